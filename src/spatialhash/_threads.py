"""How many threads the kernels use, and how idle threads wait: chosen for shared machines.

Three choices decide how parallel kernels behave when other programs share the cores.
``benchmarks/bench_contention.py`` measures them, with 0, 1 and all cores kept busy.

The thread count follows the load. A parallel region ends when its slowest thread does; when
other programs keep the cores busy, a second thread waits for a core and every call waits
for it: on two busy cores, a 5,000-point pair search took 5 to 10 times as long on two
threads as on one, and a cloth frame twice as long. `LoadMonitor` reads the CPU time that
other programs used on the process's CPUs (``/proc/stat`` less this process's own time) at
most every `LOAD_SAMPLE_SECONDS`, and a call that names no thread count runs on the CPUs
they left free, at least one: on an idle machine every usable CPU, with the cores busy one
thread. Calls with an explicit ``n_threads`` run on that many whatever the load, and
``SPATIALHASH_ADAPT_THREADS=0`` turns the monitor off. Answers never depend on the thread
count, so nothing but the speed follows the load.

The thread count's ceiling. Numba starts one thread per CPU in the process's affinity mask,
but ignores a container's CPU quota (cgroup ``cpu.max``, or ``cpu.cfs_quota_us`` in cgroup
v1): a container allowed 2 CPUs on a 64-core host would run 64 threads in 2 CPUs' worth of
time slices. `default_n_threads` is at most the CPUs the process may really use
(`usable_cpus`), and at most numba's own count (``NUMBA_NUM_THREADS``,
``numba.set_num_threads``).

The wait policy, under numba's OpenMP layer only (spatialhash asks for TBB first, see
`_layer`; a user may name OpenMP). Its libgomp makes waiting threads spin for 300,000
iterations at every barrier before they sleep, whatever the load: a thread that lost its
core makes the others spin until it runs again. `configure_wait_policy` sets `SPIN_COUNT`
(``GOMP_SPINCOUNT``) before libgomp starts, when numba may run OpenMP: idle, the 1e6-point
rows ran as fast as with libgomp's spin (within the noise of two runs; 10,000 iterations
cost them about 3%). A user's ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``
always wins, and a libgomp that another package loaded first keeps its own setting
(`wait_policy` says which applies).
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time

#: libgomp's spin iterations before a waiting thread sleeps (``GOMP_SPINCOUNT``), set
#: unless the user chose a policy. See the module docstring.
SPIN_COUNT = 100_000

#: Where libgomp reads its wait policy; a user setting either keeps it.
_POLICY_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")

#: What `configure_wait_policy` found: "set", "user", or "loaded" (libgomp already running).
_policy_state = {"state": None}


def configure_wait_policy(environ=None, maps_path: str = "/proc/self/maps") -> str:
    """Set libgomp's spin count to `SPIN_COUNT` unless the user chose a wait policy.

    Must run before numba starts its OpenMP threads (libgomp reads the variables once, when
    it is loaded). Returns ``"user"`` when ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` was
    already set, ``"loaded"`` when libgomp was already in the process (setting it would do
    nothing), else ``"set"``.
    """
    environ = os.environ if environ is None else environ
    if any(name in environ for name in _POLICY_VARIABLES):
        state = "user"
    elif _libgomp_loaded(maps_path):
        state = "loaded"
    else:
        environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
        state = "set"
    _policy_state["state"] = state
    return state


def _libgomp_loaded(maps_path: str) -> bool:
    """Whether libgomp is mapped into this process already (Linux; ``False`` elsewhere)."""
    try:
        with open(maps_path) as maps:
            return any("libgomp" in line for line in maps)
    except OSError:
        return False


def wait_policy() -> str:
    """A sentence on the wait policy in force, for ``spatialhash info`` and benchmarks."""
    state = _policy_state["state"]
    if state == "user":
        chosen = ", ".join(f"{name}={os.environ[name]}" for name in _POLICY_VARIABLES
                           if name in os.environ)
        return f"the user's ({chosen})"
    if state == "loaded":
        return "libgomp's own (it was loaded before spatialhash)"
    if state == "set":
        return f"GOMP_SPINCOUNT={SPIN_COUNT} (spatialhash's default)"
    return "not set (spatialhash sets it for numba's OpenMP layer only)"


def cgroup_cpu_limit(cgroup_root: str = "/sys/fs/cgroup",
                     proc_cgroup: str = "/proc/self/cgroup") -> float | None:
    """CPUs' worth of time the process's cgroup may use (quota / period), or ``None``.

    Reads cgroup v2 (``cpu.max`` in the process's own cgroup and its parents, the tightest
    limit) or v1 (``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``). ``None`` where there is
    no limit or nothing can be read.
    """
    limits = []
    for path in _cgroup_folders(cgroup_root, proc_cgroup):
        limit = _read_cpu_max(os.path.join(path, "cpu.max"))
        if limit is None:
            limit = _read_cfs_quota(path)
        if limit is not None:
            limits.append(limit)
    return min(limits) if limits else None


def _cgroup_folders(cgroup_root: str, proc_cgroup: str) -> list[str]:
    """The process's cgroup folders and their parents up to ``cgroup_root``, innermost first."""
    relative = []
    try:
        with open(proc_cgroup) as lines:
            for line in lines:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3 and (parts[1] == "" or "cpu" in parts[1].split(",")):
                    relative.append((parts[1], parts[2]))
    except OSError:
        pass
    folders = []
    for controllers, path in relative:
        base = cgroup_root if controllers == "" else os.path.join(cgroup_root, "cpu,cpuacct")
        if controllers and not os.path.isdir(base):
            base = os.path.join(cgroup_root, "cpu")
        parts = [part for part in path.split("/") if part]
        for depth in range(len(parts), -1, -1):
            folders.append(os.path.join(base, *parts[:depth]))
    return folders


def _read_cpu_max(path: str) -> float | None:
    try:
        with open(path) as cpu_max:
            quota, _, period = cpu_max.read().strip().partition(" ")
    except OSError:
        return None
    if quota == "max" or not period:
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def _read_cfs_quota(folder: str) -> float | None:
    try:
        with open(os.path.join(folder, "cpu.cfs_quota_us")) as quota_file:
            quota = int(quota_file.read())
        with open(os.path.join(folder, "cpu.cfs_period_us")) as period_file:
            period = int(period_file.read())
    except (OSError, ValueError):
        return None
    if quota <= 0 or period <= 0:
        return None
    return quota / period


def usable_cpus(affinity: int | None = None, cpu_limit: float | None = None) -> int:
    """The CPUs this process may really use: its affinity mask, capped by its CPU quota
    rounded up (a quota of 1.5 CPUs is worth two threads). Arguments default to this
    process's own (`os.sched_getaffinity`, `cgroup_cpu_limit`)."""
    if affinity is None:
        affinity = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                    else os.cpu_count() or 1)
    if cpu_limit is None:
        cpu_limit = cgroup_cpu_limit()
    cpus = max(1, affinity)
    if cpu_limit is not None and cpu_limit > 0:
        cpus = min(cpus, max(1, math.ceil(cpu_limit)))
    return cpus


@functools.cache
def process_cpus() -> int:
    """`usable_cpus` of this process, read once (a quota changed later is not seen)."""
    return usable_cpus()


#: Seconds between two readings of the other programs' CPU use (``/proc/stat`` counts in
#: clock ticks, a hundredth of a second: a shorter window would be mostly rounding).
LOAD_SAMPLE_SECONDS = 0.25


def _process_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


class LoadMonitor:
    """The CPUs that other programs leave free, from ``/proc/stat`` and this process's CPU time.

    `free_cpus` compares the busy time of the CPUs in ``cpus`` (all of them where ``None``)
    between two readings at least `LOAD_SAMPLE_SECONDS` apart, less the CPU time this
    process used meanwhile; it reads again only when that long has passed, so a call pays a
    clock read, and one call in many a file read. Stolen time (a hypervisor's) counts
    as busy. Until the first window closes, and where ``/proc/stat`` cannot be read, nothing
    is known (``None``).
    """

    def __init__(self, cpus=None, stat_path: str = "/proc/stat", clock=time.monotonic,
                 process_seconds=_process_cpu_seconds, tick_seconds: float | None = None):
        self._cpus = None if cpus is None else {f"cpu{cpu}" for cpu in cpus}
        self._stat_path = stat_path
        self._clock = clock
        self._process_seconds = process_seconds
        if tick_seconds is None:
            tick_seconds = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
        self._tick_seconds = tick_seconds
        self._lock = threading.Lock()
        self._last = None  # (clock, busy seconds of the CPUs, this process's seconds)
        self._free = None

    def _read_busy_seconds(self) -> tuple[float, int] | None:
        """Busy seconds since boot of the watched CPUs, all causes, and how many CPUs were
        read (``None``: unreadable)."""
        try:
            with open(self._stat_path) as stat:
                lines = stat.read().splitlines()
        except OSError:
            return None
        busy_ticks = 0
        n_read = 0
        for line in lines:
            name, _, values = line.partition(" ")
            if not name.startswith("cpu") or name == "cpu":
                continue
            if self._cpus is not None and name not in self._cpus:
                continue
            fields = [int(value) for value in values.split()]
            # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time
            # is already in user and nice.
            busy_ticks += sum(fields[:8]) - fields[3] - fields[4]
            n_read += 1
        return (busy_ticks * self._tick_seconds, n_read) if n_read else None

    def free_cpus(self) -> float | None:
        """CPUs of the watched ones that other programs left free in the last window, or
        ``None``. (A container's CPU quota may allow fewer: the caller caps the count.)"""
        now = self._clock()
        last = self._last
        if last is not None and now - last[0] < LOAD_SAMPLE_SECONDS:
            return self._free
        if not self._lock.acquire(blocking=False):
            return self._free  # another thread is reading: use the last answer
        try:
            reading = self._read_busy_seconds()
            if reading is None:
                return None
            busy, n_read = reading
            mine = self._process_seconds()
            if last is not None:
                others = (busy - last[1]) - (mine - last[2])
                self._free = n_read - max(0.0, others / (now - last[0]))
            self._last = (now, busy, mine)
            return self._free
        finally:
            self._lock.release()


def threads_for_load(n_cpus: int, free: float | None) -> int:
    """Threads for a call when others leave ``free`` of ``n_cpus`` CPUs free: the free
    CPUs, rounded, between 1 and ``n_cpus`` (all of them when nothing is known)."""
    if free is None:
        return n_cpus
    return max(1, min(n_cpus, round(free)))


@functools.cache
def _load_monitor() -> LoadMonitor:
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return LoadMonitor(cpus)


@functools.cache
def adapts_to_load() -> bool:
    """Whether calls that name no thread count follow the load (``SPATIALHASH_ADAPT_THREADS``,
    on unless set to ``0``). Read once, at the first such call (a lookup in `os.environ`
    cost more than the rest of the choice); `adapts_to_load.cache_clear` reads it
    again."""
    return os.environ.get("SPATIALHASH_ADAPT_THREADS", "1") != "0"


def default_n_threads(current: int | None = None) -> int:
    """The thread count of a call that names none: numba's (``current``, or as
    ``numba.set_num_threads`` and ``NUMBA_NUM_THREADS`` left it), at most `usable_cpus`,
    and at most the CPUs that other programs leave free (see the module docstring)."""
    if current is None:
        import numba

        current = numba.get_num_threads()
    n_threads = min(current, process_cpus())
    if n_threads > 1 and adapts_to_load():
        n_threads = min(n_threads,
                        threads_for_load(n_threads, _load_monitor().free_cpus()))
    return n_threads
