"""
A Lennard-Jones fluid with a Verlet list
========================================

A `~spatialhash.NeighborList` keeps the pairs within ``r`` of moving points, finding
candidates at ``r + skin`` and searching again only when two points may have come closer
by more than ``skin`` (some point has moved more than ``skin / 2`` from where it was, or
from where the others went). Here 500 atoms (reduced units: sigma, epsilon and the masses
are 1) start on a face-centred cubic lattice in a periodic box at density 0.8, with
velocities at temperature 1, and move for 1,000 steps of velocity Verlet. The forces come
from `~spatialhash.NeighborList.for_each_pair` with ``once=True``, which calls a numba
function once for every pair within the cut-off and stores no pairs: each call adds the
force to one atom and takes it from the other (Newton's third law), so each pair's force
is computed once; no two threads write one atom at a time, and each atom's sums come out
the same for any thread count.
"""

import matplotlib.pyplot as plt
import numba
import numpy as np

from spatialhash import Grid, NeighborList

r_cut, skin, dt, n_steps = 2.5, 0.3, 0.005, 1000
cells = 5
n = 4 * cells**3  # 500 atoms
box = (n / 0.8) ** (1.0 / 3.0)
basis = np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]])
lattice = np.stack(np.meshgrid(*[np.arange(cells)] * 3, indexing="ij"), -1).reshape(-1, 3)
positions = ((lattice[:, None] + basis[None]) * box / cells).reshape(-1, 3)
rng = np.random.default_rng(0)
velocities = rng.normal(0.0, 1.0, (n, 3))
velocities -= velocities.mean(axis=0)  # no net momentum
shift = 4.0 * (r_cut**-12 - r_cut**-6)  # the energy is shifted to 0 at the cut-off


@numba.njit
def lennard_jones(i, j, d2, dx, dy, dz, forces, energies, shift):
    inv6 = 1.0 / (d2 * d2 * d2)
    magnitude = 24.0 * inv6 * (2.0 * inv6 - 1.0) / d2  # |F| / r
    fx, fy, fz = magnitude * dx, magnitude * dy, magnitude * dz  # the force on i
    forces[i, 0] += fx
    forces[i, 1] += fy
    forces[i, 2] += fz
    forces[j, 0] -= fx
    forces[j, 1] -= fy
    forces[j, 2] -= fz
    energies[i] += 4.0 * inv6 * (inv6 - 1.0) - shift


def forces_and_energy(neighbors):
    forces, energies = np.zeros((n, 3)), np.zeros(n)
    neighbors.for_each_pair(lennard_jones, forces, energies, shift, once=True)
    return forces, energies.sum()


neighbors = NeighborList(positions, r_cut, skin, box=box)
forces, potential = forces_and_energy(neighbors)
kinetic_energy, potential_energy = [0.5 * np.sum(velocities**2)], [potential]
for _ in range(n_steps):
    velocities += 0.5 * dt * forces
    positions = np.mod(positions + dt * velocities, box)
    neighbors.update(positions)
    forces, potential = forces_and_energy(neighbors)
    velocities += 0.5 * dt * forces
    kinetic_energy.append(0.5 * np.sum(velocities**2))
    potential_energy.append(potential)
kinetic_energy, potential_energy = np.array(kinetic_energy), np.array(potential_energy)
total = kinetic_energy + potential_energy

# %%
# Checks before drawing. The list's pairs at the end are those of a new grid's pair search
# on the final positions. The potential energy summed by ``for_each_pair`` is that of the
# pairs' distances, summed in NumPy (equal up to the order of the sums). And the total
# energy is conserved: velocity Verlet is symplectic, so with this time step its error
# stays bounded, of the order of ``dt**2`` (here about 1e-3 per atom, against a kinetic
# energy of about 1 per atom), with no systematic drift; the jump of the force at the
# cut-off adds small kicks. A missing or wrong pair, a force of the wrong sign, or a step
# that dropped a pair entering the cut-off would show as a drift orders of magnitude
# larger, so the bound is 5e-3 per atom.

expected = Grid(positions, cell_size=r_cut, box=box).query_pairs(r_cut, return_distances=True)
pairs = neighbors.pairs
assert np.array_equal(pairs.sorted().indices, expected.sorted().indices)
assert np.array_equal(pairs.sorted().distances, expected.sorted().distances)
inv6 = pairs.distances**-6.0
assert np.isclose(potential_energy[-1], np.sum(4.0 * inv6 * (inv6 - 1.0) - shift),
                  rtol=1e-10)
drift = np.abs(total - total[0]).max() / n
assert drift < 5e-3, drift
print(f"{neighbors.n_builds} builds in {n_steps} steps; largest change of the total "
      f"energy: {drift:.1e} per atom")

fig, ax = plt.subplots(figsize=(7, 4))
steps = np.arange(n_steps + 1)
ax.plot(steps, kinetic_energy / n, label="kinetic")
ax.plot(steps, potential_energy / n, label="potential")
ax.plot(steps, total / n, label="total", color="black")
ax.set_xlabel("step")
ax.set_ylabel("energy per atom (reduced units)")
ax.set_title(f"Lennard-Jones, {n} atoms, a Verlet list rebuilt {neighbors.n_builds} times")
ax.legend()
plt.show()
