"""Cells of periodic systems, as molecular codes give them: parsed, checked, and measured.

A cell is given as ASE and vesin give it, a (d, d) matrix whose rows are the cell vectors;
as the d lengths of an orthorhombic box; as one length for every axis; or, in 3-D, as
MDAnalysis gives it, ``[a, b, c, alpha, beta, gamma]`` (lengths, then angles in degrees).
Each axis is periodic or open (``pbc``). Only the vectors of the periodic axes enter a
neighbour list (a pair's shift is 0 on open axes), so the vector of an open axis may be
anything finite, zero included, as ASE allows.

`CellGeometry` is what the list needs of a cell: the vectors, which axes are periodic, the
dual vectors of the periodic ones (a point's fractional coordinate along periodic axis
``a`` is ``dual[a] @ x``) and the perpendicular widths of the cell across them (the
distance between the two faces the other vectors span: ``1 / |dual[a]|``). The dual
vectors lie in the span of the periodic vectors, so that the widths are those of the
periodic lattice whatever the open axes' vectors are: a slab's width across its periodic
axes does not depend on its (open) third vector. `SystemCells` holds the cells of all the
systems of a call stacked along a first axis, read, checked and measured together (no
Python work per system), as the kernels take them; each system's `CellGeometry` is made
only where asked for (a message, the skin list's comparisons).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .._validation import as_array, as_float_array, check_finite

#: A cell whose periodic vectors span a volume (area, length) below this fraction of the
#: product of their lengths is degenerate: flat in numbers, if not exactly. A cell that
#: thin would need about ``1 / DEGENERATE_VOLUME`` images of each point for any cutoff
#: of the order of its vectors.
DEGENERATE_VOLUME = 1e-10


class CellGeometry(NamedTuple):
    """One system's cell, checked, with what a list computes from it.

    Attributes
    ----------
    vectors : ndarray of float64, shape (d, d)
        The cell vectors as rows (diagonal for lengths); ``S @ vectors`` is a shift.
    periodic : ndarray of bool, shape (d,)
        Which axes are periodic.
    axes : ndarray of int64, shape (p,)
        The periodic axes, in increasing order.
    dual : ndarray of float64, shape (p, d)
        ``dual[a] @ vectors[axes[b]]`` is 1 where ``a == b``, else 0; each row lies in the
        span of the periodic vectors.
    widths : ndarray of float64, shape (p,)
        The perpendicular width of the cell across each periodic axis, ``1 / |dual[a]|``.
    """

    vectors: np.ndarray
    periodic: np.ndarray
    axes: np.ndarray
    dual: np.ndarray
    widths: np.ndarray


class SystemCells(Sequence):
    """The checked cells of all systems of a call, stacked, so that the list's kernels
    take them as they are; ``cells[b]`` is system ``b``'s `CellGeometry`.

    Attributes
    ----------
    vectors : ndarray of float64, shape (B, d, d)
        Each system's cell vectors as rows.
    periodic : ndarray of bool, shape (B, d)
        Each system's periodic axes.
    dual : ndarray of float64, shape (B, d, d)
        ``CellGeometry.dual`` in the rows of the periodic axes, zero on the open ones.
    widths : ndarray of float64, shape (B, d)
        ``CellGeometry.widths`` on the periodic axes, infinite on the open ones (a reach of
        0 cells).
    """

    def __init__(self, vectors: np.ndarray, periodic: np.ndarray, dual: np.ndarray,
                 widths: np.ndarray) -> None:
        self.vectors, self.periodic, self.dual, self.widths = vectors, periodic, dual, widths

    def __len__(self) -> int:
        return len(self.vectors)

    def __getitem__(self, b) -> CellGeometry:
        b = operator.index(b)
        axes = np.flatnonzero(self.periodic[b])
        return CellGeometry(self.vectors[b], self.periodic[b], axes, self.dual[b, axes],
                            self.widths[b, axes])


def system_cells(cell, pbc, n_dims: int, n_systems: int | None, name: str = "cell"
                 ) -> SystemCells:
    """The checked cells of the systems (`SystemCells`): one for ``n_systems=None`` (a
    single system), else ``n_systems`` of them, ``cell`` then holding one cell per system
    along a first axis.

    ``cell=None`` is an open system (``pbc`` must then be None or all false); ``pbc=None``
    makes every axis periodic when a cell is given. ``name`` names the cell in messages
    (``points.dimensions`` where an MDAnalysis group gave it).
    """
    batch = n_systems is not None
    count = n_systems if batch else 1
    flags = _as_pbc(pbc, n_dims, n_systems, cell is not None)
    if cell is None:
        return geometries(np.zeros((count, n_dims, n_dims)), flags, name, batch)
    values = as_float_array(cell, name)
    check_finite(values, name)
    if batch and (values.ndim < 2 or values.shape[0] != n_systems):
        raise ValueError(
            f"`cell` must hold one cell per system along its first axis, shape "
            f"({n_systems}, {n_dims}, {n_dims}), ({n_systems}, {n_dims})"
            f"{f' or ({n_systems}, 6)' if n_dims == 3 else ''}, as `ptr` gives "
            f"{n_systems} systems; got shape {values.shape}. Share one cell with "
            f"`np.broadcast_to(cell, ({n_systems}, {n_dims}, {n_dims}))`."
        )
    systems = values if batch else values[np.newaxis]
    vectors, refused = _stacked_vectors(systems, n_dims)
    if refused < count:
        # The earlier systems' errors first, as one system after another.
        geometries(vectors[:refused], flags[:refused], name, batch)
        cell_vectors(systems[refused], n_dims, _name(name, batch, refused))  # raises
    return geometries(vectors, flags, name, batch)


def _stacked_vectors(systems: np.ndarray, n_dims: int) -> tuple[np.ndarray, int]:
    """``(vectors, refused)``: the (B, d, d) cell vectors of the cells ``systems`` (finite
    float64, one per system along the first axis) as `cell_vectors` reads each, and the
    first system it refuses (B if none); the vectors are those of the systems before it.
    Matrices and lengths are read together, ``[a, b, c, alpha, beta, gamma]`` system by
    system."""
    count, shape = len(systems), systems.shape[1:]
    vectors = np.zeros((count, n_dims, n_dims))
    if shape == (n_dims, n_dims):
        vectors[:] = systems
        return vectors, count
    if shape in ((), (n_dims,)):
        lengths = np.broadcast_to(systems.reshape(count, -1), (count, n_dims))
        negative = (lengths < 0).any(axis=1)
        refused = int(np.argmax(negative)) if negative.any() else count
        diagonal = np.arange(n_dims)
        vectors[:refused, diagonal, diagonal] = lengths[:refused]
        return vectors, refused
    if n_dims == 3 and shape == (6,):
        for b in range(count):
            try:
                vectors[b] = _mdanalysis_vectors(systems[b], "cell")
            except ValueError:
                return vectors, b
        return vectors, count
    return vectors, 0


def _name(name: str, batch: bool, b: int) -> str:
    """The name of system ``b``'s cell in messages: ``cell[b]`` in a batch."""
    return f"{name}[{b}]" if batch else name


