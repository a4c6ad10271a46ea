"""`NeighborList`: the pairs within ``r`` of points that move, kept between steps with a
skin (a Verlet list).

A build runs `Grid.query_pairs` at the reach ``r + skin`` (a little more, see
`REACH_MARGIN`) and keeps those pairs as candidates, with the positions of that build.
While no point has moved more than ``skin / 2`` since (the minimum image of its
displacement on periodic axes), no two points have come closer by more than ``skin``, so
every pair now within ``r`` is a candidate: an update recomputes the candidates'
distances and keeps those within ``r``. A larger move rebuilds.

The distances are computed as the pair kernels compute them
(`_kernels/neighbor_list.candidates_within`): positions through the same wrapping into
the periodic box as `Grid` (`_validation.grid_points`), the difference per axis, brought
to the nearest image on periodic axes (`cells.min_image`), squared and summed in the order
x, y, z, and compared with ``r * r``.
So the pairs are those of ``Grid(points, ...).query_pairs(r)`` on the current positions,
exactly, at every step.
"""

from __future__ import annotations

import numpy as np

from .. import _config
from .._results import Pairs
from .._validation import as_box, as_points, as_positive_scalar, grid_points
from ._grid import Grid
from ._kernels.neighbor_list import candidates_within

#: Candidates are found a relative 2**-30 beyond ``r + skin`` (within half a periodic
#: box), so that rounding in the build's distances or in a displacement can never drop a
#: pair that comes within ``r`` (both are exact to about 2**-52 of the coordinates).
REACH_MARGIN = 2.0**-30


class NeighborList:
    """The pairs within ``r`` of moving points, rebuilt only when a point has moved more
    than ``skin / 2`` since the last build.

    Parameters
    ----------
    points : array_like of float, shape (n, d)
        Initial positions, d = 1, 2 or 3.
    r : float
        Distance: pairs with ``distance <= r``, as `Grid.query_pairs`.
    skin : float
        Extra reach of the candidates, >= 0. A larger skin rebuilds less often and
        recomputes more candidates at each update.
    box, periodic
        Periodic boxes, as in `Grid`; ``r + skin`` must be at most half of every period.
    n_threads : int, optional
        Threads of the builds, as in `Grid`.

    Attributes
    ----------
    pairs : Pairs
        The pairs on the current positions, each once with ``i < j``, with their
        distances: the pairs of ``Grid(points, ...).query_pairs(r, return_distances=True)``
        (in another, deterministic order).
    n_builds : int
        Builds so far, the first included.

    Notes
    -----
    An update reads every candidate, about ``(1 + skin / r) ** 3`` times as many as the
    pairs (in 3-D), while a new `Grid` and its `Grid.query_pairs` read only the points:
    both cost about the same on the development machine (ad hoc, 5,000 to 100,000 uniform
    points, ``skin = 0.3 r``), so measure both on your data before choosing the list.

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

    def __init__(self, points, r: float, skin: float, *, box=None, periodic=None,
                 n_threads: int | None = None) -> None:
        coords = as_points(points)
        self._r = as_positive_scalar(r, "r", allow_zero=True)
        self._skin = as_positive_scalar(skin, "skin", allow_zero=True)
        self._shape = coords.shape
        self._box_argument, self._periodic_argument = box, periodic
        self._box, _ = as_box(box, periodic, coords.shape[1])
        self._half_box = self._box / 2.0
        periods = self._box[np.isfinite(self._box)]
        if periods.size and self._r + self._skin > 0.5 * float(periods.min()):
            raise ValueError(
                f"`r + skin` must be at most half the periodic box ({0.5 * periods.min()}); "
                f"got {self._r + self._skin}.")
        self._n_threads = n_threads
        self.n_builds = 0
        self._build(coords)

    @property
    def r(self) -> float:
        """The distance of the pairs."""
        return self._r

    @property
    def skin(self) -> float:
        """The extra reach of the candidates."""
        return self._skin

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
            (the candidates were found again), False when only the distances of the
            candidates were recomputed.
        """
        coords = as_points(points)
        if coords.shape != self._shape:
            raise ValueError(f"`points` must keep the shape {self._shape} of the first "
                             f"positions; got {coords.shape}.")
        displacement = coords - self._built_at
        for axis in np.flatnonzero(np.isfinite(self._box[: coords.shape[1]])):
            period = self._box[axis]
            column = displacement[:, axis]
            displacement[:, axis] = column - period * np.round(column / period)
        moved = np.einsum("ij,ij->i", displacement, displacement)
        half_skin = 0.5 * self._skin
        if moved.size and moved.max() > half_skin * half_skin:
            self._build(coords)
            return True
        self._keep_within_r(coords)
        return False

    def _build(self, coords: np.ndarray) -> None:
        reach = (self._r + self._skin) * (1.0 + REACH_MARGIN)
        periods = self._box[np.isfinite(self._box)]
        if periods.size:  # within half the box (checked at construction for r + skin)
            reach = min(reach, max(self._r + self._skin, 0.5 * float(periods.min())))
        grid = Grid(coords, cell_size=reach if reach > 0 else None, box=self._box_argument,
                    periodic=self._periodic_argument, n_threads=self._n_threads)
        # The candidates as positions in the grid's cell order (see `candidates_within`).
        self._order = grid.state.order
        rank = np.empty(self._order.shape[0], np.int64)
        rank[self._order] = np.arange(self._order.shape[0])
        self._candidates = rank[grid.query_pairs(reach).indices]
        self._built_at = coords.copy()
        self.n_builds += 1
        self._keep_within_r(coords)

    def _keep_within_r(self, coords: np.ndarray) -> None:
        """``pairs``: the candidates within ``r`` on the positions ``coords``."""
        wrapped, _, _ = grid_points(coords, self._box)
        m = self._candidates.shape[0]
        indices = np.empty((m, 2), dtype=self._order.dtype)
        distances = np.empty(m)
        with _config.threads(self._n_threads):
            n_kept = candidates_within(wrapped, self._order, self._candidates, self._box,
                                       self._half_box, self._r * self._r, indices, distances)
        n = self._shape[0]
        self.pairs = Pairs(indices[:n_kept], distances[:n_kept], (n, n))
