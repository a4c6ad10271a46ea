"""Shared test configuration: hypothesis profiles, one kernel warm-up, the seed contract.

Profiles (``HYPOTHESIS_PROFILE=ci pytest`` or ``pytest --hypothesis-profile=ci``):

- ``default``: 50 examples a property, for the edit-run loop.
- ``ci``: 300 examples a property, derandomized so a CI failure reproduces.

No deadline anywhere: numba compiles (or loads from its disk cache) on the first call.
"""

from __future__ import annotations

import os
import sys

# Under pytest-xdist (`./dev test` runs two workers), each worker compiles into a numba cache
# of its own, set before numba is imported: numba's cache saves are not safe between
# processes (two saving two signatures of one function at once can mix their files up; see
# `spatialhash._numba_internals.lock_cache_saves`). The subprocesses a test starts inherit
# their worker's.
if os.environ.get("PYTEST_XDIST_WORKER"):
    if "numba" in sys.modules:
        raise RuntimeError("numba was imported before tests/conftest.py could give this "
                           "pytest-xdist worker a cache of its own")
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(
        os.environ.get("NUMBA_CACHE_DIR")
        or os.path.join(os.path.expanduser("~"), ".cache", "spatialhash-tests", "numba"),
        os.environ["PYTEST_XDIST_WORKER"])

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings

from spatialhash import Grid

#: No "explain" phase: it re-runs failing cases under coverage tracing, which costs minutes
#: for a grid build per example and adds nothing a shrunk example does not show.
PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]

settings.register_profile(
    "default", max_examples=50, deadline=None, phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci", max_examples=300, deadline=None, derandomize=True, print_blob=True, phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# No compile notices on stderr (`spatialhash._compile_notice`): command-line tests read the
# stderr of subprocesses, which on a cold cache would compile. test_compile_notice.py
# turns them back on where it tests them.
os.environ.setdefault("SPATIALHASH_COMPILE_NOTICE", "0")
# Every thread whatever the load (`spatialhash._threads`): tests of the multi-threaded paths
# must take them on a busy CI machine too. test_threads.py tests the load's effect itself.
os.environ.setdefault("SPATIALHASH_ADAPT_THREADS", "0")

#: The seed contract: every seeded test passes for each of these seeds.
SEEDS = range(100)


@pytest.fixture(scope="session", autouse=True)
def warm_kernels():
    """Run every query once on a tiny grid, so compile (or cache load) is paid once."""
    points = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.75, 0.25]])
    for kwargs in ({}, {"box": 2.0}):
        for algorithm in ("grid", "brute"):
            grid = Grid(points, 0.5, algorithm=algorithm, **kwargs)
            assert len(grid.query_pairs(0.5, return_distances=True)) == 1
            assert len(grid.query_pairs(radii=np.full(3, 0.25))) == 1
            assert sum(len(chunk) for chunk in grid.iter_pairs(0.5, chunk_size=1)) == 1
            assert grid.query_radius(points, 0.5, return_distances=True).indices.size == 5
            assert grid.query_radius(points, 0.5, sort=False).indices.size == 5
            assert grid.count_radius(points, 0.5).sum() == 5
            assert (grid.query_knn(points, 2).counts == 2).all()
            assert grid.query_knn(points, 2, r_max=0.1).counts.sum() == 3
            assert grid.query_box(points - 0.1, points + 0.1).indices.size == 3


@pytest.fixture(params=SEEDS, ids=lambda seed: f"seed{seed}")
def seed(request) -> int:
    """Each seed of the seed contract in turn."""
    return request.param


@pytest.fixture
def rng(seed) -> np.random.Generator:
    """A generator for the current seed of the contract."""
    return np.random.default_rng(seed)
