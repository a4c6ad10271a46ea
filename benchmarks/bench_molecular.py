"""Molecular neighbour lists (`spatialhash.neighbors.neighbor_list`) against vesin, matscipy,
ASE and freud, on the same systems in the same run.

Run from the repository root::

    python benchmarks/bench_molecular.py --quick          # 1,000 atoms, cutoff 5: a check
    python benchmarks/bench_molecular.py                  # 1,000 to 100,000 atoms, the batch
    python benchmarks/bench_molecular.py --sizes 1000000 --systems fcc --cutoffs 5 \\
        --lists half --repeat 1 --no-batch --memory       # a million atoms once, peak memory
    python benchmarks/bench_molecular.py --skin 1.0 --sizes 100000 --systems water \\
        --cutoffs 5 --lists full                          # the skin list against new calls
    python benchmarks/bench_molecular.py --skin 1.0 --skin-batch --cutoffs 5 \\
        --lists full --move 0.02 0.06                     # the same on the batch

Systems
-------
- ``water``: a cubic box of water molecules at 1 g/cm3 (0.0334 molecules per A**3): the
  oxygens on a jittered cubic lattice, the hydrogens at 0.9572 A and 104.52 degrees, each
  molecule turned at random.
- ``fcc``: copper (a = 3.61 A) in its triclinic primitive cell (three vectors of a / sqrt(2)
  at 60 degrees, the first along x, the second in the xy plane), repeated k x k x k.
- ``diamond``: silicon (a = 5.431 A), the same primitive cell with two atoms, repeated.

The crystals are rattled by 0.01 A (Gaussian) so that no pair lies at exactly the cutoff:
ASE keeps ``d < cutoff``, spatialhash ``d <= cutoff``. Each size is the nearest a system can
be built to (the table gives the atoms).

Method
------
- Every contender computes the letters ``ijSdD`` (matscipy, ASE: ``ijdDS``) of one system,
  full list (each pair in both directions) or half list (each pair once), and returns
  materialized arrays: the whole computation is inside the timed region.
- Peers: vesin on one thread and on all of numba's threads (its ``n_threads``); matscipy's
  ``neighbour_list`` and ASE's ``neighbor_list`` (full lists only; ASE only up to
  ``--ase-max`` atoms, it is slow); freud's ``AABBQuery`` (float32, minimum image, no
  shifts: compared on ``(i, j)`` and distances to 1e-4) where the cutoff is below half the
  cell's width. A peer that is not installed is left out, with a note.
- Before anything is timed, each peer's answer is compared with ours: the rows as a set of
  ``(i, j, S)``, equal exactly, then their distances and vectors to 1e-12. A half list is
  compared after turning each row ``(i, j, S)`` into the one of ``(i, j, S)`` and
  ``(j, i, -S)`` that spatialhash keeps (``i < j``; an atom with its own image: the shift
  of positive sum, a zero sum to the one whose last non-zero component is positive). A
  mismatch is printed, marked in the table, and makes the script exit with status 1.
- Our first call (compiling the kernels, or loading them from numba's disk cache) is made
  on a small system before anything is timed, and its time printed.
- Times are medians over ``--repeat`` calls; a contender whose checking call took more
  than ``--slow-seconds`` is timed over ``--slow-repeat`` calls. Ratio = peer time / our
  time (above 1: spatialhash is faster).
- The batch: ``--batch-systems`` systems of ``--batch-atoms`` atoms at water's density in
  random triclinic cells (about 10 A wide, so the cutoffs reach beyond half the cell, and
  atoms meet their own images), in one call with ``ptr`` against a Python loop of vesin
  calls (and of matscipy calls, full lists) whose results are joined into the same arrays.
- ``--skin SKIN``: instead of the peers, `MolecularNeighborList` with that skin against a
  new `neighbor_list` call at each of ``--steps`` steps of small random moves (Gaussian,
  ``--move`` A per axis and step, a run for each value given), the atoms wrapped back
  into the cell every ``--wrap-every`` steps; on each system of ``--sizes`` and
  ``--systems``, or with ``--skin-batch`` on the batch (one list with ``ptr`` against one
  new call with ``ptr``; a system is searched again when one of its atoms moved beyond
  half the skin, so larger moves search more systems a step). The list's answer is
  checked against the new call's at every step before either is timed (the same rows,
  distances and vectors to the bit, in normal form); then the steps are replayed, each
  step's update and new call timed one after the other, the one going first swapping
  every step. Printed: the searches the list made (and the systems searched a step), the
  median step of each with its quartiles, the median and quartiles of the per-step ratio
  (new call over list: above 1, the list is faster), and the whole run of each (the
  list's searches included).
- ``--memory``: the peak memory of one call of each library at the first size, system,
  cutoff and list, in a fresh subprocess: the peak resident size (``VmHWM``) after the call
  minus the resident size just before it, after a warm-up on a small system.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

try:
    from . import _common as common
except ImportError:  # run as a script, or loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as common

from spatialhash.neighbors import MolecularNeighborList, neighbor_list

SYSTEMS = ("water", "fcc", "diamond")
SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000,)
CUTOFFS = (5.0, 6.0)
LISTS = ("full", "half")
PEERS = ("vesin", "matscipy", "ase", "freud")
SLOW_SECONDS = 5.0
QUICK_SLOW_SECONDS = 0.5
#: Water molecules per A**3 at 1 g/cm3.
WATER_DENSITY = 0.0334
#: Standard deviation of the crystals' rattle (A): no pair at exactly the cutoff.
RATTLE = 0.01
#: Rows may differ in distance or vector by this much (A) between two float64 codes.
DISTANCE_TOLERANCE = 1e-12
#: freud computes in float32: its distances agree to this (A), and a pair this close to
#: the cutoff may be decided either way.
FLOAT32_TOLERANCE = 1e-4


# ---------------------------------------------------------------------- systems
@dataclass
class System:
    """One periodic system: ``positions`` (n, 3), ``cell`` (3, 3) with the vectors as rows
    (the first along x, the second in the xy plane), every axis periodic."""

    name: str
    positions: np.ndarray
    cell: np.ndarray

    @property
    def n(self) -> int:
        return len(self.positions)

    def width(self) -> float:
        """The cell's smallest perpendicular width."""
        dual = np.linalg.inv(self.cell).T
        return float(1.0 / np.linalg.norm(dual, axis=1).max())


