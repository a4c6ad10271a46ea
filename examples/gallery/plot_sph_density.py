"""
An SPH density without storing the pairs
========================================

`~spatialhash.Grid.for_each_pair` calls a numba function for every ordered pair within
``r``, with the squared distance and the separation, and stores nothing. Each call adds
the smoothing kernel's weight to the density of its first point, so every point's sum is
written by one thread and comes out the same for any thread count.
"""

import matplotlib.pyplot as plt
import numba
import numpy as np

from spatialhash import Grid

rng = np.random.default_rng(1)
points = np.concatenate([rng.normal(0.5, 0.12, (6000, 2)), rng.random((3000, 2))])
h = 0.03
norm = 4.0 / (np.pi * h**8)  # the 2-D poly6 kernel: W(r) = norm * (h**2 - r**2)**3


@numba.njit
def add_weight(i, j, d2, dx, dy, dz, density, h2, norm):
    density[i] += norm * (h2 - d2) ** 3


grid = Grid(points, cell_size=h)
density = np.full(len(points), norm * h**6)  # each point's own weight
grid.for_each_pair(h, add_weight, density, h * h, norm)

# %%
# The same sums from the stored pairs, for comparison: equal up to the order of summation.

pairs = grid.query_pairs(h, return_distances=True)
weights = norm * (h * h - pairs.distances**2) ** 3
stored = (np.bincount(pairs.indices[:, 0], weights, len(points))
          + np.bincount(pairs.indices[:, 1], weights, len(points)) + norm * h**6)
assert np.allclose(density, stored, rtol=1e-12)

fig, ax = plt.subplots(figsize=(6, 5.4))
order = np.argsort(density)
dots = ax.scatter(*points[order].T, c=density[order], s=3, cmap="magma")
fig.colorbar(dots, ax=ax, label="density")
ax.set_aspect("equal")
ax.set_title("SPH density by for_each_pair")
plt.show()
