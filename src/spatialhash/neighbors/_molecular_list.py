"""`MolecularNeighborList`: the molecular list of `neighbor_list` kept between steps with a
skin, for atoms that move in periodic cells of any shape, one system or a batch (``ptr``).

How
---
A build runs the search of `neighbor_list` (``_images.batch_rows``, its kernels
unchanged) at the reach ``cutoff + skin`` (with radii, ``radii + skin / 2``), a little
more (`REACH_MARGIN`), and keeps those rows ``(i, j, S)`` as candidates, with the
positions and the cell of the build; sorted once there when ``sorted=True``. An update
splits each atom's displacement since the build into a whole number ``n`` of cell vectors
(its fractional displacement rounded) and what is left, ``x - x_built - n @ cell``
(``_kernels/molecular_list.atom_moves``). A candidate ``(i, j, S)`` is, at the current
positions, the image pair ``(i, j, S + n[i] - n[j])`` (the stored shifts take the change
of the jumps whenever they change, in the first pass of ``listed_rows``), and its vector
is the build's plus the difference of the leftovers of ``i`` and ``j``. So while every
leftover is at most ``skin / 2`` long, no image pair has come closer by more than
``skin``, and every row now within the cutoff is a candidate: the update recomputes the
candidates' vectors and keeps those within the cutoff (``listed_rows``). An atom wrapped
back into the cell between steps jumps by a lattice vector, which goes into ``n``, not
into its leftover: it has not moved far, and the shifts of its rows change by its jump.
Any integer ``n`` makes that argument hold; the nearest one makes the leftover short
wherever the cell is not far from orthogonal (elsewhere a short move may come out long,
and rebuilds).

Why the rows are the same as a new search's: a row is kept on its distance computed from
the caller's positions by `molecular_rows._pair_vector`, the search's own arithmetic, and
compared with the same bound, so a candidate is kept exactly when the search at the
current positions keeps its row, with ``d`` and ``D`` to the bit. The half-list rule
(``i < j``; for ``i == j`` the sign of the shift) is unchanged by the jumps: ``i`` and
``j`` are the same, and for ``i == j`` the shift is. Sorted rows stay sorted: the rows
of one ``(i, j)`` all add the same ``n[i] - n[j]`` to their shifts.

A changed cell rebuilds (the simplest exact rule: shifts are whole cells, and a strained
cell moves every image). So does a coordinate grown far beyond those of the build (by
`GROWTH_LIMIT`), which would outgrow the margin of the reach.

Batches. Everything above holds system by system: no pair crosses systems, each atom's
move is measured in its own system's cell, and a candidate's vector uses the cell of its
system. So a rebuild is per system: the systems with an atom beyond ``skin / 2`` (or a new
cell, or a coordinate grown too far) are searched again, by one `batch_rows` call over
all systems in which the others hold no atoms (so that its messages name each system's
cell by its own index), and their candidates replace theirs in place. Each system's
candidates lie in slots of their own: a system searched again writes its new ones into
its slots (`MolecularNeighborList._place`) and the other systems' are not touched, so a
partial search copies only its own systems' candidates (a join of the kept and the new
ones into new arrays would copy every candidate at each partial search). A search of
every system keeps its candidates as found, in slots without room; a system that
outgrows its slots moves every system into new ones, each with room for `SLACK_SHARE`
more, so that this is rare. The kernels walk the used slots system by system. The candidates
stay grouped by system and by ``i`` in increasing order, sorted within each system when
``sorted=True``, so the rows are a new batched search's, in its order when sorted. Per
system rather than all at once: in a batch of many small systems some system is nearly
always due, and searching all of them at each such step would leave the skin little to
save. The rows' arrays come from the pool of ``_outputs.py``, as a search's do.

Inputs. `update` reads its arguments with `neighbor_list`'s own code (``_molecular.
read_inputs`` and ``give_back``): tensors, DLPack objects, ASE and MDAnalysis objects in,
tensors out with the same gradients. ``mic`` only refuses, on the cutoff (not on
``cutoff + skin``: the candidates may reach further, the rows are the same), at the first
update and at each new cell.
"""

