"""
Neighbour counts on a 2-D point cloud
=====================================

How crowded is each point? `~spatialhash.Grid.count_radius` counts, for each query, the
points within ``r`` (the query itself included when it is one of the points), and stores
nothing else. Here the points are a few Gaussian clumps over a uniform background, and each
is coloured by its count.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy.spatial import cKDTree

from spatialhash import Grid

rng = np.random.default_rng(0)
centres = rng.random((5, 2))
clumps = centres[rng.integers(0, 5, 3000)] + rng.normal(scale=0.05, size=(3000, 2))
points = np.concatenate([clumps, rng.random((2000, 2))])
r = 0.03

# %%
# Build the grid once with the search radius as the cell size, then count. The counts are
# those of scipy's ``cKDTree`` (closed balls: ``distance <= r``).

grid = Grid(points, cell_size=r)
counts = grid.count_radius(points, r)
assert np.array_equal(counts, cKDTree(points).query_ball_point(points, r, return_length=True))

# %%
# Crowded points are drawn last, on top.

order = np.argsort(counts)
fig, ax = plt.subplots(figsize=(6, 5.4))
dots = ax.scatter(*points[order].T, c=counts[order], s=4, cmap="viridis")
fig.colorbar(dots, ax=ax, label=f"points within r = {r}")
ax.set_aspect("equal")
ax.set_title(f"{len(points):,} points coloured by their neighbour count")
plt.show()
