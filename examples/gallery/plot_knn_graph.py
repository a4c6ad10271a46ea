"""
A k-nearest-neighbour graph
===========================

`~spatialhash.Grid.query_knn` returns, for each query, the ``k`` nearest points, nearest
first, exact, with ties going to the smaller index. Asking it for the points themselves
with ``k + 1`` gives each point and its ``k`` nearest others: the edges of a kNN graph.
"""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection
from scipy.spatial import cKDTree

from spatialhash import Grid

rng = np.random.default_rng(4)
points = rng.random((400, 2))
k = 3

nearest = Grid(points).query_knn(points, k + 1)  # the default cell size suits kNN
distances, indices = cKDTree(points).query(points, k + 1)
assert np.array_equal(nearest.indices, indices)
assert np.allclose(nearest.distances, distances)

# %%
# Column 0 is each point itself (distance 0); the others are its neighbours.

edges = np.stack([np.repeat(points, k, axis=0), points[nearest.indices[:, 1:].ravel()]], 1)
fig, ax = plt.subplots(figsize=(6, 6))
ax.add_collection(LineCollection(edges, linewidths=0.6, colors="tab:gray"))
ax.scatter(*points.T, s=6, color="tab:blue", zorder=2)
ax.set_aspect("equal")
ax.set_title(f"Each of {len(points)} points joined to its {k} nearest")
plt.show()
