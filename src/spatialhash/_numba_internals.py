"""Every use of numba's private internals, in one place.

spatialhash needs a few things numba has no public API for. Each lives here, with why, so
that a new numba release is checked in one file. Checked against numba 0.59 to 0.68;
``pyproject.toml`` allows ``numba < 0.69`` until a newer release has been checked here and
the test suite has passed on it.

- `type_calls_without_literals`: calls between kernels typed without literal constants
  (``Dispatcher.get_call_template``), so that a flag passed as ``True`` in one place and
  ``False`` in another does not compile a kernel twice more.
- `recover_from_damaged_cache`: a cache entry that cannot be unpickled is reported,
  emptied and compiled again (``Dispatcher._cache``, ``Cache.load_overload``,
  ``Cache.flush``), instead of failing every later call.
- `compiled_address`: the address of a kernel's compiled code (``CompileResult.library``,
  ``fndesc``), for the calls through an address of ``_kernels/indirect.py``, whose
  intrinsics use numba's low-level extension API (``numba.core.cgutils``, the target
  context's calling convention).
- `CacheLocatorBase`: the base classes of the relocatable cache locator of `_cache`
  (``numba.core.caching._CacheLocator``, ``_SourceFileBackedLocatorMixin``).
- `lock_cache_saves`: every cache save of the process under a file lock
  (``IndexDataCacheFile.save``), for the worker processes of ``spatialhash compile``.
- `cache_folder` and `launch_threads`: read-only diagnostics for ``spatialhash info``.
- `is_dispatcher`: whether a decorated kernel is compiled (``numba.core.dispatcher``): under
  ``NUMBA_DISABLE_JIT=1`` numba's decorators return the plain function.
"""

from __future__ import annotations

import os
import sys

from numba.core import types
from numba.core.caching import IndexDataCacheFile, _CacheLocator, _SourceFileBackedLocatorMixin
from numba.core.dispatcher import Dispatcher

#: The bases of a cache locator backed by a source file (see `_cache.PackageCacheLocator`).
CacheLocatorBase = (_SourceFileBackedLocatorMixin, _CacheLocator)


def type_calls_without_literals(dispatcher):
    """Make calls from other kernels compile ``dispatcher`` for plain types only.

    Numba types a constant argument in a call between kernels as a literal
    (``Literal[bool](True)``, ``Literal[int](32)``) and compiles a separate specialization
    of the callee for it: a kernel called with a flag, with ``True`` and with ``False``,
    was compiled three times, each a whole cold compile of it. Literal types buy nothing
    here (no kernel uses ``numba.literally``), so calls are typed with the literals
    widened to their plain types, as calls from Python are.
    """
    get_call_template = dispatcher.get_call_template

    def call_template(args, kws):
        return get_call_template(tuple(types.unliteral(arg) for arg in args),
                                 {name: types.unliteral(arg) for name, arg in kws.items()})

    dispatcher.get_call_template = call_template
    return dispatcher


def recover_from_damaged_cache(dispatcher):
    """Make a damaged cache file of ``dispatcher`` cost a recompile, not every later call.

    Numba loads a cached kernel by unpickling its index (``.nbi``) and data (``.nbc``)
    files; a truncated or zeroed file (a full disk, a killed process, a bad copy) raises
    from the unpickling on every call, in every process, until someone deletes it. Here a
    failed load says so in one line on stderr, empties the kernel's index (the next save
    writes a good one, and the bad data file is overwritten or no longer read) and returns
    nothing, so numba compiles the kernel and saves it again.
    """
    cache = getattr(dispatcher, "_cache", None)
    load = getattr(cache, "load_overload", None)
    if load is None:
        return dispatcher

    def load_overload(sig, target_context):
        try:
            return load(sig, target_context)
        except Exception as error:  # noqa: BLE001 (any unpickling failure, by design)
            name = getattr(dispatcher.py_func, "__qualname__", "a kernel")
            print(f"spatialhash: numba's cache entry for {name} in {cache.cache_path} could "
                  f"not be read ({type(error).__name__}: {error}); compiling it again and "
                  "replacing the entry.", file=sys.stderr, flush=True)
            try:
                cache.flush()
            except OSError:
                pass  # a read-only cache: numba compiles in memory and cannot save
            return None

    cache.load_overload = load_overload
    return dispatcher


def compiled_address(kernel, arg_types) -> tuple[int, object]:
    """The address of ``kernel``'s compiled code for ``arg_types`` (compiled or loaded from
    the cache first), and its return type."""
    kernel.compile(arg_types)
    compiled = kernel.overloads[arg_types]
    address = compiled.library.get_pointer_to_function(compiled.fndesc.llvm_func_name)
    return address, compiled.signature.return_type


def can_lock_cache_saves() -> bool:
    """Whether `lock_cache_saves` works here (``fcntl``, and numba's cache class as known)."""
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return False
    return callable(getattr(IndexDataCacheFile, "save", None))


def lock_cache_saves(lock_name: str) -> None:
    """Make every numba cache save in this process hold an exclusive lock on the file
    ``lock_name`` in the folder it writes to.

    A save reads the function's index, adds its entry, then writes the index and the data
    file: two processes saving two signatures of one function at once could each write an
    index without the other's entry, or both pick the same data file name.
    """
    import fcntl

    save = IndexDataCacheFile.save

    def locked_save(self, key, data):
        with open(os.path.join(self._cache_path, lock_name), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                save(self, key, data)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    IndexDataCacheFile.save = locked_save


def cache_folder(dispatcher) -> str:
    """The folder where numba caches ``dispatcher``'s compiled code."""
    return dispatcher._cache._cache_path


def launch_threads() -> None:
    """Start numba's thread pool now (numba names its threading layer only once it has);
    a few milliseconds, and nothing compiles."""
    from numba.np.ufunc import parallel

    parallel._launch_threads()


def is_dispatcher(kernel) -> bool:
    """Whether ``kernel`` is numba's compiled dispatcher rather than a plain function."""
    return isinstance(kernel, Dispatcher)
