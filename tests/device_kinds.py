"""Helpers of the tests of arrays of other libraries (``test_device_arrays.py``,
``test_device_arguments.py``): results read back as NumPy and compared byte for byte."""

from __future__ import annotations

import numpy as np

from spatialhash import Pairs


def host(array):
    """A result's array as NumPy, whatever its kind (torch tensors and Warp arrays)."""
    if array is None or isinstance(array, np.ndarray):
        return array
    if hasattr(array, "cpu"):  # a torch tensor, on any device
        return array.cpu().numpy()
    return array.numpy()


def assert_same(got, expected, what, kind_type=None):
    """``got`` (a result or an array) equal, byte for byte, to ``expected``'s NumPy
    arrays, and its other fields equal; with ``kind_type``, its arrays of that type."""
    if isinstance(expected, np.ndarray):
        if kind_type is not None:
            assert isinstance(got, kind_type), what
        value = host(got)
        assert value.dtype == expected.dtype and value.shape == expected.shape, what
        assert value.tobytes() == expected.tobytes(), what
        return
    assert type(got) is type(expected), what
    for name, value in vars(expected).items():
        if isinstance(value, np.ndarray):
            assert_same(getattr(got, name), value, f"{what}.{name}", kind_type)
        else:
            assert getattr(got, name) == value, f"{what}.{name}"


def sorted_pairs(pairs):
    """``pairs`` (of any kind) as NumPy, their rows in lexicographic order."""
    indices, distances = host(pairs.indices), host(pairs.distances)
    order = np.lexsort((indices[:, 1], indices[:, 0]))
    return Pairs(indices[order], None if distances is None else distances[order],
                 pairs.shape)


def exact32(array):
    """``array``'s values rounded to float32, in float64: the float32 kinds then hold the
    same values as the NumPy arrays they are compared with."""
    return np.asarray(array).astype(np.float32).astype(np.float64)
