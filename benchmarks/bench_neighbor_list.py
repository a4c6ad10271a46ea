"""A Lennard-Jones fluid: a Verlet list with a skin against a pair search at every step.

Run from the repository root::

    python benchmarks/bench_neighbor_list.py                    # 4,000 and 32,000 atoms
    python benchmarks/bench_neighbor_list.py --n 4000 --steps 1000
    python benchmarks/bench_neighbor_list.py --n 32000 --large-steps 200
    python benchmarks/bench_neighbor_list.py --both-orders      # fn for (i, j) and (j, i)

Atoms start on a face-centred cubic lattice in a periodic cube at reduced density 0.8,
with Maxwell velocities at temperature 1.0 (no net momentum); the potential is
Lennard-Jones cut at 2.5 sigma (the energy shifted to 0 there), integrated by velocity
Verlet with a time step of 0.005 and unit masses. Three paths run from the same initial
state in this process, in lockstep (each step taken by every path in turn, so that all
meet the same phases of a machine whose speed drifts):

- ``rebuild``: at every step ``Grid(positions, cell_size=r_cut, box=L).for_each_pair(r_cut,
  lj_force, ...)``, a new grid and a new search, storing no list (the fastest way without
  a list);
- ``list_every_step``: at every step a new ``NeighborList(positions, r_cut, 0.0, box=L)``
  (no skin) and its ``for_each_pair(lj_force, ...)``: a list rebuilt at every step;
- ``neighbor_list``: ``NeighborList(positions, r_cut, skin, box=L)`` built once,
  ``update(positions)`` at every step (it rebuilds when two atoms may have come closer by
  more than ``skin``), then ``for_each_pair(lj_force, ...)``.

Each path calls the force function once a pair (``for_each_pair(..., once=True)``), adding
the force to one atom and taking it from the other, as molecular dynamics codes do
(Newton's third law; LAMMPS's default ``newton on``). With ``--both-orders`` every path calls
it for ``(i, j)`` and for ``(j, i)``, each call writing one atom: twice the calls, the same
forces.

The forces are summed in 64-bit fixed point (units of 2**-32): integer sums do not depend on
the order of their terms, and the two paths meet each atom's neighbours in different
orders (their cells differ), so with floating-point sums the trajectories would part in the
last bits and, the dynamics being chaotic, visibly within a few hundred steps. With these
sums both paths compute the same forces, bit for bit, whenever they find the same pairs
with the same ``d2`` and ``(dx, dy, dz)`` (which both promise): the benchmark checks that
the positions after the run are equal, bit for bit. The potential energy is summed in
floating point (it does not feed back into the motion); the two paths' energies are
compared to a relative 1e-12.

The table gives the median and the mean over the steps of the time spent finding pairs
and computing forces (``search + force``: the grid build and ``for_each_pair``, the list's
build and ``for_each_pair``, or ``update`` and ``for_each_pair``; the skin list's mean
counts its rebuilds, its median mostly not), the median of the whole step (with the
integration, the same for all), the time of the whole run, the builds, and for the skin
list the ratios of the medians of ``search + force`` and of the runs (rebuilds included)
against each of the two paths that search at every step; then the drift of the total
energy over the run per atom. A first step of each path, untimed, compiles ``lj_force``
into its scans.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

try:
    from . import _common as common
except ImportError:  # run as a script, or loaded by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _common as common

DENSITY = 0.8
TEMPERATURE = 1.0
R_CUT = 2.5
SKIN = 0.3
DT = 0.005
#: Forces are summed as integers in units of 2**-FORCE_BITS.
FORCE_BITS = 32
PATHS = ("rebuild", "list_every_step", "neighbor_list")


_LJ_FORCE: dict = {}


def _lj_force(once: bool = False):
    """The numba function of one pair: the force on ``i`` into ``force[i]`` (int64, fixed
    point), half the pair's energy into ``energy[i]``; with ``once`` (a function called once
    a pair) the same for ``j`` too, the force negated. Made once each: each new function
    compiles the scans again. The force on ``j`` is ``-rint(m * dx * scale)``, equal to
    the both-orders function's ``rint(m * -dx * scale)`` (``rint`` is symmetric), so both
    kinds give the same forces, bit for bit."""
    if once in _LJ_FORCE:
        return _LJ_FORCE[once]
    import numba

    @numba.njit
    def lj_force(i, j, d2, dx, dy, dz, force, energy, scale, shift):
        inv2 = 1.0 / d2
        inv6 = inv2 * inv2 * inv2
        magnitude = 24.0 * inv2 * inv6 * (2.0 * inv6 - 1.0)  # |F| / r
        force[i, 0] += np.int64(np.rint(magnitude * dx * scale))
        force[i, 1] += np.int64(np.rint(magnitude * dy * scale))
        force[i, 2] += np.int64(np.rint(magnitude * dz * scale))
        energy[i] += 0.5 * (4.0 * inv6 * (inv6 - 1.0) - shift)

    @numba.njit
    def lj_force_once(i, j, d2, dx, dy, dz, force, energy, scale, shift):
        inv2 = 1.0 / d2
        inv6 = inv2 * inv2 * inv2
        magnitude = 24.0 * inv2 * inv6 * (2.0 * inv6 - 1.0)
        fx = np.int64(np.rint(magnitude * dx * scale))
        fy = np.int64(np.rint(magnitude * dy * scale))
        fz = np.int64(np.rint(magnitude * dz * scale))
        force[i, 0] += fx
        force[i, 1] += fy
        force[i, 2] += fz
        force[j, 0] -= fx
        force[j, 1] -= fy
        force[j, 2] -= fz
        half_energy = 0.5 * (4.0 * inv6 * (inv6 - 1.0) - shift)
        energy[i] += half_energy
        energy[j] += half_energy

    _LJ_FORCE[once] = lj_force_once if once else lj_force
    return _LJ_FORCE[once]


def initial_state(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """``(positions, velocities, box)``: ``n = 4 k**3`` atoms on an fcc lattice at
    `DENSITY`, Maxwell velocities at `TEMPERATURE` with no net momentum."""
    cells = round((n / 4) ** (1.0 / 3.0))
    if 4 * cells**3 != n:
        raise ValueError(f"`n` must be 4 k**3 (an fcc lattice); got {n}.")
    box = (n / DENSITY) ** (1.0 / 3.0)
    a = box / cells
    basis = np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]])
    grid = np.stack(np.meshgrid(*[np.arange(cells)] * 3, indexing="ij"), -1).reshape(-1, 3)
    positions = ((grid[:, None, :] + basis[None, :, :]) * a).reshape(-1, 3) + 0.25 * a
    rng = np.random.default_rng(seed)
    velocities = rng.normal(0.0, math.sqrt(TEMPERATURE), (n, 3))
    velocities -= velocities.mean(axis=0)
    return positions, velocities, box


class Run:
    """One path's trajectory: positions, velocities, forces, and its search."""

    def __init__(self, path: str, positions, velocities, box: float, n_threads,
                 once: bool = False) -> None:
        self.path, self.box, self.n_threads, self.once = path, box, n_threads, once
        self.positions, self.velocities = positions.copy(), velocities.copy()
        n = positions.shape[0]
        self.force_fixed = np.zeros((n, 3), np.int64)
        self.energy = np.zeros(n)
        self.lj_force = _lj_force(once)
        self.shift = 4.0 * (R_CUT**-12 - R_CUT**-6)
        self.neighbors = None
        self.n_builds = 0
        self.forces = self._forces()

    def _forces(self) -> np.ndarray:
        from spatialhash import Grid, NeighborList

        self.force_fixed[:] = 0
        self.energy[:] = 0.0
        args = (self.force_fixed, self.energy, float(2**FORCE_BITS), self.shift)
        if self.path == "rebuild":
            grid = Grid(self.positions, cell_size=R_CUT, box=self.box, n_threads=self.n_threads)
            grid.for_each_pair(R_CUT, self.lj_force, *args, once=self.once)
            self.n_builds += 1
        elif self.path == "list_every_step":
            neighbors = NeighborList(self.positions, R_CUT, 0.0, box=self.box,
                                     n_threads=self.n_threads)
            neighbors.for_each_pair(self.lj_force, *args, once=self.once)
            self.n_builds += 1
        else:
            if self.neighbors is None:
                self.neighbors = NeighborList(self.positions, R_CUT, SKIN, box=self.box,
                                              n_threads=self.n_threads)
            else:
                self.neighbors.update(self.positions)
            self.n_builds = self.neighbors.n_builds
            self.neighbors.for_each_pair(self.lj_force, *args, once=self.once)
        return self.force_fixed * 2.0**-FORCE_BITS

    def step(self) -> float:
        """One velocity Verlet step; returns the seconds of the search and the forces."""
        self.velocities += 0.5 * DT * self.forces
        self.positions += DT * self.velocities
        self.positions = np.mod(self.positions, self.box)
        start = time.perf_counter()
        self.forces = self._forces()
        search = time.perf_counter() - start
        self.velocities += 0.5 * DT * self.forces
        return search

    def total_energy(self) -> float:
        return float(0.5 * np.sum(self.velocities**2) + np.sum(self.energy))


