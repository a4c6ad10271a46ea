"""
Rays against circles: what a lamp lights
========================================

`~spatialhash.Grid.query_ray` casts rays against the points taken as circles (spheres in
3-D) and returns the first one each ray meets, with the distance along the ray: the
question of line of sight, of a bullet, of a photon. Here a fan of rays leaves a lamp among
scattered circles; each ray stops at the first circle it hits, and the circles that were
hit are filled.
"""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection, PatchCollection

from spatialhash import Grid

rng = np.random.default_rng(3)
centres = rng.random((250, 2)) * 10
radius = 0.12
lamp = np.array([5.0, 5.0])
centres = centres[np.linalg.norm(centres - lamp, axis=1) > 1]  # room around the lamp

angles = np.linspace(0, 2 * np.pi, 720, endpoint=False)
directions = np.column_stack([np.cos(angles), np.sin(angles)])
origins = np.tile(lamp, (len(angles), 1))  # one origin a ray
grid = Grid(centres, cell_size=2 * radius)
hits = grid.query_ray(origins, directions, radius, max_distance=8.0)

# %%
# The same first hits by brute force, every ray against every circle: where the ray passes
# within ``radius`` of a centre ahead of it, it enters the circle ``sqrt(radius**2 - miss**2)``
# before its closest approach.

ahead = centres[None, :, :] - origins[:, None, :]
along = np.einsum("rcd,rd->rc", ahead, directions)
miss2 = np.einsum("rcd,rcd->rc", ahead, ahead) - along**2
entry = along - np.sqrt(np.maximum(radius**2 - miss2, 0))
entry[(miss2 > radius**2) | (along < 0) | (entry > 8.0)] = np.inf
assert np.allclose(hits.distances, entry.min(axis=1))

# %%
# A ray that hits nothing within ``max_distance`` has index -1 and distance ``inf``; it is
# drawn to its full length.

lengths = np.where(hits.hit, hits.distances, 8.0)
rays = np.stack([origins, origins + directions * lengths[:, None]], axis=1)
lit = np.zeros(len(centres), dtype=bool)
lit[hits.indices[hits.hit]] = True

fig, ax = plt.subplots(figsize=(6, 6))
ax.add_collection(LineCollection(rays, colors="gold", linewidths=0.5, zorder=1))
circles = [plt.Circle(centre, radius) for centre in centres]
ax.add_collection(PatchCollection(circles, facecolors=np.where(lit, "tab:red", "none"),
                                  edgecolors="black", linewidths=0.5, zorder=2))
ax.plot(*lamp, marker="*", color="orange", markersize=14, zorder=3)
ax.set_xlim(0, 10)
ax.set_ylim(0, 10)
ax.set_aspect("equal")
ax.set_title(f"{hits.hit.sum()} of {len(angles)} rays hit; {lit.sum()} circles lit")
plt.show()
