"""
Pairs in a periodic box: the minimum image
==========================================

In a periodic box of side ``box`` a point near the right edge is close to one near the left
edge: distances use the *minimum image*, each coordinate difference wrapped into
``[-box/2, box/2]``. Given ``box``, `~spatialhash.Grid` wraps the coordinates into
``[0, box)`` and finds the pairs across the boundary as well; they match scipy's
``cKDTree(points, boxsize=box)``.
"""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection
from scipy.spatial import cKDTree

from spatialhash import Grid

rng = np.random.default_rng(2)
box, r = 1.0, 0.08
points = rng.random((200, 2)) * box

pairs = Grid(points, cell_size=r, box=box).query_pairs(r).sorted().indices
expected = cKDTree(points, boxsize=box).query_pairs(r, output_type="ndarray")
assert np.array_equal(pairs, expected[np.lexsort(expected.T[::-1])])

# %%
# Each pair is drawn from ``i`` to the nearest image of ``j``; a pair that crosses the
# boundary is drawn twice, once from each end, so both halves show inside the box.

start, end = points[pairs[:, 0]], points[pairs[:, 1]]
step = end - start
step -= box * np.round(step / box)  # the minimum image
crosses = np.any(np.abs(end - start) > box / 2, axis=1)
inside = np.stack([start, start + step], axis=1)[~crosses]
across = np.concatenate([np.stack([start, start + step], axis=1)[crosses],
                         np.stack([end, end - step], axis=1)[crosses]])

fig, ax = plt.subplots(figsize=(5.5, 5.5))
ax.add_collection(LineCollection(inside, colors="tab:blue", linewidths=0.8))
ax.add_collection(LineCollection(across, colors="tab:red", linewidths=1.2))
ax.scatter(*points.T, s=6, c="black", zorder=3)
ax.add_patch(plt.Rectangle((0, 0), box, box, fill=False, linestyle="--"))
ax.set_xlim(-r, box + r)
ax.set_ylim(-r, box + r)
ax.set_aspect("equal")
ax.set_title(f"{len(pairs)} pairs within r = {r}; {crosses.sum()} across the boundary (red)")
plt.show()