from __future__ import annotations

import numpy as np

from .._config import threads
from .._kernels import indirect
from .._validation import as_positive_scalar
from ._arrays import gradient_letters, to_numpy
from ._cells import CellGeometry, SystemCells, system_cells
from ._images import KERNEL_LETTERS, _row_arrays, batch_rows
from ._kernels.molecular_list import atom_moves, chunk_rows, listed_rows, place_candidates
from ._molecular import (
    CallersInputs,
    _as_ptr,
    _as_quantities,
    _check_minimum_image,
    _reach,
    _sorted,
    give_back,
    read_inputs,
)

#: The candidates reach a relative 2**-30 of the largest coordinate (plus the reach)
#: beyond ``cutoff + skin``: rounding in the vectors, at the build and at an update, and in
#: the leftovers of the moves, is about 2**-52 of those, and can never drop a row.
REACH_MARGIN = 2.0**-30
#: A current coordinate larger than this many times the largest of its system's last
#: search (plus the reach) searches that system again: its rounding would approach the
#: margin.
GROWTH_LIMIT = 2.0**10
#: Slots laid out anew hold each system's candidates and this share of them more (and
#: `SLACK_ROWS`), so that a system searched again nearly always finds room in its own.
SLACK_SHARE = 1.0 / 8.0
SLACK_ROWS = 16


