"""
Points in boxes
===============

`~spatialhash.Grid.query_box` returns, for each closed axis-aligned box, the points inside
it, as CSR rows (``indptr``, ``indices``). Here a few boxes of different shapes select
points of a uniform cloud.
"""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from spatialhash import Grid

rng = np.random.default_rng(5)
points = rng.random((4000, 2))
lower = np.array([[0.1, 0.1], [0.5, 0.2], [0.2, 0.6], [0.7, 0.7]])
upper = lower + np.array([[0.2, 0.3], [0.4, 0.1], [0.1, 0.3], [0.25, 0.25]])

inside = Grid(points, cell_size=0.05).query_box(lower, upper)
for b in range(len(lower)):
    expected = np.flatnonzero(np.all((points >= lower[b]) & (points <= upper[b]), axis=1))
    assert np.array_equal(inside.row(b), expected)

# %%
# Each box's points in its own colour.

fig, ax = plt.subplots(figsize=(6, 6))
ax.scatter(*points.T, s=2, color="lightgray")
for b, colour in enumerate(["tab:blue", "tab:orange", "tab:green", "tab:red"]):
    ax.scatter(*points[inside.row(b)].T, s=4, color=colour)
    ax.add_patch(Rectangle(lower[b], *(upper[b] - lower[b]), fill=False, color=colour))
ax.set_aspect("equal")
ax.set_title(f"{len(inside.indices)} points in {len(lower)} boxes")
plt.show()
