"""Numba kernels of the cloth demo: one XPBD substep in pieces, and the contact bookkeeping.

Arrays and scalars in, arrays out; no validation. Positions are C-contiguous (n, 3) float64,
particle indices int64 (pairs as the grid returns them). Hot loops read indices as unsigned:
with a signed index numba must allow Python's negative wrap-around on every access, which
cost about a quarter of the constraint pass here (see also ``spatialhash._kernels.cells``).
Every solver loop is Gauss-Seidel, as in Mueller's demo.

Threads. The caller cuts the cloth into bands of columns, one per thread, and lays out
the constraint and contact lists segment by segment: ``offsets`` (``n_bands + 2``
entries) bounds segment ``s`` by ``offsets[s]:offsets[s + 1]``; segment ``b < n_bands``
holds the items with both particles in band ``b``, the last one the items between bands
(the seams). A ``*_parallel`` kernel runs the bands' segments side by side, each in order
on one thread (no two threads touch a particle), then the seams on the calling thread; its
sequential twin runs the same segments in the same order, so the two agree bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from .._config import jit, jit_parallel


# ---------------------------------------------------------------------- predict and constraints
@jit
def _predict_range(positions, previous, velocities, inverse_mass, gravity, dt, max_speed,
                   ground, ground_friction, update, start, stop):
    max_speed2 = max_speed * max_speed
    inverse_dt = 1.0 / dt
    for i in range(start, stop):
        for axis in range(3):
            if update:
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
def _solve_distance_range(positions, inverse_mass, constraints, rest_lengths, compliances,
                          inverse_dt2, start, stop):
    for k in range(start, stop):
        a = np.uint64(constraints[k, 0])
        b = np.uint64(constraints[k, 1])
        weight = inverse_mass[a] + inverse_mass[b]
        if weight == 0.0:
            continue
        dx = positions[a, 0] - positions[b, 0]
        dy = positions[a, 1] - positions[b, 1]
        dz = positions[a, 2] - positions[b, 2]
        length = math.sqrt(dx * dx + dy * dy + dz * dz)
        if length == 0.0:
            continue
        step = (rest_lengths[k] - length) / (
            (weight + compliances[k] * inverse_dt2) * length
        )
        wa = step * inverse_mass[a]
        wb = step * inverse_mass[b]
        positions[a, 0] += wa * dx
        positions[a, 1] += wa * dy
        positions[a, 2] += wa * dz
        positions[b, 0] -= wb * dx
        positions[b, 1] -= wb * dy
        positions[b, 2] -= wb * dz


@jit
def _step_band(positions, previous, velocities, inverse_mass, constraints, rest_lengths,
               compliances, offsets, column_starts, band, gravity, dt, max_speed, ground,
               ground_friction, update):
    """Predict the particles of one band of columns, then solve its own constraints."""
    size = column_starts[-1]
    for row in range(positions.shape[0] // size):
        _predict_range(positions, previous, velocities, inverse_mass, gravity, dt, max_speed,
                       ground, ground_friction, update, row * size + column_starts[band],
                       row * size + column_starts[band + 1])
    _solve_distance_range(positions, inverse_mass, constraints, rest_lengths, compliances,
                          1.0 / (dt * dt), offsets[band], offsets[band + 1])


@jit
def step_constraints(positions, previous, velocities, inverse_mass, constraints, rest_lengths,
                     compliances, offsets, column_starts, gravity, dt, max_speed, ground,
                     ground_friction, update):
    """Predict every particle, then one XPBD pass over the distance constraints.

    Predicting is an explicit step under gravity (-z) with speeds clamped to
    ``max_speed``, then the ground. ``previous`` receives the positions before the step;
    pinned particles (inverse mass 0) stay where they are. A particle that ends below
    height ``ground`` is put back on it and loses ``ground_friction`` (0..1) of its
    sideways motion in this substep: with 1 it sticks, which lets the cloth pile up instead
    of sliding away. With ``update``, each particle first takes its velocity from the last
    substep's displacement (`update_velocities`), which saves a pass over the particles.

    The constraint pass is Gauss-Seidel, in order. With one iteration per substep the
    multiplier starts from zero every time, so the update is
    ``-C / (w1 + w2 + compliance / dt**2)`` ("small steps", Macklin et al. 2019). The
    caller orders the constraints so that neighbours in the list share no particle: the
    processor then overlaps their square roots and divisions instead of waiting on the
    previous constraint's result.

    Band ``b`` is the columns ``column_starts[b]:column_starts[b + 1]`` (the last entry is
    the number of columns); each band predicts its particles and solves its segment, then
    the seams are solved.
    """
    n_bands = offsets.shape[0] - 2
    for band in range(n_bands):
        _step_band(positions, previous, velocities, inverse_mass, constraints, rest_lengths,
                   compliances, offsets, column_starts, band, gravity, dt, max_speed, ground,
                   ground_friction, update)
    _solve_distance_range(positions, inverse_mass, constraints, rest_lengths, compliances,
                          1.0 / (dt * dt), offsets[n_bands], offsets[n_bands + 1])


@jit_parallel
def step_constraints_parallel(positions, previous, velocities, inverse_mass, constraints,
                              rest_lengths, compliances, offsets, column_starts, gravity, dt,
                              max_speed, ground, ground_friction, update):
    """`step_constraints` with the bands side by side: one parallel region."""
    n_bands = offsets.shape[0] - 2
    for band in prange(n_bands):
        _step_band(positions, previous, velocities, inverse_mass, constraints, rest_lengths,
                   compliances, offsets, column_starts, band, gravity, dt, max_speed, ground,
                   ground_friction, update)
    _solve_distance_range(positions, inverse_mass, constraints, rest_lengths, compliances,
                          1.0 / (dt * dt), offsets[n_bands], offsets[n_bands + 1])


# ---------------------------------------------------------------------- contacts
@jit
def _separate_range(positions, previous, inverse_mass, pairs, thickness, friction, touching,
                    start, stop):
    thickness2 = thickness * thickness
    n_touching = start
    for k in range(start, stop):
        a = np.uint64(pairs[k, 0])
        b = np.uint64(pairs[k, 1])
        dx = positions[b, 0] - positions[a, 0]
        dy = positions[b, 1] - positions[a, 1]
        dz = positions[b, 2] - positions[a, 2]
        touching[n_touching] = k
        n_touching += dx * dx + dy * dy + dz * dz < thickness2
    for index in range(start, n_touching):
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
def solve_contacts(positions, previous, inverse_mass, pairs, offsets, thickness, friction,
                   touching):
    """Push every listed pair closer than ``thickness`` apart, to exactly ``thickness``.

    Two passes per segment: the first finds the listed pairs that touch, without branches
    (most of the list does not touch, and skipping pair by pair cost more in mispredicted
    branches than the arithmetic; ``touching`` is a buffer as long as ``pairs``); the
    second separates them in order (Gauss-Seidel), each with its distance at that moment.
    A pair pushed into contact by the second pass waits for the next substep.

    ``friction`` (0..1) moves both particles' motion in this substep towards their common
    (mass-weighted) motion, which conserves momentum. Pairs at distance zero have no
    direction to push along and are skipped, as in Mueller's demo; jittered initial
    positions make them vanishingly rare.
    """
    for segment in range(offsets.shape[0] - 1):
        _separate_range(positions, previous, inverse_mass, pairs, thickness, friction,
                        touching, offsets[segment], offsets[segment + 1])


@jit_parallel
def solve_contacts_parallel(positions, previous, inverse_mass, pairs, offsets, thickness,
                            friction, touching):
    """`solve_contacts` with the bands' segments side by side, then the seams."""
    n_bands = offsets.shape[0] - 2
    for band in prange(n_bands):
        _separate_range(positions, previous, inverse_mass, pairs, thickness, friction,
                        touching, offsets[band], offsets[band + 1])
    _separate_range(positions, previous, inverse_mass, pairs, thickness, friction, touching,
                    offsets[n_bands], offsets[n_bands + 1])


