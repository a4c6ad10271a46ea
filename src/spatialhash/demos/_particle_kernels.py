"""Numba kernels of the particle demo: two baseline contact searches and the contact solver.

Arrays and scalars in, arrays out; no validation. Positions are (n, 2) C-contiguous float64,
pairs (n_pairs, 2) int32 (the library's index type for fewer than 2**31 particles). A pair
``(i, j)`` is in contact when ``dx * dx + dy * dy <= (radii[i] + radii[j]) ** 2`` with
``dx = x_i - x_j``: the arithmetic of the library's ``query_pairs(radii=...)``, so the three
searches of the demo find exactly the same pairs, ties included.

The searches write at most ``out.shape[0]`` pairs and return how many there are; a caller
whose buffer was too small grows it and calls again (buffers live across steps, so the hot
loop allocates nothing).
"""

from __future__ import annotations

import math

import numpy as np

from .._config import jit

#: Cell coordinates are packed into one int64 key: ``(cx << KEY_SHIFT) | cy``.
KEY_SHIFT = 32
KEY_MASK = (1 << KEY_SHIFT) - 1
#: Cells per axis the keys can number (with room for the +1 offset and a neighbour).
MAX_CELLS_PER_AXIS = float((1 << 31) - 4)


@jit
def contacts_brute(positions, radii, out):
    """Every pair in contact, by comparing all ``n (n - 1) / 2`` pairs; returns the count."""
    n = positions.shape[0]
    capacity = out.shape[0]
    count = 0
    for i in range(n):
        x, y, radius = positions[i, 0], positions[i, 1], radii[i]
        for j in range(i + 1, n):
            dx = x - positions[j, 0]
            dy = y - positions[j, 1]
            limit = radius + radii[j]
            if dx * dx + dy * dy <= limit * limit:
                if count < capacity:
                    out[count, 0] = i
                    out[count, 1] = j
                count += 1
    return count


@jit
def contacts_sorted(positions, radii, cell_size, out):
    """Every pair in contact, through particles sorted by packed cell key; returns the count.

    Returns -1, finding nothing, when the positions span more cells than a key can number.

    Each particle gets the key of its cell (edge ``cell_size``, at least the largest
    contact distance). After sorting by key, the cells ``(cx + dx, cy - 1 .. cy + 1)`` of
    one column are one contiguous key range, found by two binary searches, so each
    particle scans three ranges. A pair is tested from the earlier particle in sorted order
    only, hence once.
    """
    n = positions.shape[0]
    capacity = out.shape[0]
    if n == 0:
        return 0
    low_x, low_y = positions[0, 0], positions[0, 1]
    high_x, high_y = low_x, low_y
    for i in range(1, n):
        low_x = min(low_x, positions[i, 0])
        low_y = min(low_y, positions[i, 1])
        high_x = max(high_x, positions[i, 0])
        high_y = max(high_y, positions[i, 1])
    if max(high_x - low_x, high_y - low_y) / cell_size >= MAX_CELLS_PER_AXIS:
        return -1
    keys = np.empty(n, np.int64)
    for i in range(n):
        # +1 keeps cy - 1 >= 0, so the neighbour keys below never borrow from cx.
        cx = np.int64(math.floor((positions[i, 0] - low_x) / cell_size)) + 1
        cy = np.int64(math.floor((positions[i, 1] - low_y) / cell_size)) + 1
        keys[i] = (cx << KEY_SHIFT) | cy
    order = np.argsort(keys, kind="mergesort")
    sorted_keys = keys[order]
    xs = np.empty(n, np.float64)
    ys = np.empty(n, np.float64)
    rs = np.empty(n, np.float64)
    for s in range(n):
        xs[s] = positions[order[s], 0]
        ys[s] = positions[order[s], 1]
        rs[s] = radii[order[s]]
    count = 0
    for s in range(n):
        key = sorted_keys[s]
        cx = key >> KEY_SHIFT
        cy = key & KEY_MASK
        x, y, radius, i = xs[s], ys[s], rs[s], order[s]
        for dx_cell in range(-1, 2):
            column = (cx + dx_cell) << KEY_SHIFT
            start = np.searchsorted(sorted_keys, column | (cy - 1), side="left")
            end = np.searchsorted(sorted_keys, column | (cy + 1), side="right")
            for t in range(max(start, s + 1), end):
                dx = x - xs[t]
                dy = y - ys[t]
                limit = radius + rs[t]
                if dx * dx + dy * dy <= limit * limit:
                    if count < capacity:
                        j = order[t]
                        out[count, 0] = min(i, j)
                        out[count, 1] = max(i, j)
                    count += 1
    return count