def geometries(vectors: np.ndarray, periodic: np.ndarray, name: str, batch: bool
               ) -> SystemCells:
    """The cells ``vectors`` (B, d, d) with their periodic axes ``periodic`` (B, d),
    checked and measured as `geometry` does each (`SystemCells`), together for the cells of
    each pattern of periodic axes (NumPy's stacked linear algebra, the same arithmetic cell
    by cell), so that a batch of many systems costs no Python work per system. The first
    cell, in order, that `geometry` refuses is refused with its message (its name
    ``name``, with ``[b]`` in a ``batch``)."""
    count, n_dims = periodic.shape
    periodic = np.array(periodic, dtype=bool)
    dual = np.zeros((count, n_dims, n_dims))
    widths = np.full((count, n_dims), np.inf)
    if not count:
        return SystemCells(vectors, periodic, dual, widths)
    patterns, pattern_of = np.unique(periodic, axis=0, return_inverse=True)
    failed = np.zeros(count, dtype=bool)
    groups = []
    for k, pattern in enumerate(patterns):
        members = np.flatnonzero(pattern_of.reshape(-1) == k)
        axes = np.flatnonzero(pattern)
        group = vectors[members]
        failed[members] = ((_relative_volumes(group[:, axes]) <= DEGENERATE_VOLUME)
                           | (_signed_relative_volumes(group) < -DEGENERATE_VOLUME))
        groups.append((members, axes, group[:, axes]))
    if failed.any():
        first = int(np.argmax(failed))
        geometry(vectors[first], periodic[first], _name(name, batch, first))  # raises
    for members, axes, rows in groups:
        if not axes.size:
            continue
        duals = np.linalg.solve(rows @ rows.transpose(0, 2, 1), rows)
        dual[members[:, np.newaxis], axes] = duals
        widths[members[:, np.newaxis], axes] = 1.0 / np.sqrt((duals * duals).sum(axis=2))
    return SystemCells(vectors, periodic, dual, widths)


