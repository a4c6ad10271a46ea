"""The checks that need a GPU, in one run that prints one table: the Warp engine's tests on
CUDA (the contract suite on ``"warp-cuda"``, `tests/test_warp_engine.py` with its check of
the PTX for fused multiply-adds and its CUDA test, `tests/test_warp_rays.py`'s ray casts
against the CPU engine's on CUDA, `tests/test_warp_functions.py`'s calls of a Warp
function against the CPU engine's on CUDA, `tests/test_particle_demo_device.py`'s demo
step on CUDA against the same on ``"warp-cpu"``, `tests/test_device_arrays.py`'s torch and
Warp arrays on the GPU), then the particle demo on CUDA (a few steps of a million
particles, ``spatialhash demo particles --device cuda``: its table's CUDA row goes into
the summary), then `bench_gpu.py` (the Warp engine against the CPU engine and the GPU
peers installed there, each answer checked first; a peer that cannot run says why at the
top of its output).

Run from the repository root on a machine with an NVIDIA GPU, warp-lang and the test
dependencies (pytest, hypothesis)::

    python benchmarks/gpu_check.py                     # about 8 minutes at most
    python benchmarks/gpu_check.py --sizes 100000      # a shorter benchmark

Each step runs in a subprocess with a time limit (``--test-seconds``,
``--demo-seconds``, ``--bench-seconds``), so that one step that hangs or runs long leaves
time for the rest and the table still prints; the steps' output goes to the terminal as
it comes. Exit status 1 when any step failed or ran out of time.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def gpu_facts() -> str:
    """Warp's version and the GPUs it finds, or why it finds none."""
    if importlib.util.find_spec("warp") is None:
        return "warp-lang is not installed (the gpu extra)"
    import warp as wp

    wp.init()
    names = [wp.get_device(f"cuda:{k}").name for k in range(wp.get_cuda_device_count())]
    return f"warp {wp.__version__}; GPUs: {', '.join(names) or 'none'}"


def run_step(command: list[str], seconds: float, env: dict,
             keep: str | None = None) -> tuple[str, float, str]:
    """Run ``command`` from the repository root within ``seconds``, its output passed on
    to the terminal line by line: its status (``ok``, ``failed (exit N)`` or ``out of
    time``), how long it ran, and the last line of its output that contains ``keep``
    (empty without)."""
    start = time.perf_counter()
    kept = ""
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as process:
        # The reading stops when the time is up: the timer kills the process, which
        # closes its output.
        timer = threading.Timer(seconds, process.kill)
        timer.start()
        try:
            for line in process.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                if keep is not None and keep in line:
                    kept = line.strip()
            code = process.wait()
        finally:
            timed_out = not timer.is_alive()
            timer.cancel()
    if timed_out:
        return "out of time", time.perf_counter() - start, kept
    status = "ok" if code == 0 else f"failed (exit {code})"
    return status, time.perf_counter() - start, kept


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--test-seconds", type=float, default=220)
    parser.add_argument("--demo-seconds", type=float, default=90)
    parser.add_argument("--bench-seconds", type=float, default=170)
    parser.add_argument("--demo-count", type=int, default=1_000_000,
                        help="particles of the demo's run (default a million)")
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[100_000, 1_000_000, 10_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    facts = gpu_facts()
    print(facts, flush=True)
    env = dict(os.environ, SPATIALHASH_TEST_CUDA="1", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                        os.environ.get("PYTHONPATH")])))
    rows = []
    if "GPUs: none" in facts or "not installed" in facts:
        rows.append(("everything", "not run", 0.0, facts))
    else:
        tests = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "-p", "no:xdist", "tests/test_warp_engine.py", "tests/test_warp_rays.py",
                 "tests/test_warp_functions.py", "tests/test_contract.py",
                 "tests/test_particle_demo_device.py",
                 "tests/test_device_arrays.py", "-k", "warp or device_arrays"]
        status, seconds, _ = run_step(tests, args.test_seconds, env)
        rows.append(("tests on CUDA (contract, test_warp_engine, rays, functions, PTX, "
                     "demo step, device arrays)",
                     status, seconds,
                     "the contract suite on warp-cuda and warp-cpu"))
        demo = [sys.executable, "-m", "spatialhash", "demo", "particles", "--device", "cuda",
                "--count", str(args.demo_count), "--steps", "3", "--timing-steps", "3",
                "--headless", "--output", "none"]
        status, seconds, line = run_step(demo, args.demo_seconds, env, keep=" | cuda | ")
        rows.append(("particle demo on CUDA (3 steps, then 3 timed)", status, seconds,
                     f"table row: {line}" if line else "no table row"))
        bench = [sys.executable, "benchmarks/bench_gpu.py", "--device", "cuda", "--repeat",
                 str(args.repeat), "--sizes", *map(str, args.sizes)]
        status, seconds, _ = run_step(bench, args.bench_seconds, env)
        rows.append(("bench_gpu.py", status, seconds, "its table is above"))
    print("\n| step | status | seconds | note |\n|---|---|---|---|")
    for step, status, seconds, note in rows:
        print(f"| {step} | {status} | {seconds:.0f} | {note} |")
    return 0 if all(row[1] == "ok" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
