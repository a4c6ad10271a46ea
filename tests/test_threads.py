"""The thread count and wait policy chosen for shared machines (`spatialhash._threads`).

The choices are tested through their inputs (affinity, cgroup files, ``/proc/stat``
readings, the environment), which the functions take as arguments; the subprocess tests
check the whole path in a fresh process, where libgomp has not started yet.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

from spatialhash import Grid, _config, _threads


@pytest.fixture(autouse=True)
def setting_read_afresh():
    """``SPATIALHASH_ADAPT_THREADS`` read again in each test, and after it (when the
    environment is back as it was)."""
    _threads.adapts_to_load.cache_clear()
    yield
    _threads.adapts_to_load.cache_clear()


# ---------------------------------------------------------------------- usable CPUs
@pytest.mark.parametrize(("affinity", "limit", "expected"), [
    (8, None, 8), (8, 2.0, 2), (8, 1.5, 2), (4, 0.5, 1), (2, 16.0, 2), (1, None, 1),
    (0, None, 1),
])
def test_usable_cpus_is_the_affinity_capped_by_the_quota_rounded_up(affinity, limit, expected):
    assert _threads.usable_cpus(affinity, limit) == expected


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_limit_is_the_tightest_of_the_cgroup_and_its_parents(tmp_path):
    _write(tmp_path / "proc-cgroup", "0::/outer/inner\n")
    _write(tmp_path / "fs" / "outer" / "inner" / "cpu.max", "150000 100000\n")
    _write(tmp_path / "fs" / "outer" / "cpu.max", "max 100000\n")
    args = (str(tmp_path / "fs"), str(tmp_path / "proc-cgroup"))
    assert _threads.cgroup_cpu_limit(*args) == 1.5
    _write(tmp_path / "fs" / "outer" / "cpu.max", "50000 100000\n")
    assert _threads.cgroup_cpu_limit(*args) == 0.5


def test_cgroup_v1_limit_reads_the_cfs_quota(tmp_path):
    _write(tmp_path / "proc-cgroup", "5:memory:/job\n4:cpu,cpuacct:/job\n")
    folder = tmp_path / "fs" / "cpu,cpuacct" / "job"
    _write(folder / "cpu.cfs_quota_us", "300000\n")
    _write(folder / "cpu.cfs_period_us", "100000\n")
    args = (str(tmp_path / "fs"), str(tmp_path / "proc-cgroup"))
    assert _threads.cgroup_cpu_limit(*args) == 3.0
    _write(folder / "cpu.cfs_quota_us", "-1\n")  # no quota
    assert _threads.cgroup_cpu_limit(*args) is None


def test_no_cgroup_files_mean_no_limit(tmp_path):
    assert _threads.cgroup_cpu_limit(str(tmp_path), str(tmp_path / "missing")) is None
    _write(tmp_path / "proc-cgroup", "0::/\n")
    _write(tmp_path / "cpu.max", "max 100000\n")
    assert _threads.cgroup_cpu_limit(str(tmp_path), str(tmp_path / "proc-cgroup")) is None


# ---------------------------------------------------------------------- the load
class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _stat(busy_ticks, idle_ticks):
    """A /proc/stat whose CPUs each have ``busy_ticks`` of user time and ``idle_ticks`` idle."""
    lines = [f"cpu  {sum(busy_ticks)} 0 0 {sum(idle_ticks)} 0 0 0 0 0 0"]
    lines += [f"cpu{i} {busy} 0 0 {idle} 0 0 0 0 0 0"
              for i, (busy, idle) in enumerate(zip(busy_ticks, idle_ticks, strict=True))]
    return "\n".join(lines + ["intr 12345", "ctxt 678"]) + "\n"


def _monitor(tmp_path, cpus=None):
    stat = tmp_path / "stat"
    clock = FakeClock()
    mine = {"seconds": 0.0}
    monitor = _threads.LoadMonitor(cpus, str(stat), clock, lambda: mine["seconds"], 0.01)
    return monitor, stat, clock, mine


def test_load_monitor_counts_the_busy_time_of_others_only(tmp_path):
    monitor, stat, clock, mine = _monitor(tmp_path)
    stat.write_text(_stat([1000, 1000], [5000, 5000]))
    assert monitor.free_cpus() is None  # nothing known before the first window closes
    # One second later: both CPUs fully busy (200 ticks), of which this process used 0.5 s.
    clock.now += 1.0
    mine["seconds"] = 0.5
    stat.write_text(_stat([1100, 1100], [5000, 5000]))
    assert monitor.free_cpus() == pytest.approx(0.5)
    assert _threads.threads_for_load(2, monitor.free_cpus()) == 1


def test_load_monitor_sees_an_idle_machine_and_reads_at_most_once_a_window(tmp_path):
    monitor, stat, clock, mine = _monitor(tmp_path)
    stat.write_text(_stat([1000, 1000], [5000, 5000]))
    monitor.free_cpus()
    clock.now += 1.0
    mine["seconds"] = 1.6  # all the busy time is this process's
    stat.write_text(_stat([1080, 1080], [5020, 5020]))
    assert monitor.free_cpus() == pytest.approx(2.0)
    # Within the window the file is not read again: its new contents change nothing.
    clock.now += _threads.LOAD_SAMPLE_SECONDS / 2
    stat.write_text(_stat([5000, 5000], [5020, 5020]))
    assert monitor.free_cpus() == pytest.approx(2.0)


def test_load_monitor_watches_only_the_cpus_of_the_affinity_mask(tmp_path):
    monitor, stat, clock, _ = _monitor(tmp_path, cpus={1})
    stat.write_text(_stat([1000, 1000], [5000, 5000]))
    monitor.free_cpus()
    clock.now += 1.0
    stat.write_text(_stat([1100, 1000], [5000, 5100]))  # cpu0 busy, cpu1 idle
    assert monitor.free_cpus() == pytest.approx(1.0)


def test_other_programs_on_many_cpus_leave_a_quota_its_cpus(tmp_path):
    # A container allowed 2 CPUs on an 8-CPU host half busy with other work: 4 CPUs are
    # free, of which the quota lets the process use 2.
    monitor, stat, clock, mine = _monitor(tmp_path)
    stat.write_text(_stat([1000] * 8, [5000] * 8))
    monitor.free_cpus()
    clock.now += 1.0
    stat.write_text(_stat([1100] * 4 + [1000] * 4, [5000] * 4 + [5100] * 4))
    assert monitor.free_cpus() == pytest.approx(4.0)
    assert _threads.threads_for_load(2, monitor.free_cpus()) == 2


def test_load_monitor_without_proc_stat_knows_nothing(tmp_path):
    monitor, _, clock, _ = _monitor(tmp_path)
    assert monitor.free_cpus() is None
    clock.now += 1.0
    assert monitor.free_cpus() is None
    assert _threads.threads_for_load(2, None) == 2


@pytest.mark.parametrize(("n_cpus", "free", "expected"), [
    (2, None, 2), (2, 2.0, 2), (2, 1.4, 1), (2, 0.0, 1), (2, -0.5, 1), (4, 2.6, 3), (2, 5.0, 2),
])
def test_threads_follow_the_free_cpus(n_cpus, free, expected):
    assert _threads.threads_for_load(n_cpus, free) == expected


class BusyMachine:
    """A monitor reporting that other programs use every CPU."""

    def free_cpus(self):
        return 0.0


@pytest.fixture
def busy_machine(monkeypatch):
    monkeypatch.setattr(_threads, "_load_monitor", BusyMachine)
    monkeypatch.setattr(_threads, "process_cpus", lambda: 2)
    monkeypatch.delenv("SPATIALHASH_ADAPT_THREADS", raising=False)


def test_calls_naming_no_thread_count_run_on_one_thread_when_the_cores_are_busy(busy_machine):
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one thread is all numba has here")
    before = numba.get_num_threads()
    with _config.threads(None):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before
    with _config.threads(2):  # an explicit count wins over the load
        assert numba.get_num_threads() == 2


def test_following_the_load_can_be_switched_off(busy_machine, monkeypatch):
    monkeypatch.setenv("SPATIALHASH_ADAPT_THREADS", "0")
    assert _threads.default_n_threads(2) == 2
    monkeypatch.setenv("SPATIALHASH_ADAPT_THREADS", "1")
    _threads.adapts_to_load.cache_clear()  # the setting is read once
    assert _threads.default_n_threads(2) == 1


def test_numbas_own_thread_count_stays_the_ceiling(monkeypatch):
    monkeypatch.setattr(_threads, "process_cpus", lambda: 64)
    monkeypatch.setenv("SPATIALHASH_ADAPT_THREADS", "0")
    assert _threads.default_n_threads(1) == 1
    assert _threads.default_n_threads(3) == 3


def test_answers_are_the_same_whatever_the_load(busy_machine):
    points = np.random.default_rng(3).random((30_000, 3))
    r = 0.03
    busy = Grid(points, cell_size=r).query_pairs(r, return_distances=True)
    pinned = Grid(points, cell_size=r, n_threads=-1).query_pairs(r, return_distances=True)
    assert np.array_equal(busy.indices, pinned.indices)
    assert np.array_equal(busy.distances, pinned.distances)


# ---------------------------------------------------------------------- the wait policy
def test_wait_policy_is_set_when_the_user_chose_none(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 0 0:0 0 /usr/lib/libc.so.6\n")
    environ = {}
    assert _threads.configure_wait_policy(environ, str(maps)) == "set"
    assert environ == {"GOMP_SPINCOUNT": str(_threads.SPIN_COUNT)}


@pytest.mark.parametrize("variable", ["OMP_WAIT_POLICY", "GOMP_SPINCOUNT"])
def test_a_users_wait_policy_is_kept(tmp_path, variable):
    environ = {variable: "passive"}
    assert _threads.configure_wait_policy(environ, str(tmp_path / "maps")) == "user"
    assert environ == {variable: "passive"}


def test_a_libgomp_already_loaded_is_left_alone(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 0 0:0 0 /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0\n")
    environ = {}
    assert _threads.configure_wait_policy(environ, str(maps)) == "loaded"
    assert environ == {}


def _fresh_process(code: str, env: dict, preexec_fn=None) -> str:
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "NUMBA_NUM_THREADS",
                                  "NUMBA_THREADING_LAYER")}
    environment.update(env)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environment,
                            capture_output=True, text=True, check=True, preexec_fn=preexec_fn,
                            timeout=600)
    return result.stdout.strip()


def test_a_fresh_process_under_openmp_gets_the_short_spin_and_a_users_policy_wins():
    code = """
        import os, spatialhash
        from spatialhash import _threads
        print(os.environ.get("GOMP_SPINCOUNT"), "|", _threads.wait_policy())
    """
    openmp = {"NUMBA_THREADING_LAYER": "omp"}
    spin, policy = _fresh_process(code, openmp).split(" | ")
    assert spin == str(_threads.SPIN_COUNT)
    assert "spatialhash's default" in policy
    spin, policy = _fresh_process(code, {**openmp, "OMP_WAIT_POLICY": "active"}).split(" | ")
    assert spin == "None"
    assert policy == "the user's (OMP_WAIT_POLICY=active)"


def test_a_fresh_process_on_the_default_layer_leaves_libgomp_alone():
    code = """
        import os, spatialhash
        from spatialhash import _threads
        print(os.environ.get("GOMP_SPINCOUNT"), "|", _threads.wait_policy())
    """
    spin, policy = _fresh_process(code, {}).split(" | ")
    assert spin == "None"
    assert policy.startswith("not set")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no affinity masks here")
def test_a_process_allowed_one_cpu_runs_one_thread():
    code = """
        import numpy as np
        from spatialhash import Grid, _threads
        points = np.random.default_rng(0).random((30_000, 3))
        pairs = Grid(points, cell_size=0.03).query_pairs(0.03)
        print(_threads.default_n_threads(), len(pairs))
    """
    first_cpu = min(os.sched_getaffinity(0))
    n_threads, n_pairs = _fresh_process(
        code, {}, preexec_fn=lambda: os.sched_setaffinity(0, {first_cpu})).split()
    assert n_threads == "1"
    points = np.random.default_rng(0).random((30_000, 3))
    assert int(n_pairs) == len(Grid(points, cell_size=0.03).query_pairs(0.03))
