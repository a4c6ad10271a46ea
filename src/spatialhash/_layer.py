"""Which numba threading layer runs the parallel kernels: one that survives ``fork``.

Programs fork after they have used spatialhash: ``multiprocessing`` pools (``fork`` is the
default start method on Linux before Python 3.14), PyTorch's ``DataLoader`` workers,
joblib's process backend. Numba's OpenMP layer runs on GNU libgomp, whose thread pool does
not exist in a forked child; numba detects that and ends the child with "Terminating:
fork() called from a process already using GNU OpenMP" at its first parallel kernel, and a
pool waiting for that child waits forever. Numba's TBB layer re-creates its pool in the
child, and also serves parallel calls from several Python threads at once; the workqueue
layer is fork-safe but aborts the process on concurrent calls (`_config.threads` then runs
them one at a time).

So spatialhash asks numba for TBB, then workqueue, then OpenMP (`LAYER_PRIORITY`).
``benchmarks/bench_threading.py`` measures each layer's cost of starting a parallel region
and ``benchmarks/bench_contention.py`` the default against OpenMP with the cores busy.

The ``tbb`` package (a dependency where PyPI has wheels for it) installs ``libtbb`` into the
environment's ``lib/`` folder, which is not on the loader's path inside a virtual
environment, and numba looks for the library by name only: `load_tbb` loads it by its full
path first, so that numba's lookup finds it already in the process. A user's
``NUMBA_THREADING_LAYER`` always wins (``omp`` for a program that never forks and wants
libgomp, for instance).
"""

from __future__ import annotations

import ctypes
import os
import sys

#: The order in which numba is asked for a layer when the user names none.
LAYER_PRIORITY = ("tbb", "workqueue", "omp")

#: The file name numba opens to check TBB's version, per platform.
_TBB_LIBRARY = {"win32": "tbb12.dll", "darwin": "libtbb.12.dylib"}.get(sys.platform,
                                                                       "libtbb.so.12")

#: Layers named in ``NUMBA_THREADING_LAYER`` that never use TBB.
_LAYERS_WITHOUT_TBB = ("omp", "workqueue")
#: Names under which numba may pick its OpenMP layer (the layer, and the categories that
#: hold it ahead of workqueue). With no name, `LAYER_PRIORITY` reaches workqueue, which
#: always loads, before OpenMP.
_NAMES_THAT_MAY_RUN_OPENMP = ("omp", "default", "threadsafe")


def tbb_library_path() -> str | None:
    """Where the ``tbb`` package put its library, or ``None`` where it is not installed."""
    beside_python = os.path.join(sys.prefix, "lib", _TBB_LIBRARY)
    if os.path.exists(beside_python):
        return beside_python
    # Elsewhere (a user install, Windows' folders): the package's own record of its files,
    # a slower read.
    from importlib import metadata

    try:
        files = metadata.distribution("tbb").files or ()
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == _TBB_LIBRARY:
            return str(file.locate())
    return None


def load_tbb() -> str | None:
    """Load the ``tbb`` package's library into the process, for numba's TBB layer to find.

    Returns the path loaded, or ``None`` where there is none or it would not load (numba
    then takes the next layer of `LAYER_PRIORITY`).
    """
    path = tbb_library_path()
    if path is None:
        return None
    try:
        ctypes.CDLL(path, mode=getattr(ctypes, "RTLD_GLOBAL", 0))
    except OSError:
        return None
    return path


def named_layer(environ=None) -> str:
    """The layer or category the user named in ``NUMBA_THREADING_LAYER`` ("" for none)."""
    environ = os.environ if environ is None else environ
    return environ.get("NUMBA_THREADING_LAYER", "").strip().lower()


def may_run_openmp(environ=None) -> bool:
    """Whether numba may run its OpenMP layer in this process (the user named it, or a
    category that may choose it): only then does libgomp's wait policy matter
    (`_threads.configure_wait_policy`)."""
    return named_layer(environ) in _NAMES_THAT_MAY_RUN_OPENMP


def choose(numba_config, environ=None) -> tuple[str, ...]:
    """Set numba's layer priority to `LAYER_PRIORITY` unless the user named a layer, and load
    TBB's library unless the named layer excludes it. Must run before numba starts its
    threads (its first parallel kernel). Returns the priority numba will follow."""
    named = named_layer(environ)
    if named not in _LAYERS_WITHOUT_TBB:
        load_tbb()
    if not named:
        numba_config.THREADING_LAYER_PRIORITY = list(LAYER_PRIORITY)
    return tuple(numba_config.THREADING_LAYER_PRIORITY)
