"""
DBSCAN-style clusters from the pairs within ``eps``
===================================================

DBSCAN calls a point *core* when at least ``min_samples`` points (itself included) lie
within ``eps`` of it; core points closer than ``eps`` share a cluster, a non-core point
joins the cluster of a core point within ``eps`` of it, and the rest is noise. Every step
needs only the pairs within ``eps``: `~spatialhash.query_pairs` finds them in one call,
and ``scipy.sparse.csgraph.connected_components`` joins the core points into clusters.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy.sparse import coo_array
from scipy.sparse.csgraph import connected_components

from spatialhash import query_pairs

rng = np.random.default_rng(1)
angle = rng.uniform(0, np.pi, 1500)
moons = np.concatenate([np.column_stack([np.cos(angle), np.sin(angle)]),
                        np.column_stack([1 - np.cos(angle), 0.5 - np.sin(angle)])])
points = np.concatenate([moons + rng.normal(scale=0.06, size=moons.shape),
                         rng.uniform([-1.5, -1], [2.5, 1.5], (300, 2))])
eps, min_samples = 0.1, 8

# %%
# The pairs, each once with ``i < j``; a point's neighbour count is how often it appears.

pairs = query_pairs(points, eps).indices
n = len(points)
counts = 1 + np.bincount(pairs.ravel(), minlength=n)
core = counts >= min_samples

# %%
# Clusters: connected components of the pairs between core points. A border point takes the
# cluster of one of its core neighbours; points with none are noise (-1).

both = core[pairs[:, 0]] & core[pairs[:, 1]]
graph = coo_array((np.ones(both.sum()), pairs[both].T), shape=(n, n))
_, component = connected_components(graph, directed=False)
labels = np.where(core, component, -1)
border = pairs[core[pairs[:, 0]] & ~core[pairs[:, 1]]]
labels[border[:, 1]] = component[border[:, 0]]
border = pairs[core[pairs[:, 1]] & ~core[pairs[:, 0]]]
labels[border[:, 0]] = component[border[:, 1]]
_, labels[labels >= 0] = np.unique(labels[labels >= 0], return_inverse=True)

fig, ax = plt.subplots(figsize=(7, 4.5))
ax.scatter(*points[labels < 0].T, s=4, c="lightgrey", label="noise")
ax.scatter(*points[labels >= 0].T, s=4, c=labels[labels >= 0], cmap="tab10", vmin=0, vmax=9)
ax.set_aspect("equal")
ax.set_title(f"{labels.max() + 1} clusters among {n:,} points, {len(pairs):,} pairs")
ax.legend(loc="lower left")
plt.show()
