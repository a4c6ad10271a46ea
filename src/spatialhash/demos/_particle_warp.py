"""Warp kernels of the particle demo's device step (`_particle_device.DeviceParticleSystem`).

One thread per particle or per pair; arrays and scalars in, arrays out; no validation.
Positions and velocities are ``wp.vec2d`` arrays, radii and masses float64, pairs
(n_pairs, 2) int32 with ``i < j`` (as the contact search returns them).

A step turns the pairs into a list of contacts per particle (`count_contacts`, an
exclusive scan, `fill_contacts`, `sort_contact_rows`) and then runs position-based
substeps: `integrate`, `n_sweeps` times `jacobi_sweep`, then `velocities_from_moves`.

Deterministic on a GPU. The only atomics are integer ones: the counts they sum do not
depend on the order of the threads, and the slots `fill_contacts` hands out do, but each
row is then sorted by neighbour index, which has one order. A Jacobi sweep writes the new
positions to a second array, each particle alone, summing its contacts' corrections in
row order: no float atomics, whose order of addition (and so rounding) would vary from
run to run. Where the host step's Gauss-Seidel sweep moves both particles of a pair at
once, reading what the previous pair wrote (sequential by nature), here each particle
gathers its own corrections from the positions of the sweep's start.

The arithmetic mirrors the host step's (`_particle_kernels.substep`): ``dx * dx + dy * dy``
in that order, the same push along the line of centres and the same shares of inverse
mass. The module is compiled with ``fuse_fp`` off (`MODULE_OPTIONS` of the Warp engine),
so that CUDA does not fuse a multiply and an add and the CPU and CUDA devices round alike.
"""

from __future__ import annotations

import warp as wp

from ..grid._warp_kernels import MODULE_OPTIONS

wp.set_module_options(MODULE_OPTIONS)

ZERO = wp.constant(wp.float64(0.0))
ONE = wp.constant(wp.float64(1.0))


@wp.kernel
def count_contacts(pairs: wp.array2d(dtype=wp.int32), counts: wp.array(dtype=wp.int32)):
    """``counts[i]`` += 1 for each pair of particle ``i`` (both ends of every pair)."""
    p = wp.tid()
    wp.atomic_add(counts, pairs[p, 0], 1)
    wp.atomic_add(counts, pairs[p, 1], 1)


@wp.kernel
def fill_contacts(pairs: wp.array2d(dtype=wp.int32), starts: wp.array(dtype=wp.int32),
                  cursor: wp.array(dtype=wp.int32), others: wp.array(dtype=wp.int32)):
    """Write each pair into both particles' rows of ``others`` (``starts``: the exclusive
    scan of the counts), in an order that depends on the threads; ``cursor`` starts at 0."""
    p = wp.tid()
    i = pairs[p, 0]
    j = pairs[p, 1]
    others[starts[i] + wp.atomic_add(cursor, i, 1)] = j
    others[starts[j] + wp.atomic_add(cursor, j, 1)] = i


@wp.kernel
def sort_contact_rows(starts: wp.array(dtype=wp.int32), others: wp.array(dtype=wp.int32),
                      radii: wp.array(dtype=wp.float64),
                      inverse_mass: wp.array(dtype=wp.float64),
                      rest: wp.array(dtype=wp.float64), share: wp.array(dtype=wp.float64)):
    """Sort particle ``i``'s row of ``others`` by neighbour index (insertion sort: rows
    hold a few contacts), then write each contact's constants: the contact distance
    ``rest = r_i + r_k`` and ``i``'s share of a correction, ``w_i / (w_i + w_k)``
    (``w``: inverse mass), the host step's `sweep_order` constants."""
    i = wp.tid()
    start = starts[i]
    end = starts[i + 1]
    for c in range(start + 1, end):
        key = others[c]
        d = c - 1
        while d >= start and others[d] > key:
            others[d + 1] = others[d]
            d -= 1
        others[d + 1] = key
    for c in range(start, end):
        k = others[c]
        rest[c] = radii[i] + radii[k]
        share[c] = inverse_mass[i] / (inverse_mass[i] + inverse_mass[k])


