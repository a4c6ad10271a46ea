"""`MolecularNeighborList`: the molecular list of `neighbor_list` kept between steps with a
skin, for atoms that move in a periodic cell of any shape.

How
---
A build runs the search of `neighbor_list` (``_images.batch_rows``, its kernels
unchanged) at the reach ``cutoff + skin`` (with radii, ``radii + skin / 2``), a little
more (`REACH_MARGIN`), and keeps those rows ``(i, j, S)`` as candidates, with the
positions and the cell of the build; sorted once there when ``sorted=True``. An update
splits each atom's displacement since the build into a whole number ``n`` of cell vectors
(its fractional displacement rounded) and what is left, ``x - x_built - n @ cell``
(``_kernels/molecular_list.atom_moves``). A candidate ``(i, j, S)`` is, at the current
positions, the image pair ``(i, j, S + n[i] - n[j])`` (the stored shifts take the
change of the jumps whenever they change, ``shift_candidates``), and its vector is the
build's plus the difference of the leftovers of ``i`` and ``j``. So while every leftover is at
most ``skin / 2`` long, no image pair has come closer by more than ``skin``, and every
row now within the cutoff is a candidate: the update recomputes the candidates' vectors
and keeps those within the cutoff (``listed_rows``). An atom wrapped back into the cell
between steps jumps by a lattice vector, which goes into ``n``, not into its leftover:
it has not moved far, and the shifts of its rows change by its jump. Any integer ``n``
makes that argument hold; the nearest one makes the leftover short wherever the cell is
not far from orthogonal (elsewhere a short move may come out long, and rebuilds).

Why the rows are the same as a new search's: a row is kept on its distance computed from
the caller's positions by `molecular._pair_vector`, the search's own arithmetic, and
compared with the same bound, so a candidate is kept exactly when the search at the
current positions keeps its row, with ``d`` and ``D`` to the bit. The half-list rule
(``i < j``; for ``i == j`` the sign of the shift) is unchanged by the jumps: ``i`` and
``j`` are the same, and for ``i == j`` the shift is. Sorted rows stay sorted: the rows
of one ``(i, j)`` all add the same ``n[i] - n[j]`` to their shifts.

A changed cell rebuilds (the simplest exact rule: shifts are whole cells, and a strained
cell moves every image). So does a coordinate grown far beyond those of the build (by
`GROWTH_LIMIT`), which would outgrow the margin of the reach.
"""

from __future__ import annotations

import numpy as np

from .._config import threads
from .._validation import as_points, as_positive_scalar
from ._cells import CellGeometry, system_cells
from ._images import batch_rows
from ._kernels.molecular_list import atom_moves, listed_rows, shift_candidates
from ._molecular import _as_quantities, _outputs, _reach, _sorted

#: The candidates reach a relative 2**-30 of the largest coordinate (plus the reach)
#: beyond ``cutoff + skin``: rounding in the vectors, at the build and at an update, and in
#: the leftovers of the moves, is about 2**-52 of those, and can never drop a row.
REACH_MARGIN = 2.0**-30
#: A current coordinate larger than this many times the build's largest (plus the reach)
#: rebuilds: its rounding would approach the margin.
GROWTH_LIMIT = 2.0**10


