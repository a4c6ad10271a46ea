"""A numba cache locator that makes spatialhash's compiled kernels relocatable.

Numba's own locator for ``NUMBA_CACHE_DIR`` keys the cache by the absolute path of the
source directory, so a fresh clone or a new virtual environment compiles everything again
(about a minute). This locator keys it by the module's path inside the package instead.

Staleness. Numba checks each entry against a hash of its own source file only, yet a
kernel's compiled code holds the code of the kernels it calls from other files (numba
links them in), and a parallel driver depends on the intrinsics of `_kernels/indirect.py`.
With numba's check, a change to `cells.py` would leave `pairs.py`'s cached kernels running
the old `cells.py` code. So this locator stamps every entry with one hash of all the files
that hold compiled code (`_config.py`, the four ``_kernels/`` packages, the demos'
kernels): any change there recompiles everything, as a fresh clone would, and a cache can
never serve code compiled from other sources. (Numba's default in-tree cache, used when
these variables are not set, keeps numba's per-file check: delete `src/**/__pycache__/*.nb*`
after changing a kernel that others call.)

Enable it with both environment variables (CI does)::

    NUMBA_CACHE_DIR=~/.cache/spatialhash-numba
    NUMBA_CACHE_LOCATOR_CLASSES=spatialhash._cache.PackageCacheLocator,UserProvidedCacheLocator,InTreeCacheLocator,UserWideCacheLocator

Functions outside spatialhash fall through to numba's usual locators listed after it.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os

from numba import config

from ._numba_internals import CacheLocatorBase

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
#: The files that hold compiled code, relative to the package (glob patterns).
_COMPILED_SOURCES = ("_config.py", "_numba_internals.py", os.path.join("_kernels", "*.py"),
                     os.path.join("grid", "_kernels", "*.py"),
                     os.path.join("neighbors", "_kernels", "*.py"),
                     os.path.join("dynamic", "_kernels", "*.py"),
                     os.path.join("demos", "_*kernels.py"))


def _compiled_sources() -> tuple:
    """(path, mtime, size) of every file holding compiled code, in a fixed order."""
    paths = sorted(path for pattern in _COMPILED_SOURCES
                   for path in glob.glob(os.path.join(_PACKAGE_DIR, pattern)))
    return tuple((path, os.stat(path).st_mtime_ns, os.stat(path).st_size) for path in paths)


@functools.cache
def _hash_sources(sources: tuple) -> bytes:
    """One hash of the contents of ``sources`` (memoized on their mtimes and sizes, so a
    file changed while the process runs is hashed again)."""
    digest = hashlib.sha256()
    for path, _, _ in sources:
        digest.update(os.path.relpath(path, _PACKAGE_DIR).encode())
        with open(path, "rb") as source:
            digest.update(hashlib.sha256(source.read()).digest())
    return digest.digest()


class PackageCacheLocator(*CacheLocatorBase):
    """Cache spatialhash kernels in ``NUMBA_CACHE_DIR/spatialhash/<subpackage>``."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        inside = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), _PACKAGE_DIR)
        self._cache_path = os.path.normpath(os.path.join(config.CACHE_DIR, "spatialhash", inside))

    def get_cache_path(self):
        return self._cache_path

    def get_source_stamp(self):
        """The hash of all the compiled sources (see the module docstring)."""
        return _hash_sources(_compiled_sources())

    @classmethod
    def from_function(cls, py_func, py_file):
        inside_package = os.path.abspath(py_file).startswith(_PACKAGE_DIR + os.sep)
        if not config.CACHE_DIR or not inside_package:
            return None
        return super().from_function(py_func, py_file)
