"""
Frames of the particle demo: discs piling up
============================================

``spatialhash demo particles`` drops thousands of discs of mixed sizes into a box and lets
them pile up under gravity; every step finds the discs in contact with one
``Grid.query_pairs(radii=...)`` call, then pushes overlapping discs apart. Here the demo's
own simulation, `spatialhash.demos.particles.ParticleSystem`, runs headless with 400
discs, and four of its frames are drawn, coloured by radius as the demo colours them (small
blue, large orange). The demo needs no extra package for this: only its animation (Pillow)
and its window (pygame) do.
"""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import EllipseCollection
from matplotlib.colors import LinearSegmentedColormap, LogNorm

from spatialhash.demos.particles import DEEP_OVERLAP, ParticleSystem, find_contacts

system = ParticleSystem(400, seed=1)
frames = {}
for step in range(241):
    if step in (0, 80, 140, 240):
        frames[step] = system.positions.copy()
        # The demo's own check: no two discs overlap by more than DEEP_OVERLAP (20%) of
        # the smaller radius.
        assert system.max_overlap() <= DEEP_OVERLAP
    if step < 240:
        system.step()

# %%
# The contact search against a reference: every pair of discs with
# ``distance <= radii[i] + radii[j]``, by brute force in NumPy over all pairs, in the
# kernels' arithmetic (squared distances), is the set the demo's hash search finds.

positions, radii = system.positions, system.radii
delta = positions[:, None, :] - positions[None, :, :]
squared = delta[..., 0] * delta[..., 0] + delta[..., 1] * delta[..., 1]
reach = radii[:, None] + radii[None, :]
first, second = np.nonzero(np.triu(squared <= reach * reach, k=1))
found = find_contacts(positions, radii)
order = np.lexsort((found[:, 1], found[:, 0]))
assert np.array_equal(found[order], np.column_stack([first, second]))
overlap = (reach[first, second] - np.sqrt(squared[first, second])) / np.minimum(
    radii[first], radii[second])
print(f"{len(found)} discs in contact after {system.n_steps} steps; largest overlap "
      f"{overlap.max():.1%} of the smaller radius (the demo's limit: {DEEP_OVERLAP:.0%})")

# %%
# Four frames. Lengths are in smallest radii; the demo's colours run from blue (radius 1)
# to orange (radius 4) on a log scale.

colours = LinearSegmentedColormap.from_list("demo", np.array(
    [(49, 104, 208), (64, 178, 172), (146, 208, 80), (246, 190, 60), (236, 98, 52)]) / 255)
fig, axes = plt.subplots(1, 4, figsize=(12, 3.4), sharey=True)
for ax, (step, frame) in zip(axes, frames.items(), strict=True):
    discs = EllipseCollection(2 * radii, 2 * radii, 0, units="xy", offsets=frame,
                              offset_transform=ax.transData, cmap=colours,
                              norm=LogNorm(radii.min(), radii.max()))
    discs.set_array(radii)
    ax.add_collection(discs)
    ax.set_xlim(0, system.width)
    ax.set_ylim(0, system.height)
    ax.set_aspect("equal")
    ax.set_facecolor((18 / 255, 18 / 255, 28 / 255))
    ax.set_title(f"step {step}")
    ax.set_xticks([])
    ax.set_yticks([])
fig.suptitle(f"{system.n_particles} discs under gravity, one query_pairs(radii=...) a step")
plt.show()
