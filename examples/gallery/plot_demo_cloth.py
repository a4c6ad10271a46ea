"""
Frames of the cloth demo: a cloth that folds without passing through itself
===========================================================================

``spatialhash demo cloth`` drops a hanging cloth of particles edge-first onto the ground.
Two particles of the cloth must stay a thickness apart, and the pairs that might touch come
from ``Grid.query_pairs``, rebuilt only when the particles have moved far enough to need it.
Here the demo's own simulation, `spatialhash.demos.cloth.Cloth`, runs headless on a
24 x 24 cloth for 60 frames (one simulated second), and four frames are drawn with the
demo's colours: orange where the front of the cloth faces the viewer, blue where its back
does.
"""

import matplotlib.pyplot as plt
import numpy as np
from mpl_toolkits.mplot3d.art3d import Poly3DCollection

from spatialhash.demos.cloth import (
    INTERPENETRATION_FRACTION,
    INTERPENETRATION_REST_DISTANCE,
    Cloth,
)

cloth = Cloth(24, seed=0)
loose = Cloth(24, seed=0, self_collision=False)  # the same cloth, passing through itself
frames = {}
for frame in range(61):
    if frame in (0, 12, 24, 60):
        frames[frame] = cloth.positions.copy()
        # The demo's own checks: the surface crosses itself nowhere, and no two distant
        # parts of the cloth lie on top of each other.
        assert np.isfinite(cloth.positions).all()
        assert cloth.count_crossings() == 0 and cloth.count_interpenetrations() == 0
    if frame < 60:
        cloth.step_frame()
        loose.step_frame()


# %%
# The demo's interpenetration count against a reference: by brute force in NumPy over all
# pairs of particles, those closer than half the thickness that lie more than twice the
# thickness apart in the flat rest cloth. Without self-collision the same cloth has many;
# with it, none.

def interpenetrations(cloth):
    gap = np.linalg.norm(cloth.positions[:, None] - cloth.positions[None, :], axis=-1)
    grid = np.column_stack([cloth.rows, cloth.columns]) * cloth.spacing
    rest = np.linalg.norm(grid[:, None] - grid[None, :], axis=-1)
    far = INTERPENETRATION_REST_DISTANCE * max(cloth.thickness, cloth.spacing)
    close = INTERPENETRATION_FRACTION * cloth.thickness
    return int(np.count_nonzero(np.triu((gap < close) & (rest > far), k=1)))


assert interpenetrations(cloth) == cloth.count_interpenetrations() == 0
assert interpenetrations(loose) == loose.count_interpenetrations() > 0
print(f"after {cloth.frame} frames: with self-collision {cloth.count_crossings()} crossings "
      f"and 0 interpenetrating pairs; without, {loose.count_crossings()} crossings and "
      f"{loose.count_interpenetrations()} interpenetrating pairs")

# %%
# Four frames, each triangle of the cloth's mesh shaded by its angle to a light above.

_, triangles = cloth.mesh()
light = np.array([-0.4, -0.5, 1.0]) / np.linalg.norm([-0.4, -0.5, 1.0])
front, back = np.array([235, 120, 40]) / 255, np.array([60, 130, 220]) / 255
elevation, azimuth = 20, 120
toward_viewer = np.array([np.cos(np.radians(elevation)) * np.cos(np.radians(azimuth)),
                          np.cos(np.radians(elevation)) * np.sin(np.radians(azimuth)),
                          np.sin(np.radians(elevation))])
every = np.concatenate(list(frames.values()))
low, high = every.min(axis=0), every.max(axis=0)

fig = plt.figure(figsize=(12, 3.8), layout="constrained")
for panel, (frame, positions) in enumerate(frames.items()):
    ax = fig.add_subplot(1, 4, panel + 1, projection="3d")
    corners = positions[triangles]
    normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    facing = (normals @ toward_viewer >= 0)[:, None]
    shade = 0.3 + 0.7 * np.abs(normals @ light)[:, None]
    colours = np.where(facing, front, back) * shade
    ax.add_collection3d(Poly3DCollection(corners, facecolors=colours, edgecolors=colours,
                                         linewidths=0.3))
    ax.set(xlim=(low[0], high[0]), ylim=(low[1], high[1]), zlim=(0, high[2]))
    ax.set_box_aspect(high - [low[0], low[1], 0], zoom=1.15)
    ax.view_init(elevation, azimuth)
    ax.set_axis_off()
    ax.set_title(f"frame {frame} ({frame / cloth.fps:.2f} s)")
fig.suptitle(f"{cloth.size} x {cloth.size} cloth, {cloth.substeps} substeps a frame: no "
             "crossings, no interpenetrating pairs")
plt.show()
