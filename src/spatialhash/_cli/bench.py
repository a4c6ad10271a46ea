"""``spatialhash bench``: run the benchmark table of the source repository.

The benchmark scripts are not part of the installed package: they live in ``benchmarks/``
at the root of the source checkout, which an editable install (``pip install -e .``)
points back to. Every argument after ``bench`` goes to ``benchmarks/bench_batch.py``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import spatialhash

from .common import CommandError, add_command

DESCRIPTION = (
    "Run the benchmark table: spatialhash against scipy's cKDTree and the other peers "
    "installed (pip install 'spatialhash[bench]'), on the same data, answers checked "
    "before timing. Every argument after `bench` goes to benchmarks/bench_batch.py of "
    "the source repository, e.g. `spatialhash bench --n 100000 --repeat 3`; its options "
    "follow. The exit status is the script's."
)


def add_parser(subparsers) -> None:
    """Add ``bench`` to the command line's ``subparsers``; its arguments pass through."""
    # No options of its own (not even -h, handled in run()): whatever follows `bench`
    # belongs to the script.
    parser = add_command(subparsers, "bench", run, "run the benchmark table", DESCRIPTION,
                         add_help=False, allow_abbrev=False)
    parser.set_defaults(passthrough=True, print_help=parser.print_help)


def benchmark_script() -> Path:
    """``benchmarks/bench_batch.py`` of the source checkout spatialhash is imported from."""
    # src/spatialhash/__init__.py -> the repository root is two folders above the package.
    return Path(spatialhash.__file__).resolve().parents[2] / "benchmarks" / "bench_batch.py"


def run(args: argparse.Namespace) -> int:
    """``spatialhash bench [ARGS...]``: the script's exit status."""
    script = benchmark_script()
    extras = args.extras
    if "-h" in extras or "--help" in extras:
        args.print_help()
        print()
        sys.stdout.flush()
    if not script.is_file():
        raise CommandError(
            "the benchmarks ship with the source repository, not with the installed package: "
            f"{script} does not exist. Clone the repository, install it with "
            "`pip install -e .` and run `spatialhash bench` (or ./dev bench) there."
        )
    return subprocess.run([sys.executable, str(script), *extras],
                          cwd=script.parent.parent).returncode
