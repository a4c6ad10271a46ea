"""Neighbour lists: the pairs of points that move, kept between steps; and the molecular
lists of atoms in periodic cells of any shape, with their cell shifts and vectors.

Where the code is
-----------------
``_neighbor_list.py``: `NeighborList`, the Verlet list (the pairs within ``r``, or within
``radii[i] + radii[j]``, kept with a skin). ``_molecular.py``: `neighbor_list`, the
molecular list (ASE's letters ``i j S d D``), its inputs checked there; ``_cells.py``: the
cells it takes, checked and measured (dual vectors, perpendicular widths);
``_images.py``: the pairs of all systems of a call, each atom's shifted positions searched
among its system's wrapped atoms (its docstring is the design of the molecular list),
by the kernels of ``_kernels/molecular_state.py`` (the atoms set up) and
``_kernels/molecular.py`` (the scan). ``_molecular_list.py``:
`MolecularNeighborList`, the molecular list kept with a skin (its docstring is its
design), built by that search and filtered by ``_kernels/molecular_list.py``.
``_list_functions.py``: a user's function over a Verlet list's pairs. ``_kernels/``: the
Verlet list's numba kernels, ``neighbor_list.py`` (the candidates
as rows, the check of the moves, the pairs within reach) and ``neighbor_list_functions.py``
(a user's function over them). The whole path of a build is ``_neighbor_list.py`` ->
`Grid._found_pairs` -> the grid's engine (`GridEngine.found_pairs`) ->
``_kernels/neighbor_list.py``; of an update and its pairs, ``_neighbor_list.py`` ->
``_kernels/neighbor_list.py``; of a function over the pairs, ``_neighbor_list.py`` ->
``_list_functions.py`` -> ``grid/_pair_functions.py`` (`run_scan`) ->
``_kernels/neighbor_list_functions.py``. ``_arrays.py``: the boundary with the caller's
arrays (PyTorch CPU tensors and DLPack objects read as NumPy, results back as tensors).

Design
------
A list is built on a `Grid`, from what `Grid` and its engine interface (`GridEngine`,
``grid/_engine.py``) declare, never from the grid's private state: a build asks the
grid for its pairs as its search found them (`GridEngine.found_pairs`: the pairs as
positions in the grid's point order, grouped by the point whose scan met them; that order;
the points in it; and the slabs of rows a function over the pairs may run at once), and
keeps them as rows. Between builds the list works on its own arrays (`ListState`), with
the arithmetic of the grid's pair kernels, so its pairs are those of a new grid's
`query_pairs` on the current positions, exactly. The design of the Verlet list itself
(the skin, the moves, the rows) is the docstring of ``_neighbor_list.py``.
"""

from ._molecular import neighbor_list
from ._molecular_list import MolecularNeighborList
from ._neighbor_list import NeighborList

__all__ = ["MolecularNeighborList", "NeighborList", "neighbor_list"]