# ---------------------------------------------------------------------- velocities
@jit
def update_velocities(positions, previous, velocities, dt):
    """Velocities from the substep's displacement (the PBD velocity update)."""
    inverse_dt = 1.0 / dt
    for i in range(positions.shape[0]):
        for axis in range(3):
            velocities[i, axis] = (positions[i, axis] - previous[i, axis]) * inverse_dt


# ---------------------------------------------------------------------- staleness of the list
#: Columns of a partial result of `_displacements_range`.
_LOW, _HIGH, _LARGEST, _SECOND, _N_PARTIAL = 0, 3, 6, 7, 8


@jit
def _displacements_range(positions, reference, centre, start, stop, partial):
    """Box of the displacements ``d_i`` of particles start..stop and the two largest
    squared distances ``|d_i - centre|**2``, into ``partial`` (`_N_PARTIAL` floats)."""
    low_x = low_y = low_z = np.inf
    high_x = high_y = high_z = -np.inf
    cx, cy, cz = centre[0], centre[1], centre[2]
    largest = second = 0.0
    for i in range(start, stop):
        dx = positions[i, 0] - reference[i, 0]
        dy = positions[i, 1] - reference[i, 1]
        dz = positions[i, 2] - reference[i, 2]
        low_x, high_x = min(low_x, dx), max(high_x, dx)
        low_y, high_y = min(low_y, dy), max(high_y, dy)
        low_z, high_z = min(low_z, dz), max(high_z, dz)
        distance2 = (dx - cx) ** 2 + (dy - cy) ** 2 + (dz - cz) ** 2
        # Branch-free update of the two largest: distance2 displaces `second` when it
        # beats it, and then `largest` when it beats that too.
        second = max(second, min(largest, distance2))
        largest = max(largest, distance2)
    partial[_LOW], partial[_LOW + 1], partial[_LOW + 2] = low_x, low_y, low_z
    partial[_HIGH], partial[_HIGH + 1], partial[_HIGH + 2] = high_x, high_y, high_z
    partial[_LARGEST], partial[_SECOND] = largest, second