def cell_vectors(values: np.ndarray, n_dims: int, name: str) -> np.ndarray:
    """The (d, d) cell vectors of one system's cell ``values`` (finite float64): a matrix
    of vectors as rows, d lengths, one length, or ``[a, b, c, alpha, beta, gamma]``."""
    if values.shape == (n_dims, n_dims):
        return np.array(values)
    if values.ndim == 0 or values.shape == (n_dims,):
        lengths = np.broadcast_to(values, (n_dims,))
        negative = np.flatnonzero(lengths < 0)
        if negative.size:
            raise ValueError(
                f"`{name}` lengths must be >= 0; got {lengths[negative[0]]} on axis "
                f"{negative[0]}."
            )
        return np.diag(lengths)
    if n_dims == 3 and values.shape == (6,):
        return _mdanalysis_vectors(values, name)
    mdanalysis = ", [a, b, c, alpha, beta, gamma] (degrees)" if n_dims == 3 else ""
    raise ValueError(
        f"`{name}` must be a ({n_dims}, {n_dims}) matrix whose rows are the cell vectors, "
        f"{n_dims} lengths{mdanalysis} or one length, for {n_dims}-D points; got shape "
        f"{values.shape}."
    )


def _mdanalysis_vectors(box: np.ndarray, name: str) -> np.ndarray:
    """The cell vectors of MDAnalysis' ``[a, b, c, alpha, beta, gamma]``: ``a`` along x,
    ``b`` in the xy plane, as MDAnalysis' ``triclinic_vectors`` (and ASE's
    ``cellpar_to_cell``) lay them out. A right angle is taken as exactly 90 degrees, so
    that an orthorhombic box gives exact zeros rather than cos(pi / 2)."""
    lengths, angles = box[:3], box[3:]
    if not (lengths > 0).all() or not ((angles > 0) & (angles < 180)).all():
        raise ValueError(
            f"`{name}` as [a, b, c, alpha, beta, gamma] must have lengths > 0 and angles "
            f"strictly between 0 and 180 degrees; got {box.tolist()}."
        )
    cos = np.where(angles == 90.0, 0.0, np.cos(np.radians(angles)))
    sin_gamma = 1.0 if angles[2] == 90.0 else float(np.sin(np.radians(angles[2])))
    a, b, c = lengths
    cos_alpha, cos_beta, cos_gamma = cos
    c_x = c * cos_beta
    c_y = c * (cos_alpha - cos_beta * cos_gamma) / sin_gamma
    c_z2 = c * c - c_x * c_x - c_y * c_y
    if not c_z2 > 0:
        raise ValueError(
            f"`{name}` as [a, b, c, alpha, beta, gamma] must describe a cell of non-zero "
            f"volume; got {box.tolist()}, whose angles no cell has."
        )
    return np.array([[a, 0.0, 0.0],
                     [b * cos_gamma, b * sin_gamma, 0.0],
                     [c_x, c_y, np.sqrt(c_z2)]])


def _as_pbc(pbc, n_dims: int, n_systems: int | None, has_cell: bool) -> np.ndarray:
    """Periodicity as an (n_systems or 1, d) bool array: from a bool, one bool per axis
    (shared by all systems) or, for a batch, one row per system."""
    count = 1 if n_systems is None else n_systems
    if pbc is None:
        return np.full((count, n_dims), has_cell)
    flags = as_array(pbc, "pbc", "a bool or a sequence of bools")
    if flags.dtype != np.bool_:
        raise TypeError(f"`pbc` must be a bool or an array of bools; got {pbc!r:.80}.")
    shapes = [(), (n_dims,)] + ([] if n_systems is None else [(n_systems, n_dims)])
    if flags.shape not in shapes:
        raise ValueError(
            f"`pbc` must be one bool, or one per axis ({n_dims},)"
            f"{'' if n_systems is None else f', or one row per system {shapes[-1]}'}; got "
            f"shape {flags.shape}."
        )
    flags = np.broadcast_to(flags, (count, n_dims))
    if flags.any() and not has_cell:
        raise ValueError(
            f"`cell` must be given for periodic axes; got cell=None and pbc={pbc!r:.80}."
        )
    return flags


