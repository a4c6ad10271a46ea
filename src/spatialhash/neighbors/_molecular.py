"""`neighbor_list`: the pairs of atoms within a cutoff in periodic cells of any shape, with
their cell shifts and vectors, as ASE's ``neighbor_list``, vesin and matscipy return them.

The inputs are checked here, once: the letters asked for, PyTorch tensors and DLPack
objects read as NumPy arrays (``_arrays.py``, which gives the results back as tensors), an
ASE ``Atoms`` or an MDAnalysis ``AtomGroup`` or ``Universe`` unpacked (found by their
attributes: neither library is imported here), the cutoff or radii, the offsets of a batch
of systems (``ptr``), and the cells (``_cells.py``). The pairs of all systems are then
found by ``_images.py`` and its kernels (``_kernels/molecular.py``) in one call, written
straight into the arrays asked for. The conventions are set out in ``docs/molecular.md``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _outputs as output_pool
from .._config import threads
from .._kernels import indirect
from .._validation import as_array, as_points, as_positive_scalar, as_radii
from ._arrays import callers_kind, gradient_letters, to_callers_kind, to_numpy, with_gradients
from ._cells import SystemCells, system_cells
from ._images import batch_rows
from ._kernels.molecular_sort import (
    chunk_bounds,
    sort_groups,
    sort_short_groups,
    sorted_rows,
)

#: The letters `neighbor_list` returns: ASE's five and the system of each pair.
QUANTITIES = "ijSdDb"


def neighbor_list(quantities: str, points, cutoff: float | None = None, cell=None, pbc=None,
                  *, radii=None, full_list: bool = True, sorted: bool = False,
                  mic: bool = False, ptr=None):
    """Every pair of atoms within a cutoff, in a periodic cell of any shape, with the cell
    shift, vector and distance of each: ASE's ``neighbor_list``, closed at the cutoff.

    Parameters
    ----------
    quantities : str
        The arrays to return, one letter each, in the order asked (ASE's letters):
        ``"i"`` and ``"j"``, the two atoms of each pair (int64, shape (m,));
        ``"S"``, the cell shift (int64, shape (m, d)), 0 on open axes; ``"D"``, the vector
        ``points[j] - points[i] + S @ cell`` (float64, shape (m, d)); ``"d"``, its length
        (float64, shape (m,)); ``"b"``, the system of each pair (int64, shape (m,); all 0
        without ``ptr``).
    points : array_like or torch.Tensor, shape (n, d), ase.Atoms, or MDAnalysis AtomGroup
        Positions, d = 1, 2 or 3, in any real dtype (converted to float64 once; float32
        included), anywhere (not necessarily inside the cell); never modified. A PyTorch
        tensor on the CPU, of any real dtype (bfloat16 widened by torch), is read in
        place, and the results are then tensors over the arrays computed (no copy);
        of points that require grad, ``"d"`` and ``"D"`` carry the gradient of
        ``|D|`` and ``D`` with respect to them (new tensors, their values unchanged);
        any object with ``__dlpack__`` on the CPU is read in
        place too (``np.from_dlpack``), with NumPy results. Positions not C-contiguous
        or read-only are copied once (numba compiles a read-only or strided array's
        kernels apart). ``cell``, ``pbc``, ``ptr``, ``radii`` and ``cutoff`` take
        tensors and DLPack objects as well. An ASE
        ``Atoms`` (anything with ``get_positions``, ``get_cell`` and ``get_pbc``) gives
        the positions, the cell and the periodicity. An MDAnalysis ``AtomGroup`` or
        ``Universe`` (anything with ``atoms.positions`` and ``dimensions``) gives the
        positions of its atoms (float32, as MDAnalysis holds them) and its box
        ``dimensions``, ``[a, b, c, alpha, beta, gamma]``: every axis periodic, or every
        axis open where ``dimensions`` is None; indices are then into the group's atoms.
        With either, ``cell``, ``pbc`` and ``ptr`` must be left out.
    cutoff : float, optional
        Pairs with ``d <= cutoff`` are returned (closed, as everywhere in spatialhash;
        ASE keeps ``d < cutoff``). Finite and > 0. Give ``cutoff`` or ``radii``, not both.
        Any cutoff works: one beyond half the cell's width gives a pair once for each
        image within it, and an atom meets its own images.
    cell : array_like of float, optional
        The cell: a (d, d) matrix whose rows are the cell vectors (ASE, vesin); d lengths
        (an orthorhombic box); one length for every axis; or in 3-D MDAnalysis'
        ``[a, b, c, alpha, beta, gamma]`` (angles in degrees; ``a`` along x, ``b`` in the
        xy plane). With ``ptr``, one per system along a first axis: (B, d, d), (B, d) or
        (B, 6). Must be finite and right-handed (determinant > 0; a zero determinant is
        accepted where an open axis's vector is zero or dependent), and its periodic
        vectors must span a non-zero volume. The vector of an open axis is not used and
        may be zero. Default None: no cell, every axis open.
    pbc : bool or array_like of bool, optional
        Which axes are periodic: one bool, one per axis (d,) (a slab, a wire), or with
        ``ptr`` one row per system (B, d). Default None: every axis periodic when a
        ``cell`` is given, none otherwise.
    radii : array_like of float, shape (n,), optional
        One radius per atom, >= 0 and finite, instead of ``cutoff``: pairs with
        ``d <= radii[i] + radii[j]`` (ASE's per-atom cutoffs).
    full_list : bool, default True
        Each pair in both directions, ``(i, j, S)`` and ``(j, i, -S)`` (vectors ``D`` and
        ``-D``), as ASE returns them. False: each pair once, as ``(i, j, S)`` with
        ``i < j`` whatever ``S``, and for an atom with its own image (``i == j``) the
        shift whose components sum to a positive number, a zero sum going to the shift
        whose last non-zero component is positive.
    sorted : bool, default False
        Sort the rows in lexicographic order of ``(i, j, S)``. Unsorted rows come grouped
        by ``i`` in increasing order (as ASE's), in an order fixed by the input within
        each ``i``.
    mic : bool, default False
        Minimum image: refuse (`ValueError`) a cutoff (``2 * max(radii)``) above half
        the cell's shortest perpendicular width across its periodic axes; otherwise the
        same list, where an atom meets no image of itself and a pair appears with one
        shift, but for a pair at exactly half that width, which may appear with two
        (both images are at the cutoff, and the cutoff is closed).
    ptr : array_like of int, shape (B + 1,), optional
        Many systems in one call: the points of system ``b`` are
        ``points[ptr[b]:ptr[b + 1]]`` (``ptr`` non-decreasing, from 0 to n; a system may
        be empty). Each has its cell (``cell`` stacked) and periodicity; no pair is ever
        made across systems. Indices ``i``, ``j`` are into the concatenated ``points``.

    Returns
    -------
    ndarray, torch.Tensor, or tuple of them
        The arrays of ``quantities``, in that order; a single letter gives the array
        itself (as ASE and matscipy do), several a tuple. Tensors (CPU, with the dtypes
        above) where ``points`` is a tensor, NumPy arrays otherwise.

    Raises
    ------
    ValueError
        A shape, an unknown letter, a NaN or infinity (points, cell), a cutoff not
        finite and > 0, a degenerate or left-handed cell, points beyond 2**30 cells of
        the origin, ``mic`` with too large a cutoff, a cutoff and cell that need more
        than 5 * 10**7 periodic images of the points (a cell far thinner than the cutoff:
        see ``_images.MAX_IMAGES``), or a bad ``ptr``; the message names the parameter
        and shows the value seen.
    TypeError
        Both or neither of ``cutoff`` and ``radii``, ``quantities`` not a string,
        ``cell``, ``pbc`` or ``ptr`` given with an ``Atoms``, ``AtomGroup`` or
        ``Universe``, a ``pbc`` not of bools, a ``ptr`` not of integers, a tensor or
        DLPack object on a device other than the CPU, or ``"d"`` or ``"D"`` asked of a
        ``cell`` tensor that requires grad (their gradient with respect to the cell is
        not computed: ask for ``"ijS"`` and compute ``D`` in torch, as
        ``docs/molecular.md`` shows).

    Notes
    -----
    Each row satisfies its test on exactly the ``d`` returned: pairs are searched a
    little beyond the cutoff, then ``D`` is computed by the formula above from the
    caller's positions (never from wrapped ones), ``d`` from ``D``, and the row kept when
    ``d <= cutoff``. ``(j, i, -S)`` has the vector ``-D`` to the bit. The search is
    that of each atom's shifted positions among the atoms wrapped into their cell (each
    atom asks with each shift that can bring an image within the cutoff's reach,
    ``ceil(cutoff / width)`` cells each side of each periodic axis at most), in numba
    kernels over all systems of a batch at once, on several threads (no Python loop
    over points or systems). See ``docs/molecular.md`` for the conventions next to ASE, vesin,
    matscipy and MDAnalysis.

    Examples
    --------
    >>> import numpy as np
    >>> from spatialhash.neighbors import neighbor_list
    >>> cell = np.array([[2.0, 0.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 2.0]])
    >>> points = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    >>> i, j, S, d = neighbor_list("ijSd", points, 2.0, cell)
    >>> int(np.sum(i == j))  # each atom and 4 images of itself, at exactly 2.0
    8
    >>> bool((d <= 2.0).all())
    True
    """
    letters = _as_quantities(quantities)
    given = read_inputs(letters, points, cell, pbc, ptr)
    positions, cell, pbc, cell_name = given.positions, given.cell, given.pbc, given.cell_name
    n, n_dims = positions.shape
    reach, radii, name, seen = _reach(to_numpy(cutoff, "cutoff"), to_numpy(radii, "radii"), n)
    offsets = _as_ptr(given.ptr, n)
    batch = offsets is not None
    if offsets is None:
        offsets = np.array([0, n], dtype=np.int64)
    cells = system_cells(cell, pbc, n_dims, len(offsets) - 1 if batch else None, cell_name)
    if mic:
        _check_minimum_image(cells, reach, name, seen, batch)
    shown = f"cutoff = {seen}" if name == "cutoff" else seen
    computed = "".join(set(letters + ("ijS" if sorted else "") + given.gradients))
    arrays = batch_rows(positions, cells, offsets, reach, radii, bool(full_list), computed,
                        (name, shown, cell_name, batch))
    if sorted:
        arrays = _sorted(arrays)
    return give_back(letters, arrays, given)


class CallersInputs(NamedTuple):
    """What `read_inputs` makes of the caller's points, cell, periodicity and offsets:
    the boundary `neighbor_list` and `MolecularNeighborList.update` share.

    Attributes
    ----------
    positions : ndarray of float64, shape (n, d)
        The positions, checked (those of an ``Atoms``, ``AtomGroup`` or ``Universe``),
        C-contiguous and writable (`kernel_array`).
    cell, pbc, ptr
        As given, as NumPy arrays where they were tensors or DLPack objects; the cell
        and periodicity of an ``Atoms``, ``AtomGroup`` or ``Universe`` in its place.
    cell_name : str
        The cell's name in messages (``points.dimensions`` for MDAnalysis' box).
    from_atoms : bool
        Whether ``points`` was an ``Atoms``, ``AtomGroup`` or ``Universe``: its cell and
        periodicity are then those given, None meaning open.
    kind : str
        The kind of arrays the results go back as (`_arrays.callers_kind`).
    gradients : str
        The letters the rows need for `_arrays.with_gradients` (none without it).
    points : object
        The caller's ``points``, which the gradients are taken with respect to.
    """

    positions: np.ndarray
    cell: object
    pbc: object
    ptr: object
    cell_name: str
    from_atoms: bool
    kind: str
    gradients: str
    points: object


def read_inputs(letters: str, points, cell, pbc, ptr) -> CallersInputs:
    """The caller's points, cell, periodicity and offsets read once (`CallersInputs`):
    tensors and DLPack objects as NumPy arrays (``_arrays.py``), an ASE ``Atoms`` or an
    MDAnalysis ``AtomGroup`` or ``Universe`` unpacked, the positions checked; a ``cell``
    tensor that requires grad refused where ``letters`` asks for ``d`` or ``D``."""
    kind = callers_kind(points)
    gradients = gradient_letters(letters, points, cell)
    arrays, cell, pbc, ptr = (to_numpy(value, name) for value, name in (
        (points, "points"), (cell, "cell"), (pbc, "pbc"), (ptr, "ptr")))
    positions, cell, pbc, cell_name = _unpack_atoms(arrays, cell, pbc, ptr)
    # `_unpack_atoms` gives anything but those objects back as it came.
    return CallersInputs(kernel_array(as_points(positions, "points")), cell, pbc, ptr,
                         cell_name, positions is not arrays, kind, gradients, points)


def kernel_array(array: np.ndarray) -> np.ndarray:
    """``array`` as the kernels take every array, C-contiguous and writable (they never
    write the caller's): a copy only where it is not. A read-only, Fortran-ordered or
    strided array is a type of its own to numba, which would compile every kernel of the
    list again for it."""
    return np.require(array, requirements=("C", "W"))


def give_back(letters: str, arrays: dict[str, np.ndarray], given: CallersInputs):
    """The arrays of ``letters`` (`_outputs`) as the caller gave its points: tensors for
    tensors, with ``d`` and ``D`` differentiable where the points require grad."""
    outputs = to_callers_kind(_outputs(letters, arrays), given.kind)
    if not given.gradients:
        return outputs
    return with_gradients(letters, outputs, given.points, arrays)


def _as_quantities(quantities) -> str:
    """The letters asked for, checked against `QUANTITIES`."""
    if not isinstance(quantities, str):
        raise TypeError(f"`quantities` must be a string of letters from {QUANTITIES!r}; got "
                        f"{quantities!r:.80}.")
    unknown = [letter for letter in quantities if letter not in QUANTITIES]
    if unknown or not quantities:
        raise ValueError(
            f"`quantities` must be one or more letters from {QUANTITIES!r} (i, j, shift S, "
            f"distance d, vector D, system b); got {quantities!r}."
        )
    return quantities


def _unpack_atoms(points, cell, pbc, ptr):
    """``(positions, cell, pbc, cell_name)``: those of an ASE ``Atoms`` or of an
    MDAnalysis ``AtomGroup`` or ``Universe`` (found by their attributes, so that neither
    library need be installed), or the arguments as given; ``cell_name`` names the cell in
    messages, as the caller knows it."""
    ase = all(hasattr(points, method) for method in ("get_positions", "get_cell", "get_pbc"))
    # An AtomGroup's `atoms` is itself, a Universe's its every atom: one test finds both.
    mdanalysis = not ase and hasattr(points, "dimensions") and hasattr(
        getattr(points, "atoms", None), "positions")
    if not (ase or mdanalysis):
        return points, cell, pbc, "cell"
    given = {name: value for name, value in (("cell", cell), ("pbc", pbc), ("ptr", ptr))
             if value is not None}
    kind = "an ase.Atoms" if ase else "an MDAnalysis AtomGroup or Universe"
    for name, value in given.items():
        raise TypeError(
            f"`{name}` must be left out with {kind} as `points`, which gives the cell and "
            f"periodicity of one system; got {name}={value!r:.80}. Pass the positions as "
            "an array to set them."
        )
    if ase:
        return (points.get_positions(), np.asarray(points.get_cell(), dtype=np.float64),
                np.asarray(points.get_pbc(), dtype=bool), "cell")
    dimensions = points.dimensions
    if dimensions is None:  # MDAnalysis' "no box": every axis open
        return points.atoms.positions, None, None, "cell"
    return (points.atoms.positions, np.asarray(dimensions, dtype=np.float64), None,
            "points.dimensions")


def _reach(cutoff, radii, n: int) -> tuple[float, np.ndarray | None, str, object]:
    """``(reach, radii, name, seen)``: the farthest a pair may be, the radii (or None),
    and the parameter and value a minimum-image refusal names."""
    if (cutoff is None) == (radii is None):
        raise TypeError("give exactly one of `cutoff` (a distance) and `radii` (one per "
                        f"point); got cutoff={cutoff!r:.80} and radii={radii!r:.80}.")
    if radii is not None:
        radii = kernel_array(as_radii(radii, "radii", n))
        reach = 2.0 * float(radii.max()) if n else 0.0
        return reach, radii, "radii", f"2 * max(radii) = {reach}"
    if isinstance(cutoff, dict) or np.ndim(cutoff) != 0:
        raise TypeError(
            f"`cutoff` must be one distance (a real number); got {cutoff!r:.80}. Per-atom "
            "cutoffs go in `radii=` (pairs within radii[i] + radii[j]); cutoffs per pair "
            "of elements are not supported."
        )
    cutoff = as_positive_scalar(cutoff, "cutoff")
    return cutoff, None, "cutoff", cutoff


def _as_ptr(ptr, n: int) -> np.ndarray | None:
    """The offsets of a batch's systems, checked: integers, 1-D, from 0 to ``n``,
    non-decreasing; None without a batch."""
    if ptr is None:
        return None
    offsets = as_array(ptr, "ptr", "a 1-D array of integers")
    if offsets.dtype.kind not in "iu":
        raise TypeError(f"`ptr` must hold integers; got dtype {offsets.dtype}.")
    if offsets.ndim != 1 or len(offsets) < 2:
        raise ValueError(
            f"`ptr` must be 1-D with B + 1 offsets for B >= 1 systems; got shape "
            f"{offsets.shape}."
        )
    if offsets[0] != 0 or offsets[-1] != n:
        raise ValueError(
            f"`ptr` must run from 0 to the number of points ({n}); got ptr[0] = "
            f"{offsets[0]} and ptr[-1] = {offsets[-1]}."
        )
    falls = np.flatnonzero(np.diff(offsets) < 0)
    if falls.size:
        k = falls[0]
        raise ValueError(
            f"`ptr` must be non-decreasing; got ptr[{k}] = {offsets[k]} > ptr[{k + 1}] = "
            f"{offsets[k + 1]}."
        )
    return offsets.astype(np.int64)


def _check_minimum_image(cells: SystemCells, reach: float, name: str, seen,
                         batch: bool) -> None:
    """Refuse a reach beyond half the shortest perpendicular width of any system's
    periodic axes (``mic=True``), the first such system in order (a system without
    periodic axes has infinite widths)."""
    refused = np.flatnonzero(reach > cells.widths.min(axis=1, initial=np.inf) / 2.0)
    if not refused.size:
        return
    system = int(refused[0])
    cell = cells[system]
    column = int(np.argmin(cell.widths))
    half = cell.widths[column] / 2.0
    where = f" of cell[{system}]" if batch else ""
    raise ValueError(
        f"`{name}` must be at most half the cell's shortest perpendicular width "
        f"with `mic=True` ({half:.17g}, across axis {cell.axes[column]}{where}); "
        f"got {seen}. Pass mic=False for a pair at every image within reach."
    )


def _sorted(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The rows, grouped by ``i`` in increasing order as `batch_rows` gives them, in
    lexicographic order of ``(i, j, S[:, 0], S[:, 1], ...)`` (`row_order`), ``i`` itself
    unchanged."""
    order = row_order(arrays["i"], arrays["j"], arrays["S"])
    return {letter: values if letter == "i" else np.take(
        values, order, axis=0, out=output_pool.empty(values.shape, values.dtype))
        for letter, values in arrays.items()}


def row_order(first: np.ndarray, j: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """The order (int64 (m,)) that sorts the rows ``(i, j, S)`` (int64 (m,), (m,),
    (m, d)), grouped by ``i = first`` in increasing order, by ``(j, S)`` within each
    group (``_kernels/molecular_sort.py``): the chunks of groups by
    `molecular_sort.sort_short_groups`, then the chunks it left (a group too long to rank,
    or keys that do not pack) by `molecular_sort.sort_groups`, so that the merge sorts
    compile only for rows that need them."""
    bounds = chunk_bounds(first)
    chunks = np.arange(len(bounds) - 1, dtype=np.int64)
    order = np.empty(len(first), np.int64)
    args = (first, j, shifts, 0, 0, order)
    with threads(None):
        left = sorted_rows(first, j, shifts, bounds, chunks, order,
                           indirect.kernel_target(sort_short_groups, args, None))
        if left.any():
            sorted_rows(first, j, shifts, bounds, chunks[left > 0], order,
                        indirect.kernel_target(sort_groups, args, None))
    return order


def _outputs(letters: str, arrays: dict[str, np.ndarray]):
    """The arrays of ``letters`` in order: the array itself for one letter, else a tuple.
    A letter asked twice gets two arrays of its own."""
    outputs = tuple(np.array(arrays[letter]) if letters.count(letter) > 1 and
                    letters.index(letter) != k else arrays[letter]
                    for k, letter in enumerate(letters))
    return outputs[0] if len(outputs) == 1 else outputs
