"""A ray through the dynamic hash whose hits are offered, nearest first, to a user's
compiled function: `DynamicHash.query_ray` with ``fn``. The first hit ``fn`` accepts is
the answer.

`ray_function_hit` is the walk of `ray.cast_kernel` compiled for a user's function: the
same clipping, the same cells with the same widening, each object tested once with
`ray.ray_object`, or a level's objects one by one where `ray.ray_hits` tests them so, so
the ray finds the same hits at the same distances. The levels walk side by side, the level
furthest behind first, the hits found wait in a heap
(``spatialhash/_kernels/ray_functions.py``), and those nearer than every level's frontier
are offered to ``fn``, nearest first, ties by the smaller key (the id): no hit still to be
found can come before them (see the module docstring of ``ray.py``). ``fn`` returning True
ends the cast.

Called ``(objects, cells, level_cells, keys, cast, buffers, fn, args)``, arguments as
`ray.ray_hits` takes them; ``fn(0, keys[slot], distance, *args)``. Writes the slot and
distance of the hit ``fn`` accepts to position 0 of the `QueryBuffers` ``buffers`` and
returns 1, or 0 when ``fn`` accepts none.

Compiled anew for each ``fn`` (and types of ``args``), ``fn`` inlined; not cached on disk,
for the reason given in ``grid/_kernels/pair_functions.py``. The kernel is made by the
factory of ``ray.py`` but named as one of this module, whose compile notice says it
compiles for each new ``fn``.
"""

from __future__ import annotations

import numba

from ..._config import _JIT_OPTIONS, _kernel
from .ray import cast_kernel

_cast = cast_kernel(with_fn=True)
_cast.__name__ = _cast.__qualname__ = "ray_function_hit"
_cast.__module__ = __name__

#: Not cached on disk (see the module docstring).
ray_function_hit = _kernel(numba.njit(**{**_JIT_OPTIONS, "cache": False})(_cast))