def geometry(vectors: np.ndarray, periodic: np.ndarray, name: str) -> CellGeometry:
    """Check a (d, d) cell with its periodic axes and measure it (`CellGeometry`): the
    periodic vectors must span a non-zero volume, and the cell must not be left-handed."""
    axes = np.flatnonzero(periodic)
    rows = vectors[axes]
    volume = _relative_volume(rows)
    if volume <= DEGENERATE_VOLUME:
        raise ValueError(
            f"`{name}` must span a non-zero volume on its periodic axes {axes.tolist()}; got "
            f"the vectors {rows.tolist()}, of relative volume {volume:.3g}. Make the "
            "axes whose vector is zero or dependent open (`pbc`)."
        )
    determinant = _signed_relative_volume(vectors)
    if determinant < -DEGENERATE_VOLUME:
        raise ValueError(
            f"`{name}` must be right-handed (a determinant > 0); got determinant "
            f"{np.linalg.det(vectors):.6g} for the vectors {vectors.tolist()}. Negate one "
            "vector, or swap two, for the same lattice."
        )
    dual = np.linalg.solve(rows @ rows.T, rows) if axes.size else np.zeros((0, len(vectors)))
    widths = 1.0 / np.sqrt((dual * dual).sum(axis=1))
    return CellGeometry(vectors, np.array(periodic, dtype=bool), axes, dual, widths)


def _relative_volume(rows: np.ndarray) -> float:
    """The volume (area, length) the (p, d) rows span over the product of their lengths:
    1 for orthogonal rows, 0 for dependent ones, computed from unit rows so that a flat
    cell comes out at rounding level (about 1e-16), not at its square root."""
    if not len(rows):
        return 1.0
    norms = np.sqrt((rows * rows).sum(axis=1))
    if not (norms > 0).all():
        return 0.0
    unit = rows / norms[:, np.newaxis]
    if len(rows) == rows.shape[1]:
        return abs(float(np.linalg.det(unit)))
    if len(rows) == 1:
        return 1.0
    return float(np.sqrt((np.cross(unit[0], unit[1]) ** 2).sum()))  # two rows in 3-D


def _signed_relative_volume(vectors: np.ndarray) -> float:
    """The determinant of the (d, d) vectors made unit length, 0 if one of them is zero."""
    norms = np.sqrt((vectors * vectors).sum(axis=1))
    if not (norms > 0).all():
        return 0.0
    return float(np.linalg.det(vectors / norms[:, np.newaxis]))


def _relative_volumes(rows: np.ndarray) -> np.ndarray:
    """`_relative_volume` of each of the stacked rows (B, p, d), together."""
    if not rows.shape[1]:
        return np.ones(len(rows))
    norms = np.sqrt((rows * rows).sum(axis=2))
    zero = ~(norms > 0).all(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = rows / norms[:, :, np.newaxis]
    unit[zero] = 0.0
    if rows.shape[1] == rows.shape[2]:
        volumes = np.abs(np.linalg.det(unit)) if len(rows) else np.zeros(0)
    elif rows.shape[1] == 1:
        volumes = np.ones(len(rows))
    else:  # two rows in 3-D
        volumes = np.sqrt((np.cross(unit[:, 0], unit[:, 1]) ** 2).sum(axis=1))
    return np.where(zero, 0.0, volumes)


def _signed_relative_volumes(vectors: np.ndarray) -> np.ndarray:
    """`_signed_relative_volume` of each of the stacked vectors (B, d, d), together."""
    norms = np.sqrt((vectors * vectors).sum(axis=2))
    zero = ~(norms > 0).all(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = vectors / norms[:, :, np.newaxis]
    unit[zero] = 0.0
    volumes = np.linalg.det(unit) if len(vectors) else np.zeros(0)
    return np.where(zero, 0.0, volumes)
