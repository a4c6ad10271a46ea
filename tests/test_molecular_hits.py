"""The molecular kernels' first pass keeps each chunk's hits in a share of memory sized from
an estimate (``_images._hit_share``); a chunk whose hits do not fit finds them again in the
second pass. The rows must not depend on the estimate: here every share is too small (or
ample), and the rows, their order and their bits equal the oracle's and each other's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import molecular_oracle as oracle
from spatialhash.neighbors import _images, neighbor_list
from test_molecular import _rows, systems


def _all_letters(positions, cutoff, cell, pbc=None, **options):
    return neighbor_list("ijSdDb", positions, cutoff, cell, pbc, **options)


@pytest.mark.parametrize("full_list", [True, False])
@pytest.mark.parametrize("room", [0.0, 0.1, 4.0])
def test_rows_do_not_depend_on_the_room_kept_for_hits(monkeypatch, full_list, room):
    rng = np.random.default_rng(5)
    cell = np.array([[9.0, 0.0, 0.0], [3.0, 8.5, 0.0], [-2.0, 1.5, 10.0]])
    positions = rng.uniform(-2.0, 12.0, (700, 3))
    ptr = np.array([0, 300, 300, 700])
    cells = np.stack([cell, cell * 1.3, cell * 0.7])
    expected = [_all_letters(positions, 4.5, cell, full_list=full_list),
                _all_letters(positions, 4.5, cells, ptr=ptr, full_list=full_list)]
    monkeypatch.setattr(_images, "HIT_ROOM", room)
    got = [_all_letters(positions, 4.5, cell, full_list=full_list),
           _all_letters(positions, 4.5, cells, ptr=ptr, full_list=full_list)]
    for mine, theirs in zip(got, expected, strict=True):
        for a, b in zip(mine, theirs, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes()


@given(system=systems(), data=st.data())
def test_a_list_whose_hits_never_fit_equals_the_oracle(system, data):
    positions, cell, pbc = system
    cutoff = data.draw(st.sampled_from([0.5, 1.0, 2.25, 4.0]))
    original = _images.HIT_ROOM
    _images.HIT_ROOM = 0.0  # 16 hits a chunk: nearly every chunk scans again
    try:
        got = neighbor_list("ijSdD", positions, cutoff, cell, pbc)
    finally:
        _images.HIT_ROOM = original
    assert _rows(got) == oracle.pairs(positions, cell, pbc, cutoff)


@pytest.mark.parametrize("full_list", [True, False])
def test_crowded_bins_next_to_sparse_ones_equal_the_oracle(full_list):
    # Bins of more atoms than a chunk (a bin's atoms split between chunks) next to bins
    # of a few atoms; in a triclinic cell, so atoms near its faces ask shifted queries
    # too.
    rng = np.random.default_rng(11)
    cell = np.array([[12.0, 0.0, 0.0], [2.0, 11.0, 0.0], [-1.5, 1.0, 13.0]])
    crowd = 5.0 + rng.uniform(0.0, 1.5, (450, 3))
    sparse = rng.uniform(-1.0, 13.0, (150, 3))
    positions = np.concatenate([sparse[:70], crowd, sparse[70:]])
    got = neighbor_list("ijSdD", positions, 2.5, cell, full_list=full_list)
    expected = oracle.pairs(positions, cell, True, 2.5)
    if not full_list:
        expected = {key: value for key, value in expected.items() if oracle.is_half_row(*key)}
    assert _rows(got) == expected
    assert np.all(np.diff(got[0]) >= 0)  # grouped by i in increasing order
