"""Numba configuration in one place: the jit decorators, the threading layer, thread counts.

Every kernel module takes its decorators from here, so the caching and floating-point policy
is set once. ``fastmath`` stays off on purpose: the tests compare our results bit for bit with
plain-NumPy oracles that use the same arithmetic, and reassociation would break that
(a pair at exactly ``distance == r`` must be decided the same way everywhere).
"""

from __future__ import annotations

import threading

import numba

from . import _compile_notice, _layer, _numba_internals, _threads

# The threading layer: one that survives fork and serves several Python threads (`_layer`).
_layer.choose(numba.config)
if _layer.may_run_openmp():
    _threads.configure_wait_policy()
# A line on stderr when a first call compiles (`_compile_notice`).
_compile_notice.install()

#: Options shared by every kernel: compiled code is cached on disk, no fast-math.
_JIT_OPTIONS = {"cache": True, "nogil": True, "fastmath": False, "error_model": "numpy"}


def jit(func):
    """Compile ``func`` as a sequential, cached numba kernel."""
    return _kernel(numba.njit(**_JIT_OPTIONS)(func))


def jit_inline(func):
    """Compile ``func`` as a helper that numba inlines into each kernel calling it, at the
    level of numba's IR: no call, and no reference counting of the arrays it is passed,
    which for a helper called once per cell in a scan of small cells cost a third of the
    scan's time."""
    return _kernel(numba.njit(inline="always", **_JIT_OPTIONS)(func))


def jit_parallel(func):
    """Compile ``func`` as a cached numba kernel whose ``prange`` loops run on all threads."""
    return _kernel(numba.njit(parallel=True, **_JIT_OPTIONS)(func))


def jit_variant(func, name: str, *, parallel: bool = False):
    """Compile ``func``, a function made by a factory, as the kernel ``name``: one source
    compiled into several kernels, each with the factory's arguments as constants (numba
    prunes the branches on them) and a name of its own (numba's cache files and the
    compile notices go by the name; the cache tells the variants apart by their constants
    too). ``parallel`` as in `jit_parallel`."""
    func.__name__ = func.__qualname__ = name
    return jit_parallel(func) if parallel else jit(func)


def _kernel(dispatcher):
    """``dispatcher`` called from other kernels without literal types, and recovering from
    a damaged cache entry (`_numba_internals`). Under ``NUMBA_DISABLE_JIT=1`` numba's
    decorators return the plain Python function, which is kept as it is: the kernels then
    run as Python, where an index out of bounds raises ``IndexError`` (CI runs a subset of
    the tests so)."""
    if not _numba_internals.is_dispatcher(dispatcher):
        return dispatcher
    return _numba_internals.recover_from_damaged_cache(
        _numba_internals.type_calls_without_literals(dispatcher))


def check_n_threads(n_threads: int | None) -> int | None:
    """Validate a user's thread count; ``None`` means numba's default (all cores)."""
    if n_threads is None:
        return None
    if isinstance(n_threads, bool) or not isinstance(n_threads, (int,)) and not (
        hasattr(n_threads, "__index__")
    ):
        raise TypeError(f"`n_threads` must be an integer or None; got {n_threads!r}.")
    n_threads = int(n_threads)
    limit = numba.config.NUMBA_NUM_THREADS
    if n_threads == -1:
        return limit
    if not 1 <= n_threads <= limit:
        raise ValueError(
            f"`n_threads` must be -1 or between 1 and {limit} (NUMBA_NUM_THREADS); "
            f"got {n_threads}."
        )
    return n_threads


class threads:  # noqa: N801 (used as a function: ``with threads(n):``)
    """Run the body with numba's thread count set to ``n_threads``; with ``None``,
    `_threads.default_n_threads` (numba's count capped by the CPUs this process may use and
    by those other programs leave free).

    Under numba's workqueue layer, which aborts the process when two Python threads start
    parallel regions at once ("Concurrent access has been detected"), the bodies run one
    at a time (`_WORKQUEUE_LOCK`); the OpenMP and TBB layers run them side by side.

    A class rather than a generator context manager, which cost nearly twice as much a use
    (ad hoc, timeit): a grid built and queried every frame enters it twice."""

    __slots__ = ("_n_threads", "_previous", "_locked")

    def __init__(self, n_threads: int | None) -> None:
        self._n_threads = n_threads
        self._previous = None
        self._locked = False

    def __enter__(self) -> None:
        current = numba.get_num_threads()  # starts the threading layer if need be
        if _serializes_calls():
            _WORKQUEUE_LOCK.acquire()
            self._locked = True
        wanted = self._n_threads
        if wanted is None:
            wanted = _threads.default_n_threads(current)
        if wanted != current:
            self._previous = current
            numba.set_num_threads(wanted)

    def __exit__(self, *exc_info) -> None:
        if self._previous is not None:
            numba.set_num_threads(self._previous)
            self._previous = None
        if self._locked:
            self._locked = False
            _WORKQUEUE_LOCK.release()


#: Held around every parallel call while numba runs its workqueue layer (see `threads`).
_WORKQUEUE_LOCK = threading.RLock()
_LAYER = {"serializes": None}


def _serializes_calls() -> bool:
    """Whether the threading layer in use needs parallel calls one at a time (workqueue)."""
    serializes = _LAYER["serializes"]
    if serializes is None:
        serializes = _LAYER["serializes"] = numba.threading_layer() == "workqueue"
    return serializes