class MolecularNeighborList:
    """The rows of `neighbor_list` for moving atoms in a periodic cell of any shape, kept
    between steps with a skin: each `update` returns what a new `neighbor_list` call with
    the same options returns at the new positions, and searches again only when some atom
    moved more than ``skin / 2`` since the last search, or the cell changed.

    Parameters
    ----------
    quantities : str
        The arrays each `update` returns, letters of ``"ijSdDb"``, as in `neighbor_list`.
    cutoff : float, optional
        Rows with ``d <= cutoff``, finite and > 0. Give ``cutoff`` or ``radii``.
    skin : float
        Extra reach of the stored candidates, finite and >= 0. A larger skin searches less
        often and checks more candidates at each update.
    cell : array_like of float, optional
        The cell, as in `neighbor_list` (one system): (d, d) rows, d lengths, one length, or
        ``[a, b, c, alpha, beta, gamma]``. `update` may give a new one. Default None: open.
    pbc : bool or array_like of bool, optional
        Periodic axes, as in `neighbor_list`; fixed for the list's life.
    radii : array_like of float, shape (n,), optional
        Instead of ``cutoff``: rows with ``d <= radii[i] + radii[j]``.
    full_list : bool, default True
        Both directions of each pair, or (False) one, by `neighbor_list`'s rule.
    sorted : bool, default False
        Rows in lexicographic order of ``(i, j, S)``, as `neighbor_list` sorts them.
        Unsorted rows come grouped by ``i`` in increasing order, but in an order of their
        own within each ``i`` (not that of a new `neighbor_list` call).

    Attributes
    ----------
    n_builds : int
        Searches so far (the first `update` makes the first).
    rebuilt : bool
        Whether the last `update` searched again (True after the first).

    Notes
    -----
    An atom's move is measured up to whole cell vectors: an atom wrapped back into the
    cell between steps (jumping by a lattice vector) has not moved, and the shifts ``S``
    of its rows change by its jump, as a new search's do. Any change of the cell's
    periodic vectors rebuilds. Batches (``ptr``), ``mic`` and ASE or MDAnalysis objects
    are not taken: give the positions as an array.

    Examples
    --------
    >>> import numpy as np
    >>> from spatialhash.neighbors import MolecularNeighborList, neighbor_list
    >>> rng = np.random.default_rng(0)
    >>> cell = np.array([[4.0, 0.0, 0.0], [1.0, 4.0, 0.0], [0.0, 0.5, 4.0]])
    >>> points = rng.random((100, 3)) @ cell
    >>> neighbors = MolecularNeighborList("ijSd", cutoff=1.5, skin=0.3, cell=cell)
    >>> i, j, S, d = neighbors.update(points)
    >>> points = points + rng.normal(0.0, 0.01, points.shape)
    >>> i, j, S, d = neighbors.update(points)
    >>> neighbors.rebuilt
    False
    >>> fresh = neighbor_list("ijSd", points, 1.5, cell)
    >>> sorted(zip(i, j, map(tuple, S))) == sorted(zip(fresh[0], fresh[1], map(tuple, fresh[2])))
    True
    """

    def __init__(self, quantities: str, cutoff: float | None = None, skin: float | None = None,
                 cell=None, pbc=None, *, radii=None, full_list: bool = True,
                 sorted: bool = False) -> None:
        self._letters = _as_quantities(quantities)
        if skin is None:
            raise TypeError("give `skin`, the extra reach of the candidates (>= 0).")
        self._skin = as_positive_scalar(skin, "skin", allow_zero=True)
        # Checked now (radii against their own length), and against the atoms at the first
        # update.
        self._cutoff, self._radii, _, _ = _reach(cutoff, radii, _length(radii))
        self._radii_argument = radii
        self._cell, self._pbc = cell, pbc
        self._full_list, self._sorted = bool(full_list), bool(sorted)
        self._geometry: CellGeometry | None = None
        self._shape: tuple[int, int] | None = None
        self.n_builds = 0
        self.rebuilt = False

    @property
    def cutoff(self) -> float | None:
        """The cutoff of the rows (None when they are found by radii)."""
        return None if self._radii_argument is not None else self._cutoff

    @property
    def skin(self) -> float:
        """The extra reach of the candidates."""
        return self._skin

    def update(self, points, cell=None):
        """Take the positions now (and the cell, if it changed); returns the rows of
        ``neighbor_list(quantities, points, cutoff, cell, pbc, ...)`` at them.

        Parameters
        ----------
        points : array_like of float, shape (n, d)
            The positions, anywhere (wrapped into the cell or not), never modified; the
            same shape at every update.
        cell : array_like of float, optional
            The cell now, in any form `neighbor_list` takes; default None: the cell last
            given. A cell whose periodic vectors changed rebuilds.

        Returns
        -------
        ndarray or tuple of ndarray
            The arrays of ``quantities``, in that order, as `neighbor_list` returns them:
            new arrays at each update.
        """
        coords = as_points(points, "points")
        if self._shape is None:
            self._first(coords)
        elif coords.shape != self._shape:
            raise ValueError(
                f"`points` must keep the shape {self._shape} of the first positions (the "
                f"same atoms); got shape {coords.shape}. Make a new list for other atoms.")
        geometry = self._geometry
        if cell is not None:
            geometry = system_cells(cell, self._pbc, coords.shape[1], None)[0]
        rebuild = self._moved(coords, geometry)
        if rebuild:
            self._build(coords, geometry)
        elif not np.array_equal(self._jumps, self._applied):
            # The candidates' shifts follow the jumps: their rows at these positions.
            with threads(None):
                shift_candidates(*self._candidates, self._jumps - self._applied)
            self._applied = self._jumps.copy()
        self.rebuilt = rebuild
        return self._rows(coords)

    def _first(self, coords: np.ndarray) -> None:
        """Check the radii against the first positions, and resolve the cell."""
        if self._radii is not None:
            self._cutoff, self._radii, _, _ = _reach(None, self._radii_argument, len(coords))
        self._geometry = system_cells(self._cell, self._pbc, coords.shape[1], None)[0]
        self._shape = coords.shape  # last: a refused first update leaves no state

    def _moved(self, coords: np.ndarray, geometry: CellGeometry) -> bool:
        """Whether a search is due: none yet, a changed cell, or a move beyond the skin
        (the jumps of the moves into ``self._jumps`` otherwise)."""
        if self.n_builds == 0:
            return True
        built = self._geometry
        axes = built.axes
        if not (np.array_equal(geometry.periodic, built.periodic)
                and np.array_equal(geometry.vectors[axes], built.vectors[axes])):
            return True
        half_skin = 0.5 * self._skin
        with threads(None):
            n_beyond, largest = atom_moves(coords, self._built_at, built.vectors,
                                           built.periodic, self._dual, half_skin * half_skin,
                                           self._jumps)
        return n_beyond > 0 or largest > GROWTH_LIMIT * self._scale

    def _build(self, coords: np.ndarray, geometry: CellGeometry) -> None:
        """Search the candidates at ``cutoff + skin`` (or ``radii + skin / 2``) and the
        margin, and keep them with these positions and cell."""
        n, n_dims = coords.shape
        largest = float(np.abs(coords).max()) if n else 0.0
        reach = self._cutoff + self._skin
        scale = largest + reach
        margin = REACH_MARGIN * scale
        if self._radii is None:
            radii = None
            reach += margin
            names = ("cutoff", f"cutoff + skin = {self._cutoff + self._skin}", "cell", False)
        else:
            # Rows within (r_i + skin / 2) + (r_j + skin / 2): every row within
            # r_i + r_j + skin, with the margin.
            radii = self._radii + 0.5 * (self._skin + margin)
            reach = 2.0 * float(radii.max()) if n else 0.0
            names = ("radii", f"2 * max(radii) + skin = {self._cutoff + self._skin}",
                     "cell", False)
        found = batch_rows(coords, [geometry], np.array([0, n], dtype=np.int64), reach,
                           radii, self._full_list, "ijS", names)
        if self._sorted:
            found = _sorted(found)
        self._candidates = (found["i"], found["j"], found["S"])
        self._scale = scale
        self._geometry = geometry
        self._vectors = geometry.vectors[np.newaxis]
        self._periodic = geometry.periodic[np.newaxis]
        self._dual = np.zeros((n_dims, n_dims))
        self._dual[geometry.axes] = geometry.dual
        self._built_at = coords.copy()
        self._jumps = np.zeros((n, n_dims), dtype=np.int64)
        self._applied = self._jumps.copy()  # the jumps the candidates' shifts include
        self._keep = np.empty(len(found["i"]), dtype=np.bool_)
        self.n_builds += 1

    def _rows(self, coords: np.ndarray):
        """The candidates within the cutoff at ``coords``, as the letters asked for."""
        n, n_dims = coords.shape
        letters = self._letters
        radii = np.empty(0) if self._radii is None else self._radii
        candidates = self._candidates
        args = (coords, self._vectors, self._periodic, candidates, radii, self._cutoff,
                self._keep)
        with threads(None):
            counts = listed_rows(*args, np.empty(0, np.int64), _empty_out(n_dims))
            starts = np.cumsum(counts) - counts
            m = int(counts.sum())
            out = tuple(np.empty((m if letter in letters else 0,)
                                 + ((n_dims,) if letter in "SD" else ()),
                                 dtype=np.float64 if letter in "Dd" else np.int64)
                        for letter in "ijSDd")
            listed_rows(*args, starts, out)
        arrays = dict(zip("ijSDd", out, strict=True))
        arrays["b"] = np.zeros(m if "b" in letters else 0, dtype=np.int64)
        return _outputs(letters, arrays)


def _empty_out(n_dims: int) -> tuple[np.ndarray, ...]:
    """The output arrays of a count pass: no rows."""
    return (np.empty(0, np.int64), np.empty(0, np.int64), np.empty((0, n_dims), np.int64),
            np.empty((0, n_dims)), np.empty(0))


def _length(radii) -> int:
    """The length of 1-D ``radii``, else 0 (a scalar; `as_radii` refuses the rest)."""
    try:
        return len(radii) if np.ndim(radii) == 1 else 0
    except ValueError:  # ragged nested sequences
        return 0