def run_paths(n: int, steps: int, seed: int, n_threads, once: bool) -> dict:
    """Every path of `PATHS` from the same initial state, in lockstep: each step of the run
    is taken by every path in turn (the first path of each step rotating), so that the
    paths meet the same phases of a machine whose speed drifts, rather than one path the
    fast minutes and another the slow ones."""
    positions, velocities, box = initial_state(n, seed)
    for path in PATHS:
        Run(path, positions, velocities, box, n_threads, once).step()  # compiles; untimed
    runs = {path: Run(path, positions, velocities, box, n_threads, once) for path in PATHS}
    energies = {path: [run.total_energy()] for path, run in runs.items()}
    search = {path: [] for path in PATHS}
    whole = {path: [] for path in PATHS}
    for step in range(steps):
        for k in range(len(PATHS)):
            path = PATHS[(step + k) % len(PATHS)]
            run = runs[path]
            start = time.perf_counter()
            search[path].append(run.step())
            whole[path].append(time.perf_counter() - start)
            energies[path].append(run.total_energy())
    return {path: {"positions": run.positions, "energies": np.array(energies[path]),
                   "search": common.median(search[path]),
                   "step": common.median(whole[path]),
                   "search_mean": float(np.mean(search[path])),
                   "total": float(np.sum(whole[path])), "n_builds": run.n_builds}
            for path, run in runs.items()}


