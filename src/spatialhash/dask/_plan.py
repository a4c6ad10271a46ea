"""The tile plan: rectangles that cover space, each holding about as many points as one
worker's memory allows, and the rule that sends each point to its tiles.

The plan is a k-d tree cut at weighted medians of a deterministic sample (evenly spaced
rows of every partition, each weighted by the rows it stands for), so the same data and
the same target give the same plan on every run. A node is cut along the axis where its
sample spreads most, until the rows it stands for fit the target; a dense cluster is
therefore cut into more, smaller tiles, and a node whose sample holds one position only
(duplicates) stays one tile whatever its size.

A point's *home* is the one tile whose half-open rectangle holds it (``x < cut`` goes
left). Its *memberships* are every tile whose rectangle grown by the search's reach (the
*margin*) holds it: the home and the tiles where it is a *ghost*. The margin is the reach
widened by a relative 2**-20 and by eight units in the last place of the largest cut, so
rounding can only add ghosts, never lose one: a pair within the reach has its points at
most the reach apart on each axis, and one of them is at home in the tile. On a periodic
axis a point near an end is also tried at its image one period away, so tiles at the two
ends see each other's points; a tile that spans a periodic axis whole gets each point once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._kernels.cells import N_AXES
from .._validation import wrap_into_box

#: Rows of the sample taken over the whole data set (about; each partition gives at
#: least one row when it has any).
SAMPLE_ROWS = 200_000


@dataclass(frozen=True)
class Survey:
    """What one pass over the data tells the plan.

    Attributes
    ----------
    lengths : ndarray of int64
        Rows per partition; ``offsets`` are their running sums (global row numbers).
    sample : ndarray (s, d)
        Evenly spaced rows of every partition; ``weights`` the rows each stands for.
    max_radius : float
        The largest radius (0 without radii).
    scale : float
        The largest coordinate magnitude.
    """

    lengths: np.ndarray
    sample: np.ndarray
    weights: np.ndarray
    max_radius: float
    scale: float

    @property
    def n_rows(self) -> int:
        return int(self.lengths.sum())

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate(([0], np.cumsum(self.lengths)[:-1])).astype(np.int64)


def block_summary(block, quota: int) -> tuple:
    """Rows, an evenly spaced sample of at most ``quota`` rows, the rows each sampled row
    stands for, the largest radius and the largest coordinate magnitude of one block."""
    coords = block.coords
    m = coords.shape[0]
    take = min(m, max(quota, 1))
    rows = np.linspace(0, m - 1, take).astype(np.int64) if take else np.zeros(0, np.int64)
    max_radius = float(block.radii.max()) if block.radii is not None and m else 0.0
    scale = float(np.abs(coords).max()) if m else 0.0
    return m, coords[rows], np.full(take, m / take if take else 0.0), max_radius, scale


def survey(source) -> Survey:
    """One pass over ``source``: lengths, the sample, the largest radius and magnitude."""
    import dask
    from dask import delayed

    quota = max(1, SAMPLE_ROWS // max(len(source.parts), 1))
    summarize = delayed(block_summary, pure=True)
    results = dask.compute(*[summarize(part, quota) for part in source.parts])
    d = source.n_dims
    samples = [r[1] for r in results] or [np.zeros((0, d))]
    return Survey(
        lengths=np.array([r[0] for r in results], dtype=np.int64),
        sample=np.concatenate(samples).reshape(-1, d),
        weights=np.concatenate([r[2] for r in results] or [np.zeros(0)]),
        max_radius=max([r[3] for r in results], default=0.0),
        scale=max([r[4] for r in results], default=0.0),
    )


def padded(coords: np.ndarray, box: np.ndarray) -> np.ndarray:
    """(m, 3) float64 copy with periodic axes wrapped into the box, as the grid wraps them."""
    points3 = np.zeros((coords.shape[0], N_AXES))
    points3[:, :coords.shape[1]] = coords
    return wrap_into_box(points3, box)


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, cumulative[-1] / 2)])


@dataclass(frozen=True)
class TilePlan:
    """A k-d tree of tiles.

    Attributes
    ----------
    axis, cut : ndarray
        Per internal node: the axis and the position of its cut.
    left, right : ndarray of int64
        Per internal node: a child node (``>= 0``) or a tile (``-1 - tile``).
    root : int
        The root node, or ``-1`` when the plan is one tile.
    lower, upper : ndarray (n_tiles, 3)
        Each tile's half-open rectangle (``-inf``/``inf`` on the outside of open axes,
        ``0``/``box`` on periodic ones).
    box : ndarray (3,)
        The period of each axis, ``inf`` where open.
    """

    axis: np.ndarray
    cut: np.ndarray
    left: np.ndarray
    right: np.ndarray
    root: int
    lower: np.ndarray
    upper: np.ndarray
    box: np.ndarray

    @property
    def n_tiles(self) -> int:
        return self.lower.shape[0]

    def margin(self, reach: float) -> float:
        """The reach widened so that rounding can add ghosts but never lose one."""
        finite = np.concatenate((self.cut, self.box[np.isfinite(self.box)], [1.0]))
        return reach * (1.0 + 2.0 ** -20) + 8.0 * float(np.spacing(np.abs(finite).max()))

    def home(self, points3: np.ndarray) -> np.ndarray:
        """The home tile of each row of ``points3`` (wrapped into the box), int64."""
        tiles = np.zeros(points3.shape[0], dtype=np.int64)
        if self.root < 0:
            return tiles
        rows = np.arange(points3.shape[0])
        node = np.full(points3.shape[0], self.root, dtype=np.int64)
        while rows.size:
            go_left = points3[rows, self.axis[node]] < self.cut[node]
            child = np.where(go_left, self.left[node], self.right[node])
            done = child < 0
            tiles[rows[done]] = -1 - child[done]
            rows, node = rows[~done], child[~done]
        return tiles

    def memberships(self, points3: np.ndarray, margin) -> tuple[np.ndarray, np.ndarray]:
        """Every (row, tile) with row's point inside tile's rectangle grown by ``margin``
        (a scalar or one per row), each pair once, sorted by row then tile."""
        n = points3.shape[0]
        if self.root < 0:
            return np.arange(n), np.zeros(n, dtype=np.int64)
        margins = np.broadcast_to(np.asarray(margin, dtype=np.float64), (n,))
        rows = np.arange(n)
        positions = points3
        # On a periodic axis, also try each point's image one period away when it lies
        # within the margin of an end (images of images reach the corners).
        for axis in np.flatnonzero(np.isfinite(self.box)):
            length = self.box[axis]
            x = positions[:, axis]
            below = np.flatnonzero(x < margins[rows])
            above = np.flatnonzero(x > length - margins[rows])
            shifted_below = positions[below].copy()
            shifted_below[:, axis] += length
            shifted_above = positions[above].copy()
            shifted_above[:, axis] -= length
            positions = np.concatenate((positions, shifted_below, shifted_above))
            rows = np.concatenate((rows, rows[below], rows[above]))
        found_rows, found_tiles = [], []
        copy = np.arange(rows.size)
        node = np.full(rows.size, self.root, dtype=np.int64)
        while copy.size:
            x = positions[copy, self.axis[node]]
            m = margins[rows[copy]]
            go_left = x < self.cut[node] + m
            go_right = x >= self.cut[node] - m
            copy = np.concatenate((copy[go_left], copy[go_right]))
            child = np.concatenate((self.left[node][go_left], self.right[node][go_right]))
            done = child < 0
            found_rows.append(rows[copy[done]])
            found_tiles.append(-1 - child[done])
            copy, node = copy[~done], child[~done]
        found_rows = np.concatenate(found_rows)
        found_tiles = np.concatenate(found_tiles)
        key = np.unique(found_rows * self.n_tiles + found_tiles)
        return key // self.n_tiles, key % self.n_tiles


def plan_tiles(sample: np.ndarray, weights: np.ndarray, box: np.ndarray,
               rows_per_tile: float, reach: float = 0.0) -> TilePlan:
    """Cut the sample's space into tiles of about ``rows_per_tile`` rows each.

    Parameters
    ----------
    sample : ndarray (s, d)
        Sampled coordinates (any real values; periodic axes are wrapped here).
    weights : ndarray (s,)
        Rows each sampled row stands for.
    box : ndarray (3,)
        Periods, ``inf`` on open axes.
    rows_per_tile : float
        The most rows a tile should hold, ghosts included.
    reach : float
        The search's reach: a tile's ghosts are estimated as if the density inside it
        continued a reach beyond it. A cut that would not make the halves' rows, ghosts
        included, smaller than nine tenths of the whole is not made (a tile narrower than
        the reach gains nothing by being cut), so where the points are so dense that a
        reach-wide tile holds more than ``rows_per_tile``, tiles stay larger.
    """
    points3 = padded(sample, box)
    n_dims = sample.shape[1]
    axes, cuts, lefts, rights = [], [], [], []
    lower: list[np.ndarray] = []
    upper: list[np.ndarray] = []
    start_lower = np.where(np.isfinite(box), 0.0, -np.inf)
    start_upper = np.where(np.isfinite(box), box, np.inf)

    def with_ghosts(home: float, widths: np.ndarray) -> float:
        if reach <= 0:
            return home
        # A node no wider than the reach on an axis counts as that wide (its points all
        # at one position there would otherwise make the estimate infinite).
        return home * float(np.prod(1.0 + 2.0 * reach / np.maximum(widths, reach)))

    def split(rows: np.ndarray, low: np.ndarray, high: np.ndarray) -> int:
        """Return the node made of ``rows`` (>= 0) or the tile (``-1 - tile``)."""
        cut_axis, cut = None, None
        home = float(weights[rows].sum())
        if rows.size > 1:
            spread = np.ptp(points3[rows, :n_dims], axis=0)
            widths = np.minimum((high - low)[:n_dims], spread)
            rows_held = with_ghosts(home, widths)
            for axis in np.argsort(-spread, kind="stable"):
                if spread[axis] <= 0 or rows_held <= rows_per_tile:
                    break
                halves = widths.copy()
                halves[axis] /= 2
                if with_ghosts(home / 2, halves) > 0.9 * rows_held:
                    break  # narrower than the reach: cutting adds ghosts, not room
                values = points3[rows, axis]
                median = _weighted_median(values, weights[rows])
                if median <= values.min():  # nothing would go left: cut above the lowest
                    median = float(np.min(values[values > values.min()]))
                cut_axis, cut = int(axis), median
                break
        if cut_axis is None:
            lower.append(low)
            upper.append(high)
            return -len(lower)  # -1 - (len(lower) - 1)
        node = len(axes)
        axes.append(cut_axis)
        cuts.append(cut)
        lefts.append(0)
        rights.append(0)
        goes_left = points3[rows, cut_axis] < cut
        left_high, right_low = high.copy(), low.copy()
        left_high[cut_axis] = cut
        right_low[cut_axis] = cut
        lefts[node] = split(rows[goes_left], low, left_high)
        rights[node] = split(rows[~goes_left], right_low, high)
        return node

    root = split(np.arange(points3.shape[0]), start_lower, start_upper)
    return TilePlan(
        axis=np.array(axes, dtype=np.int64), cut=np.array(cuts, dtype=np.float64),
        left=np.array(lefts, dtype=np.int64), right=np.array(rights, dtype=np.int64),
        root=root if root >= 0 else -1,
        lower=np.array(lower).reshape(-1, N_AXES), upper=np.array(upper).reshape(-1, N_AXES),
        box=box.copy(),
    )
