"""Which engine runs a `Grid`: the ``algorithm`` names the structure, the ``device``
where it runs.

- ``"cpu"`` (the default): the numba engines of ``_engine.ENGINES``, on this process's
  threads.
- ``"cuda"`` or ``"cuda:N"``: the Warp engine (`_warp_engine.WarpEngine`) on that GPU.
- ``"warp-cpu"``: the Warp engine with its kernels compiled by Warp for the CPU. It runs
  the code the GPU runs, on any machine, so that users and the tests can check it where
  there is no GPU. It is a choice of engine as much as of device, hence a name of its own
  rather than ``"cpu"`` (the numba engine) or Warp's own ``"cpu"``.

Warp is imported when a Warp device is named, never before: without the ``gpu`` extra
installed, such a device raises one line naming it. A CUDA device is checked before
anything compiles, and a missing driver or GPU is named in a `RuntimeError`. Warp
prints a banner and a line per compiled module at its default log level, and its native
library writes a warning to stderr at start-up on machines without a CUDA driver: both
are kept from this package's users (`_quiet` around the start, Warp's log level around
the loads), since a missing driver either does not matter (with ``"warp-cpu"``) or
raises its own error here.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import tempfile
import threading
from collections.abc import Callable

from ._engine import ENGINES

#: ``algorithm="auto"`` uses brute force up to this many points.
BRUTE_FORCE_MAX_POINTS = 32
ALGORITHMS = ("auto", *ENGINES)
#: The Warp engine's kernels, compiled by Warp for the CPU.
WARP_CPU = "warp-cpu"
_CUDA = re.compile(r"cuda(?::(\d+))?")
_DEVICES = "'cpu', 'cuda', 'cuda:N' (N the number of a GPU) or 'warp-cpu'"
#: The line Warp's native library writes on machines without a CUDA driver.
_NO_DRIVER_WARNING = "Warp CUDA warning: Could not find or load the NVIDIA CUDA driver."
#: The Warp devices whose kernels are loaded (`load_warp`), and the lock of the loading.
_LOADED: set[str] = set()
_LOCK = threading.Lock()


def choose_engine(algorithm, device, n_points: int) -> tuple[str, Callable]:
    """The structure ``algorithm`` names (``"auto"`` resolved by ``n_points``) and the
    engine class, or factory with the `GridEngine` constructor's arguments, that builds
    it on ``device``. Raises `ValueError` or `TypeError` naming the argument, `ImportError`
    without Warp and `RuntimeError` without the GPU a Warp device needs."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"`algorithm` must be one of {ALGORITHMS}; got {algorithm!r}.")
    warp_device = warp_device_name(device)
    if algorithm == "auto":
        algorithm = "brute" if n_points <= BRUTE_FORCE_MAX_POINTS else "grid"
    if warp_device is None:
        return algorithm, ENGINES[algorithm]
    load_warp(device, warp_device)
    from . import _warp_engine

    engine = _warp_engine.ENGINES[algorithm]
    return algorithm, functools.partial(engine, device=warp_device, device_name=device)


def warp_device_name(device) -> str | None:
    """Warp's name of the device ``device`` names (``"cpu"`` for ``"warp-cpu"``, else
    ``"cuda"`` or ``"cuda:N"``), or None for ``"cpu"``, the numba engine."""
    if not isinstance(device, str):
        raise TypeError(f"`device` must be a str: {_DEVICES}; got {type(device).__name__} "
                        f"{device!r}.")
    if device == "cpu":
        return None
    if device == WARP_CPU:
        return "cpu"
    if _CUDA.fullmatch(device):
        return device
    raise ValueError(f"`device` must be {_DEVICES}; got {device!r}.")


def load_warp(device: str, warp_device: str):
    """Import and start Warp, check that ``warp_device`` exists, and load the engine's
    kernels on it (compiling them the first time, into Warp's kernel cache), once per
    process and device. Returns the ``warp`` module."""
    try:
        import warp
    except ImportError as error:
        raise ImportError(
            f"`device` is {device!r}, which runs on NVIDIA Warp (warp-lang), not installed: "
            "pip install 'spatialhash[gpu]'.") from error
    # One thread at a time: `_quiet` moves file descriptor 2 and puts it back.
    with _LOCK:
        if warp_device not in _LOADED:
            with _quiet(warp):
                warp.init()
            if warp_device != "cpu":
                check_cuda_device(device, *cuda_facts(warp))
            from ._warp_kernels import build, knn, ray, scan

            with warp.ScopedLogLevel(warp.LOG_WARNING):
                for module in (build, scan, knn, ray):
                    warp.load_module(module, device=warp_device)
            _LOADED.add(warp_device)
    return warp


def cuda_facts(warp) -> tuple[tuple | None, int]:
    """What Warp found of CUDA: the driver's version (None without a driver, as on a
    machine without an NVIDIA GPU or with a warp-lang built without CUDA) and the number
    of GPUs."""
    return warp.get_cuda_driver_version(), warp.get_cuda_device_count()


def check_cuda_device(device: str, driver: tuple | None, n_gpus: int) -> None:
    """Raise `RuntimeError` naming what is missing for ``device`` (``"cuda"`` or
    ``"cuda:N"``), given what `cuda_facts` found."""
    remedy = ("Use device='cpu' for the CPU engine, or device='warp-cpu' to run the Warp "
              "engine's kernels on the CPU.")
    if driver is None:
        missing = "a CUDA driver, and Warp could not load or start one (libcuda)"
    elif n_gpus == 0:
        missing = (f"a CUDA GPU, and Warp found none (CUDA driver "
                   f"{driver[0]}.{driver[1]})")
    else:
        index = _CUDA.fullmatch(device).group(1)
        if index is None or int(index) < n_gpus:
            return
        names = ", ".join(f"cuda:{k}" for k in range(n_gpus))
        missing = f"GPU {index}, and Warp found {n_gpus} GPU(s): {names}"
        remedy = "Name one of those."
    raise RuntimeError(f"`device` is {device!r}, which needs {missing}. {remedy}")


@contextlib.contextmanager
def _quiet(warp):
    """Warp's log level at warnings and above, and its native library's line about a
    missing CUDA driver dropped from stderr: what is written to file descriptor 2 inside
    is held back and written out after, less that line."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            with warp.ScopedLogLevel(warp.LOG_WARNING):
                yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [line for line in captured.read().decode(errors="replace").splitlines(True)
                    if not line.startswith(_NO_DRIVER_WARNING)]
            if kept:
                sys.stderr.write("".join(kept))
