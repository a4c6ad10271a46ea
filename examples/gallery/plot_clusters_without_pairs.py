"""
Friends-of-friends clusters without storing the pairs
=====================================================

Friends-of-friends clustering links every two points within ``r`` and calls each connected
group a cluster. With the pairs stored this is ``scipy.sparse.csgraph.connected_components``
(as in the DBSCAN example); `~spatialhash.Grid.for_each_pair` finds the same clusters with
memory for two labels a point, whatever the number of pairs.

Every point starts labelled with its own index, and a label is always the index of a point
of the same cluster, no larger than the point's own. A pass over the pairs gives each point
the smallest label among itself and its neighbours, reading the old labels and writing new
ones, so that no thread reads a label another is changing: the result does not depend on the
threads. On its own a pass moves a label one link along a chain, so a long chain takes as
many passes as it has links. Two steps in NumPy shorten that: each point's old label (the
root of the tree of pointers it hangs from) takes the smallest new label of the points that
held it, and pointer jumping, ``labels = labels[labels]`` until nothing changes, makes every
point point straight at its root. When a pass changes nothing, every point carries the
smallest index in its cluster.
"""

import matplotlib.pyplot as plt
import numba
import numpy as np
from scipy.sparse import coo_array
from scipy.sparse.csgraph import connected_components

from spatialhash import Grid

rng = np.random.default_rng(4)
turns = rng.uniform(0, 3 * np.pi, 4000)  # a long spiral: a chain many links long
spiral = np.column_stack([np.cos(turns), np.sin(turns)]) * (0.1 + 0.09 * turns[:, None])
angles = np.arange(8) * np.pi / 4
centres = 1.45 * np.column_stack([np.cos(angles), np.sin(angles)])
blobs = (rng.normal(0, 0.08, (8, 300, 2)) + centres[:, None]).reshape(-1, 2)
points = np.concatenate([spiral + rng.normal(0, 0.01, spiral.shape), blobs,
                         rng.uniform(-1.8, 1.8, (1500, 2))])
n, r = len(points), 0.04


@numba.njit
def take_smallest(i, j, d2, dx, dy, dz, new, old):
    if old[j] < new[i]:
        new[i] = old[j]


grid = Grid(points, cell_size=r)
labels = np.arange(n)
n_passes = n_jumps = 0
while True:
    new = labels.copy()
    grid.for_each_pair(r, take_smallest, new, labels)
    n_passes += 1
    if np.array_equal(new, labels):
        break
    np.minimum.at(new, labels, new.copy())  # each old label takes its points' smallest
    labels = new
    while True:
        jumped = labels[labels]
        n_jumps += 1
        if np.array_equal(jumped, labels):
            break
        labels = jumped

# %%
# The same clusters from the stored pairs. SciPy numbers its components in its own order,
# so both are compared as partitions: each SciPy component is relabelled by its smallest
# index (``np.unique`` returns each label's first position). The labels above are the
# smallest indices too, so the two arrays are equal exactly when they group the points
# alike.

pairs = grid.query_pairs(r).indices
graph = coo_array((np.ones(len(pairs)), pairs.T), shape=(n, n))
n_clusters, component = connected_components(graph, directed=False)
_, smallest, inverse = np.unique(component, return_index=True, return_inverse=True)
assert np.array_equal(labels, smallest[inverse])
print(f"{n_clusters:,} clusters of {n:,} points ({len(pairs):,} pairs) after {n_passes} "
      f"passes over the pairs and {n_jumps} pointer jumps")

# %%
# The clusters of ten points or more, each in its own colour; the rest in grey.

roots, sizes = np.unique(labels, return_counts=True)
roots = roots[sizes >= 10]
big = np.isin(labels, roots)
fig, ax = plt.subplots(figsize=(6.4, 6))
ax.scatter(*points[~big].T, s=2, c="lightgrey")
ax.scatter(*points[big].T, s=2, c=np.searchsorted(roots, labels[big]), cmap="tab10",
           vmin=0, vmax=9)
ax.set_aspect("equal")
ax.set_title(f"{len(roots)} clusters of 10 points or more, r = {r}")
plt.show()