def cell_from_parameters(a: float, b: float, c: float, alpha: float, beta: float,
                         gamma: float) -> np.ndarray:
    """The cell vectors (rows) of lengths and angles (degrees): ``a`` along x, ``b`` in the
    xy plane, as ASE's ``cellpar_to_cell`` and MDAnalysis lay them out."""
    cos_alpha, cos_beta, cos_gamma = np.cos(np.radians([alpha, beta, gamma]))
    sin_gamma = np.sin(np.radians(gamma))
    c_x = c * cos_beta
    c_y = c * (cos_alpha - cos_beta * cos_gamma) / sin_gamma
    return np.array([[a, 0.0, 0.0], [b * cos_gamma, b * sin_gamma, 0.0],
                     [c_x, c_y, np.sqrt(c * c - c_x * c_x - c_y * c_y)]])


def water_box(n: int, seed: int) -> System:
    """About ``n`` atoms of water (n / 3 molecules) in a cube at 1 g/cm3."""
    rng = np.random.default_rng(seed)
    molecules = max(1, round(n / 3))
    edge = (molecules / WATER_DENSITY) ** (1.0 / 3.0)
    sites_per_edge = int(np.ceil(molecules ** (1.0 / 3.0)))
    spacing = edge / sites_per_edge
    sites = np.stack(np.meshgrid(*[np.arange(sites_per_edge)] * 3, indexing="ij"),
                     -1).reshape(-1, 3)
    sites = sites[rng.choice(len(sites), molecules, replace=False)]
    oxygens = (sites + 0.5 + rng.uniform(-0.15, 0.15, (molecules, 3))) * spacing
    half_angle = np.radians(104.52) / 2.0
    local = 0.9572 * np.array([[np.sin(half_angle), np.cos(half_angle), 0.0],
                               [-np.sin(half_angle), np.cos(half_angle), 0.0]])
    rotations = _random_rotations(molecules, rng)
    hydrogens = oxygens[:, np.newaxis, :] + np.einsum("mab,hb->mha", rotations, local)
    positions = np.concatenate([oxygens[:, np.newaxis, :], hydrogens], axis=1).reshape(-1, 3)
    return System("water", positions, np.eye(3) * edge)


def _random_rotations(count: int, rng) -> np.ndarray:
    """``count`` uniformly random rotation matrices (from unit quaternions)."""
    quaternions = rng.normal(size=(4, count))
    w, x, y, z = quaternions / np.linalg.norm(quaternions, axis=0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
    ], axis=1)


def crystal(name: str, n: int, seed: int) -> System:
    """About ``n`` atoms of fcc copper or diamond silicon in their primitive cell (three
    vectors at 60 degrees) repeated k x k x k, rattled by `RATTLE`."""
    lattice, basis = {"fcc": (3.61, [[0.0, 0.0, 0.0]]),
                      "diamond": (5.431, [[0.0, 0.0, 0.0], [0.25, 0.25, 0.25]])}[name]
    basis = np.array(basis)
    primitive = cell_from_parameters(*[lattice / np.sqrt(2.0)] * 3, 60.0, 60.0, 60.0)
    repeats = max(1, round((n / len(basis)) ** (1.0 / 3.0)))
    cells = np.stack(np.meshgrid(*[np.arange(repeats)] * 3, indexing="ij"), -1).reshape(-1, 3)
    fractional = (cells[:, np.newaxis, :] + basis[np.newaxis, :, :]).reshape(-1, 3)
    positions = fractional @ primitive
    positions += np.random.default_rng(seed).normal(0.0, RATTLE, positions.shape)
    return System(name, positions, primitive * repeats)


def make_system(name: str, n: int, seed: int) -> System:
    return water_box(n, seed) if name == "water" else crystal(name, n, seed)


# ---------------------------------------------------------------------- rows
@dataclass
class Rows:
    """A list in normal form: rows sorted by ``(i, j, S)``; for a half list each pair as
    the row spatialhash keeps."""

    i: np.ndarray
    j: np.ndarray
    shifts: np.ndarray
    distances: np.ndarray
    vectors: np.ndarray


