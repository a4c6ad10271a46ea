"""A numba cache locator that makes spatialhash's compiled kernels relocatable.

Numba's own locator for ``NUMBA_CACHE_DIR`` keys the cache by the absolute path of the
source directory, so a fresh clone or a new virtual environment compiles everything again
(about a minute). This locator keys it by the module's path inside the package instead;
numba checks every entry against a hash of the source file's contents and its own version,
so a cache can never serve code compiled from other sources.

Enable it with both environment variables (CI does)::

    NUMBA_CACHE_DIR=~/.cache/spatialhash-numba
    NUMBA_CACHE_LOCATOR_CLASSES=spatialhash._cache.PackageCacheLocator,UserProvidedCacheLocator,InTreeCacheLocator,UserWideCacheLocator

Functions outside spatialhash fall through to numba's usual locators listed after it.
"""

from __future__ import annotations

import os

from numba.core import config
from numba.core.caching import _CacheLocator, _SourceFileBackedLocatorMixin

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class PackageCacheLocator(_SourceFileBackedLocatorMixin, _CacheLocator):
    """Cache spatialhash kernels in ``NUMBA_CACHE_DIR/spatialhash/<subpackage>``."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        inside = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), _PACKAGE_DIR)
        self._cache_path = os.path.normpath(os.path.join(config.CACHE_DIR, "spatialhash", inside))

    def get_cache_path(self):
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        inside_package = os.path.abspath(py_file).startswith(_PACKAGE_DIR + os.sep)
        if not config.CACHE_DIR or not inside_package:
            return None
        return super().from_function(py_func, py_file)