class MolecularNeighborList:
    """The rows of `neighbor_list` for moving atoms in periodic cells of any shape, one
    system or a batch of them, kept between steps with a skin: each `update` returns what
    a new `neighbor_list` call with the same arguments returns at the new positions, and
    searches a system again only when one of its atoms moved more than ``skin / 2`` since
    its last search, or its cell changed.

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
        The cell, in any form `neighbor_list` takes (with ``ptr``, one per system);
        `update` may give a new one. Default None: open.
    pbc : bool or array_like of bool, optional
        Periodic axes, as in `neighbor_list`; `update` may give new ones.
    radii : array_like of float, shape (n,), optional
        Instead of ``cutoff``: rows with ``d <= radii[i] + radii[j]``.
    full_list : bool, default True
        Both directions of each pair, or (False) one, by `neighbor_list`'s rule.
    sorted : bool, default False
        Rows in lexicographic order of ``(i, j, S)``, as `neighbor_list` sorts them.
        Unsorted rows come grouped by ``i`` in increasing order, but in an order of their
        own within each ``i`` (not that of a new `neighbor_list` call).
    mic : bool, default False
        Refuse (`ValueError`, at the first `update` and at each new cell) a cutoff above
        half a cell's shortest perpendicular width, as `neighbor_list` does; the rows are
        the same.
    ptr : array_like of int, shape (B + 1,), optional
        A batch of systems, as in `neighbor_list`: the offsets of each system's atoms in
        the concatenated points, fixed for the list's life (or given at the first
        `update`).

    Attributes
    ----------
    n_builds : int
        Searches so far (the first `update` makes the first; a search of some systems of
        a batch counts one).
    rebuilt : bool
        Whether the last `update` searched again (True after the first).
    rebuilt_systems : ndarray of int64
        The systems the last `update` searched (all after the first; ``[0]`` or none
        without ``ptr``).

    Notes
    -----
    An atom's move is measured up to whole cell vectors: an atom wrapped back into the
    cell between steps (jumping by a lattice vector) has not moved, and the shifts ``S``
    of its rows change by its jump, as a new search's do. Any change of a system's
    periodic vectors or periodicity searches that system again. In a batch, a system
    whose atoms all stayed within ``skin / 2`` keeps its candidates while others are
    searched: no pair crosses systems, so each system's candidates are its own.

    Positions, cells and periodicity are read as `neighbor_list` reads them (the same
    code): arrays, PyTorch CPU tensors and DLPack objects (tensors in, tensors out, with
    ``d`` and ``D`` differentiable with respect to points that require grad), an ASE
    ``Atoms`` or an MDAnalysis ``AtomGroup`` or ``Universe``, whose cell and periodicity
    then replace the last ones.

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
                 sorted: bool = False, mic: bool = False, ptr=None) -> None:
        self._letters = _as_quantities(quantities)
        if skin is None:
            raise TypeError("give `skin`, the extra reach of the candidates (>= 0).")
        self._skin = as_positive_scalar(to_numpy(skin, "skin"), "skin", allow_zero=True)
        gradient_letters(self._letters, None, cell)  # a cell that requires grad: refused
        cutoff, radii = to_numpy(cutoff, "cutoff"), to_numpy(radii, "radii")
        # Checked now (radii against their own length), and against the atoms at the first
        # update.
        self._cutoff, self._radii, _, _ = _reach(cutoff, radii, _length(radii))
        self._radii_argument = radii
        # The cell and periodicity last given, and the name of the cell in messages.
        self._given = (to_numpy(cell, "cell"), to_numpy(pbc, "pbc"), "cell")
        self._ptr = to_numpy(ptr, "ptr")
        self._full_list, self._sorted, self._mic = bool(full_list), bool(sorted), bool(mic)
        self._shape: tuple[int, int] | None = None
        self.n_builds = 0
        self.rebuilt = False
        self.rebuilt_systems = np.empty(0, np.int64)

    @property
    def cutoff(self) -> float | None:
        """The cutoff of the rows (None when they are found by radii)."""
        return None if self._radii_argument is not None else self._cutoff

    @property
    def skin(self) -> float:
        """The extra reach of the candidates."""
        return self._skin

    def update(self, points, cell=None, pbc=None, *, ptr=None):
        """Take the positions now (and the cell and periodicity, if they changed); returns
        the rows of ``neighbor_list(quantities, points, cutoff, cell, pbc, ...)`` at them.

        Parameters
        ----------
        points : array_like of float, shape (n, d), tensor, ase.Atoms, or MDAnalysis AtomGroup
            The positions, anywhere (wrapped into the cell or not), never modified; the
            same shape at every update. As `neighbor_list` takes them: tensors give
            tensors; an ``Atoms``, ``AtomGroup`` or ``Universe`` gives its cell and
            periodicity too (``cell``, ``pbc`` and ``ptr`` must then be left out).
        cell : array_like of float, optional
            The cell now, in any form `neighbor_list` takes; default None: the cell last
            given. A system whose periodic vectors changed is searched again.
        pbc : bool or array_like of bool, optional
            The periodic axes now; default None: those last given.
        ptr : array_like of int, shape (B + 1,), optional
            The offsets of the batch's systems; default None: those given before. Fixed
            for the list's life: a different ``ptr`` is refused (make a new list).

        Returns
        -------
        ndarray, torch.Tensor, or tuple of them
            The arrays of ``quantities``, in that order, as `neighbor_list` returns them:
            new arrays at each update.
        """
        given = read_inputs(self._letters, points, cell, pbc, ptr)
        coords = given.positions
        if self.n_builds == 0:
            self._first(coords, given)
        elif coords.shape != self._shape:
            raise ValueError(
                f"`points` must keep the shape {self._shape} of the first positions (the "
                f"same atoms); got shape {coords.shape}. Make a new list for other atoms.")
        elif given.ptr is not None and not (self._batch and _same(given.ptr, self._offsets)):
            raise _changed_ptr(self._offsets if self._batch else None, given.ptr)
        latest, geometries = self._cells(coords, given)
        search = self._due(coords, geometries)
        if search.any():
            self._search(coords, geometries, search, latest[2])
        # Kept only now: a refused update leaves the list as it was.
        self._given, self._geometries = latest, geometries
        self.rebuilt = bool(search.any())
        self.rebuilt_systems = np.flatnonzero(search)
        # The candidates' shifts follow the jumps: their rows at these positions.
        jumped = not np.array_equal(self._jumps, self._applied)
        rows = self._rows(coords, given.gradients,
                          self._jumps - self._applied if jumped else self._no_jumps)
        if jumped:
            self._applied = self._jumps.copy()
        return give_back(self._letters, rows, given)

    def _first(self, coords: np.ndarray, given: CallersInputs) -> None:
        """Check the radii and the offsets against the first positions, and set up the
        list's arrays (again, after a refused first update)."""
        n = len(coords)
        self._cutoff, self._radii, name, seen = _reach(
            self._cutoff if self._radii is None else None, self._radii_argument, n)
        self._bound = (self._cutoff, name, seen)  # what `mic` refuses, as named
        if self._ptr is not None and given.ptr is not None and not _same(given.ptr, self._ptr):
            raise _changed_ptr(self._ptr, given.ptr)
        ptr = self._ptr if given.ptr is None else given.ptr
        if given.from_atoms and ptr is not None:
            raise TypeError(
                f"`ptr` must be left out with an ase.Atoms or an MDAnalysis group as "
                f"`points`, which holds one system; got ptr={ptr!r:.80}.")
        offsets = _as_ptr(ptr, n)
        self._batch = offsets is not None
        self._offsets = np.array([0, n], np.int64) if offsets is None else offsets
        n_systems = len(self._offsets) - 1
        self._system = np.repeat(np.arange(n_systems, dtype=np.int64),
                                 np.diff(self._offsets))
        self._geometries: list[CellGeometry] | None = None
        self._limits = np.zeros(n_systems)  # GROWTH_LIMIT times each system's scale
        self._built_at = np.array(coords)
        self._jumps = np.zeros(coords.shape, dtype=np.int64)
        self._applied = self._jumps.copy()  # the jumps the candidates' shifts include
        self._no_jumps = np.zeros((0, coords.shape[1]), dtype=np.int64)  # none changed
        self._far = np.zeros(n, dtype=np.bool_)
        self._candidates = (np.empty(0, np.int64), np.empty(0, np.int64),
                            np.empty((0, coords.shape[1]), np.int64))
        # System b's candidates in the slots starts[b] up to ends[b], room up to
        # starts[b + 1].
        self._slots = (np.zeros(n_systems + 1, np.int64), np.zeros(n_systems, np.int64))
        self._keep = np.empty(0, dtype=np.bool_)
        self._shape = coords.shape

    def _cells(self, coords: np.ndarray, given: CallersInputs
               ) -> tuple[tuple, list[CellGeometry]]:
        """``(latest, geometries)``: the cell, periodicity and cell name now (given, or
        those last given), and each system's checked cell (those of the last update where
        neither changed); with ``mic``, refused beyond half a width."""
        last_cell, last_pbc, last_name = self._given
        if given.from_atoms:
            if self._batch:
                raise TypeError(
                    "`points` must be an array with the `ptr` the list was given: an "
                    "ase.Atoms or an MDAnalysis group holds one system; got "
                    f"{type(given.points).__name__}.")
            latest = (given.cell, given.pbc, given.cell_name)
        else:
            latest = (last_cell if given.cell is None else given.cell,
                      last_pbc if given.pbc is None else given.pbc,
                      last_name if given.cell is None else "cell")
        if (self._geometries is not None and _same(latest[0], last_cell)
                and _same(latest[1], last_pbc)):
            return latest, self._geometries
        geometries = system_cells(latest[0], latest[1], coords.shape[1],
                                  len(self._offsets) - 1 if self._batch else None, latest[2])
        if self._mic:
            _check_minimum_image(geometries, *self._bound, self._batch)
        return latest, geometries

    def _due(self, coords: np.ndarray, geometries: list[CellGeometry]) -> np.ndarray:
        """Which systems to search (bool (B,)): all at first, else those whose cell
        changed or with an atom moved beyond ``skin / 2`` (the jumps of the moves into
        ``self._jumps``)."""
        n_systems = len(self._offsets) - 1
        if self.n_builds == 0:
            return np.ones(n_systems, dtype=bool)
        search = np.zeros(n_systems, dtype=bool)
        if geometries is not self._geometries:
            search[:] = [_changed(old, new) for old, new in zip(self._geometries, geometries,
                                                                 strict=True)]
        half_skin = 0.5 * self._skin
        with threads(None):
            atom_moves(coords, self._built_at, self._cell_arrays, self._dual,
                       half_skin * half_skin, self._limits, self._jumps, self._far)
        if self._far.any():
            search[self._system[self._far]] = True
        return search

    def _search(self, coords: np.ndarray, geometries: list[CellGeometry], search: np.ndarray,
                cell_name: str) -> None:
        """Search the candidates of the systems ``search`` marks at ``cutoff + skin`` (or
        ``radii + skin / 2``) and the margin, and keep them with these positions, in
        place of those systems' former ones."""
        offsets = self._offsets
        sizes = np.diff(offsets)
        everything = bool(search.all())
        atoms = np.repeat(search, sizes)
        sub = coords if everything else coords[atoms]
        sub_offsets = offsets if everything else np.concatenate(
            [[0], np.cumsum(np.where(search, sizes, 0))]).astype(np.int64)
        largest = float(np.abs(sub).max()) if sub.size else 0.0
        reach = self._cutoff + self._skin
        scale = largest + reach
        margin = REACH_MARGIN * scale
        if self._radii is None:
            radii = None
            reach += margin
            names = ("cutoff", f"cutoff + skin = {self._cutoff + self._skin}", cell_name,
                     self._batch)
        else:
            # Rows within (r_i + skin / 2) + (r_j + skin / 2): every row within
            # r_i + r_j + skin, with the margin.
            radii = (self._radii if everything else self._radii[atoms]) + 0.5 * (
                self._skin + margin)
            reach = 2.0 * float(radii.max()) if len(radii) else 0.0
            names = ("radii", f"2 * max(radii) + skin = {self._cutoff + self._skin}",
                     cell_name, self._batch)
        found = batch_rows(sub, geometries, sub_offsets, reach, radii, self._full_list, "ijS",
                           names)
        if self._sorted:
            found = _sorted(found)
        # The other systems hold no atoms in `sub`: only those searched have rows.
        self._place((found["i"], found["j"], found["S"]),
                    np.searchsorted(found["i"], sub_offsets), search,
                    offsets[:-1] - sub_offsets[:-1])
        self._limits[search] = GROWTH_LIMIT * scale
        self._built_at[atoms] = coords[atoms]
        self._jumps[atoms] = 0
        self._applied[atoms] = 0
        self._cell_arrays, self._dual = _cell_arrays(geometries, self._system)
        self.n_builds += 1

    def _place(self, found: tuple[np.ndarray, ...], found_offsets: np.ndarray,
               search: np.ndarray, index_shift: np.ndarray) -> None:
        """Put the candidates ``found`` ``(i, j, S)`` of the systems ``search`` marks
        (system b's from ``found_offsets[b]`` up to ``found_offsets[b + 1]``, its indices
        less ``index_shift[b]`` than in all the atoms) in their systems' slots, in place
        of their former ones. The candidates of a search of every system are kept as
        they are, in slots without room (nothing copied: every search of a single
        system, and no copying kernel to compile at the first update). Where a system
        outgrows its slots, every system's candidates move into new slots, each with
        room for `SLACK_SHARE` more: a copy of every candidate, as a join of the old and
        new ones would be, but rare."""
        if search.all():
            self._candidates = found
            self._slots = (found_offsets, found_offsets[1:].copy())
            self._keep = np.empty(len(found[0]), dtype=np.bool_)
            return
        starts, ends = self._slots
        systems = np.flatnonzero(search)
        counts = np.diff(found_offsets)[systems]
        found_starts, index_shift = found_offsets[systems], index_shift[systems]
        if (counts <= starts[systems + 1] - starts[systems]).all():
            with threads(None):
                place_candidates(found, found_starts, counts, index_shift,
                                 self._candidates, starts[systems])
            ends[systems] = starts[systems] + counts
            return
        sizes = ends - starts[:-1]
        sizes[systems] = counts
        room = sizes + np.ceil(SLACK_SHARE * sizes).astype(np.int64) + SLACK_ROWS
        new_starts = np.concatenate([[0], np.cumsum(room)]).astype(np.int64)
        n_slots, n_dims = int(new_starts[-1]), self._shape[1]
        candidates = (np.empty(n_slots, np.int64), np.empty(n_slots, np.int64),
                      np.empty((n_slots, n_dims), np.int64))
        kept = np.flatnonzero(~search)
        with threads(None):
            place_candidates(self._candidates, starts[kept], sizes[kept],
                             np.zeros(len(kept), np.int64), candidates, new_starts[kept])
            place_candidates(found, found_starts, counts, index_shift, candidates,
                             new_starts[systems])
        self._candidates = candidates
        self._slots = (new_starts, new_starts[:-1] + sizes)
        self._keep = np.empty(n_slots, dtype=np.bool_)

    def _rows(self, coords: np.ndarray, gradients: str, jumps: np.ndarray
              ) -> dict[str, np.ndarray]:
        """The candidates within the cutoff at ``coords``, their shifts first moved by
        ``jumps`` (the change of each atom's jump, int64 (n, d); (0, d) where none
        changed): the arrays of the letters asked for and of ``gradients``, by letter,
        over memory recycled as a search's are (``_outputs.py``: the rows of a large batch
        would otherwise take fresh pages at every update)."""
        n_dims = coords.shape[1]
        letters = self._letters + gradients
        radii = np.empty(0) if self._radii is None else self._radii
        args = (coords, self._cell_arrays, (*self._candidates, *self._slots), jumps, radii,
                self._cutoff)
        no_rows = _row_arrays("", 0, n_dims)
        # One set of argument types whatever the list: one target.
        kernel = indirect.kernel_target(chunk_rows, (*args, 0, 0, self._keep, 0, no_rows),
                                        None)
        with threads(None):
            counts = listed_rows(*args, self._keep, np.empty(0, np.int64), no_rows, kernel)
            starts = np.cumsum(counts) - counts
            out = _row_arrays(letters, int(counts.sum()), n_dims)
            listed_rows(*args, self._keep, starts, out, kernel)
        return dict(zip(KERNEL_LETTERS, out, strict=True))


