"""Numba kernels of the cloth demo: one XPBD substep in pieces, and the contact bookkeeping.

Arrays and scalars in, arrays out; no validation. Positions are C-contiguous (n, 3) float64,
particle indices int64 (pairs as the grid returns them). Hot loops read indices as unsigned:
with a signed index numba must allow Python's negative wrap-around on every access, which
cost about a quarter of the constraint pass here (see also ``spatialhash._kernels.cells``).
Every solver loop is sequential Gauss-Seidel, as in Mueller's demo.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from .._config import jit, jit_parallel


@jit
def predict(positions, previous, velocities, inverse_mass, gravity, dt, max_speed, ground,
            ground_friction, update_first):
    """Explicit step under gravity (-z) with speeds clamped to ``max_speed``, then the ground.

    With ``update_first``, the velocities are first taken from the displacement since
    ``previous`` (`update_velocities` of the substep before, in the same pass over the
    particles). ``previous`` then receives the positions before the step; pinned particles
    (inverse mass 0) stay where they are. A particle that ends below height ``ground`` is
    put back on it and loses ``ground_friction`` (0..1) of its sideways motion in this
    substep: with 1 it sticks, which lets the cloth pile up instead of sliding away.
    """
    max_speed2 = max_speed * max_speed
    inverse_dt = 1.0 / dt
    for i in range(positions.shape[0]):
        for axis in range(3):
            if update_first:
                velocities[i, axis] = (positions[i, axis] - previous[i, axis]) * inverse_dt
            previous[i, axis] = positions[i, axis]
        if inverse_mass[i] == 0.0:
            continue
        velocities[i, 2] -= gravity * dt
        speed2 = velocities[i, 0] ** 2 + velocities[i, 1] ** 2 + velocities[i, 2] ** 2
        if speed2 > max_speed2:
            scale = max_speed / math.sqrt(speed2)
            for axis in range(3):
                velocities[i, axis] *= scale
        for axis in range(3):
            positions[i, axis] += velocities[i, axis] * dt
        if positions[i, 2] < ground:
            for axis in range(2):
                positions[i, axis] -= ground_friction * (positions[i, axis] - previous[i, axis])
            positions[i, 2] = ground


@jit
def solve_distances(positions, constraints, rest_lengths, share_a, share_b):
    """One XPBD pass over distance constraints, in order (Gauss-Seidel).

    With one iteration per substep the multiplier starts from zero every time, so the
    update moves particle ``a`` by ``share_a * (rest - length) / length`` times the
    difference vector, with ``share_a = w_a / (w_a + w_b + compliance / dt**2)`` computed
    once ("small steps", Macklin et al. 2019). The caller orders the constraints so that
    neighbours in the list share no particle (the processor then overlaps their square
    roots and divisions instead of waiting on the previous constraint's result), in bands
    that `solve_distances_parallel` runs on several threads.
    """
    for k in range(constraints.shape[0]):
        a = np.uint64(constraints[k, 0])
        b = np.uint64(constraints[k, 1])
        dx = positions[a, 0] - positions[b, 0]
        dy = positions[a, 1] - positions[b, 1]
        dz = positions[a, 2] - positions[b, 2]
        length = math.sqrt(dx * dx + dy * dy + dz * dz)
        if length == 0.0:
            continue
        step = (rest_lengths[k] - length) / length
        wa = step * share_a[k]
        wb = step * share_b[k]
        positions[a, 0] += wa * dx
        positions[a, 1] += wa * dy
        positions[a, 2] += wa * dz
        positions[b, 0] -= wb * dx
        positions[b, 1] -= wb * dy
        positions[b, 2] -= wb * dz


@jit_parallel
def solve_distances_parallel(positions, constraints, rest_lengths, share_a, share_b,
                             band_start, n_first):
    """`solve_distances` on all threads, band by band: band ``m`` is constraints
    ``band_start[m]`` to ``band_start[m + 1] - 1``, and no two of the first ``n_first``
    bands share a particle, nor do two of the others (`_cloth_grid.grid_constraints` orders
    the constraints so). So the first bands run at once, each in order, then the others; the
    sequential kernel meets the constraints in the same order, and the result is the same,
    bit for bit, on any number of threads. Two parallel regions a pass rather than one per
    group of constraints that share no particle: ad hoc, 100 x 100, 19% less time a pass.

    Each band is one call of `solve_distances` on its slice of the constraints: a call
    per band, not per constraint (called per constraint, even inlined with numba's
    ``inline="always"``, the update ran ten to fourteen times slower on the 59,000
    constraints of 100 x 100)."""
    bounds = (0, n_first, band_start.shape[0] - 1)
    for phase in range(2):
        lo, hi = bounds[phase], bounds[phase + 1]
        for m in prange(lo, hi):
            first, end = band_start[m], band_start[m + 1]
            solve_distances(positions, constraints[first:end], rest_lengths[first:end],
                            share_a[first:end], share_b[first:end])


@jit
def solve_contacts(positions, previous, inverse_mass, pairs, thickness, friction, touching):
    """Push every listed pair closer than ``thickness`` apart, to exactly ``thickness``.

    Two passes: the first finds the listed pairs that touch, without branches (most of
    the list does not touch, and skipping pair by pair cost more in mispredicted branches
    than the arithmetic; ``touching`` is a buffer as long as ``pairs``); the second
    separates them in order (Gauss-Seidel), each with its distance at that moment. A pair
    pushed into contact by the second pass waits for the next substep.

    ``friction`` (0..1) moves both particles' motion in this substep towards their common
    (mass-weighted) motion, which conserves momentum. Pairs at distance zero have no
    direction to push along and are skipped, as in Mueller's demo; jittered initial
    positions make them vanishingly rare.
    """
    thickness2 = thickness * thickness
    n_touching = 0
    for k in range(pairs.shape[0]):
        a = np.uint64(pairs[k, 0])
        b = np.uint64(pairs[k, 1])
        dx = positions[b, 0] - positions[a, 0]
        dy = positions[b, 1] - positions[a, 1]
        dz = positions[b, 2] - positions[a, 2]
        touching[n_touching] = k
        n_touching += dx * dx + dy * dy + dz * dz < thickness2
    for index in range(n_touching):
        k = touching[index]
        a = np.uint64(pairs[k, 0])
        b = np.uint64(pairs[k, 1])
        dx = positions[b, 0] - positions[a, 0]
        dy = positions[b, 1] - positions[a, 1]
        dz = positions[b, 2] - positions[a, 2]
        distance2 = dx * dx + dy * dy + dz * dz
        if distance2 >= thickness2 or distance2 == 0.0:
            continue
        wa = inverse_mass[a]
        wb = inverse_mass[b]
        weight = wa + wb
        if weight == 0.0:
            continue
        distance = math.sqrt(distance2)
        scale = (thickness - distance) / (distance * weight)
        positions[a, 0] -= scale * wa * dx
        positions[a, 1] -= scale * wa * dy
        positions[a, 2] -= scale * wa * dz
        positions[b, 0] += scale * wb * dx
        positions[b, 1] += scale * wb * dy
        positions[b, 2] += scale * wb * dz
        if friction == 0.0:
            continue
        share_a = friction * wa / weight
        share_b = friction * wb / weight
        for axis in range(3):
            # Each particle moves towards the common motion by its share of the weight.
            relative = (positions[b, axis] - previous[b, axis]) - (
                positions[a, axis] - previous[a, axis]
            )
            positions[a, axis] += share_a * relative
            positions[b, axis] -= share_b * relative


@jit
def update_velocities(positions, previous, velocities, dt):
    """Velocities from the substep's displacement (the PBD velocity update)."""
    inverse_dt = 1.0 / dt
    for i in range(positions.shape[0]):
        for axis in range(3):
            velocities[i, axis] = (positions[i, axis] - previous[i, axis]) * inverse_dt


@jit
def spreads_of_displacements(positions, reference_a, reference_b, centres, spreads):
    """Bounds on how far the particles have moved relative to each other since two
    references, both in one pass.

    With ``d_i`` the displacement since a reference, any centre ``c`` gives
    ``|d_i - d_j| <= 2 max_i |d_i - c|`` for every pair: a rigid drift of the whole cloth
    (falling) does not count, only motion of particles relative to each other does. The
    centre that makes the bound smallest is about that of the displacements' bounding
    box, which a second pass would need. So ``centres[0]`` (for ``reference_a``) and
    ``centres[1]`` hold the centres of the previous call's bounding boxes (zeros for a
    new reference): they move little between substeps. ``spreads[0]`` and ``spreads[1]``
    receive the bounds, and ``centres`` this call's bounding-box centres for the next.
    """
    spreads[0] = spreads[1] = 0.0
    n = positions.shape[0]
    if n == 0:
        return
    # Scalars rather than small arrays, so that the loop keeps them in registers (ad hoc,
    # 10,000 particles, separate runs: 22% less time).
    ca_x, ca_y, ca_z = centres[0, 0], centres[0, 1], centres[0, 2]
    cb_x, cb_y, cb_z = centres[1, 0], centres[1, 1], centres[1, 2]
    low_ax = low_ay = low_az = low_bx = low_by = low_bz = np.inf
    high_ax = high_ay = high_az = high_bx = high_by = high_bz = -np.inf
    largest_a = largest_b = 0.0
    for i in range(n):
        x, y, z = positions[i, 0], positions[i, 1], positions[i, 2]
        dax = x - reference_a[i, 0]
        day = y - reference_a[i, 1]
        daz = z - reference_a[i, 2]
        dbx = x - reference_b[i, 0]
        dby = y - reference_b[i, 1]
        dbz = z - reference_b[i, 2]
        low_ax, high_ax = min(low_ax, dax), max(high_ax, dax)
        low_ay, high_ay = min(low_ay, day), max(high_ay, day)
        low_az, high_az = min(low_az, daz), max(high_az, daz)
        low_bx, high_bx = min(low_bx, dbx), max(high_bx, dbx)
        low_by, high_by = min(low_by, dby), max(high_by, dby)
        low_bz, high_bz = min(low_bz, dbz), max(high_bz, dbz)
        largest_a = max(largest_a, (dax - ca_x) ** 2 + (day - ca_y) ** 2 + (daz - ca_z) ** 2)
        largest_b = max(largest_b, (dbx - cb_x) ** 2 + (dby - cb_y) ** 2 + (dbz - cb_z) ** 2)
    spreads[0] = math.sqrt(largest_a)
    spreads[1] = math.sqrt(largest_b)
    centres[0, 0], centres[0, 1], centres[0, 2] = (
        0.5 * (low_ax + high_ax), 0.5 * (low_ay + high_ay), 0.5 * (low_az + high_az))
    centres[1, 0], centres[1, 1], centres[1, 2] = (
        0.5 * (low_bx + high_bx), 0.5 * (low_by + high_by), 0.5 * (low_bz + high_bz))


@jit
def pairs_within(positions, pairs, reach, kept):
    """Copy the pairs closer than ``reach`` now to the front of ``kept`` (as long as
    ``pairs``), branch-free as in `solve_contacts`; returns how many there are."""
    reach2 = reach * reach
    n_kept = 0
    for k in range(pairs.shape[0]):
        a = np.uint64(pairs[k, 0])
        b = np.uint64(pairs[k, 1])
        dx = positions[b, 0] - positions[a, 0]
        dy = positions[b, 1] - positions[a, 1]
        dz = positions[b, 2] - positions[a, 2]
        kept[n_kept, 0] = pairs[k, 0]
        kept[n_kept, 1] = pairs[k, 1]
        n_kept += dx * dx + dy * dy + dz * dz < reach2
    return n_kept


@jit_parallel
def pairs_within_parallel(positions, pairs, reach, kept, n_chunks):
    """`pairs_within` on every thread, with the same output: chunk ``k`` of the pairs
    keeps its pairs in the same rows of ``kept`` as it reads, then the chunks' rows are
    moved down after one another (see `split_contacts_parallel`)."""
    bounds = chunk_bounds(pairs.shape[0], n_chunks)
    counts = np.empty(n_chunks, np.int64)
    for k in prange(n_chunks):
        lo, hi = bounds[k], bounds[k + 1]
        counts[k] = pairs_within(positions, pairs[lo:hi], reach, kept[lo:hi])
    n_kept = counts[0]
    for k in range(1, n_chunks):
        move_rows_down(kept, bounds[k], n_kept, counts[k])
        n_kept += counts[k]
    return n_kept


@jit
def chunk_bounds(n, n_chunks):
    """Bounds of ``n_chunks`` chunks of ``n`` items as equal as can be, shape (n_chunks + 1,)."""
    bounds = np.empty(n_chunks + 1, np.int64)
    for k in range(n_chunks + 1):
        bounds[k] = n * k // n_chunks
    return bounds


@jit
def move_rows_down(rows, source, target, count):
    """Rows ``source .. source + count - 1`` of the (m, 2) ``rows`` to ``target <= source``
    on (in order, so that overlapping ranges move correctly)."""
    for row in range(count):
        rows[target + row, 0] = rows[source + row, 0]
        rows[target + row, 1] = rows[source + row, 1]


@jit
def split_contacts(positions, pairs, rows, columns, spacing, rest_distance, reach, outer,
                   inner):
    """`far_in_rest` and then `pairs_within` in one pass: the pairs farther apart than
    ``rest_distance`` in the rest cloth go to the front of ``outer``, those of them also
    closer than ``reach`` now to the front of ``inner`` (both as long as ``pairs``), in
    order. Returns both counts."""
    limit2 = rest_distance * rest_distance
    spacing2 = spacing * spacing
    reach2 = reach * reach
    n_outer = 0
    n_inner = 0
    for k in range(pairs.shape[0]):
        a = np.uint64(pairs[k, 0])
        b = np.uint64(pairs[k, 1])
        di = float(rows[a] - rows[b])
        dj = float(columns[a] - columns[b])
        far = (di * di + dj * dj) * spacing2 > limit2
        dx = positions[b, 0] - positions[a, 0]
        dy = positions[b, 1] - positions[a, 1]
        dz = positions[b, 2] - positions[a, 2]
        outer[n_outer, 0] = inner[n_inner, 0] = pairs[k, 0]
        outer[n_outer, 1] = inner[n_inner, 1] = pairs[k, 1]
        n_outer += far
        n_inner += far & (dx * dx + dy * dy + dz * dz < reach2)
    return n_outer, n_inner


@jit_parallel
def split_contacts_parallel(positions, pairs, rows, columns, spacing, rest_distance, reach,
                            outer, inner, n_chunks):
    """`split_contacts` on every thread, with the same outputs: chunk ``k`` of the pairs
    splits into the same rows of ``outer`` and ``inner`` as it reads, and the chunks' rows
    are then moved down after one another (a move to lower rows never overwrites rows
    not yet moved). Returns both counts."""
    bounds = chunk_bounds(pairs.shape[0], n_chunks)
    counts = np.empty((n_chunks, 2), np.int64)
    for k in prange(n_chunks):
        lo, hi = bounds[k], bounds[k + 1]
        counts[k, 0], counts[k, 1] = split_contacts(
            positions, pairs[lo:hi], rows, columns, spacing, rest_distance, reach,
            outer[lo:hi], inner[lo:hi])
    n_outer = counts[0, 0]
    n_inner = counts[0, 1]
    for k in range(1, n_chunks):
        move_rows_down(outer, bounds[k], n_outer, counts[k, 0])
        move_rows_down(inner, bounds[k], n_inner, counts[k, 1])
        n_outer += counts[k, 0]
        n_inner += counts[k, 1]
    return n_outer, n_inner


@jit
def far_in_rest(pairs, rows, columns, spacing, rest_distance, kept):
    """Copy the pairs farther apart than ``rest_distance`` in the flat rest cloth to the
    front of ``kept`` (as long as ``pairs``); returns how many there are."""
    limit2 = rest_distance * rest_distance
    spacing2 = spacing * spacing
    n_kept = 0
    for k in range(pairs.shape[0]):
        a = np.uint64(pairs[k, 0])
        b = np.uint64(pairs[k, 1])
        di = float(rows[a] - rows[b])
        dj = float(columns[a] - columns[b])
        kept[n_kept, 0] = pairs[k, 0]
        kept[n_kept, 1] = pairs[k, 1]
        n_kept += (di * di + dj * dj) * spacing2 > limit2
    return n_kept


@jit
def _orient(ax, ay, az, bx, by, bz, cx, cy, cz, dx, dy, dz):
    """Six times the signed volume of the tetrahedron abcd."""
    ux, uy, uz = bx - ax, by - ay, bz - az
    vx, vy, vz = cx - ax, cy - ay, cz - az
    wx, wy, wz = dx - ax, dy - ay, dz - az
    return ux * (vy * wz - vz * wy) - uy * (vx * wz - vz * wx) + uz * (vx * wy - vy * wx)


@jit
def count_crossings(positions, edges, triangles, candidates):
    """How many (edge, triangle) candidates cross: the segment pierces the triangle.

    Pairs sharing a particle are skipped. The test is strict (signed volumes of opposite
    signs for the edge's ends, of one sign around the triangle's sides), so an edge that
    only touches the triangle, or lies in its plane, does not count.
    """
    count = 0
    for k in range(candidates.shape[0]):
        e = candidates[k, 0]
        t = candidates[k, 1]
        p = edges[e, 0]
        q = edges[e, 1]
        a = triangles[t, 0]
        b = triangles[t, 1]
        c = triangles[t, 2]
        if p == a or p == b or p == c or q == a or q == b or q == c:
            continue
        px, py, pz = positions[p, 0], positions[p, 1], positions[p, 2]
        qx, qy, qz = positions[q, 0], positions[q, 1], positions[q, 2]
        ax, ay, az = positions[a, 0], positions[a, 1], positions[a, 2]
        bx, by, bz = positions[b, 0], positions[b, 1], positions[b, 2]
        cx, cy, cz = positions[c, 0], positions[c, 1], positions[c, 2]
        side_p = _orient(ax, ay, az, bx, by, bz, cx, cy, cz, px, py, pz)
        side_q = _orient(ax, ay, az, bx, by, bz, cx, cy, cz, qx, qy, qz)
        if not ((side_p > 0.0 and side_q < 0.0) or (side_p < 0.0 and side_q > 0.0)):
            continue
        around_ab = _orient(px, py, pz, qx, qy, qz, ax, ay, az, bx, by, bz)
        around_bc = _orient(px, py, pz, qx, qy, qz, bx, by, bz, cx, cy, cz)
        around_ca = _orient(px, py, pz, qx, qy, qz, cx, cy, cz, ax, ay, az)
        if (around_ab > 0.0 and around_bc > 0.0 and around_ca > 0.0) or (
            around_ab < 0.0 and around_bc < 0.0 and around_ca < 0.0
        ):
            count += 1
    return count
