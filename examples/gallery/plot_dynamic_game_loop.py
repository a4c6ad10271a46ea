"""
Moving objects in a small game loop
===================================

A `~spatialhash.DynamicHash` holds objects by id and is updated in place as they move:
here 300 discs of a few sizes drift in a 2-D world, each frame moves them all with one
`~spatialhash.DynamicHash.move_many`, and `~spatialhash.DynamicHash.query_pairs` returns
the ids of every overlapping pair (boxes first, then the discs' own shapes).
"""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Circle

from spatialhash import DynamicHash

rng = np.random.default_rng(3)
n, size = 300, 40.0
centres = rng.random((n, 2)) * size
radii = rng.choice([0.4, 0.8, 2.0], n, p=[0.6, 0.3, 0.1])
velocities = rng.normal(0.0, 0.3, (n, 2))

world = DynamicHash(cell_size=1.0, n_dims=2)
world.insert_many(np.arange(n), centres, radius=radii)

# %%
# Twenty frames: move, wrap at the walls, and ask for the overlapping pairs. Each pair is
# checked against the discs' distance.

for _ in range(20):
    centres = np.mod(centres + velocities, size)
    world.move_many(np.arange(n), centres, radius=radii)
    pairs = world.query_pairs()
distance = np.linalg.norm(centres[pairs[:, 0]] - centres[pairs[:, 1]], axis=1)
assert np.all(distance <= radii[pairs[:, 0]] + radii[pairs[:, 1]])

# %%
# The last frame: discs that touch another are drawn in red.

touching = np.zeros(n, bool)
touching[pairs.ravel()] = True
fig, ax = plt.subplots(figsize=(6, 6))
for centre, radius, hit in zip(centres, radii, touching, strict=True):
    ax.add_patch(Circle(centre, radius, color="tab:red" if hit else "tab:blue", alpha=0.6))
ax.set_xlim(0, size)
ax.set_ylim(0, size)
ax.set_aspect("equal")
ax.set_title(f"{len(pairs)} overlapping pairs among {n} moving discs")
plt.show()
