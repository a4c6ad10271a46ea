"""The visit of one cell's pairs in the scan of pairs (`pair_scan.half_stencil_scan`):
each point of the cell against its candidates, the distances in loops LLVM vectorizes, the
hits picked out without a branch, then each hit given to the consumer.

Two visits, both inlined into each kernel of the scan at numba's IR level (no call, and no
reference counting of the arrays they are passed):

- `visit_gathered`: the cell's candidates copied next to each other first (`gather_near`),
  so each point scans one long run, the candidates after it;
- `visit_runs`: the runs of the cell's half stencil one by one, with their image shifts and
  minimum images.

``visitor`` is the scan's constant (`ROWS`, `BOTH_ORDERS` or `ONCE`), passed on so that
numba prunes the other consumers' branches here too: `ROWS`, the rows counted (``write``
false) or written from ``position`` into outputs with room for them (the scan grows
appended outputs before the visit); otherwise the user's ``fn(i, j, d2, dx, dy, dz,
*args)``, and for `BOTH_ORDERS` ``fn(j, i, d2, -dx, -dy, -dz, *args)`` after it. The
arrays are passed one by one and only scalars come back (the new ``position``): a tuple
of arrays built or returned for each cell costs reference counts that numba does not
prune.
"""

from __future__ import annotations

import math

import numpy as np

from ..._config import jit, jit_inline
from ..._kernels.distance import NO_BOX, NO_SHIFT, displacement

#: The consumers of the scan (`pair_scan.half_stencil_scan`).
ROWS, BOTH_ORDERS, ONCE = "rows", "both orders", "once"


@jit_inline
def gather_near(points, order, radii, r2, runs, own_start, own_end, keep_below, near):
    """Copy the points of the runs ``runs = (run_bounds, n_runs)`` that lie within reach of
    the box bounding the points ``own_start .. own_end - 1`` (one cell's) next to each
    other, in the order of the runs, into ``near = (x, y, z, j, radii)``: coordinates,
    original indices (``order``) and, ``radii`` not empty, radii; returns how many. The
    buffers must hold every point of the runs. Within reach: ``sqrt(r2)``, or the cell's
    largest radius plus the point's. Points before ``keep_below`` (the cell's own, for a
    half stencil, whose index arithmetic counts on them) are kept whatever their distance.

    A point left out is no pair of any point of the cell, in floating point too:
    ``|x_i - x_j|`` rounds to at least what the distance to the box's face rounds to
    (rounding is monotone), and so do the squares and sums. On 5,000 uniform points in
    3-D, 54% of the other cells' points were copied (counted).
    """
    run_bounds, n_runs = runs
    near_x, near_y, near_z, near_j, near_radii = near
    with_radii = radii.shape[0] > 0
    lo_x = hi_x = points[0, own_start]
    lo_y = hi_y = points[1, own_start]
    lo_z = hi_z = points[2, own_start]
    largest_radius = 0.0
    for i in range(own_start, own_end):
        lo_x, hi_x = min(lo_x, points[0, i]), max(hi_x, points[0, i])
        lo_y, hi_y = min(lo_y, points[1, i]), max(hi_y, points[1, i])
        lo_z, hi_z = min(lo_z, points[2, i]), max(hi_z, points[2, i])
        if with_radii:
            largest_radius = max(largest_radius, radii[i])
    limit2 = r2
    keep_below = np.uint64(keep_below)
    k = 0
    for r in range(n_runs):
        for j in range(np.uint64(run_bounds[r, 0]), np.uint64(run_bounds[r, 1])):
            px, py, pz = points[0, j], points[1, j], points[2, j]
            near_x[k] = px
            near_y[k] = py
            near_z[k] = pz
            # The original index: read in order here, once per cell, rather than at random
            # for every pair (ad hoc, 5,000 points in 3-D, one thread, order alternated:
            # 9% less time).
            near_j[k] = order[j]
            if with_radii:
                near_radii[k] = radii[j]
                limit = largest_radius + radii[j]
                limit2 = limit * limit
            ex = max(lo_x - px, px - hi_x, 0.0)
            ey = max(lo_y - py, py - hi_y, 0.0)
            ez = max(lo_z - pz, pz - hi_z, 0.0)
            # Written unconditionally, kept only within reach.
            within = ex * ex + ey * ey + ez * ez <= limit2
            k += 1 if within | (j < keep_below) else 0
    return k


