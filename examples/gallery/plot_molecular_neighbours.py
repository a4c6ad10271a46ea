"""
Molecular neighbour lists: images and g(r) of a copper crystal
==============================================================

`~spatialhash.neighbors.neighbor_list` gives the pairs of atoms within a cutoff in a
periodic cell of any shape, as ASE's ``neighbor_list`` does: the letters ``"ijd"`` ask
for the two atoms and the distance of each pair. Here the cell is copper's primitive
face-centred cubic cell, built by ASE (three vectors of 2.55 Å at 60 degrees to each
other: a triclinic cell), repeated three times along each vector (27 atoms) and rattled,
and the cutoff is larger than the cell's width, so the list holds periodic images: each
atom meets images of itself, and meets each other atom several times, once for every
image within the cutoff.
"""

import matplotlib.pyplot as plt
import numpy as np
from ase.build import bulk
from ase.neighborlist import neighbor_list as ase_neighbor_list

from spatialhash.neighbors import neighbor_list

a = 3.6  # copper's lattice constant, in Å
atoms = bulk("Cu", "fcc", a=a).repeat(3)
atoms.rattle(stdev=0.05, seed=0)  # a Gaussian displacement of each coordinate
cell = atoms.cell.array  # the cell vectors as rows
n = len(atoms)
volume = abs(np.linalg.det(cell))
# The perpendicular width across each pair of faces: the volume over a face's area.
width = volume / np.linalg.norm(np.cross(cell[[1, 2, 0]], cell[[2, 0, 1]]), axis=1)
cutoff = 8.0  # Å
assert cutoff > width.max() > cutoff / 2

# %%
# The full list, each pair in both directions as ASE returns it. A sphere of 8 Å around
# an atom holds some 180 atoms of the crystal, and the cell only 27: the other 26 come
# back once for every image of them within the cutoff, and each atom meets twelve images
# of itself, one for each lattice vector of length ``3 a / sqrt(2)`` = 7.64 Å (the
# cell's own vectors among them), whatever the rattling.

i, j, d = neighbor_list("ijd", atoms, cutoff)
own = np.bincount(i[i == j], minlength=n)  # images of the atom itself
others = np.bincount(i[i != j], minlength=n)  # the other atoms, once per image
partners = np.unique(np.column_stack([i, j])[i != j], axis=0)
assert (own == 12).all()
assert len(partners) == n * (n - 1)  # every other atom is a neighbour of every atom...
assert (others > 5 * (n - 1)).all()  # ...and comes back more than five times on average

# %%
# The same pairs as ASE's ``neighbor_list``, with the same cell shifts ``S``. ASE keeps
# the pairs with ``d < cutoff`` and spatialhash those with ``d <= cutoff``; no distance
# here is at the cutoff, so the two lists are equal as sets of ``(i, j, S)``.

assert np.abs(d - cutoff).min() > 1e-9


def rows(i, j, shifts):
    """The rows of a list as a set of ``(i, j, S)``."""
    return set(zip(i.tolist(), j.tolist(), map(tuple, shifts.tolist()), strict=True))


ours = neighbor_list("ijS", atoms, cutoff)
theirs = ase_neighbor_list("ijS", atoms, cutoff)
assert rows(*ours) == rows(*theirs)
assert len(ours[0]) == len(theirs[0]) == len(i)  # and no row twice

# %%
# The radial distribution function g(r) from the distances: the rows in each shell
# ``[r, r + dr)`` over those of an ideal gas, ``n`` atoms each with ``n / V`` neighbours
# per unit volume around it, ``V = abs(det(cell))``, so
# ``n * (n / V) * 4/3 pi ((r + dr)^3 - r^3)`` rows in the shell. Its peaks are the
# shells of the fcc lattice, at ``a sqrt(k / 2)``, broadened by the rattling; the first
# holds each atom's 12 nearest neighbours, at ``a / sqrt(2)`` = 2.55 Å, and farther out,
# where the shells crowd together, g(r) averages 1.

edges = np.linspace(0.0, cutoff, 161)
ideal = n * (n / volume) * 4.0 / 3.0 * np.pi * np.diff(edges**3)
in_shell = np.histogram(d, edges)[0]
g = in_shell / ideal
assert np.count_nonzero(d < 3.1) == 12 * n  # between the first shell and the second
assert abs(edges[np.argmax(g)] - a / np.sqrt(2)) < 0.1
far = edges[:-1] >= 4.0
assert abs(in_shell[far].sum() / ideal[far].sum() - 1.0) < 0.05

# %%
# Left, each atom's rows: its own images and the other atoms, against the 26 a
# minimum-image list would give (each other atom once). Right, g(r), with half the cell's
# width, beyond which a pair may come back with a second shift, and the width, beyond
# which an atom may meet itself.

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), width_ratios=[1, 1.5],
                                  layout="constrained")
atom = np.arange(n)
left.bar(atom, own, color="tab:red", label="images of the atom itself")
left.bar(atom, others, bottom=own, color="tab:blue", label=f"the {n - 1} other atoms, per image")
left.axhline(n - 1, color="black", linestyle="--", linewidth=1,
             label="each other atom once (minimum image)")
left.set_xlabel("atom")
left.set_ylabel(f"neighbours within {cutoff:g} Å")
left.set_ylim(0, 1.4 * (own + others).max())
left.legend(loc="upper center", framealpha=0.95)
left.set_title(f"{len(i):,} rows; each other atom {others.mean() / (n - 1):.1f} times on "
               "average")

right.stairs(g, edges, color="tab:blue")
right.axhline(1.0, color="grey", linewidth=0.8)
for x, text in [(width.min() / 2, "half the width"), (width.min(), "the width")]:
    right.axvline(x, color="black", linestyle=":", linewidth=1)
    right.annotate(f"{text}\n{x:.2f} Å", (x, 0.97), xycoords=("data", "axes fraction"),
                   xytext=(4, 0), textcoords="offset points", va="top", fontsize=9)
right.set_xlim(0.0, cutoff)
right.set_xlabel("r (Å)")
right.set_ylabel("g(r)")
right.set_title("g(r) from the distances: the fcc shells at a sqrt(k / 2)")
fig.suptitle(f"{n} copper atoms in a rattled triclinic cell of width {width.min():.2f} Å, "
             f"cutoff {cutoff:g} Å")
plt.show()
