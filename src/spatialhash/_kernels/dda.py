"""Ray traversal of a uniform grid, cell by cell (Amanatides & Woo), for 1-, 2- and 3-D.

The grid is the batch grid's: cell ``c`` on an axis covers cell units ``[c, c + 1)`` where
a position's cell unit is ``u = (x - grid_origin) * inv_cell_size``. A ray
``x(t) = point + t * direction`` is first brought to cell units once, by `ray_to_cells`:
``u(t) = u_start + t * u_rate``. 2-D rays are 3-D rays with ``direction = 0`` on the padded
axis (so ``u_rate = 0`` there and the traversal never steps along it).

Interface (all helpers take plain arrays and scalars; buffers are the caller's, so a kernel
allocates them once per thread, not per ray)::

    ray_to_cells(point, direction, grid_origin, inv_cell_size, u_start, u_rate)
    t_lo, t_hi = clip_to_cells(u_start, u_rate, lower, upper, t_lo, t_hi)
    dda_start(u_start, u_rate, t_lo, cell, step, t_next)
    t_enter = t_lo
    while True:
        t_exit = min(dda_exit(t_next, t_enter), t_hi)
        ...visit cell (int64 (3,)) for t in [t_enter, t_exit)...
        if t_exit >= t_hi:
            break
        axis, t_enter = dda_step(u_start, u_rate, cell, step, t_next)

`dda_step` moves to the next cell and returns the axis it stepped along and the parameter
of the crossed face, which is bit for bit the ``t_exit`` of the cell just left (both are
``min(t_next)``), so the intervals partition ``[t_lo, t_hi]`` exactly. The last cell's
interval is closed at ``t_hi``. `traverse` runs the whole loop and returns the cells.

A hot loop can keep the walk in scalars instead (the batch grid's ``ray.py`` does: passing
the five arrays to a helper on every step costs reference-count updates): `next_axis` picks
the axis and `leave_parameter` gives the new ``t_next`` on it, the same arithmetic as
`dda_step`. A loop that walks several rays side by side (the dynamic hash's levels) keeps
one walk a row of ``(n, 3)`` arrays and moves row ``row`` with `row_exit` and `row_step`,
inlined, the same arithmetic again, with neither a call nor a view of the row.

Choices:

- Face parameters are computed directly, ``t = (face - u_start) / u_rate`` with the face an
  integer, never accumulated by adding a ``t_delta`` per step: no drift over long rays, and
  on exact (dyadic) input each ``t`` is the correctly rounded exact value, so the rounded
  order of crossings is the exact order (equal exact values stay equal).
- One axis at a time. Where a ray crosses an edge or a corner (two or three faces at the
  same ``t``) it steps along the lowest axis first and visits the intermediate cells with
  empty intervals ``[t, t)``. No cell the ray passes through is skipped; a few cells it
  only touches at one point are visited too.
- A zero direction component (``u_rate == 0``) never divides: that axis's ``t_next`` is
  ``inf``. A ray lying exactly on a face ``u == c`` is in cell ``c`` (the floor), as a
  point there would be.
- A ray starting outside the cells of interest is clipped first (`clip_to_cells` to the
  box of cells, in cell units) and started at ``t_lo > 0``: `dda_start` takes the cell at
  ``u(t_lo)`` and corrects it by at most one cell per axis so that it agrees with the
  face parameters (``t_enter <= t_lo < t_next`` per moving axis). Rounding near a face can
  therefore put the start, or a crossing, one cell off the exact one only where the ray is
  within a few ulps of that face: callers that look for objects near the ray widen their
  reach by a tolerance (see `ray.py`).
"""

from __future__ import annotations

import numpy as np

from .._config import jit, jit_inline
from .cells import floor_to_int


@jit
def ray_to_cells(point, direction, grid_origin, inv_cell_size, u_start, u_rate):
    """Write the ray in cell units: ``u(t) = u_start + t * u_rate`` per axis."""
    for axis in range(3):
        u_start[axis] = (point[axis] - grid_origin[axis]) * inv_cell_size[axis]
        u_rate[axis] = direction[axis] * inv_cell_size[axis]


@jit
def clip_to_cells(u_start, u_rate, lower, upper, t_lo, t_hi):
    """The part ``[t_lo, t_hi]`` of the ray inside the box ``lower <= u <= upper`` (cell units).

    ``lower`` and ``upper`` are floats per axis. Returns the clipped ``(t_lo, t_hi)``;
    ``t_lo > t_hi`` when the ray misses the box within the given range. An axis along which
    the ray does not move keeps the whole range when ``u_start`` lies in ``[lower, upper]``.
    """
    for axis in range(3):
        rate = u_rate[axis]
        if rate == 0.0:
            if u_start[axis] < lower[axis] or u_start[axis] > upper[axis]:
                return np.inf, -np.inf
            continue
        t_a = (lower[axis] - u_start[axis]) / rate
        t_b = (upper[axis] - u_start[axis]) / rate
        if t_a > t_b:
            t_a, t_b = t_b, t_a
        t_lo = max(t_lo, t_a)
        t_hi = min(t_hi, t_b)
    return t_lo, t_hi


@jit
def face_parameter(u_start, u_rate, face):
    """``t`` at which the ray crosses the face ``u == face`` of one axis (``u_rate != 0``)."""
    return (face - u_start) / u_rate