def half_rule(i: np.ndarray, j: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """Whether ``(i, j, S)`` is the row of its pair that spatialhash's half list keeps."""
    total = shifts.sum(axis=1)
    last_sign = np.zeros(len(shifts), dtype=np.int64)
    for axis in (2, 1, 0):
        last_sign = np.where(last_sign == 0, np.sign(shifts[:, axis]), last_sign)
    return (i < j) | ((i == j) & ((total > 0) | ((total == 0) & (last_sign > 0))))


def normal_rows(i, j, shifts, distances, vectors, half: bool) -> Rows:
    """`Rows` of one answer (any integer dtypes)."""
    i, j = np.asarray(i).astype(np.int64), np.asarray(j).astype(np.int64)
    shifts = np.asarray(shifts).astype(np.int64)
    distances = np.asarray(distances, dtype=np.float64)
    vectors = np.asarray(vectors, dtype=np.float64)
    if half:
        flip = ~half_rule(i, j, shifts)
        i, j = np.where(flip, j, i), np.where(flip, i, j)
        shifts = np.where(flip[:, np.newaxis], -shifts, shifts)
        vectors = np.where(flip[:, np.newaxis], -vectors, vectors)
    order = np.lexsort((shifts[:, 2], shifts[:, 1], shifts[:, 0], j, i))
    return Rows(i[order], j[order], shifts[order], distances[order], vectors[order])


def compare_rows(ours: Rows, theirs: Rows, cutoff: float) -> common.Check:
    """Equal row sets, then distances and vectors within `DISTANCE_TOLERANCE`. Rows in one
    list only are described: a pair at exactly the cutoff (ASE's strict test) is named."""
    same_keys = (len(ours.i) == len(theirs.i) and np.array_equal(ours.i, theirs.i)
                 and np.array_equal(ours.j, theirs.j)
                 and np.array_equal(ours.shifts, theirs.shifts))
    if not same_keys:
        return common.Check(False, "MISMATCH: " + _row_difference(ours, theirs, cutoff))
    gap = max(float(np.abs(ours.distances - theirs.distances).max(initial=0.0)),
              float(np.abs(ours.vectors - theirs.vectors).max(initial=0.0)))
    if gap > DISTANCE_TOLERANCE:
        return common.Check(False, f"MISMATCH: same rows, distances or vectors differ by "
                                   f"{gap:.3g}")
    return common.Check(True, f"identical rows ({len(ours.i):,}), distances and vectors "
                              f"within {gap:.2g}")


def _row_difference(ours: Rows, theirs: Rows, cutoff: float) -> str:
    def keyed(rows: Rows) -> dict:
        return {(a, b, *s): d for a, b, s, d in zip(
            rows.i.tolist(), rows.j.tolist(), rows.shifts.tolist(), rows.distances.tolist(),
            strict=True)}

    mine, peer = keyed(ours), keyed(theirs)
    only_ours = {k: d for k, d in mine.items() if k not in peer}
    only_theirs = {k: d for k, d in peer.items() if k not in mine}
    at_cutoff = sum(abs(d - cutoff) <= DISTANCE_TOLERANCE for d in only_ours.values())
    return (f"{len(ours.i):,} rows against {len(theirs.i):,}; {len(only_ours):,} only in "
            f"ours ({at_cutoff:,} at the cutoff), {len(only_theirs):,} only in the peer's; "
            f"e.g. {sorted(only_ours.items())[:2]} {sorted(only_theirs.items())[:2]}")


def compare_pairs_float32(ours: Rows, i, j, distances, n: int, cutoff: float
                          ) -> common.Check:
    """freud's minimum-image pairs against ours: ``(i, j)`` sets (as `Rows` of a half list
    they are ``i < j``), pairs decided differently only within `FLOAT32_TOLERANCE` of the
    cutoff, distances of the common pairs within it."""
    mine = ours.i * n + ours.j
    theirs = np.asarray(i).astype(np.int64) * n + np.asarray(j).astype(np.int64)
    order = np.argsort(theirs)
    theirs, their_distances = theirs[order], np.asarray(distances, np.float64)[order]
    if len(np.unique(mine)) != len(mine):
        return common.Check(False, "MISMATCH: a pair appears with two shifts in our list")
    common_mine = np.isin(mine, theirs)
    common_theirs = np.isin(theirs, mine)
    lonely = np.concatenate([ours.distances[~common_mine], their_distances[~common_theirs]])
    if (np.abs(lonely - cutoff) > FLOAT32_TOLERANCE).any():
        return common.Check(False, f"MISMATCH: {len(lonely):,} pairs in one list only, some "
                                   "away from the cutoff")
    gap = float(np.abs(ours.distances[common_mine] - their_distances[common_theirs])
                .max(initial=0.0))
    if gap > FLOAT32_TOLERANCE:
        return common.Check(False, f"MISMATCH: distances differ by {gap:.3g}")
    return common.Check(True, f"(i, j) equal but {len(lonely)} at the cutoff, float32 "
                              f"distances within {gap:.2g}")


# ---------------------------------------------------------------------- contenders
@dataclass
class Contender:
    """A peer's computation and the check of its answer against ours."""

    name: str
    compute: Callable[[], object]
    check: Callable[[object, Rows], common.Check]


def ours(system: System, cutoff: float, half: bool) -> Callable[[], object]:
    return lambda: neighbor_list("ijSdD", system.positions, cutoff, system.cell,
                                 full_list=not half)


def contenders(system: System, cutoff: float, half: bool, peers: list[str], threads: int,
               ase_max: int) -> tuple[list[Contender], list[str]]:
    """The peers that apply to this system, and a note for each that does not."""
    found, notes = [], []

    def exact(letters: str):
        order = [letters.index(letter) for letter in "ijSdD"]
        return lambda result, mine: compare_rows(
            mine, normal_rows(*[result[k] for k in order], half), cutoff)

    if "vesin" in peers:
        import vesin

        for count in dict.fromkeys([1, threads]):
            calculator = vesin.NeighborList(cutoff=cutoff, full_list=not half,
                                            n_threads=count)
            found.append(Contender(
                f"vesin, {count} thread{'s' if count > 1 else ''}",
                lambda calculator=calculator: calculator.compute(
                    system.positions, system.cell, True, "ijSdD"),
                exact("ijSdD")))
    if "matscipy" in peers:
        if half:
            notes.append("matscipy: full lists only")
        else:
            from matscipy.neighbours import neighbour_list

            found.append(Contender(
                "matscipy", lambda: neighbour_list("ijdDS", positions=system.positions,
                                                   cell=system.cell, pbc=[True] * 3,
                                                   cutoff=cutoff), exact("ijdDS")))
    if "ase" in peers:
        if half:
            notes.append("ASE: full lists only")
        elif system.n > ase_max:
            notes.append(f"ASE: left out above {ase_max:,} atoms (--ase-max)")
        else:
            from ase import Atoms
            from ase.neighborlist import neighbor_list as ase_neighbor_list

            atoms = Atoms(positions=system.positions, cell=system.cell, pbc=True)
            found.append(Contender("ASE", lambda: ase_neighbor_list("ijdDS", atoms, cutoff),
                                   exact("ijdDS")))
    if "freud" in peers:
        contender = freud_contender(system, cutoff, half)
        if isinstance(contender, str):
            notes.append(contender)
        else:
            found.append(contender)
    return found, notes


def freud_contender(system: System, cutoff: float, half: bool) -> Contender | str:
    """freud's ``AABBQuery`` in the same box (its matrix: our vectors as columns, upper
    triangular as our cells are built), positions wrapped into its centred box first."""
    if cutoff >= system.width() / 2.0:
        return f"freud: cutoff {cutoff} not below half the cell's width ({system.width():.3g})"
    import freud

    box = freud.box.Box.from_matrix(system.cell.T)
    points = box.wrap(system.positions - system.cell.sum(axis=0) / 2.0).astype(np.float32)
    query = freud.locality.AABBQuery(box, points)

    def compute():
        found = query.query(points, {"r_max": cutoff, "exclude_ii": True}).toNeighborList()
        i, j = found.query_point_indices, found.point_indices
        distances = found.distances
        if half:
            keep = i < j
            i, j, distances = i[keep], j[keep], distances[keep]
        return np.array(i), np.array(j), np.array(distances)

    def check(result, mine: Rows) -> common.Check:
        if not half:
            keep = half_rule(mine.i, mine.j, mine.shifts)
            mine = Rows(*(array[keep] for array in (mine.i, mine.j, mine.shifts,
                                                     mine.distances, mine.vectors)))
            # freud's full list: compare its half (i < j) with ours.
            keep_theirs = result[0] < result[1]
            result = tuple(array[keep_theirs] for array in result)
        return compare_pairs_float32(mine, *result, system.n, cutoff)

    return Contender("freud (float32)", compute, check)


def available_peers(chosen: list[str]) -> tuple[list[str], list[str]]:
    """The chosen peers that import, and a note for each that does not."""
    modules = {"vesin": "vesin", "matscipy": "matscipy.neighbours", "ase": "ase.neighborlist",
               "freud": "freud"}
    present, notes = [], []
    for name in chosen:
        try:
            importlib.import_module(modules[name])
        except ImportError as error:
            notes.append(f"{name}: not installed ({error})")
            continue
        present.append(name)
    return present, notes


# ---------------------------------------------------------------------- timing
def timed_runs(compute: Callable[[], object], first_seconds: float, repeat: int,
               slow_seconds: float, slow_repeat: int) -> list[float]:
    runs = slow_repeat if first_seconds > slow_seconds else repeat
    return common.time_repeated(compute, runs)


def run_case(system: System, cutoff: float, half: bool, peers: list[str], args,
             log) -> list[dict]:
    """One system, cutoff and list: ours, then each peer checked and timed."""
    compute = ours(system, cutoff, half)
    first, result = common.time_call(compute)
    mine = normal_rows(*result, half)
    del result
    ours_times = timed_runs(compute, first, args.repeat, args.slow_seconds, args.slow_repeat)
    ours_s = common.median(ours_times)
    label = {"system": system.name, "n": system.n, "cutoff": cutoff,
             "list": "half" if half else "full", "pairs": len(mine.i), "ours_s": ours_s,
             "ours_runs": len(ours_times)}
    log(f"{system.name} n={system.n:,} cutoff={cutoff} {label['list']}: "
        f"{len(mine.i):,} rows, ours {ours_s:.3g} s")
    found, notes = contenders(system, cutoff, half, peers, args.threads, args.ase_max)
    rows = []
    for contender in found:
        first, result = common.time_call(contender.compute)
        check = contender.check(result, mine)
        del result
        row = {**label, "peer": contender.name, "check_ok": check.ok,
               "check": check.message}
        if check.ok:
            times = timed_runs(contender.compute, first, args.repeat, args.slow_seconds,
                               args.slow_repeat)
            row.update(peer_s=common.median(times), peer_runs=len(times),
                       ratio=common.median(times) / ours_s)
        log(f"  {contender.name}: {check.message}"
            + (f"; {row['peer_s']:.3g} s, ratio {row['ratio']:.2f}" if check.ok else ""))
        rows.append(row)
    for note in notes:
        rows.append({**label, "peer": note.split(":")[0], "note": note})
    return rows


# ---------------------------------------------------------------------- the batch
def batch_systems(count: int, atoms: int, seed: int) -> tuple[np.ndarray, np.ndarray,
                                                                 np.ndarray]:
    """``(positions, cells, ptr)``: ``count`` systems of ``atoms`` random atoms at water's
    atom density (0.1 per A**3) in random triclinic cells of the same volume."""
    rng = np.random.default_rng(seed)
    volume = atoms / (3 * WATER_DENSITY)
    cells, positions = [], []
    for _ in range(count):
        angles = rng.uniform(75.0, 105.0, 3)
        shape = cell_from_parameters(1.0, *rng.uniform(0.85, 1.15, 2), *angles)
        cell = shape * (volume / np.linalg.det(shape)) ** (1.0 / 3.0)
        cells.append(cell)
        positions.append(rng.random((atoms, 3)) @ cell)
    ptr = np.arange(count + 1, dtype=np.int64) * atoms
    return np.concatenate(positions), np.stack(cells), ptr


def run_batch(args, peers: list[str], log) -> list[dict]:
    """The batch in one call with ``ptr`` against Python loops of the peers' calls."""
    positions, cells, ptr = batch_systems(args.batch_systems, args.batch_atoms, args.seed)
    rows = []
    for cutoff in args.cutoffs:
        for half in [name == "half" for name in args.lists]:
            def compute(cutoff=cutoff, half=half):
                return neighbor_list("ijSdD", positions, cutoff, cells, ptr=ptr,
                                     full_list=not half)

            first, result = common.time_call(compute)
            mine = normal_rows(*result, half)
            del result
            times = timed_runs(compute, first, args.repeat, args.slow_seconds,
                               args.slow_repeat)
            label = {"system": f"batch {args.batch_systems:,} x {args.batch_atoms}",
                     "n": len(positions), "cutoff": cutoff, "list": "half" if half else "full",
                     "pairs": len(mine.i), "ours_s": common.median(times),
                     "ours_runs": len(times)}
            log(f"batch cutoff={cutoff} {label['list']}: {len(mine.i):,} rows, ours "
                f"{label['ours_s']:.3g} s")
            for name, loop in batch_loops(positions, cells, ptr, cutoff, half, peers,
                                          args.threads):
                first, result = common.time_call(loop)
                check = compare_rows(mine, normal_rows(*result, half), cutoff)
                del result
                row = {**label, "peer": name, "check_ok": check.ok, "check": check.message}
                if check.ok:
                    peer_times = timed_runs(loop, first, args.repeat, args.slow_seconds,
                                            args.slow_repeat)
                    row.update(peer_s=common.median(peer_times), peer_runs=len(peer_times),
                               ratio=common.median(peer_times) / label["ours_s"])
                log(f"  {name}: {check.message}"
                    + (f"; ratio {row['ratio']:.2f}" if check.ok else ""))
                rows.append(row)
    return rows


def batch_loops(positions, cells, ptr, cutoff: float, half: bool, peers: list[str],
                threads: int):
    """``(name, loop)`` of each peer: one call per system, indices offset and every letter
    joined into one array (``ijSdD``), as one call with ``ptr`` returns them."""
    def joined(parts):
        offsets = [start for start, _ in parts]
        results = [result for _, result in parts]
        return (np.concatenate([r[0] + o for r, o in zip(results, offsets, strict=True)]),
                np.concatenate([r[1] + o for r, o in zip(results, offsets, strict=True)]),
                np.concatenate([r[2] for r in results]),
                np.concatenate([r[3] for r in results]),
                np.concatenate([r[4] for r in results]))

    systems = [(int(ptr[b]), positions[ptr[b]:ptr[b + 1]], cells[b])
               for b in range(len(cells))]
    if "vesin" in peers:
        import vesin

        for count in dict.fromkeys([1, threads]):
            calculator = vesin.NeighborList(cutoff=cutoff, full_list=not half,
                                            n_threads=count)

            def loop(calculator=calculator):
                return joined([(start, calculator.compute(points, cell, True, "ijSdD"))
                               for start, points, cell in systems])

            yield f"vesin, {count} thread{'s' if count > 1 else ''}", loop
    if "matscipy" in peers and not half:
        from matscipy.neighbours import neighbour_list

        def matscipy_loop():
            parts = []
            for start, points, cell in systems:
                i, j, shifts, distances, vectors = neighbour_list(
                    "ijSdD", positions=points, cell=cell, pbc=[True] * 3, cutoff=cutoff)
                parts.append((start, (i, j, shifts, distances, vectors)))
            return joined(parts)

        yield "matscipy", matscipy_loop


# ---------------------------------------------------------------------- memory
def memory_probe(library: str, system_name: str, n: int, cutoff: float, half: bool,
                 seed: int) -> dict:
    """Peak memory of one call in this (fresh) process; see the module's docstring."""
    system = make_system(system_name, n, seed)
    small = make_system(system_name, 500, seed)
    if library == "spatialhash":
        ours(small, cutoff, half)()

        def compute():
            return ours(system, cutoff, half)()
    else:
        import vesin

        calculator = vesin.NeighborList(cutoff=cutoff, full_list=not half,
                                        n_threads=numba.get_num_threads())
        calculator.compute(small.positions, small.cell, True, "ijSdD")

        def compute():
            return calculator.compute(system.positions, system.cell, True, "ijSdD")
    peak_before = common.peak_resident_bytes()
    resident_before = common.resident_bytes()
    seconds, output = common.time_call(compute)
    peak_after = common.peak_resident_bytes()
    return {"library": library, "system": system_name, "n": system.n, "cutoff": cutoff,
            "list": "half" if half else "full", "pairs": len(output[0]),
            "seconds": seconds, "input_bytes": system.positions.nbytes,
            "output_bytes": sum(array.nbytes for array in output),
            "peak_above_resident_bytes": peak_after - resident_before,
            "peak_raised": peak_after > peak_before}


def measure_memory(args) -> list[dict]:
    """`memory_probe` of spatialhash and vesin, each in a fresh subprocess of this script."""
    results = []
    for library in ("spatialhash", "vesin"):
        command = [sys.executable, str(Path(__file__).resolve()), "--memory-probe", library,
                   "--systems", args.systems[0], "--sizes", str(args.sizes[0]),
                   "--cutoffs", str(args.cutoffs[0]), "--lists", args.lists[0],
                   "--seed", str(args.seed)]
        if args.threads_given:
            command += ["--threads", str(args.threads)]
        finished = subprocess.run(command, capture_output=True, text=True, check=False)
        if finished.returncode != 0:
            tail = finished.stderr.strip().splitlines()[-1:] or ["no output"]
            results.append({"library": library, "error": tail[0]})
            continue
        results.append(json.loads(finished.stdout.strip().splitlines()[-1]))
    return results


def memory_lines(results: list[dict]) -> list[str]:
    lines = []
    for result in results:
        if "error" in result:
            lines.append(f"- {result['library']}: probe failed: {result['error']}")
            continue
        extra = result["peak_above_resident_bytes"] / 1e6
        peak = f"peak {extra:,.0f} MB" if result["peak_raised"] else (
            f"peak at most {extra:,.0f} MB (below the process's earlier peak)")
        lines.append(
            f"- {result['library']}: {result['system']}, {result['n']:,} atoms, cutoff "
            f"{result['cutoff']}, {result['list']} list: {peak} above the resident size "
            f"before the call; input {result['input_bytes'] / 1e6:,.0f} MB, output "
            f"{result['output_bytes'] / 1e6:,.0f} MB ({result['pairs']:,} rows); the call "
            f"took {result['seconds']:.3g} s")
    return lines


# ---------------------------------------------------------------------- reporting
def environment(threads: int) -> dict:
    versions = {"python": sys.version.split()[0]}
    for module in ("numpy", "numba", "spatialhash", "vesin", "matscipy", "ase", "freud"):
        try:
            versions[module] = importlib.import_module(module).__version__
        except ImportError:
            versions[module] = None
    try:
        layer = numba.threading_layer()
    except ValueError:
        layer = "not started"
    return {"versions": versions, "cpu": common.cpu_model(), "cores": common.usable_cores(),
            "threads": threads, "threading_layer": layer}


def results_table(rows: list[dict], repeat: int) -> str:
    """One line per system, size, cutoff and list: our time, then each peer's time and
    ratio (peer / ours), ``MISMATCH`` where its answer differed, blank where it did not
    run."""
    cases: dict[tuple, dict] = {}
    peers: list[str] = []
    for row in rows:
        if "note" in row:
            continue
        key = (row["system"], row["n"], row["cutoff"], row["list"])
        cases.setdefault(key, {"row": row})
        if row["peer"] not in peers:
            peers.append(row["peer"])
        if not row["check_ok"]:
            cell = "MISMATCH"
        else:
            runs = "" if row["peer_runs"] == repeat else f", {row['peer_runs']} run"
            cell = f"{common.format_seconds(row['peer_s'])} ({row['ratio']:.2f}x{runs})"
        cases[key][row["peer"]] = cell
    headers = ["system", "atoms", "cutoff", "list", "rows", "spatialhash (s)", *peers]
    body = []
    for case in cases.values():
        row = case["row"]
        runs = "" if row["ours_runs"] == repeat else f" ({row['ours_runs']} run)"
        body.append([row["system"], f"{row['n']:,}", f"{row['cutoff']:g}", row["list"],
                     f"{row['pairs']:,}", common.format_seconds(row["ours_s"]) + runs,
                     *[case.get(peer, "") for peer in peers]])
    return common.markdown_table(headers, body)


# ---------------------------------------------------------------------- the skin list
def skin_steps(positions: np.ndarray, cells: np.ndarray, system: np.ndarray, steps: int,
               move: float, wrap_every: int, seed: int) -> list[np.ndarray]:
    """The positions of ``steps`` steps of `skin_step`, wrapped every ``wrap_every``."""
    rng = np.random.default_rng(seed)
    frames = []
    for step in range(1, steps + 1):
        positions = skin_step(positions, cells, system, rng, move,
                              bool(wrap_every) and step % wrap_every == 0)
        frames.append(positions)
    return frames


def skin_step(positions: np.ndarray, cells: np.ndarray, system: np.ndarray, rng,
              move: float, wrap: bool) -> np.ndarray:
    """``positions`` moved at random (Gaussian, ``move`` per axis), each atom wrapped into
    the cell of its system (``cells`` (B, 3, 3), ``system`` (n,)) when ``wrap``."""
    positions = positions + rng.normal(0.0, move, positions.shape)
    if wrap:
        inverse = np.linalg.inv(cells)[system]
        jumps = np.floor(np.einsum("nk,nka->na", positions, inverse))
        positions = positions - np.einsum("na,nak->nk", jumps, cells[system])
    return positions


def run_skin(name: str, positions: np.ndarray, cell: np.ndarray, ptr: np.ndarray | None,
             cutoff: float, half: bool, move: float, args, log) -> dict:
    """The skin list against a new call at each step, on one system (``ptr`` None) or a
    batch (``cell`` (B, 3, 3)): checked, then timed in turns."""
    cells = cell.reshape(-1, 3, 3)
    system = (np.zeros(len(positions), np.int64) if ptr is None
              else np.repeat(np.arange(len(ptr) - 1), np.diff(ptr)))
    frames = skin_steps(positions, cells, system, args.steps, move, args.wrap_every,
                        args.seed)

    def fresh(points):
        return neighbor_list("ijSdD", points, cutoff, cell, full_list=not half, ptr=ptr)

    def new_list():
        return MolecularNeighborList("ijSdD", cutoff, args.skin, cell, full_list=not half,
                                     ptr=ptr)

    label = {"system": name, "n": len(positions), "cutoff": cutoff, "skin": args.skin,
             "move": move, "list": "half" if half else "full", "steps": args.steps}
    checked = new_list()
    checked.update(positions)
    searched = []
    for step, points in enumerate(frames):
        ours_rows = normal_rows(*checked.update(points), half)
        searched.append(len(checked.rebuilt_systems))
        theirs = normal_rows(*fresh(points), half)
        for field in ("i", "j", "shifts", "distances", "vectors"):
            if not np.array_equal(getattr(ours_rows, field), getattr(theirs, field)):
                log(f"MISMATCH at step {step}: {field} differ")
                return {**label, "check_ok": False}
    del ours_rows, theirs
    timed = new_list()
    timed.update(positions)
    times = {"list": [], "fresh": []}
    for step, points in enumerate(frames):
        calls = {"list": lambda p=points: timed.update(p),
                 "fresh": lambda p=points: fresh(p)}
        for which in (("list", "fresh") if step % 2 else ("fresh", "list")):
            times[which] += common.time_repeated(calls[which], 1)
    ratios = np.array(times["fresh"]) / np.array(times["list"])
    row = {**label, "searches": timed.n_builds - 1, "searched_systems": searched,
           "check_ok": True, "list_s": times["list"], "fresh_s": times["fresh"],
           "list_median_s": common.median(times["list"]),
           "fresh_median_s": common.median(times["fresh"]),
           "list_total_s": sum(times["list"]), "fresh_total_s": sum(times["fresh"]),
           "step_ratio_quartiles": np.percentile(ratios, [25, 50, 75]).tolist()}
    row["total_ratio"] = row["fresh_total_s"] / row["list_total_s"]
    quartiles = {which: np.percentile(times[which], [25, 50, 75]) for which in times}
    low, middle, high = row["step_ratio_quartiles"]
    systems = "" if ptr is None else (
        f" (systems searched a step: median {np.median(searched):g}, "
        f"{min(searched)}-{max(searched)})")
    log(f"{name} n={len(positions):,} cutoff={cutoff} skin={args.skin} move={move} "
        f"{row['list']}: {row['searches']} searches in {args.steps} steps{systems}; every "
        f"step equal to a new call, bit for bit")
    for which, title in (("list", "list update"), ("fresh", "new call")):
        q = quartiles[which]
        log(f"  {title}: median {q[1]:.3g} s (quartiles {q[0]:.3g}-{q[2]:.3g})")
    log(f"  new call / list update, per step: median {middle:.2f} (quartiles "
        f"{low:.2f}-{high:.2f}); whole run: list {row['list_total_s']:.3g} s, new calls "
        f"{row['fresh_total_s']:.3g} s, ratio {row['total_ratio']:.2f}")
    return row


def skin_cases(args):
    """``(name, positions, cell, ptr)`` of the skin runs: the batch (``--skin-batch``) or
    each size and system."""
    if args.skin_batch:
        positions, cells, ptr = batch_systems(args.batch_systems, args.batch_atoms,
                                              args.seed)
        yield f"batch {args.batch_systems:,} x {args.batch_atoms}", positions, cells, ptr
        return
    for n in args.sizes:
        for name in args.systems:
            system = make_system(name, n, args.seed)
            yield system.name, system.positions, system.cell, None


# ---------------------------------------------------------------------- command line
def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help=f"atoms per system (default {' '.join(map(str, SIZES))}; "
                             f"--quick: {' '.join(map(str, QUICK_SIZES))})")
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--cutoffs", type=float, nargs="+", default=list(CUTOFFS),
                        help="cutoffs in A (default 5 6)")
    parser.add_argument("--lists", nargs="+", choices=LISTS, default=list(LISTS))
    parser.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS),
                        help="peers to run, each when installed (default: all)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="timed calls per contender (default 5; --quick: 3)")
    parser.add_argument("--slow-seconds", type=float, default=SLOW_SECONDS,
                        help="a contender whose checking call took longer is timed over "
                             f"--slow-repeat calls (default {SLOW_SECONDS}; --quick: "
                             f"{QUICK_SLOW_SECONDS})")
    parser.add_argument("--slow-repeat", type=int, default=1)
    parser.add_argument("--ase-max", type=int, default=10_000,
                        help="largest system ASE runs on (default 10000)")
    parser.add_argument("--threads", type=int, default=None,
                        help="numba's threads and vesin's second thread count (default: "
                             "numba's default, every core)")
    parser.add_argument("--batch-systems", type=int, default=None,
                        help="systems in the batch (default 1000; --quick: 100)")
    parser.add_argument("--batch-atoms", type=int, default=100)
    parser.add_argument("--no-batch", action="store_true", help="skip the batch")
    parser.add_argument("--memory", action="store_true",
                        help="peak memory of one call of spatialhash and of vesin at the "
                             "first size, system, cutoff and list, in fresh subprocesses")
    parser.add_argument("--skin", type=float, default=None,
                        help="time MolecularNeighborList with this skin (A) against new "
                             "calls, instead of the peers")
    parser.add_argument("--steps", type=int, default=20,
                        help="steps of the --skin run (default 20)")
    parser.add_argument("--move", type=float, nargs="+", default=[0.02],
                        help="standard deviation of a step's move per axis, A, one run "
                             "each (default 0.02)")
    parser.add_argument("--skin-batch", action="store_true",
                        help="the --skin run on the batch (--batch-systems x "
                             "--batch-atoms) instead of the --sizes and --systems")
    parser.add_argument("--wrap-every", type=int, default=5,
                        help="wrap the atoms into the cell every this many steps of the "
                             "--skin run (default 5; 0: never)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help=f"{', '.join(map(str, QUICK_SIZES))} atoms, cutoff "
                             f"{CUTOFFS[0]:g}, 3 runs, a batch of 100 systems")
    parser.add_argument("--output-json", type=Path, default=None)
    parser.add_argument("--memory-probe", choices=("spatialhash", "vesin"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sizes = args.sizes or list(QUICK_SIZES if args.quick else SIZES)
    if args.quick and args.cutoffs == list(CUTOFFS):
        args.cutoffs = list(CUTOFFS[:1])
    if args.quick and args.slow_seconds == SLOW_SECONDS:
        args.slow_seconds = QUICK_SLOW_SECONDS
    args.repeat = args.repeat or (3 if args.quick else 5)
    args.batch_systems = args.batch_systems or (100 if args.quick else 1000)
    args.threads_given = args.threads is not None
    if args.threads is not None:
        numba.set_num_threads(args.threads)
    args.threads = numba.get_num_threads()
    return args


def main(argv=None) -> int:
    """Run the benchmark; returns 1 when any peer's answer differed from ours."""
    args = parse_args(argv)
    if args.memory_probe:
        print(json.dumps(memory_probe(args.memory_probe, args.systems[0], args.sizes[0],
                                      args.cutoffs[0], args.lists[0] == "half", args.seed)))
        return 0

    def log(line: str) -> None:
        print(line, flush=True)

    if args.skin is not None:
        print(f"numba {numba.get_num_threads()} threads; load average "
              f"{', '.join(f'{load:.2f}' for load in os.getloadavg())} at the start")
        rows = [run_skin(*case, cutoff, item == "half", move, args, log)
                for case in skin_cases(args) for cutoff in args.cutoffs
                for item in args.lists for move in args.move]
        print(f"load average {', '.join(f'{load:.2f}' for load in os.getloadavg())} at "
              "the end")
        if args.output_json:
            args.output_json.write_text(json.dumps(rows, indent=1))
        return 0 if all(row["check_ok"] for row in rows) else 1
    peers, notes = available_peers(args.peers)
    for note in notes:
        log(note)
    probe_before = common.speed_probe()
    warm = make_system("fcc", 200, args.seed)
    seconds, _ = common.time_call(lambda: [ours(warm, 5.0, half)() for half in (False, True)])
    log(f"our first calls (compile or cache load), 200 atoms: {seconds:.2f} s")
    rows = []
    for n in args.sizes:
        for name in args.systems:
            system = make_system(name, n, args.seed)
            for cutoff in args.cutoffs:
                for half in [item == "half" for item in args.lists]:
                    rows += run_case(system, cutoff, half, peers, args, log)
    if not args.no_batch:
        rows += run_batch(args, peers, log)
    env = environment(args.threads)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n## Results\n{env['cpu']}, {env['cores']} cores; numba {env['threads']} "
          f"threads ({env['threading_layer']} layer); load average {load:.2f} at the end")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v))
    print(f"before the run: {probe_before}; after: {common.speed_probe()}")
    print(f"medians over {args.repeat} calls (fewer where marked); each peer: its time "
          "(s) and, in brackets, its time over ours (above 1: spatialhash is faster); the "
          "batch: our one call with `ptr` against a Python loop of the peer's calls\n")
    print(results_table(rows, args.repeat))
    left_out = sorted({row["note"] for row in rows if "note" in row})
    if left_out:
        print("\nleft out: " + "; ".join(left_out))
    memory = measure_memory(args) if args.memory else []
    if memory:
        print("\n## Peak memory (VmHWM after the call minus the resident size before it, "
              "fresh subprocess)")
        print("\n".join(memory_lines(memory)))
    if args.output_json:
        args.output_json.write_text(json.dumps({"environment": env, "rows": rows,
                                                "memory": memory}, indent=1))
    mismatched = [row for row in rows if row.get("check_ok") is False]
    if mismatched:
        print(f"\n{len(mismatched)} peer answer(s) differed from ours.")
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main())