@jit
def _merge_displacements(partials, box_centre):
    """Sum of the two largest distances over all partial results; the centre of the box
    of all displacements into ``box_centre``."""
    largest = second = 0.0
    for axis in range(3):
        low, high = np.inf, -np.inf
        for chunk in range(partials.shape[0]):
            low = min(low, partials[chunk, _LOW + axis])
            high = max(high, partials[chunk, _HIGH + axis])
        box_centre[axis] = 0.5 * (low + high)
    for chunk in range(partials.shape[0]):
        for value in (partials[chunk, _LARGEST], partials[chunk, _SECOND]):
            second = max(second, min(largest, value))
            largest = max(largest, value)
    return math.sqrt(largest) + math.sqrt(second)


@jit
def displacement_bound(positions, reference, centre, box_centre):
    """Bound on how far any two particles have moved relative to each other.

    With ``d_i`` the displacement of particle ``i`` since ``reference`` and any point
    ``c`` (``centre``), ``|d_i - d_j| <= |d_i - c| + |d_j - c|``, which is at most the sum
    of the two largest ``|d_i - c|`` for every pair ``i != j``: that sum is returned. A
    rigid drift (the whole cloth falling) costs nothing when ``c`` follows it; the centre
    of the box of the displacements, a good choice of ``c``, is written to ``box_centre``.
    """
    partials = np.empty((1, _N_PARTIAL))
    _displacements_range(positions, reference, centre, 0, positions.shape[0], partials[0])
    return _merge_displacements(partials, box_centre)


# ---------------------------------------------------------------------- contact list
@jit
def sort_contacts(pairs, rows, columns, spacing, rest_distance, bands, kept, offsets):
    """Copy the pairs farther apart than ``rest_distance`` in the flat rest cloth into
    ``kept`` (as long as ``pairs``), segment by segment; returns how many there are.

    ``bands[i]`` is particle ``i``'s band; segment ``b`` receives the pairs with both
    particles in band ``b``, the last segment the others, each in the order of ``pairs``.
    ``offsets`` (number of bands + 2) receives the segments' bounds.
    """
    n_segments = offsets.shape[0] - 1
    offsets[0] = 0
    if n_segments == 2:
        # One band: its segment is every pair kept, and there are no seams.
        n_kept = far_in_rest(pairs, rows, columns, spacing, rest_distance, kept)
        offsets[1] = offsets[2] = n_kept
        return n_kept
    limit2 = rest_distance * rest_distance
    spacing2 = spacing * spacing
    seams = n_segments - 1
    n = pairs.shape[0]
    # Each pair's segment, n_segments for the pairs dropped; branch-free.
    segments = np.empty(n, dtype=np.int64)
    for k in range(n):
        a = np.uint64(pairs[k, 0])
        b = np.uint64(pairs[k, 1])
        di = float(rows[a] - rows[b])
        dj = float(columns[a] - columns[b])
        band_a = bands[a]
        segment = band_a if band_a == bands[b] else seams
        segments[k] = segment if (di * di + dj * dj) * spacing2 > limit2 else n_segments
    counts = np.zeros(n_segments + 1, dtype=np.int64)
    for k in range(n):
        counts[segments[k]] += 1
    for segment in range(n_segments):
        offsets[segment + 1] = offsets[segment] + counts[segment]
    # The dropped pairs are written after the kept ones, where nothing reads them: no
    # branch in the copy (which halved this kernel's time).
    cursor = np.empty(n_segments + 1, np.int64)
    cursor[:n_segments] = offsets[:n_segments]
    cursor[n_segments] = offsets[n_segments]
    for k in range(n):
        segment = segments[k]
        position = cursor[segment]
        kept[position, 0] = pairs[k, 0]
        kept[position, 1] = pairs[k, 1]
        cursor[segment] = position + 1
    return offsets[n_segments]


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
