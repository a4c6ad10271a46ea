"""
SPH pressure forces in a periodic box
=====================================

Smoothed-particle hydrodynamics in two passes of `~spatialhash.Grid.for_each_pair`, storing
no pairs. The first sums each particle's density with the poly6 kernel; the second its
pressure force with the gradient of the spiky kernel and the symmetric pressure term
``p_i / rho_i**2 + p_j / rho_j**2``, the pressure from the equation of state
``p = k (rho - rho0)``. Each call writes only to its first particle's row, so every sum is
made by one thread, in the same order for any thread count. The box is periodic: a clump
placed on a corner feels the particles across all four edges. The code is the same for a
million particles in 3-D, with the 3-D kernels' constants.
"""

import matplotlib.pyplot as plt
import numba
import numpy as np

from spatialhash import Grid

rng = np.random.default_rng(3)
box, h = 1.0, 0.03
clumps = rng.normal([[0.0, 0.0], [0.55, 0.45]], [0.08, 0.1], (1500, 2, 2)).reshape(-1, 2)
points = np.mod(np.concatenate([clumps, rng.random((3000, 2))]), box)
n = len(points)
mass = box * box / n  # a mean density of 1
k, rho0 = 1.0, 1.0
poly6 = 4.0 / (np.pi * h**8)  # 2-D poly6: W(r) = poly6 * (h**2 - r**2)**3
spiky = -30.0 / (np.pi * h**5)  # 2-D spiky: dW/dr = spiky * (h - r)**2


@numba.njit
def add_density(i, j, d2, dx, dy, dz, density, h2, weight):
    density[i] += weight * (h2 - d2) ** 3


@numba.njit
def add_pressure_force(i, j, d2, dx, dy, dz, forces, term, h, weight):
    # term[i] = p_i / rho_i**2; the gradient of W at x_i - x_j is dW/dr * (dx, dy) / r
    r = np.sqrt(d2)
    magnitude = -weight * (term[i] + term[j]) * (h - r) ** 2 / r
    forces[i, 0] += magnitude * dx
    forces[i, 1] += magnitude * dy


grid = Grid(points, cell_size=h, box=box)
density = np.full(n, mass * poly6 * h**6)  # each particle's own weight
grid.for_each_pair(h, add_density, density, h * h, mass * poly6)
pressure = k * (density - rho0)
forces = np.zeros((n, 2))
grid.for_each_pair(h, add_pressure_force, forces, pressure / density**2, h,
                   mass * mass * spiky)

# %%
# The same arithmetic in NumPy, from the stored pairs (each once, with ``i < j``) and the
# minimum-image separations. Every density and force is a sum over a particle's neighbours
# (a few tens, up to about a hundred in the clumps) that ``for_each_pair`` adds in the
# grid's cell order and ``np.bincount`` in the pairs' order, so they agree up to rounding,
# not bit for bit. A force's terms have both signs and can cancel to almost nothing, so its
# error is measured against the sum of its terms' sizes: rounding makes it a few 1e-15 of
# that; the bound, 1e-10, leaves room for any order of summation yet catches a wrong term.

pairs = grid.query_pairs(h, return_distances=True)
i, j = pairs.indices.T
weights = mass * poly6 * (h * h - pairs.distances**2) ** 3
expected_density = (np.bincount(i, weights, n) + np.bincount(j, weights, n)
                    + mass * poly6 * h**6)
assert np.allclose(density, expected_density, rtol=1e-12, atol=0)

term = k * (expected_density - rho0) / expected_density**2
separation = points[i] - points[j]
separation -= box * np.round(separation / box)  # the minimum image
pair_forces = (-mass * mass * spiky * (term[i] + term[j]) * (h - pairs.distances) ** 2
               / pairs.distances)[:, None] * separation  # the force on i; on j, minus it
expected = np.stack([np.bincount(i, pair_forces[:, axis], n)
                     - np.bincount(j, pair_forces[:, axis], n) for axis in range(2)], 1)
sizes = np.linalg.norm(pair_forces, axis=1)
scale = np.bincount(i, sizes, n) + np.bincount(j, sizes, n)
error = np.linalg.norm(forces - expected, axis=1)
assert np.all(error <= 1e-10 * scale), (error / scale).max()

# %%
# Momentum is conserved: the force of ``j`` on ``i`` is minus that of ``i`` on ``j`` (the
# pressure term and the kernel's gradient are symmetric and antisymmetric in ``i, j``), so
# the two calls for a pair add exactly opposite vectors and the forces sum to zero up to
# the rounding of the sums: at most about ``(m + log2(n)) * 2.2e-16`` of the sum of the
# sizes of all the forces' terms, ``m`` the most neighbours a particle has (about a
# hundred); the bound is 1e-12 of it. With the pressure term ``2 p_i / rho_i**2``, not
# symmetric, the total would miss zero by about a tenth of a percent of that sum.

total = forces.sum(axis=0)
assert np.linalg.norm(total) <= 1e-12 * scale.sum(), total
print(f"{n:,} particles, {len(pairs):,} pairs; total force {np.linalg.norm(total):.1e}, "
      f"against {scale.sum():.1e} for the sizes of its terms")

fig, ax = plt.subplots(figsize=(6.4, 5.6))
order = np.argsort(density)
dots = ax.scatter(*points[order].T, c=density[order], s=2, cmap="viridis")
fig.colorbar(dots, ax=ax, label="density")
shown = rng.choice(n, 500, replace=False)
longest = np.percentile(np.linalg.norm(forces[shown], axis=1), 95)
ax.quiver(*points[shown].T, *forces[shown].T, color="crimson", width=0.004, angles="xy",
          scale_units="xy", scale=longest / 0.06)  # the longest arrows about 0.06 long
ax.set_xlim(0, box)
ax.set_ylim(0, box)
ax.set_aspect("equal")
ax.set_title(f"Density and pressure forces (arrows: 500 of {n:,} particles)")
plt.show()
