"""The hits a ray has found but not yet offered to a user's function, shared by the batch
grid's and the dynamic hash's ray casts with ``fn`` (``Grid.query_ray``,
``DynamicHash.query_ray``).

A ray walks the cells in order, but finds its hits out of order: a sphere found from one
cell may be entered farther along the ray than one found from the next. So the hits found
wait in a binary min-heap ranked by distance, then by key (the index or the integer id,
so ties go to the smaller, as in the casts without ``fn``), and the walk pops them, in
that order, only once it has passed their distance: once no hit still to be found can
come before them (each caller's module docstring says when that is). The heap holds a
payload beside each key (the dynamic hash's slot). The casts keep it as one tuple of its
three arrays, pushing with `add_hit` (which grows it when full) and popping with
`take_hit`, both inlined into them.

`return_type_of` types a call of the user's function as the ray kernels make it, so that
the host can refuse a function that does not return a bool before compiling a kernel.
"""

from __future__ import annotations

import numba
import numpy as np

from .._config import jit, jit_inline

#: Room of a new heap (it doubles when full).
HEAP_ROOM = 64


@jit
def hit_before(t_a, key_a, t_b, key_b):
    """Whether hit a comes before hit b: nearer, or as near with a smaller key."""
    return t_a < t_b or (t_a == t_b and key_a < key_b)


@jit
def new_hits(room):
    """Empty heap arrays ``(distances, keys, payloads)`` with room for ``room`` hits."""
    return np.empty(room), np.empty(room, np.int64), np.empty(room, np.int64)


@jit
def grown_hits(heap_t, heap_key, heap_item):
    """The heap arrays with twice the room, holding the same hits."""
    room = heap_t.shape[0]
    grown_t, grown_key, grown_item = new_hits(2 * room)
    for i in range(room):
        grown_t[i] = heap_t[i]
        grown_key[i] = heap_key[i]
        grown_item[i] = heap_item[i]
    return grown_t, grown_key, grown_item


@jit
def push_hit(heap_t, heap_key, heap_item, size, t, key, item):
    """Add a hit to the heap of ``size`` hits (room for one more); returns the new size."""
    position = size
    while position > 0:
        parent = (position - 1) // 2
        if not hit_before(t, key, heap_t[parent], heap_key[parent]):
            break
        heap_t[position] = heap_t[parent]
        heap_key[position] = heap_key[parent]
        heap_item[position] = heap_item[parent]
        position = parent
    heap_t[position] = t
    heap_key[position] = key
    heap_item[position] = item
    return size + 1


@jit
def pop_hit(heap_t, heap_key, heap_item, size):
    """Remove the first hit (position 0, read before the call) from the heap of ``size >=
    1`` hits; returns the new size."""
    size -= 1
    t, key, item = heap_t[size], heap_key[size], heap_item[size]
    position = 0
    while True:
        child = 2 * position + 1
        if child >= size:
            break
        if child + 1 < size and hit_before(heap_t[child + 1], heap_key[child + 1],
                                           heap_t[child], heap_key[child]):
            child += 1
        if not hit_before(heap_t[child], heap_key[child], t, key):
            break
        heap_t[position] = heap_t[child]
        heap_key[position] = heap_key[child]
        heap_item[position] = heap_item[child]
        position = child
    if size > 0:
        heap_t[position] = t
        heap_key[position] = key
        heap_item[position] = item
    return size


@jit_inline
def add_hit(heap, size, t, key, item):
    """`push_hit` on the heap ``(distances, keys, payloads)`` of ``size`` hits, grown first
    when full (`grown_hits`); returns ``(heap, size)``, both new. Inlined: called for every
    hit of a cast with ``fn``."""
    heap_t, heap_key, heap_item = heap
    if size == heap_t.shape[0]:
        heap_t, heap_key, heap_item = grown_hits(heap_t, heap_key, heap_item)
    size = push_hit(heap_t, heap_key, heap_item, size, t, key, item)
    return (heap_t, heap_key, heap_item), size


@jit_inline
def take_hit(heap, size):
    """The first hit of the heap ``(distances, keys, payloads)`` of ``size >= 1`` hits,
    removed (`pop_hit`): ``(size, distance, key, payload)``, ``size`` the new one."""
    heap_t, heap_key, heap_item = heap
    t, key, item = heap_t[0], heap_key[0], heap_item[0]
    return pop_hit(heap_t, heap_key, heap_item, size), t, key, item


def _call_as_kernels_do(fn, args):
    return fn(np.int64(0), np.int64(0), 0.0, *args)


#: Not cached on disk: typed anew for each ``fn`` (see `pair_functions` on why such code
#: never hits the cache).
_call_probe = numba.njit(cache=False)(_call_as_kernels_do)


def return_type_of(fn, args):
    """The numba type ``fn(ray, index, distance, *args)`` returns, called with int64,
    int64 and float64 as the ray kernels call it; raises numba's ``TypingError`` when
    numba cannot type the call, ``ValueError`` when it cannot type an argument. Compiles
    ``fn`` for those types, which the kernels then reuse (tens of ms)."""
    signature = (numba.typeof(fn), numba.typeof(args))
    _call_probe.compile(signature)
    return _call_probe.overloads[signature].signature.return_type