def _cell_arrays(geometries: SystemCells, system: np.ndarray
                 ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """``((vectors, periodic, system), dual)`` of the kernels: each system's cell vectors
    (B, d, d), periodic axes (B, d) and dual vectors (B, d, d), zero on open axes, as the
    cells hold them stacked."""
    return (geometries.vectors, geometries.periodic, system), geometries.dual


def _changed(built: CellGeometry, now: CellGeometry) -> bool:
    """Whether a system's periodic axes or their vectors changed since its search."""
    return not (np.array_equal(now.periodic, built.periodic)
                and np.array_equal(now.vectors[built.axes], built.vectors[built.axes]))


def _same(value, last) -> bool:
    """Whether a cell or periodicity ``value`` is ``last``, or holds the same values."""
    if value is last:
        return True
    if value is None or last is None:
        return False
    value, last = np.asarray(value), np.asarray(last)
    return value.shape == last.shape and np.array_equal(value, last)


def _changed_ptr(kept, ptr) -> ValueError:
    """The refusal of a ``ptr`` other than the list's."""
    shown = None if kept is None else np.asarray(kept).tolist()
    return ValueError(
        f"`ptr` must stay the offsets the list was given ({shown}) for the list's life; "
        f"got ptr={np.asarray(ptr).tolist()!r:.80}. Make a new list for other systems.")


def _length(radii) -> int:
    """The length of 1-D ``radii``, else 0 (a scalar; `as_radii` refuses the rest)."""
    try:
        return len(radii) if np.ndim(radii) == 1 else 0
    except ValueError:  # ragged nested sequences
        return 0
