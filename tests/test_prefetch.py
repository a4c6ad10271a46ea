"""The prefetch hints of ``_kernels/prefetch.py``, compiled into a kernel, change nothing:
for any 1-D array and any index at or past its end (an empty array's too), the kernel
runs and the array keeps its values."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from spatialhash._kernels.prefetch import prefetch_read, prefetch_write


@numba.njit
def _hinted_sum(array, index):
    prefetch_write(array, index)
    prefetch_read(array, index)
    return array.sum()


@pytest.mark.parametrize("array", [np.arange(10.0), np.arange(20, dtype=np.int64),
                                   np.empty(0)])
@pytest.mark.parametrize("index", [0, 7, 10_000])
def test_a_prefetch_leaves_the_array_as_it_was(array, index):
    before = array.copy()
    assert _hinted_sum(array, index) == before.sum()
    assert array.tobytes() == before.tobytes()
