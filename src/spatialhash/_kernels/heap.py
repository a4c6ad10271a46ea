"""The bounded max-heap of the k nearest candidates, shared by the batch grid's and the
dynamic hash's k-nearest queries.

Candidates rank by squared distance, then by index, so ties go to the smaller index and
the k kept are the same whatever order the candidates come in.
"""

from __future__ import annotations

from .._config import jit


@jit
def ranks_before(d2_a, index_a, d2_b, index_b):
    """Whether candidate a ranks before candidate b: nearer, or as near with a smaller index."""
    return d2_a < d2_b or (d2_a == d2_b and index_a < index_b)


@jit
def heap_offer(heap_d2, heap_index, size, d2, index):
    """Offer a candidate to the max-heap of the best ``len(heap_d2)``; returns the new size."""
    k = heap_d2.shape[0]
    if size < k:
        position = size
        size += 1
        while position > 0:
            parent = (position - 1) // 2
            if not ranks_before(heap_d2[parent], heap_index[parent], d2, index):
                break
            heap_d2[position] = heap_d2[parent]
            heap_index[position] = heap_index[parent]
            position = parent
        heap_d2[position] = d2
        heap_index[position] = index
        return size
    if not ranks_before(d2, index, heap_d2[0], heap_index[0]):
        return size
    _sift_down(heap_d2, heap_index, 0, size, d2, index)
    return size


@jit
def _sift_down(heap_d2, heap_index, position, size, d2, index):
    """Place ``(d2, index)`` at ``position`` and sift it down a heap of ``size`` entries."""
    while True:
        child = 2 * position + 1
        if child >= size:
            break
        if child + 1 < size and ranks_before(
            heap_d2[child], heap_index[child], heap_d2[child + 1], heap_index[child + 1]
        ):
            child += 1
        if not ranks_before(d2, index, heap_d2[child], heap_index[child]):
            break
        heap_d2[position] = heap_d2[child]
        heap_index[position] = heap_index[child]
        position = child
    heap_d2[position] = d2
    heap_index[position] = index


@jit
def heap_sort_ascending(heap_d2, heap_index, size):
    """Sort the first ``size`` heap entries in place, nearest first."""
    for end in range(size - 1, 0, -1):
        top_d2, top_index = heap_d2[0], heap_index[0]
        last_d2, last_index = heap_d2[end], heap_index[end]
        heap_d2[end] = top_d2
        heap_index[end] = top_index
        _sift_down(heap_d2, heap_index, 0, end, last_d2, last_index)