@jit
def dda_start(u_start, u_rate, t_start, cell, step, t_next):
    """Fill ``cell`` (int64 (3,)), ``step`` (int64 (3,), -1, 0 or +1) and ``t_next``
    (float64 (3,), the parameter at which the ray leaves ``cell`` along each axis; ``inf``
    where it does not move) for the cell containing ``u(t_start)``.

    On a moving axis the cell is chosen so that the face it is entered by is crossed at or
    before ``t_start`` and the face it is left by strictly after: the start agrees with the
    face parameters that `dda_step` uses later.
    """
    for axis in range(3):
        rate = u_rate[axis]
        origin = u_start[axis]
        c = floor_to_int(origin + t_start * rate)
        if rate > 0.0:
            step[axis] = 1
            if face_parameter(origin, rate, float(c)) > t_start:
                c -= 1
            elif face_parameter(origin, rate, float(c + 1)) <= t_start:
                c += 1
            t_next[axis] = face_parameter(origin, rate, float(c + 1))
        elif rate < 0.0:
            step[axis] = -1
            if face_parameter(origin, rate, float(c + 1)) > t_start:
                c += 1
            elif face_parameter(origin, rate, float(c)) <= t_start:
                c -= 1
            t_next[axis] = face_parameter(origin, rate, float(c))
        else:
            step[axis] = 0
            t_next[axis] = np.inf
        cell[axis] = c


@jit
def dda_exit(t_next, t_enter):
    """Parameter at which the ray leaves the current cell (never before ``t_enter``)."""
    return max(min(t_next[0], min(t_next[1], t_next[2])), t_enter)


@jit
def dda_step(u_start, u_rate, cell, step, t_next):
    """Move ``cell`` to the next cell along the ray, updating ``t_next`` in place.

    Steps along the axis whose face comes first (the lowest axis on ties) and returns
    ``(axis, t_crossed)``; ``t_crossed`` equals the ``min(t_next)`` before the step, that is
    the ``t_exit`` of the cell left and the ``t_enter`` of the new one. Call it only while
    some ``t_next`` is finite.
    """
    return row_step(u_start.reshape(1, 3), u_rate.reshape(1, 3), cell.reshape(1, 3),
                    step.reshape(1, 3), t_next.reshape(1, 3), 0)


@jit_inline
def row_exit(t_next, row, t_enter):
    """`dda_exit` of the walk in row ``row`` of ``t_next`` (float64 (n, 3))."""
    return max(min(t_next[row, 0], min(t_next[row, 1], t_next[row, 2])), t_enter)


@jit_inline
def row_step(u_start, u_rate, cell, step, t_next, row):
    """`dda_step` of the walk in row ``row`` of the ``(n, 3)`` arrays: ``(axis,
    t_crossed)``."""
    axis = next_axis(t_next[row, 0], t_next[row, 1], t_next[row, 2])
    t_crossed = t_next[row, axis]
    c = cell[row, axis] + step[row, axis]
    cell[row, axis] = c
    t_next[row, axis] = leave_parameter(u_start[row, axis], u_rate[row, axis], c,
                                        step[row, axis], t_crossed)
    return axis, t_crossed


@jit
def next_axis(t_x, t_y, t_z):
    """The axis whose face the ray crosses first (the lowest on ties)."""
    if t_x <= t_y and t_x <= t_z:
        return 0
    if t_y <= t_z:
        return 1
    return 2


@jit
def leave_parameter(u_start, u_rate, c, step, t_crossed):
    """``t`` at which the ray leaves cell ``c`` of one axis, entered at ``t_crossed``.

    Scalars only, so kernels that keep the walk in scalars (`ray.py`) share the arithmetic.
    """
    face = float(c + 1) if step > 0 else float(c)
    # Far from the grid origin (|u| near 2**53) consecutive faces can round to the same
    # parameter: the interval is then empty, but time never runs back.
    return max(face_parameter(u_start, u_rate, face), t_crossed)


@jit
def traverse(point, direction, grid_origin, inv_cell_size, t_lo, t_hi, max_cells):
    """Every cell the ray visits for ``t`` in ``[t_lo, t_hi]``, in order (at most
    ``max_cells``): ``(cells (m, 3) int64, t_enter (m,), t_exit (m,))``.

    The whole loop of the module docstring in one call, for tests and for callers that want
    the cells rather than a visit per cell. Empty when ``t_lo > t_hi``.
    """
    u_start = np.empty(3)
    u_rate = np.empty(3)
    cell = np.empty(3, np.int64)
    step = np.empty(3, np.int64)
    t_next = np.empty(3)
    cells = np.empty((max_cells, 3), np.int64)
    t_enter_out = np.empty(max_cells)
    t_exit_out = np.empty(max_cells)
    if t_lo > t_hi or max_cells == 0:
        return cells[:0], t_enter_out[:0], t_exit_out[:0]
    ray_to_cells(point, direction, grid_origin, inv_cell_size, u_start, u_rate)
    dda_start(u_start, u_rate, t_lo, cell, step, t_next)
    t_enter = t_lo
    count = 0
    while count < max_cells:
        t_exit = min(dda_exit(t_next, t_enter), t_hi)
        cells[count] = cell
        t_enter_out[count] = t_enter
        t_exit_out[count] = t_exit
        count += 1
        if t_exit >= t_hi:
            break
        _, t_enter = dda_step(u_start, u_rate, cell, step, t_next)
    return cells[:count], t_enter_out[:count], t_exit_out[:count]
