"""``spatialhash info``: versions, threads and the kernel cache, for bug reports."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

import numba

import spatialhash

from .common import add_command

#: Distributions reported, by role: the hard dependencies, then the optional ones
#: (the extras in pyproject.toml).
REQUIRED = ("numpy", "numba")
OPTIONAL = ("scipy", "pillow", "pygame", "tqdm", "pyarrow", "vesin", "freud-analysis",
            "scikit-learn", "pymunk", "rtree")


def add_parser(subparsers) -> None:
    """Add ``info`` to the command line's ``subparsers``."""
    parser = add_command(
        subparsers, "info", run, "versions, threads, numba cache",
        "Print the versions of spatialhash, Python and its dependencies (optional ones: "
        "'not installed' when missing), numba's threading layer and thread count, the "
        "numba cache in use, and the CPU count.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def version(distribution: str) -> str:
    """The installed version of ``distribution``, or ``"not installed"``."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def threading_layer() -> str:
    """The threading layer numba uses (started here if no parallel code ran yet)."""
    try:
        # numba names its layer only once its thread pool has started; starting it costs
        # a few milliseconds and compiles nothing.
        from .._numba_internals import launch_threads

        launch_threads()
        return numba.threading_layer()
    except Exception as error:  # report, never fail: this is a diagnostic
        return f"unavailable ({error})"


def kernel_cache() -> tuple[str, int]:
    """Where spatialhash's kernels are cached, and how many are (one index file each)."""
    try:
        from .._numba_internals import cache_folder
        from ..grid._kernels import pairs

        folder = Path(cache_folder(pairs.pairs_parts))
    except Exception as error:  # numba internals: report, never fail
        return f"unknown ({error})", 0
    return str(folder), len(list(folder.glob("*.nbi"))) if folder.is_dir() else 0


def collect() -> dict[str, str]:
    """Everything ``info`` reports, as strings in print order."""
    from .. import _threads

    cache_folder, n_cached = kernel_cache()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    quota = _threads.cgroup_cpu_limit()
    report = {
        "spatialhash": f"{spatialhash.__version__} ({Path(spatialhash.__file__).parent})",
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
    }
    report.update({name: version(name) for name in REQUIRED + OPTIONAL})
    report.update({
        "cpus": f"{os.cpu_count()}" + ("" if usable is None else f" ({usable} in the affinity "
                                                                 f"mask)")
                + ("" if quota is None else f", CPU quota {quota:g}"),
        "numba threading layer": threading_layer(),
        "numba threads": f"{numba.get_num_threads()} of NUMBA_NUM_THREADS="
                         f"{numba.config.NUMBA_NUM_THREADS}",
        "spatialhash threads": f"at most {min(numba.get_num_threads(), _threads.process_cpus())}"
                               + (", fewer while other programs keep the CPUs busy"
                                  if _threads.adapts_to_load()
                                  else " (SPATIALHASH_ADAPT_THREADS=0: whatever the load)"),
        "OpenMP wait policy": _threads.wait_policy(),
        "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR") or "not set (caches in "
                                                               "__pycache__ next to sources)",
        "NUMBA_CACHE_LOCATOR_CLASSES": os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES")
                                       or "not set",
        "kernel cache": f"{cache_folder} ({n_cached} cached kernels)",
    })
    return report


def run(args: argparse.Namespace) -> int:
    """``spatialhash info``."""
    report = collect()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        width = max(len(key) for key in report)
        for key, value in report.items():
            print(f"{key + ':':<{width + 1}} {value}")
    return 0
