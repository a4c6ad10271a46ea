"""Process pools after multi-threaded queries: fork, forkserver and spawn all finish.

Each scenario runs in a subprocess with a timeout, since the failure this guards against is
a pool that never returns (a forked child of a process using GNU OpenMP ends itself at its
first parallel kernel, and the pool waits for it forever).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types

import pytest

from spatialhash import _layer

POOL_AFTER_QUERIES = """
    import multiprocessing
    import sys

    import numba
    import numpy as np
    from spatialhash import Grid

    def work(args):
        seed, n_threads = args
        points = np.random.default_rng(seed).random((5_000, 3))
        grid = Grid(points, n_threads=n_threads)
        pairs = grid.query_pairs(0.05)
        nearest = grid.query_knn(points[:100], k=4)
        return len(pairs), int(nearest.indices.sum())

    if __name__ == "__main__":
        jobs = [(seed, n_threads) for seed in range(3) for n_threads in (None, 1)]
        # The parent's queries run on every thread numba has, so its pool has started.
        expected = [work((seed, -1)) for seed, _ in jobs]
        context = multiprocessing.get_context(sys.argv[1])
        with context.Pool(2) as pool:
            found = pool.map_async(work, jobs).get(timeout=240)
        assert found == expected, (found, expected)
        print(numba.threading_layer(), numba.get_num_threads(), "ok")
"""


def _run_script(tmp_path, code: str, *args: str, **env) -> subprocess.CompletedProcess:
    # A file, not ``-c``: spawn and forkserver children import the main module by path.
    script = tmp_path / "pool.py"
    script.write_text(textwrap.dedent(code))
    environment = {key: value for key, value in os.environ.items()
                   if key != "NUMBA_THREADING_LAYER"}
    environment.update(env)
    return subprocess.run([sys.executable, str(script), *args], env=environment,
                          capture_output=True, text=True, timeout=420, check=False)


@pytest.mark.parametrize("start_method", [
    "fork", pytest.param("forkserver", marks=pytest.mark.slow),
    pytest.param("spawn", marks=pytest.mark.slow)])
def test_a_process_pool_after_multi_threaded_queries_finishes(tmp_path, start_method):
    finished = _run_script(tmp_path, POOL_AFTER_QUERIES, start_method)
    assert finished.returncode == 0, finished.stderr[-2000:]
    layer, n_threads, ok = finished.stdout.split()
    assert ok == "ok"
    assert layer in ("tbb", "workqueue"), layer  # the fork-safe layers
    if _layer.tbb_library_path() is not None:
        assert layer == "tbb"


@pytest.mark.slow
def test_a_users_threading_layer_wins(tmp_path):
    code = """
        import numba
        import numpy as np
        from spatialhash import Grid
        Grid(np.random.default_rng(0).random((5_000, 3))).query_pairs(0.05)
        print(numba.threading_layer())
    """
    finished = _run_script(tmp_path, code, NUMBA_THREADING_LAYER="workqueue")
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert finished.stdout.split() == ["workqueue"]


def _config() -> types.SimpleNamespace:
    return types.SimpleNamespace(THREADING_LAYER_PRIORITY=["omp", "tbb", "workqueue"])


def test_the_fork_safe_layers_go_first_when_the_user_names_none(monkeypatch):
    loaded = []
    monkeypatch.setattr(_layer, "load_tbb", lambda: loaded.append(True))
    config = _config()
    assert _layer.choose(config, environ={}) == ("tbb", "workqueue", "omp")
    assert config.THREADING_LAYER_PRIORITY == ["tbb", "workqueue", "omp"]
    assert loaded == [True]


@pytest.mark.parametrize(("named", "loads_tbb"),
                         [("omp", False), ("workqueue", False), ("tbb", True),
                          ("forksafe", True)])
def test_a_named_layer_keeps_numbas_priority_and_tbb_loads_only_where_it_may_serve(
        monkeypatch, named, loads_tbb):
    loaded = []
    monkeypatch.setattr(_layer, "load_tbb", lambda: loaded.append(True))
    config = _config()
    assert _layer.choose(config, environ={"NUMBA_THREADING_LAYER": named}) == (
        "omp", "tbb", "workqueue")
    assert loaded == ([True] if loads_tbb else [])


def test_without_the_tbb_package_nothing_is_loaded(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    assert _layer.tbb_library_path() is None
    assert _layer.load_tbb() is None
