"""``sorted=True`` of the molecular lists: each atom's rows sorted on their own
(``neighbors/_kernels/molecular_sort.py``) must give the order ``np.lexsort`` gives of all
the rows by ``(i, j, S)``, stably, whatever the keys: packed into one integer per row where
they fit, merge sorted on the keys themselves where they do not, in chunks of groups
sorted by a first pass or, where it left them, by a second."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spatialhash._kernels.row_sort import RANK_SORT_MAX
from spatialhash.neighbors import MolecularNeighborList, neighbor_list
from spatialhash.neighbors._kernels.molecular_sort import GROUPS_PER_CHUNK
from spatialhash.neighbors._molecular import row_order


def lexsort_order(first, j, shifts):
    """The oracle: every row by ``(i, j, S[:, 0], S[:, 1], ...)``, stably."""
    keys = [shifts[:, axis] for axis in range(shifts.shape[1] - 1, -1, -1)]
    return np.lexsort([*keys, j, first])


@st.composite
def grouped_rows(draw, bound=4, most_groups=12, long_shares=(0.0,)):
    """``(i, j, S)``: rows grouped by ``i`` in increasing order (atoms without rows among
    them), with ``j`` and ``S`` among five values in ``[-bound, bound]``: equal keys are
    common. A share of the groups (one of ``long_shares``) is longer than ranks sort."""
    n_dims = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    counts = rng.integers(0, draw(st.sampled_from([3, 20, 2 * RANK_SORT_MAX])),
                          draw(st.integers(0, most_groups)))
    long = rng.random(len(counts)) < draw(st.sampled_from(long_shares))
    counts[long] = RANK_SORT_MAX + 1 + rng.integers(0, RANK_SORT_MAX, np.count_nonzero(long))
    first = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    values = rng.integers(-bound, bound + 1, 5)  # a few values: ties at any bound
    j = rng.choice(values, len(first))
    shifts = rng.choice(values, (len(first), n_dims))
    return first, j, shifts


@given(rows=grouped_rows())
def test_each_atoms_rows_sorted_alone_are_the_lexsort_of_all(rows):
    first, j, shifts = rows
    np.testing.assert_array_equal(row_order(first, j, shifts), lexsort_order(*rows))


@given(rows=grouped_rows(bound=2**61))
def test_keys_too_wide_to_pack_are_sorted_all_the_same(rows):
    first, j, shifts = rows
    np.testing.assert_array_equal(row_order(first, j, shifts), lexsort_order(*rows))


@given(rows=grouped_rows(most_groups=3 * GROUPS_PER_CHUNK, long_shares=(0.0, 0.002, 0.05)))
def test_chunks_of_many_groups_some_too_long_to_rank(rows):
    # The first pass leaves the chunks of groups with a long group; the second sorts them,
    # the others stay as the first sorted them.
    first, j, shifts = rows
    np.testing.assert_array_equal(row_order(first, j, shifts), lexsort_order(*rows))


def test_one_chunk_too_long_to_rank_one_too_wide_to_pack_among_short_ones():
    rng = np.random.default_rng(6)
    counts = rng.integers(0, 30, 4 * GROUPS_PER_CHUNK)
    counts[GROUPS_PER_CHUNK + 7] = RANK_SORT_MAX + 1  # in the second chunk
    counts[2 * GROUPS_PER_CHUNK + 5] = 5  # in the third
    first = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    j = rng.integers(-3, 4, len(first))
    shifts = rng.integers(-3, 4, (len(first), 3))
    j[first == 2 * GROUPS_PER_CHUNK + 5] = [2**62, -2**62, 0, 2**62, 1]
    np.testing.assert_array_equal(row_order(first, j, shifts),
                                  lexsort_order(first, j, shifts))


@pytest.mark.parametrize("j, shifts", [
    ([5, 5, 5, 4], [[0], [0], [-1], [0]]),  # ties kept in order
    ([2**62, -2**62, 0], [[2**62], [-2**62], [0]]),  # spans beyond 62 bits
    ([1, 0], [[-2**63], [2**63 - 1]]),  # the int64 extremes
])
def test_named_keys(j, shifts):
    first = np.zeros(len(j), np.int64)
    j, shifts = np.array(j, np.int64), np.array(shifts, np.int64)
    np.testing.assert_array_equal(row_order(first, j, shifts),
                                  lexsort_order(first, j, shifts))


def test_no_rows():
    assert row_order(*(np.zeros(0, np.int64),) * 2, np.zeros((0, 3), np.int64)).shape == (0,)


@pytest.mark.parametrize("full_list", [True, False])
@pytest.mark.parametrize("radii", [False, True])
def test_sorted_lists_are_the_unsorted_ones_in_lexsort_order_to_the_bit(full_list, radii):
    rng = np.random.default_rng(3)
    cell = np.array([[6.0, 0.0, 0.0], [1.5, 5.5, 0.0], [-1.0, 0.5, 4.5]])
    positions = rng.uniform(-2.0, 8.0, (150, 3))
    options = ({"radii": rng.uniform(0.5, 2.0, 150)} if radii else {"cutoff": 4.0})
    unsorted = neighbor_list("ijSdDb", positions, cell=cell, full_list=full_list, **options)
    ordered = neighbor_list("ijSdDb", positions, cell=cell, full_list=full_list,
                            sorted=True, **options)
    order = lexsort_order(*unsorted[:3])
    for got, rows in zip(ordered, unsorted, strict=True):
        assert got.dtype == rows.dtype and got.tobytes() == rows[order].tobytes()


def test_a_sorted_batch_is_each_system_sorted_one_after_the_other():
    rng = np.random.default_rng(4)
    ptr = np.array([0, 40, 40, 95, 120])
    cells = np.stack([np.eye(3) * 5.0, np.eye(3) * 4.0, np.diag([6.0, 5.0, 7.0]),
                      [[5.0, 0.0, 0.0], [2.0, 5.0, 0.0], [0.0, 1.0, 5.0]]])
    positions = rng.uniform(0.0, 6.0, (120, 3))
    i, j, shifts, distances = neighbor_list("ijSd", positions, 3.5, cells, ptr=ptr,
                                            sorted=True)
    for b in range(4):
        alone = neighbor_list("ijSd", positions[ptr[b]:ptr[b + 1]], 3.5, cells[b],
                              sorted=True)
        mine = (i >= ptr[b]) & (i < ptr[b + 1])
        for got, expected in zip((i[mine] - ptr[b], j[mine] - ptr[b], shifts[mine],
                                  distances[mine]), alone, strict=True):
            assert got.tobytes() == expected.tobytes()


def test_a_sorted_skin_list_is_a_new_sorted_search():
    rng = np.random.default_rng(5)
    cell = np.diag([7.0, 6.0, 6.5])
    positions = rng.uniform(0.0, 7.0, (200, 3))
    listed = MolecularNeighborList("ijSdD", 3.0, 0.5, sorted=True)
    for _ in range(3):
        got = listed.update(positions, cell)
        fresh = neighbor_list("ijSdD", positions, 3.0, cell, sorted=True)
        for a, b in zip(got, fresh, strict=True):
            assert a.tobytes() == b.tobytes()
        positions = positions + rng.normal(0.0, 0.1, positions.shape)
