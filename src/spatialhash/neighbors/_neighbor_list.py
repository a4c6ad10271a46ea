"""`NeighborList`: the pairs within ``r`` (or within ``radii[i] + radii[j]``) of points
that move, kept between steps with a skin (a Verlet list).

A build runs `Grid.query_pairs` at the reach ``r + skin`` (with radii: ``radii + skin /
2``; a little more, see `REACH_MARGIN`) and keeps those pairs as candidates, with the
positions of that build. Two points have come closer since by at most ``|d_i - d_j|``,
``d`` being the displacements (the minimum image of each on periodic axes), and that is at
most ``|d_i - c| + |d_j - c|`` for any ``c``. So while every displacement lies within
``skin / 2`` of the origin, or of the centre of the box bounding the displacements (a
drift of all the points, as a falling body), no two points have come closer by more than
``skin``, and every pair now within reach is a candidate: an update recomputes the
candidates' distances and keeps those within reach. A larger move rebuilds.

The candidates are kept as rows over the build's cell order, each pair once, in the row
of the point whose scan found it in the build's pair search (`Grid._found_pairs`, the
engine's `GridEngine.found_pairs`: the pairs as positions in the grid's point order, that
order, the points in it and the slabs of rows), with the positions copied into that order
at each update (``_kernels/neighbor_list.py``):
a row's candidates lie in nearby cells, so their positions are read from nearby memory, and
4-byte indices (under 2**31 points) keep the rows a quarter the size of a list of (i, j)
int64 pairs.
An update checks the moves (one pass, a second about the centre when some point moved
beyond ``skin / 2``) and copies the positions; `NeighborList.pairs` keeps the candidates
within reach when asked for, and `NeighborList.for_each_pair` calls a user's function for
them without storing them (`_list_functions.for_each_listed_pair`: each pair once, in
slabs of rows where the build's grid cuts into slabs; else over the rows and their
transposes on every thread, or over the rows on the calling thread). The distances are
computed as the pair
kernels compute them: positions through the same wrapping into the periodic box as `Grid`
(`_validation.grid_points`), the difference per axis, brought to the nearest image on
periodic axes (`cells.min_image`), squared and summed in the order x, y, z, and compared
with ``r * r`` (or ``(radii[i] + radii[j]) ** 2``). So the pairs are those of
``Grid(points, ...).query_pairs(r)`` (or ``query_pairs(radii=radii)``) on the current
positions, exactly, at every step.
"""

from __future__ import annotations

import numpy as np

from .. import _config
from .._results import Pairs
from .._user_functions import pair_function
from .._validation import as_box, as_points, as_positive_scalar, as_radii, grid_points
from ..grid import Grid
from ._kernels.neighbor_list import (
    candidates_within,
    lower_rows,
    moved_beyond,
    positions_in_order,
    rows_of_found_pairs,
)
from ._kernels.neighbor_list_functions import ListState
from ._list_functions import for_each_listed_pair

#: Candidates are found a relative 2**-30 beyond ``r + skin`` (within half a periodic
#: box), so that rounding in the build's distances or in a displacement can never drop a
#: pair that comes within ``r`` (both are exact to about 2**-52 of the coordinates).
REACH_MARGIN = 2.0**-30
#: The radii of a list of pairs within one distance.
_NO_RADII = np.empty(0, dtype=np.float64)