@jit
def near_buffers(size):
    """Room for ``size`` gathered candidates: coordinates, original indices and radii."""
    return (np.empty(size, np.float64), np.empty(size, np.float64), np.empty(size, np.float64),
            np.empty(size, np.int64), np.empty(size, np.float64))


@jit
def grown_outputs(indices, distances, needed):
    """Copies of the pair outputs with room for at least ``needed`` rows (doubling)."""
    capacity = max(needed, 2 * indices.shape[0])
    # Element loops, not slice assignment: numba compiles a shape-mismatch error message
    # for every array slice assignment, seconds of cold compile (see `_config.jit`).
    grown_indices = np.empty((capacity, 2), indices.dtype)
    for row in range(indices.shape[0]):
        grown_indices[row, 0] = indices[row, 0]
        grown_indices[row, 1] = indices[row, 1]
    grown_distances = distances
    if distances.shape[0] > 0:
        grown_distances = np.empty(capacity, np.float64)
        for row in range(distances.shape[0]):
            grown_distances[row] = distances[row]
    return grown_indices, grown_distances


@jit_inline
def visit_gathered(state, params, near, hit_index, hit_d2, out_indices, out_distances, cell,
                   visitor, fn, args):
    """Visit the pairs of cell ``a`` with its ``n`` gathered candidates ``near``
    (`gather_near`, the cell's own points first; ``cell = (a, n, position, write,
    as_found, images)``, ``images`` unused): each point ``i`` pairs with the candidates
    after it. ``hit_index`` and ``hit_d2`` hold ``n`` entries."""
    points, order, cell_start = state.points, state.order, state.cell_start
    r2, radii = params[0], params[1]
    with_radii = radii.shape[0] > 0
    near_x, near_y, near_z, near_j, near_radii = near
    a, n_near, position, write, as_found, _ = cell
    want_distances = out_distances.shape[0] > 0
    own_start, own_end = cell_start[a], cell_start[a + 1]
    for i in range(own_start, own_end):
        x, y, z = points[0, i], points[1, i], points[2, i]
        radius = radii[i] if with_radii else 0.0
        k_lo = np.uint64(i - own_start + 1)
        k_hi = np.uint64(n_near)
        n_hits = 0
        if visitor == ROWS and not write:
            # Counting: branch-free, so LLVM vectorizes it.
            if with_radii:
                for k in range(k_lo, k_hi):
                    d2 = displacement(x, y, z, near_x[k], near_y[k], near_z[k], NO_SHIFT,
                                      NO_BOX, NO_BOX, False)[3]
                    limit = radius + near_radii[k]
                    if d2 <= limit * limit:
                        n_hits += 1
            else:
                for k in range(k_lo, k_hi):
                    d2 = displacement(x, y, z, near_x[k], near_y[k], near_z[k], NO_SHIFT,
                                      NO_BOX, NO_BOX, False)[3]
                    if d2 <= r2:
                        n_hits += 1
            position += n_hits
            continue
        # The distances in a loop LLVM vectorizes, then the hits picked out without a
        # branch (no test-and-branch to mispredict around every hit).
        for k in range(k_lo, k_hi):
            hit_d2[k] = displacement(x, y, z, near_x[k], near_y[k], near_z[k], NO_SHIFT,
                                     NO_BOX, NO_BOX, False)[3]
        if with_radii:
            for k in range(k_lo, k_hi):
                limit = radius + near_radii[k]
                hit_index[n_hits] = k
                n_hits += 1 if hit_d2[k] <= limit * limit else 0
        else:
            for k in range(k_lo, k_hi):
                hit_index[n_hits] = k
                n_hits += 1 if hit_d2[k] <= r2 else 0
        if visitor == ROWS:
            oi = order[i]
            for h in range(n_hits):
                k = hit_index[h]
                oj = near_j[k]
                out_indices[position + h, 0] = oi if as_found else min(oi, oj)
                out_indices[position + h, 1] = oj if as_found else max(oi, oj)
                if want_distances:
                    out_distances[position + h] = math.sqrt(hit_d2[k])
            position += n_hits
        else:
            oi = np.int64(order[i])
            for h in range(n_hits):
                k = hit_index[h]
                oj, d2 = near_j[k], hit_d2[k]
                dx, dy, dz, _ = displacement(x, y, z, near_x[k], near_y[k], near_z[k],
                                             NO_SHIFT, NO_BOX, NO_BOX, False)
                fn(oi, oj, d2, dx, dy, dz, *args)
                if visitor == BOTH_ORDERS:
                    fn(oj, oi, d2, -dx, -dy, -dz, *args)
    return position