def compare(n: int, steps: int, seed: int, n_threads, once: bool) -> tuple[list, dict]:
    results = run_paths(n, steps, seed, n_threads, once)
    rebuild, every_step, listed = (results[path] for path in PATHS)
    same = all(results[path]["positions"].tobytes() == rebuild["positions"].tobytes()
               for path in PATHS[1:])
    energies_close = all(np.allclose(rebuild["energies"], results[path]["energies"],
                                     rtol=1e-12, atol=0.0) for path in PATHS[1:])
    energies = listed["energies"]
    drift = (energies[-1] - energies[0]) / n
    spread = (energies.max() - energies.min()) / n
    labels = {"rebuild": "grid, every step", "list_every_step": "list, rebuilt every step",
              "neighbor_list": f"NeighborList, skin {SKIN}"}
    rows = []
    for path in PATHS:
        result = results[path]
        ratios = ["", "", "", ""]
        if path == "neighbor_list":
            ratios = [f"{rebuild['search'] / result['search']:.2f}x",
                      f"{rebuild['total'] / result['total']:.2f}x",
                      f"{every_step['search'] / result['search']:.2f}x",
                      f"{every_step['total'] / result['total']:.2f}x"]
        rows.append([f"{n:,}", steps, labels[path], f"{result['search'] * 1e3:.3f}",
                     f"{result['search_mean'] * 1e3:.3f}", f"{result['step'] * 1e3:.3f}",
                     f"{result['total']:.2f}", result["n_builds"], *ratios])
    summary = {"n": n, "steps": steps, "positions_equal": same,
               "energies_close": bool(energies_close), "drift_per_atom": float(drift),
               "spread_per_atom": float(spread),
               "energy_per_atom_start": float(energies[0] / n),
               **{f"{path}_{key}": results[path][key]
                  for path in PATHS
                  for key in ("search", "search_mean", "step", "total", "n_builds")}}
    return rows, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[4_000, 32_000],
                        help="atoms, each 4 k**3 (default: 4000 32000)")
    parser.add_argument("--steps", type=int, default=1_000,
                        help="steps of the systems under 10,000 atoms")
    parser.add_argument("--large-steps", type=int, default=200,
                        help="steps of the systems of 10,000 atoms or more")
    parser.add_argument("--n-threads", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--both-orders", action="store_true",
                        help="every path calls the force function for both orders of each "
                             "pair, each call writing one atom (default: once a pair, "
                             "for_each_pair(..., once=True), writing both atoms)")
    parser.add_argument("--output-json", type=Path, default=None)
    args = parser.parse_args(argv)
    import numba

    all_rows, summaries = [], []
    for n in args.n:
        steps = args.steps if n < 10_000 else args.large_steps
        rows, summary = compare(n, steps, args.seed, args.n_threads, not args.both_orders)
        all_rows += rows
        summaries.append(summary)
    threads = args.n_threads or numba.get_num_threads()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    calls = "for both orders of each pair" if args.both_orders else "once a pair (once=True)"
    print(f"Lennard-Jones fluid, density {DENSITY}, T {TEMPERATURE}, r_cut {R_CUT}, skin "
          f"{SKIN}, dt {DT}; forces called {calls}; {common.cpu_model()}, {threads} "
          f"threads, load average {load:.2f} at the end\n")
    print(common.markdown_table(
        ["atoms", "steps", "path", "search + force, median (ms)",
         "search + force, mean (ms)", "whole step, median (ms)", "run (s)", "builds",
         "vs grid: medians", "vs grid: runs", "vs list every step: medians",
         "vs list every step: runs"], all_rows))
    ok = True
    for summary in summaries:
        print(f"\n{summary['n']:,} atoms: positions after {summary['steps']} steps equal bit "
              f"for bit on the three paths: {summary['positions_equal']}; total energies "
              f"equal to 1e-12: "
              f"{summary['energies_close']}; total energy per atom "
              f"{summary['energy_per_atom_start']:.4f}, drift "
              f"{summary['drift_per_atom']:.2e} (largest minus smallest "
              f"{summary['spread_per_atom']:.2e}) over the run")
        ok &= summary["positions_equal"] and summary["energies_close"]
    if args.output_json:
        args.output_json.write_text(json.dumps(summaries, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
