"""`FunctionQueries`, the part of `Grid` that calls a user's function over pairs
(`for_each_pair`) and over each query's neighbours (`for_each_neighbor`): a base class of
`Grid`, in a module of its own because these methods' docstrings (the threads, the order of
the calls, the compile) are as long as the rest of the class.
"""

from __future__ import annotations

from .._user_functions import pair_function
from ._inputs import radius_inputs


class FunctionQueries:
    """`Grid`'s calls of a user's function. They use the grid's validated state:
    ``_engine``, ``_n_dims``, ``_box``, ``_periodic``, ``_io`` (its caller's kind of
    array) and ``_pair_inputs``, which `Grid` sets and defines."""

    def for_each_pair(self, r: float | None = None, fn=None, *args, radii=None,
                      once: bool = False) -> None:
        """Call ``fn(i, j, d2, dx, dy, dz, *args)`` for every pair within ``r``, in both
        orders, on every thread, storing no list.

        Parameters
        ----------
        r, radii
            As in `query_pairs`, whose pairs these are, each met as ``(i, j)`` and
            ``(j, i)``, with the same squared distances. With ``radii``, pass ``r=None``:
            ``for_each_pair(None, fn, *args, radii=radii)``.
        fn : function compiled with numba's ``njit``, or a Warp function
            Called with ``i``, ``j`` (int64, ``i != j``), ``d2`` (float64, the squared
            distance), ``dx, dy, dz`` (float64, ``points[i] - points[j]``, the minimum
            image on periodic axes, 0 on axes the points lack), then ``args``. A numba
            function on the CPU engine (``device="cpu"``); on the Warp engine
            (``device="cuda"`` or ``"warp-cpu"``) a Warp function (``@wp.func``), its
            parameters typed (``wp.int64``, ``wp.float64``, then the arguments' types).
        *args
            Passed on to ``fn``: arrays, numbers, tuples (what numba compiles); on the
            Warp engine, Warp arrays on the grid's device and numbers (Python's pass as
            ``wp.float64``, ``wp.int64`` or ``wp.bool``, NumPy's as their dtype).
        once : bool, default False
            Call ``fn`` once for each pair, as ``(i, j)`` or as ``(j, i)`` (which one is
            fixed by the grid), rather than for both orders. ``fn`` may then write rows
            ``i`` and ``j`` (Newton's third law: the force on ``i`` added, on ``j``
            taken away), and computes each pair's work once.

        Notes
        -----
        The calls that write each row come in an order fixed by the grid, whatever the
        thread count: sums into ``out[i]`` are the same, bit for bit, for any
        ``n_threads``. ``fn`` may write to row ``i`` only (or, with ``once``, rows ``i``
        and ``j``): other writes race. An exception raised in ``fn`` is raised here (the
        outputs partly updated).

        Most grids are cut into slabs of cells across their slowest axis, at least the
        reach thick: each pair is then found once, from the lower cell, and ``fn`` called
        for ``(i, j)`` and right after for ``(j, i)``, the slabs running in two phases so
        that no two threads write one row. From 2,000 points the scan runs on every
        thread. Grids with too few planes for 4 slabs scan on the calling thread under
        2,000 points, and from there on (or where pairs are found by cell id) scan every
        point's full stencil, each pair met from each side; with ``once`` these scan on
        the calling thread. The choice depends on the grid and the number of points,
        never on the threads.

        Numba compiles the scan anew for each ``fn`` (and types of ``args``), ``fn``
        inlined: the first call with a new ``fn`` waits for a compile of a few seconds,
        which on the multi-threaded path (from 2,000 points) takes about 1.75 times as
        long as on one thread, and longer with an empty disk cache. Not cached on disk:
        numba's cache keys that code by the ``fn`` object, new in every process, and never
        hits. Define ``fn`` once, at module level.

        On the Warp engine one thread per point scans its full block of cells and calls
        ``fn`` for its row ``i``, in the order of that walk: a sum into ``out[i]`` is the
        same bit for bit on every run, though not the CPU engine's sum, whose
        calls come in another order (equal to rounding; integer counts are equal). The
        ``d2, dx, dy, dz`` are the CPU engine's, bit for bit but for the sign of a zero.
        With ``once``, a pair is called from its point first in the grid's order, as
        ``(i, j)``; the thread of ``j``'s own pairs runs meanwhile, so ``fn`` must update
        row ``j`` with Warp's ``+=`` or ``-=`` on an array element (an atomic add), and
        on a GPU such sums come in the order the threads reach them (equal to rounding
        from run to run; on ``"warp-cpu"``, one thread, always the same). Warp compiles a
        kernel for each new ``fn`` and types of ``args`` (on ``"warp-cpu"`` a few
        seconds) and keeps it in its kernel cache on disk, which later processes load.

        Examples
        --------
        >>> import numpy as np
        >>> from numba import njit
        >>> from spatialhash import Grid
        >>> @njit
        ... def count(i, j, d2, dx, dy, dz, counts):
        ...     counts[i] += 1
        >>> points = np.random.default_rng(0).random((1000, 3))
        >>> grid = Grid(points, cell_size=0.1)
        >>> counts = np.zeros(len(points), dtype=np.int64)
        >>> grid.for_each_pair(0.1, count, counts)
        >>> bool(counts.sum() == 2 * len(grid.query_pairs(0.1)))
        True
        """
        fn = pair_function(fn, self._device)
        r2, radii_sorted, reach = self._pair_inputs(r, radii)
        self._engine.for_each_pair(r2, radii_sorted, reach, fn, args, bool(once))

    def for_each_neighbor(self, queries, r, fn=None, *args) -> None:
        """Call ``fn(q, j, d2, dx, dy, dz, *args)`` for every point ``j`` within ``r`` of
        each query ``q`` (the rows of `query_radius`, same arguments), ``dx, dy, dz`` being
        ``queries[q] - points[j]``. As `for_each_pair`: one thread per query (``fn`` may
        write to row ``q``), its ``j`` in a fixed order, ``fn``'s exceptions raised here,
        a compile for each new ``fn`` (twice as long multi-threaded, from 2,000 queries).
        On the Warp engine ``fn`` is a Warp function, as in `for_each_pair`, and a query's
        calls come in the order of its unsorted row of `query_radius`, the CPU engine's
        order: sums into row ``q`` equal the CPU engine's bit for bit."""
        fn = pair_function(fn, self._device)
        queries = self._io.queries(queries, self._n_dims, self._box)
        query_points, radii = radius_inputs(queries, r, self._n_dims, self._box,
                                            self._periodic, self._io)
        self._engine.for_each_neighbor(query_points, radii, fn, args)