@jit_inline
def visit_runs(state, params, run_bounds, run_shifts, hit_index, hit_d2, out_indices,
               out_distances, cell, visitor, fn, args):
    """Visit the pairs of cell ``a`` with the ``n`` runs of its half stencil one by one
    (``cell = (a, n, position, write, as_found, images)``), run 0 starting at cell ``a``:
    each point ``i`` pairs with the points after it there. ``images = (box3, half3,
    use_min_image)``: minimum images per pair on whole periodic axes. ``hit_index`` and
    ``hit_d2`` hold as many entries as the runs' points."""
    points, order, cell_start = state.points, state.order, state.cell_start
    r2, radii = params[0], params[1]
    with_radii = radii.shape[0] > 0
    a, n_runs, position, write, as_found, images = cell
    box3, half3, use_min_image = images
    want_distances = out_distances.shape[0] > 0
    for i in range(cell_start[a], cell_start[a + 1]):
        x, y, z = points[0, i], points[1, i], points[2, i]
        radius = radii[i] if with_radii else 0.0
        n_hits = 0
        for r in range(n_runs):
            # Unsigned bounds: see the `cells` docstring.
            start = np.uint64(i + 1 if r == 0 else run_bounds[r, 0])
            end = np.uint64(run_bounds[r, 1])
            shift = (run_shifts[r, 0], run_shifts[r, 1], run_shifts[r, 2])
            if visitor == ROWS and not write and not use_min_image:
                # Counting: branch-free, so LLVM vectorizes it.
                if with_radii:
                    for j in range(start, end):
                        d2 = displacement(x, y, z, points[0, j], points[1, j], points[2, j],
                                          shift, NO_BOX, NO_BOX, False)[3]
                        limit = radius + radii[j]
                        if d2 <= limit * limit:
                            n_hits += 1
                else:
                    for j in range(start, end):
                        d2 = displacement(x, y, z, points[0, j], points[1, j], points[2, j],
                                          shift, NO_BOX, NO_BOX, False)[3]
                        if d2 <= r2:
                            n_hits += 1
                continue
            for j in range(start, end):
                d2 = displacement(x, y, z, points[0, j], points[1, j], points[2, j], shift,
                                  box3, half3, use_min_image)[3]
                if with_radii:
                    limit = radius + radii[j]
                    hit = d2 <= limit * limit
                else:
                    hit = d2 <= r2
                # Written unconditionally, kept only on a hit: no branch to mispredict.
                hit_index[n_hits] = j
                hit_d2[n_hits] = d2
                n_hits += 1 if hit else 0
            if visitor != ROWS:
                # Called run by run: the differences need the run's shift.
                oi = np.int64(order[i])
                for h in range(n_hits):
                    j = hit_index[h]
                    dx, dy, dz, _ = displacement(x, y, z, points[0, j], points[1, j],
                                                 points[2, j], shift, box3, half3,
                                                 use_min_image)
                    oj = np.int64(order[j])
                    fn(oi, oj, hit_d2[h], dx, dy, dz, *args)
                    if visitor == BOTH_ORDERS:
                        fn(oj, oi, hit_d2[h], -dx, -dy, -dz, *args)
                n_hits = 0
        if visitor == ROWS:
            if write:
                oi = order[i]
                for h in range(n_hits):
                    oj = order[hit_index[h]]
                    out_indices[position + h, 0] = oi if as_found else min(oi, oj)
                    out_indices[position + h, 1] = oj if as_found else max(oi, oj)
                    if want_distances:
                        out_distances[position + h] = math.sqrt(hit_d2[h])
            position += n_hits
    return position
