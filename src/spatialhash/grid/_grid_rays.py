"""`RayQueries`, the part of `Grid` that casts rays (`query_ray`): a base class of `Grid`,
in a module of its own because the method's docstring (segments, the user's function over
the hits, the cost) is long.
"""

from __future__ import annotations

from .._results import Neighbors, RayHits
from .._user_functions import GRID_RAY_CALL, ray_function
from ._inputs import ray_inputs


class RayQueries:
    """`Grid`'s ray casts. They use the grid's validated state: ``_engine``, ``_n_dims``,
    ``_n_points``, ``_periodic`` and ``_io`` (its caller's kind of array), which `Grid`
    sets."""

    def query_ray(self, origins, directions, radii, *, max_distance=None,
                  all_hits: bool = False, fn=None, args: tuple = ()) -> RayHits | Neighbors:
        """Cast rays (or segments) against the points taken as spheres (circles in 2-D).

        Parameters
        ----------
        origins : array_like of float, shape (m, d) or (d,)
            Start of each ray.
        directions : array_like of float, shape (m, d) or (d,)
            Direction of each ray, any non-zero length: it is normalized, so distances
            are lengths along the ray, not multiples of ``directions``.
        radii : float or array_like of float, shape (n,)
            Radius of the sphere around each point (one for all or one per point), >= 0.
            Spheres are closed: a ray that grazes one (tangent) hits it.
        max_distance : float or array_like of float, shape (m,), optional
            Segment casts: only hits at distance ``<= max_distance`` count (one for all
            rays or one per ray; ``inf`` or None: unbounded rays).
        all_hits : bool, default False
            Return every sphere each ray meets rather than the first.
        fn : function compiled with numba's ``njit``, or a Warp function, optional
            Decides which hits count: ``fn(ray, index, distance, *args) -> bool`` is called
            with ``ray`` (int64, the ray's row of ``origins``), ``index`` (int64, the
            point) and ``distance`` (float64, along the ray) for the ray's hits in order,
            nearest first, ties by the smaller index (the order of an ``all_hits`` row),
            until it returns True: that hit is the ray's answer and its walk stops. False
            passes over the hit. Not with ``all_hits``. On the Warp engine
            (``device="cuda"`` or ``"warp-cpu"``), a Warp function (``@wp.func``)
            returning a bool.
        args : tuple, default ()
            Passed to ``fn`` after the hit's values: arrays, numbers, tuples (what numba
            compiles); on the Warp engine, Warp arrays on the grid's device and numbers.

        Returns
        -------
        RayHits or Neighbors
            First hits: `RayHits` with ``indices`` and ``distances`` of shape (m,), -1 and
            ``inf`` where a ray hits nothing, ties broken by the smaller index; with
            ``fn``, the first hit it accepts (-1 and ``inf`` where it accepts none). With
            ``all_hits``: `Neighbors`, one CSR row per ray sorted by distance along the ray,
            then by index; ``distances`` are the distances along the ray.

        Notes
        -----
        The distance of a hit is where the ray enters the sphere; a ray starting inside
        (or on) a sphere hits it at distance 0. Rays walk the cells (3-D DDA) and test the
        spheres centred within ``max(radii)`` of each cell, so the cost grows with
        ``(max(radii) / cell_size) ** d``: build the grid with a cell size near the largest
        radius or larger. Rays need an open grid (no periodic axes).

        With ``fn``, a ray's walk offers ``fn`` a hit once it has passed the hit's
        distance (spheres found from a cell can be farther than those of the next), so
        ``fn`` sees its hits in exact order, each once, and a ray that it accepts early
        stops early. One thread calls ``fn`` for a ray's hits (``fn`` may write to row
        ``ray`` of an output), in the same order for any ``n_threads``; an exception raised
        in ``fn`` is raised here, and a function that does not return a bool for these
        arguments raises `TypeError` before any ray is cast. Numba compiles the cast anew
        for each ``fn`` (and types of ``args``), ``fn`` inlined: the first call with a new
        ``fn`` waits for a compile, about twice as long on the multi-threaded path (from
        2,000 rays) as on one thread, and a quarter to a third longer again with an empty
        disk cache. Not cached on disk: numba's cache keys that code by the ``fn`` object,
        new in every process, and never hits. Define ``fn`` once, at module level.

        On the Warp engine every hit of each ray is found first (the rows of
        ``all_hits``, in their memory), then offered to ``fn`` in that order, one thread
        a ray, until it accepts one: ``fn`` gets the calls it gets on the CPU engine, and
        the answer is the CPU engine's. Warp compiles a kernel for each new ``fn``, kept
        in its kernel cache on disk.

        Examples
        --------
        >>> import numpy as np
        >>> from numba import njit
        >>> from spatialhash import Grid
        >>> @njit
        ... def not_the_shooter(ray, index, distance, shooters):
        ...     return index != shooters[ray]
        >>> points = np.array([[0.0, 0.0], [2.0, 0.0], [4.0, 0.0]])
        >>> grid = Grid(points, cell_size=1.0)
        >>> shooters = np.array([0, 1])
        >>> hits = grid.query_ray(points[shooters], [[1.0, 0.0], [-1.0, 0.0]], 0.5,
        ...                       fn=not_the_shooter, args=(shooters,))
        >>> hits.indices.tolist(), hits.distances.tolist()
        ([1, 0], [1.5, 1.5])
        """
        origins3, units3, radii, limit = ray_inputs(self._n_dims, self._n_points,
                                                    self._periodic, origins, directions,
                                                    radii, max_distance, self._io)
        fn = ray_function(fn, args, all_hits, GRID_RAY_CALL, self._device)
        return self._io.results(self._engine.query_ray(origins3, units3, radii, limit,
                                                       all_hits, fn, args))