@jit
def substep(positions, previous, velocities, radii, pairs, constants, n_pairs, world):
    """One position-based substep: integrate, resolve contacts and walls, derive velocities.

    ``world = (gravity, max_speed, dt, width, height, n_iterations)``. Velocities get
    gravity and are capped at ``max_speed`` (so that no particle moves farther than the
    search's skin in a step); positions advance; then ``n_iterations``
    Gauss-Seidel sweeps push each overlapping pair of ``pairs[:n_pairs]`` apart along the
    line of centres, in proportion to inverse mass (``constants``: see `sweep_order`), and
    clamp particles inside the box.
    The new velocity is the position change over ``dt``: contacts are inelastic along the
    normal, which lets a pile come to rest.
    """
    gravity, max_speed, dt, width, height, n_iterations = world
    n = positions.shape[0]
    for i in range(n):
        vx = velocities[i, 0]
        vy = velocities[i, 1] - gravity * dt
        speed = math.sqrt(vx * vx + vy * vy)
        if speed > max_speed:
            vx *= max_speed / speed
            vy *= max_speed / speed
        previous[i, 0] = positions[i, 0]
        previous[i, 1] = positions[i, 1]
        positions[i, 0] += vx * dt
        positions[i, 1] += vy * dt
    for _ in range(n_iterations):
        for p in range(n_pairs):
            i, j = pairs[p, 0], pairs[p, 1]
            dx = positions[i, 0] - positions[j, 0]
            dy = positions[i, 1] - positions[j, 1]
            distance = math.sqrt(dx * dx + dy * dy)
            norm = distance
            if distance == 0.0:
                # Coincident centres: any direction separates them; take a fixed one.
                dx, norm = 1.0, 1.0
            # Branch-free: pairs apart by more than their radii get a zero push (a branch
            # here is mispredicted about half the time).
            scale = max(constants[p, 0] - distance, 0.0) / norm
            share_i, share_j = scale * constants[p, 1], scale * constants[p, 2]
            positions[i, 0] += dx * share_i
            positions[i, 1] += dy * share_i
            positions[j, 0] -= dx * share_j
            positions[j, 1] -= dy * share_j
        for i in range(n):
            radius = radii[i]
            positions[i, 0] = min(max(positions[i, 0], radius), width - radius)
            positions[i, 1] = min(max(positions[i, 1], radius), height - radius)
    for i in range(n):
        velocities[i, 0] = (positions[i, 0] - previous[i, 0]) / dt
        velocities[i, 1] = (positions[i, 1] - previous[i, 1]) / dt


@jit
def sweep_order(pairs, radii, inverse_mass, stride, scratch, out, constants):
    """Write ``pairs`` to ``out`` sorted by ``(i, j)``, then interleaved with ``stride``.

    ``constants`` gets, for each row of ``out``, what the substeps need of the pair and
    would otherwise load and divide again in every sweep: the contact distance
    ``r_i + r_j`` and each particle's share of a correction, ``w_i / (w_i + w_j)`` and
    ``w_j / (w_i + w_j)`` (``w``: inverse mass).

    Sorting (two stable counting sorts, by ``j`` then by ``i``) makes the order of the
    Gauss-Seidel sweeps independent of the search that found the pairs, so every search
    gives the same trajectory, bit for bit. Interleaving takes the sorted pairs in the
    order 0, stride, 2 stride, ..., 1, stride + 1, ...: sorted pairs of one particle sit
    together, and sweeping them in a row makes one long chain of dependent updates (each
    reads what the previous one wrote); interleaved, consecutive pairs rarely share a
    particle, the processor overlaps them and the sweep runs about twice as fast.
    ``scratch`` holds at least as many rows as ``pairs``.
    """
    n_pairs = pairs.shape[0]
    n_particles = radii.shape[0]
    starts = np.zeros(n_particles + 1, np.int64)
    for p in range(n_pairs):
        starts[pairs[p, 1] + 1] += 1
    for k in range(n_particles):
        starts[k + 1] += starts[k]
    for p in range(n_pairs):
        j = pairs[p, 1]
        scratch[starts[j], 0] = pairs[p, 0]
        scratch[starts[j], 1] = j
        starts[j] += 1
    starts[:] = 0
    for p in range(n_pairs):
        starts[scratch[p, 0] + 1] += 1
    for k in range(n_particles):
        starts[k + 1] += starts[k]
    per_phase, longer = n_pairs // stride, n_pairs % stride
    for p in range(n_pairs):
        i = scratch[p, 0]
        rank = starts[i]
        starts[i] += 1
        # Where the sorted rank lands when the sorted pairs are read phase by phase.
        phase = rank % stride
        q = phase * per_phase + min(phase, longer) + rank // stride
        j = scratch[p, 1]
        out[q, 0] = i
        out[q, 1] = j
        total = inverse_mass[i] + inverse_mass[j]
        constants[q, 0] = radii[i] + radii[j]
        constants[q, 1] = inverse_mass[i] / total
        constants[q, 2] = inverse_mass[j] / total


@jit
def max_relative_overlap(positions, radii, pairs, n_pairs):
    """Largest ``(r_i + r_j - distance) / min(r_i, r_j)`` over the pairs (0 when none)."""
    worst = 0.0
    for p in range(n_pairs):
        i, j = pairs[p, 0], pairs[p, 1]
        dx = positions[i, 0] - positions[j, 0]
        dy = positions[i, 1] - positions[j, 1]
        overlap = radii[i] + radii[j] - math.sqrt(dx * dx + dy * dy)
        worst = max(worst, overlap / min(radii[i], radii[j]))
    return worst
