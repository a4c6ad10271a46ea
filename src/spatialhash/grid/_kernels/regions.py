"""The pair search's work split: per-point radii in the grid's order, regions of cells of
about equal point counts, and the rows each region reserves for its pairs
(``grid/_pair_search.py`` calls them around the scan of ``pairs.py``)."""

from __future__ import annotations

import math

import numpy as np

from ..._config import jit


@jit
def sorted_radii(radii, order):
    """``radii[order]``, the largest radius (0 for none), and whether every radius is
    finite and >= 0, in one pass."""
    n = order.shape[0]
    out = np.empty(n, np.float64)
    largest = 0.0
    valid = True
    for s in range(n):
        value = radii[order[s]]
        out[s] = value
        largest = max(largest, value)
        valid &= (value >= 0.0) & (value < np.inf)
    return out, largest, valid


@jit
def split_regions(cell_start, n_regions):
    """Cells that bound about ``n_regions`` runs of cells of equal point counts:
    ``region_cells`` rises strictly from 0 to the number of occupied cells, region ``k``
    being cells ``region_cells[k]`` to ``region_cells[k + 1] - 1``. Compiled, since the
    NumPy version (a search, a linspace, a unique) cost a call as much as a large part of
    the search it serves at a few thousand points."""
    n_occupied = cell_start.shape[0] - 1
    n_points = cell_start[n_occupied]
    bounds = np.empty(n_regions + 1, np.int64)
    bounds[0] = 0
    n_bounds = 1
    for k in range(1, n_regions):
        cell = np.searchsorted(cell_start, k * n_points / n_regions)
        if bounds[n_bounds - 1] < cell < n_occupied:
            bounds[n_bounds] = cell
            n_bounds += 1
    if n_occupied > 0:
        bounds[n_bounds] = n_occupied
        n_bounds += 1
    return bounds[:n_bounds].copy()


@jit
def region_rows(region_cells, cell_start, estimates, per_point, margin, slack):
    """First row of each region's rows, and the total at the end, shape (n_regions + 1,):
    ``margin`` times its estimate plus ``slack`` rows per region, the estimate being
    ``estimates[k]``, or ``per_point`` rows per point when ``estimates`` is empty."""
    n_regions = region_cells.shape[0] - 1
    rows = np.empty(n_regions + 1, np.int64)
    rows[0] = 0
    for k in range(n_regions):
        if estimates.shape[0] > 0:
            estimate = estimates[k]
        else:
            estimate = per_point * (cell_start[region_cells[k + 1]] - cell_start[region_cells[k]])
        rows[k + 1] = rows[k] + np.int64(math.ceil(margin * estimate)) + slack
    return rows
