"""Numba configuration in one place: the jit decorators, the threading layer, thread counts.

Every kernel module takes its decorators from here, so the caching and floating-point policy
is set once. ``fastmath`` stays off on purpose: the tests compare our results bit for bit with
plain-NumPy oracles that use the same arithmetic, and reassociation would break that
(a pair at exactly ``distance == r`` must be decided the same way everywhere).
"""

from __future__ import annotations

import os
import sys
import threading

import numba
from numba.core import types

from . import _compile_notice, _threads

# On the 2-core development machine the OpenMP layer starts a parallel region in 4.7 us
# back to back and 72 us after 5 ms idle; the workqueue layer takes 30 us and 263 us
# (benchmarks/bench_threading.py; TBB would not load with numba 0.68). Code that asks for
# pairs every frame pays that start on every call, so OpenMP goes first. A user's explicit
# NUMBA_THREADING_LAYER still wins.
# The OpenMP layer is also the one that serves parallel calls from several Python threads at
# once (the workqueue layer aborts the process on concurrent use). Its waiting threads spin
# for a short while only (`_threads`), so that a machine whose cores are busy does not make
# every call wait for descheduled threads.
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER_PRIORITY = ["omp", "tbb", "workqueue"]
_threads.configure_wait_policy()
# A line on stderr when a first call compiles (`_compile_notice`).
_compile_notice.install()

#: Options shared by every kernel: compiled code is cached on disk, no fast-math.
_JIT_OPTIONS = {"cache": True, "nogil": True, "fastmath": False, "error_model": "numpy"}


def jit(func):
    """Compile ``func`` as a sequential, cached numba kernel."""
    return _recovering_from_damaged_cache(
        _without_literal_specializations(numba.njit(**_JIT_OPTIONS)(func)))


def jit_parallel(func):
    """Compile ``func`` as a cached numba kernel whose ``prange`` loops run on all threads."""
    return _recovering_from_damaged_cache(
        _without_literal_specializations(numba.njit(parallel=True, **_JIT_OPTIONS)(func)))


def _recovering_from_damaged_cache(dispatcher):
    """Make a damaged cache file of ``dispatcher`` cost a recompile, not every later call.

    Numba loads a cached kernel by unpickling its index (``.nbi``) and data (``.nbc``)
    files; a truncated or zeroed file (a full disk, a killed process, a bad copy) raises
    from the unpickling on every call, in every process, until someone deletes it. Here a
    failed load says so in one line on stderr, empties the kernel's index (numba's
    ``flush``: the next save writes a good one, and the bad data file is overwritten or no
    longer read) and returns nothing, so numba compiles the kernel and saves it again.
    Checked against numba 0.59-0.68 (``Dispatcher._cache``, ``Cache.load_overload``).
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


def _without_literal_specializations(dispatcher):
    """Make calls from other kernels compile ``dispatcher`` for plain types only.

    Numba types a constant argument in a call between kernels as a literal
    (``Literal[bool](True)``, ``Literal[int](32)``) and compiles a separate specialization
    of the callee for it: `pairs.pairs_scan_cells_gathered`, called with a flag, with
    ``True`` and with ``False``, was compiled three times, 8 to 13 s each on a cold
    cache. Literal types buy nothing here (no kernel uses ``numba.literally``), so calls
    are typed with the literals widened to their plain types, as calls from Python are.
    """
    get_call_template = dispatcher.get_call_template

    def call_template(args, kws):
        return get_call_template(tuple(types.unliteral(arg) for arg in args),
                                 {name: types.unliteral(arg) for name, arg in kws.items()})

    dispatcher.get_call_template = call_template
    return dispatcher


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

    A class rather than a generator context manager: entering and leaving with ``None``
    took 0.6-0.9 us against 2.0-2.4 (ad hoc, timeit), paid twice by a grid built and
    queried every frame."""

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
