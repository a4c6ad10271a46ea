"""The checks that need a GPU, in one run that prints one table: the Warp engine's tests on
CUDA (the contract suite on ``"warp-cuda"``, `tests/test_warp_engine.py` with its check of
the PTX for fused multiply-adds and its CUDA test, `tests/test_warp_rays.py`'s ray casts
and `tests/test_warp_functions.py`'s calls of a Warp function against the CPU engine's on
CUDA), then `bench_gpu.py`.

Run from the repository root on a machine with an NVIDIA GPU, warp-lang and the test
dependencies (pytest, hypothesis)::

    python benchmarks/gpu_check.py                     # about 8 minutes at most
    python benchmarks/gpu_check.py --sizes 100000      # a shorter benchmark

Each step runs in a subprocess with a time limit (``--test-seconds``,
``--bench-seconds``), so that one step that hangs or runs long leaves time for the rest
and the table still prints; the steps' output goes to the terminal as it comes. The
particle demo has no GPU engine yet, and the table says so. Exit status 1 when any step
failed or ran out of time.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
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


def run_step(command: list[str], seconds: float, env: dict) -> tuple[str, float]:
    """Run ``command`` from the repository root within ``seconds``: its status (``ok``,
    ``failed (exit N)`` or ``out of time``) and how long it ran."""
    start = time.perf_counter()
    try:
        finished = subprocess.run(command, cwd=ROOT, env=env, timeout=seconds, check=False)
    except subprocess.TimeoutExpired:
        return "out of time", time.perf_counter() - start
    status = "ok" if finished.returncode == 0 else f"failed (exit {finished.returncode})"
    return status, time.perf_counter() - start


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--test-seconds", type=float, default=240)
    parser.add_argument("--bench-seconds", type=float, default=220)
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
                 "tests/test_warp_functions.py", "tests/test_contract.py", "-k", "warp"]
        status, seconds = run_step(tests, args.test_seconds, env)
        rows.append(("tests on CUDA (contract, test_warp_engine, rays, functions, PTX)",
                     status, seconds, "the contract suite on warp-cuda and warp-cpu"))
        bench = [sys.executable, "benchmarks/bench_gpu.py", "--device", "cuda", "--repeat",
                 str(args.repeat), "--sizes", *map(str, args.sizes)]
        status, seconds = run_step(bench, args.bench_seconds, env)
        rows.append(("bench_gpu.py", status, seconds, "its table is above"))
    rows.append(("particle demo on the GPU", "not built", 0.0,
                 "the demo has no GPU engine yet"))
    print("\n| step | status | seconds | note |\n|---|---|---|---|")
    for step, status, seconds, note in rows:
        print(f"| {step} | {status} | {seconds:.0f} | {note} |")
    return 0 if all(row[1] in ("ok", "not built") for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