@wp.kernel
def integrate(positions: wp.array(dtype=wp.vec2d), previous: wp.array(dtype=wp.vec2d),
              velocities: wp.array(dtype=wp.vec2d), gravity: wp.float64,
              max_speed: wp.float64, dt: wp.float64):
    """Gravity, the speed cap at ``max_speed`` (the search's skin per step), then the move
    over ``dt``; ``previous`` keeps the position before it. As the host step does."""
    i = wp.tid()
    vx = velocities[i][0]
    vy = velocities[i][1] - gravity * dt
    speed = wp.sqrt(vx * vx + vy * vy)
    if speed > max_speed:
        vx *= max_speed / speed
        vy *= max_speed / speed
    position = positions[i]
    previous[i] = position
    positions[i] = wp.vec2d(position[0] + vx * dt, position[1] + vy * dt)


@wp.kernel
def jacobi_sweep(positions: wp.array(dtype=wp.vec2d), radii: wp.array(dtype=wp.float64),
                 starts: wp.array(dtype=wp.int32), others: wp.array(dtype=wp.int32),
                 rest: wp.array(dtype=wp.float64), share: wp.array(dtype=wp.float64),
                 box: wp.vec2d, moved: wp.array(dtype=wp.vec2d)):
    """One Jacobi sweep: ``moved[i]`` is particle ``i`` pushed out of its contacts, read
    from ``positions`` (the sweep's start), then clamped inside the ``box``.

    Each contact ``k`` pushes ``i`` along the line of centres by ``i``'s share of their
    overlap ``max(rest - distance, 0)``, the push one Gauss-Seidel update of the host
    step gives it; the pushes are summed in row order."""
    i = wp.tid()
    x = positions[i][0]
    y = positions[i][1]
    push_x = ZERO
    push_y = ZERO
    for c in range(starts[i], starts[i + 1]):
        k = others[c]
        dx = x - positions[k][0]
        dy = y - positions[k][1]
        distance = wp.sqrt(dx * dx + dy * dy)
        norm = distance
        if distance == ZERO:
            # Coincident centres: the host step's fixed direction, +x for the smaller
            # index of the pair and -x for the larger.
            dy = ZERO
            norm = ONE
            dx = ONE
            if k < i:
                dx = -ONE
        scale = wp.max(rest[c] - distance, ZERO) / norm * share[c]
        push_x += dx * scale
        push_y += dy * scale
    radius = radii[i]
    x = wp.min(wp.max(x + push_x, radius), box[0] - radius)
    y = wp.min(wp.max(y + push_y, radius), box[1] - radius)
    moved[i] = wp.vec2d(x, y)


@wp.kernel
def velocities_from_moves(positions: wp.array(dtype=wp.vec2d),
                          previous: wp.array(dtype=wp.vec2d), dt: wp.float64,
                          velocities: wp.array(dtype=wp.vec2d)):
    """The velocity is the substep's position change over ``dt`` (inelastic contacts)."""
    i = wp.tid()
    velocities[i] = wp.vec2d((positions[i][0] - previous[i][0]) / dt,
                             (positions[i][1] - previous[i][1]) / dt)


@wp.kernel
def pair_overlaps(positions: wp.array(dtype=wp.vec2d), radii: wp.array(dtype=wp.float64),
                  pairs: wp.array2d(dtype=wp.int32), overlaps: wp.array(dtype=wp.float64)):
    """``(r_i + r_j - distance) / min(r_i, r_j)`` of each pair (`max_relative_overlap`'s
    terms)."""
    p = wp.tid()
    i = pairs[p, 0]
    j = pairs[p, 1]
    dx = positions[i][0] - positions[j][0]
    dy = positions[i][1] - positions[j][1]
    overlap = radii[i] + radii[j] - wp.sqrt(dx * dx + dy * dy)
    overlaps[p] = overlap / wp.min(radii[i], radii[j])