class NeighborList:
    """The pairs within ``r`` (or within ``radii[i] + radii[j]``) of moving points,
    rebuilt only when two points may have come closer by more than ``skin`` since the
    last build.

    Parameters
    ----------
    points : array_like of float, shape (n, d)
        Initial positions, d = 1, 2 or 3.
    r : float, optional
        Distance: pairs with ``distance <= r``, as `Grid.query_pairs`.
    skin : float
        Extra reach of the candidates, >= 0. A larger skin rebuilds less often and
        recomputes more candidates at each update.
    radii : array_like of float, shape (n,), optional
        Instead of ``r``: a radius per point, pairs with ``distance <= radii[i] +
        radii[j]``, as ``Grid.query_pairs(radii=radii)``.
    box, periodic
        Periodic boxes, as in `Grid`; ``r + skin`` (or ``2 * max(radii) + skin``) must be
        at most half of every period.
    n_threads : int, optional
        Threads of the builds, of `pairs` and of `for_each_pair`, as in `Grid`.

    Attributes
    ----------
    n_builds : int
        Builds so far, the first included.

    Notes
    -----
    An update keeps the candidates while every displacement since the build lies within
    ``skin / 2`` of the origin or of the centre of all of them (the box bounding them):
    points that jiggle in place keep their list, and so do points that drift together,
    however far. Otherwise it rebuilds.

    An update only checks the moves and copies the positions; the candidates' distances
    are computed when `pairs` is read or `for_each_pair` runs. Both read every candidate,
    about ``(1 + skin / r) ** 3`` times as many as the pairs (in 3-D), one by one from
    memory, while a new `Grid` and its search read the points of the cells around each
    point, many at a time, and a build costs about a new grid's search at the reach ``r +
    skin``. The list gains where the search is a large part of a step and rebuilds are
    rare; where the search is cheap next to the work ``fn`` does for each pair, it gains
    little. A Lennard-Jones fluid (``r = 2.5``, skin 0.3, ``once=True``, 2 threads,
    ``benchmarks/bench_neighbor_list.py``): forces by the list against a new grid's
    `Grid.for_each_pair` at every step, 1.7-1.8 times faster on the median step with
    4,000 atoms and 1.3 times with 32,000, and 1.4-1.5 and 1.2 times over whole runs,
    rebuilds included; against a list rebuilt at every step, 2.0-2.1 and 1.7 times over
    whole runs. Measure both on your data before choosing the list.

    Examples
    --------
    >>> import numpy as np
    >>> from spatialhash import NeighborList
    >>> rng = np.random.default_rng(0)
    >>> points = rng.random((1000, 3))
    >>> neighbors = NeighborList(points, r=0.1, skin=0.02)
    >>> points = points + rng.normal(0.0, 0.001, points.shape)
    >>> neighbors.update(points)  # every point moved less than skin / 2
    False
    >>> pairs = neighbors.pairs
    """

    def __init__(self, points, r: float | None = None, skin: float | None = None, *,
                 radii=None, box=None, periodic=None, n_threads: int | None = None) -> None:
        coords = as_points(points)
        if (r is None) == (radii is None):
            raise TypeError("give exactly one of `r` (a distance) and `radii` (one per point).")
        if skin is None:
            raise TypeError("give `skin`, the extra reach of the candidates (>= 0).")
        self._skin = as_positive_scalar(skin, "skin", allow_zero=True)
        self._shape = coords.shape
        self._box_argument, self._periodic_argument = box, periodic
        self._box, _ = as_box(box, periodic, coords.shape[1])
        self._half_box = self._box / 2.0
        if radii is None:
            self._r = as_positive_scalar(r, "r", allow_zero=True)
            self._radii = None
            reach, name = self._r, "r + skin"
        else:
            self._r = None
            self._radii = as_radii(radii, "radii", coords.shape[0]).copy()
            reach = 2.0 * float(self._radii.max()) if self._radii.size else 0.0
            name = "2 * max(radii) + skin"
        periods = self._box[np.isfinite(self._box)]
        if periods.size and reach + self._skin > 0.5 * float(periods.min()):
            raise ValueError(
                f"`{name}` must be at most half the periodic box ({0.5 * periods.min()}); "
                f"got {reach + self._skin}.")
        self._n_threads = n_threads
        self.n_builds = 0
        self._build(coords)

    @property
    def r(self) -> float | None:
        """The distance of the pairs (None when they are found by `radii`)."""
        return self._r

    @property
    def radii(self) -> np.ndarray | None:
        """The radius of each point (pairs within ``radii[i] + radii[j]``), or None."""
        return None if self._radii is None else self._radii.copy()

    @property
    def skin(self) -> float:
        """The extra reach of the candidates."""
        return self._skin

    @property
    def pairs(self) -> Pairs:
        """The pairs on the current positions, each once with ``i < j``, with their
        distances: the pairs of ``Grid(points, ...).query_pairs(r, return_distances=True)``
        (or ``query_pairs(radii=radii, ...)``; in another, deterministic order). Found on
        first use after each `update` (an update by itself only checks the moves);
        `for_each_pair` needs none."""
        if self._pairs is None:
            state = self._state
            with _config.threads(self._n_threads):
                indices, distances = candidates_within(
                    state.positions, state.radii, state.order, state.indptr, state.neighbours,
                    state.box, state.half_box, self._r2())
            n = self._shape[0]
            self._pairs = Pairs(indices, distances, (n, n))
        return self._pairs

    def update(self, points) -> bool:
        """Take new positions; returns whether the candidates were rebuilt.

        Parameters
        ----------
        points : array_like of float, shape (n, d)
            The positions now, the same shape as the first ones.

        Returns
        -------
        bool
            True when some point had moved more than ``skin / 2`` since the last build
            (the candidates were found again), False when the candidates were kept.
        """
        coords = as_points(points)
        if coords.shape != self._shape:
            raise ValueError(f"`points` must keep the shape {self._shape} of the first "
                             f"positions; got {coords.shape}.")
        half_skin = 0.5 * self._skin
        with _config.threads(self._n_threads):
            beyond = moved_beyond(coords, self._built_at, self._box, half_skin * half_skin)
        if beyond:
            self._build(coords)
            return True
        wrapped, _, _ = grid_points(coords, self._box)
        self._take_positions(wrapped)
        return False

    def for_each_pair(self, fn, *args, once: bool = False) -> None:
        """Call ``fn(i, j, d2, dx, dy, dz, *args)`` for every pair within reach on the
        current positions, in both orders, on every thread, storing no list.

        Parameters
        ----------
        fn : function compiled with numba's ``njit``
            Called as by `Grid.for_each_pair`: ``i``, ``j`` (int64, ``i != j``), ``d2``
            (float64, the squared distance), ``dx, dy, dz`` (float64, ``points[i] -
            points[j]``, the minimum image on periodic axes, 0 on axes the points lack),
            then ``args``. The pairs are those of `pairs`, with the squared distances and
            differences of ``Grid(points, ...).for_each_pair(r, fn, ...)``, bit for bit.
        *args
            Passed on to ``fn``: arrays, numbers, tuples (what numba compiles).
        once : bool, default False
            Call ``fn`` once for each pair, in one of its orders, as
            `Grid.for_each_pair` does with ``once``: ``fn`` may write rows ``i`` and
            ``j``. Lists whose build's grid has no slabs then run on the calling thread.

        Notes
        -----
        The calls for each ``i`` come in an order fixed by the build (not that of
        `Grid.for_each_pair`), for any thread count: sums into ``out[i]`` are the same,
        bit for bit, for any ``n_threads`` (but may differ from `Grid.for_each_pair`'s in
        the last bits). Each pair is met once and ``fn`` called for ``(i, j)`` then
        ``(j, i)``, on every thread where the build's grid cuts into slabs (as in
        `Grid.for_each_pair`), on the calling thread where it does not and the list has
        fewer than 2,000 points; larger lists without slabs meet each pair from both of
        its rows, on every thread. ``fn`` may write to row ``i`` only: writes to row ``j``
        race. An exception raised in ``fn`` is raised here. Numba compiles the scan anew
        for each ``fn``, as for `Grid.for_each_pair`.

        Examples
        --------
        >>> import numpy as np
        >>> from spatialhash import NeighborList
        >>> points = np.random.default_rng(0).random((1000, 3))
        >>> neighbors = NeighborList(points, r=0.1, skin=0.02)
        >>> from numba import njit
        >>> @njit
        ... def add_force(i, j, d2, dx, dy, dz, forces):
        ...     forces[i, 0] += dx  # a spring pulling i towards j
        ...     forces[i, 1] += dy
        ...     forces[i, 2] += dz
        >>> forces = np.zeros((len(points), 3))
        >>> neighbors.for_each_pair(add_force, forces)
        >>> bool(np.abs(forces.sum(axis=0)).max() < 1e-9)  # equal and opposite
        True
        """
        fn = pair_function(fn)
        for_each_listed_pair(self._state, self._r2(), self._slabs, self._lower_rows,
                             self._n_threads, fn, args, bool(once))

    def _r2(self) -> float:
        """``r * r`` (0 with radii: the kernels take each pair's own distance)."""
        return 0.0 if self._r is None else self._r * self._r

    def _build(self, coords: np.ndarray) -> None:
        periods = self._box[np.isfinite(self._box)]
        if self._radii is None:
            reach = (self._r + self._skin) * (1.0 + REACH_MARGIN)
            if periods.size:  # within half the box (checked at construction for r + skin)
                reach = min(reach, max(self._r + self._skin, 0.5 * float(periods.min())))
            search = {"r": reach}
        else:
            # Pairs within (r_i + skin / 2) + (r_j + skin / 2): every pair within
            # r_i + r_j + skin, with the margin.
            build_radii = (self._radii + 0.5 * self._skin) * (1.0 + REACH_MARGIN)
            if periods.size:  # 2 * max(radii) + skin within half the box (checked)
                build_radii = np.minimum(build_radii, np.maximum(
                    self._radii + 0.5 * self._skin, 0.25 * float(periods.min())))
            search = {"radii": build_radii}
            reach = 2.0 * float(build_radii.max()) if build_radii.size else 0.0
        # Cells as wide as the search's reach.
        grid = Grid(coords, cell_size=reach if reach > 0 else None,
                    box=self._box_argument, periodic=self._periodic_argument,
                    n_threads=self._n_threads)
        found = grid._found_pairs(**search)
        order = found.order
        n = order.shape[0]
        self._slabs = found.slabs
        indptr = np.empty(n + 1, np.int64)
        neighbours = np.empty(found.pairs.shape[0], order.dtype)
        rows_of_found_pairs(found.pairs, indptr, neighbours)
        radii = _NO_RADII if self._radii is None else self._radii[order]
        # The grid's own points, wrapped and in its order: the positions of this build.
        self._state = ListState(found.points, order, indptr, neighbours, self._box,
                                self._half_box, radii)
        self._lower = None
        self._pairs = None
        self._built_at = coords.copy()
        self.n_builds += 1

    def _lower_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows transposed (`lower_rows`), made on first use after each build."""
        if self._lower is None:
            state = self._state
            self._lower = (np.empty_like(state.indptr), np.empty_like(state.neighbours))
            lower_rows(state.indptr, state.neighbours, *self._lower)
        return self._lower

    def _take_positions(self, wrapped: np.ndarray) -> None:
        """The positions ``wrapped`` (through `grid_points`) copied into the cell order;
        the pairs forgotten."""
        with _config.threads(self._n_threads):
            positions_in_order(wrapped, self._state.order, self._state.positions)
        self._pairs = None
