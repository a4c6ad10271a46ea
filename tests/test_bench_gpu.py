"""`benchmarks/bench_gpu.py` on Warp's CPU device at a tiny size, so that the script and
its peers' adapters (`benchmarks/_gpu_peers.py`) run without a GPU: every peer that
imports here does each of its tasks on both data sets and its answer is checked equal to
spatialhash's; a wrong answer is marked and makes the exit status 1; a peer that cannot
run says why.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from spatialhash import Grid

pytest.importorskip("warp", reason="the gpu extra")

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
#: Points of the runs: enough for 16 nearest, few enough to compile and run in seconds.
N = 200


def load_bench_gpu():
    """bench_gpu.py loaded by its path (it finds `_common` and `_gpu_peers` beside it)."""
    spec = importlib.util.spec_from_file_location("bench_gpu", BENCHMARKS / "bench_gpu.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return load_bench_gpu()


def table_rows(output: str) -> list[list[str]]:
    """The cells of the rows of the markdown table that ends ``output``."""
    lines = [line for line in output.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def run(bench, capsys, *args) -> tuple[int, str]:
    status = bench.main(["--device", "warp-cpu", "--sizes", str(N), "--repeat", "1", *args])
    return status, capsys.readouterr().out


@pytest.mark.slow
def test_every_importable_peer_answers_each_task_checked(bench, capsys):
    status, output = run(bench, capsys)
    assert status == 0, output
    rows = table_rows(output)
    expected = {("spatialhash, CPU engine", task) for task in bench.TASKS}
    for peer in bench.peers.PEERS:
        if peer.missing():
            assert f"{peer.label}: skipped: not installed" in output
        else:
            assert f"{peer.label}: {', '.join(peer.tasks)} on warp-cpu" in output
            expected |= {(peer.label, task) for task in peer.tasks}
    for label, task in expected:
        for data in ("uniform", "clustered"):
            row = [row for row in rows if row[1:3] == [data, task] and row[4] == label]
            assert len(row) == 1, (label, task, data, output)
            points, _, _, ours, _, seconds, ratio, answer = row[0]
            assert points == f"{N:,}" and "MISMATCH" not in answer
            assert float(ours) > 0 and float(seconds) > 0 and ratio.endswith("x"), row
    assert len(rows) == 2 * len(expected)


def wrong_pairs(problem):
    """The pairs less the last one."""
    pairs = Grid(problem.points, problem.r).query_pairs(problem.r).indices[:-1]
    return pairs[:, 0], pairs[:, 1]


def wrong_radius(problem):
    """The radius rows with one point too far added to row 0."""
    result = Grid(problem.points, problem.r).query_radius(problem.points, problem.r)
    rows = np.repeat(np.arange(len(result.indptr) - 1), np.diff(result.indptr))
    far = np.argmax(np.linalg.norm(problem.points - problem.points[0], axis=1))
    return np.append(rows, 0), np.append(result.indices, far)


def wrong_knn(problem, knn_type):
    """The 17th nearest in place of the 16th."""
    result = Grid(problem.points, problem.r).query_knn(problem.points, 17)
    keep = [*range(15), 16]
    return knn_type(result.indices[:, keep], result.distances[:, keep])


def raising(problem):
    raise MemoryError("no room here\nsecond line")


@pytest.mark.slow
def test_a_wrong_answer_or_an_error_is_marked_and_fails_the_run(bench, capsys, monkeypatch):
    wrong = bench.peers.Peer("wrong", "wrong", ("numpy",), {
        "pairs": wrong_pairs, "radius": wrong_radius,
        "knn16": functools.partial(wrong_knn, knn_type=bench.peers.Knn)})
    monkeypatch.setattr(bench.peers, "PEERS", (wrong,))
    status, output = run(bench, capsys, "--data", "uniform", "--tasks", "pairs", "radius",
                         "knn16")
    assert status == 1
    rows = {row[2]: row for row in table_rows(output) if row[4] == "wrong"}
    assert sorted(rows) == ["knn16", "pairs", "radius"]
    for row in rows.values():
        assert row[5] == "-" and row[6] == "nanx", row
    assert rows["pairs"][7].startswith("MISMATCH: 1 of")
    assert rows["radius"][7].startswith("MISMATCH: 1 of")
    assert rows["knn16"][7].startswith("MISMATCH: distances differ")

    monkeypatch.setattr(bench.peers, "PEERS", (bench.peers.Peer("raising", "raising",
                                                                ("numpy",),
                                                                {"pairs": raising}),))
    status, output = run(bench, capsys, "--data", "uniform", "--tasks", "pairs")
    assert status == 1
    [row] = [row for row in table_rows(output) if row[4] == "raising"]
    assert row[5:] == ["-", "nanx", "ERROR: MemoryError: no room here"]


@pytest.mark.slow
def test_a_peer_above_its_size_limit_says_so_and_peers_chooses(bench, capsys, monkeypatch):
    limited = bench.peers.Peer("limited", "limited", ("numpy",), {"pairs": raising},
                               max_points=N - 1, quadratic="brute force")
    left_out = bench.peers.Peer("left-out", "left out", ("numpy",), {"pairs": raising})
    monkeypatch.setattr(bench.peers, "PEERS", (limited, left_out))
    status, output = run(bench, capsys, "--data", "uniform", "--tasks", "pairs",
                         "--peers", "limited")
    assert status == 0, output
    [row] = [row for row in table_rows(output) if row[4] == "limited"]
    assert row[5:] == ["-", "nanx", f"not run above {N - 1:,} points (brute force)"]
    assert "left out" not in output


def test_a_peer_that_cannot_run_says_why(bench):
    peers = bench.peers
    absent = peers.Peer("absent", "absent", ("numpy", "no_such_module_here"), {})
    assert absent.skip("warp-cpu") == "not installed (no_such_module_here)"
    cpu_only = peers.Peer("cpu only", "cpu only", ("numpy",), {}, cuda=False)
    assert cpu_only.skip("warp-cpu") is None
    assert cpu_only.skip("cuda") == "no adapter for cuda: its GPU path has never run here"
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("torch finds a CUDA device")
    on_torch = peers.Peer("on torch", "on torch", ("torch",), {}, torch_cuda=True)
    assert on_torch.skip("warp-cpu") is None
    assert on_torch.skip("cuda:0") == f"torch {torch.__version__} has no CUDA device"


def test_largest_row_is_the_most_neighbours_of_a_point(bench):
    points = np.array([[0.0, 0, 0], [0.5, 0, 0], [1.0, 0, 0], [5.0, 0, 0]])
    grid = Grid(points, 0.5)
    assert bench.largest_row(grid.query_pairs(0.5), "pairs", 4) == 2
    assert bench.largest_row(grid.query_radius(points, 0.5), "radius", 4) == 2
    assert bench.largest_row(grid.query_pairs(0.1), "pairs", 4) == 0
