"""Rays whose hits are offered, nearest first, to a user's compiled function:
`Grid.query_ray` with ``fn``. The first hit ``fn`` accepts is the ray's answer.

The scan is the walk of `ray.cast_kernel` compiled for a user's function: the same clipping,
the same neighbourhood slabs, the same test of each sphere (`ray_sphere.sphere_entry`), so a
ray finds the same hits at the same distances as `ray.cast_rays` in its mode
`ray.MODE_FILL`. Instead of keeping the best, it keeps every hit found in a heap
(``spatialhash/_kernels/ray_functions.py``) and, once the slab of a cell has been tested,
offers ``fn`` the heap's hits at distances ``<= t_exit`` of that cell, nearest first, ties
by the smaller index. That is the rule by which `ray.cast_rays` takes its best hit as final:
every hit point before ``t_exit`` lies in a cell already visited (up to the tolerance of the
reach), whose neighbourhood's spheres have been tested, so no hit still to be found comes
first. ``fn`` returning True ends the ray's walk; hits beyond ``t_exit`` wait for later
cells; at the end of the walk (or of the one run over every sphere, for a ray that does not
walk) the remaining hits are offered in order. So ``fn`` sees a prefix of the ray's
`all_hits` row, in that row's order, and the ray's answer is the first hit of that row
``fn`` accepts.

`RAYS` is ``(sequential scan, guarded scan, parallel driver)``, each called with
``(state, params, lo, hi, fn, args)``; ``params`` is ``(radii, max_radius, walk_limit,
origins, units, max_distance, visit_order, out_indices, out_distances)``, the first seven
as `ray.cast_kernel` takes them, and ``fn(q, index, distance, *args)`` is called with
``q`` and ``index`` int64.

Threads, errors and compiling are those of `pair_functions`, whose factories make the
guard and the parallel driver here: rays in chunks of `RAYS_PER_CHUNK`, each ray cast by
one thread, ``fn`` called for its hits in the same order for any thread count; compiled
anew for each ``fn``, never cached on disk. The scan is made by the factory of ``ray.py``
but named as a kernel of this module, whose compile notice says it compiles for each new
``fn``.
"""

from __future__ import annotations

from .pair_functions import compiled_scans
from .ray import RAYS_PER_CHUNK, cast_kernel

_scan = cast_kernel(with_fn=True)
_scan.__module__ = __name__

#: (sequential scan, guarded scan, parallel driver over chunks of rays).
RAYS = compiled_scans(_scan, "ray_function_rays", RAYS_PER_CHUNK)
