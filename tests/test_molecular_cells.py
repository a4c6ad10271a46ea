"""The cells of a batch are checked and measured together (``_cells.geometries``): each
system's cell must come out as it does alone, to the bit, and a batch with several bad
cells is refused for the first of them, in order, as if checked one after another."""

from __future__ import annotations

import numpy as np
import pytest

from spatialhash.neighbors import neighbor_list
from spatialhash.neighbors._cells import geometry, system_cells


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_a_batch_of_cells_is_measured_as_each_cell_alone(n_dims):
    rng = np.random.default_rng(n_dims)
    vectors = rng.normal(size=(40, n_dims, n_dims)) * rng.uniform(0.5, 50.0, (40, 1, 1))
    vectors[np.linalg.det(vectors) < 0, 0] *= -1.0
    pbc = rng.random((40, n_dims)) < 0.7
    pbc[:, 0] = True
    batch = system_cells(vectors, pbc, n_dims, 40)
    for b, cell in enumerate(batch):
        alone = geometry(vectors[b], pbc[b], f"cell[{b}]")
        for got, expected in zip(cell, alone, strict=True):
            assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


def test_the_first_bad_cell_of_a_batch_is_named_whatever_the_others_are():
    left_handed = np.diag([1.0, 1.0, -1.0]) * 10.0
    boxes = [np.eye(3) * 10.0, left_handed, np.zeros((3, 3))]
    positions, ptr = np.zeros((3, 3)), [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"`cell\[1\]` must be right-handed"):
        neighbor_list("ij", positions, 1.0, np.stack(boxes), ptr=ptr)
    flat = [[10.0, 10.0, 10.0, 10.0, 10.0, 90.0]] * 3  # no cell has these angles
    flat[0] = [10.0, 10.0, 10.0, 90.0, 90.0, 90.0]
    with pytest.raises(ValueError, match=r"`cell\[1\]` as \[a, b, c, alpha, beta, gamma\]"):
        neighbor_list("ij", positions, 1.0, np.array(flat), ptr=ptr)
    # A zero length (a flat cell) before a negative one: the flat cell, earlier, is named,
    # though the negative length is found as the lengths are read, before any measuring.
    lengths = np.array([[10.0, 0.0, 10.0], [10.0, -1.0, 10.0], [10.0, 10.0, 10.0]])
    with pytest.raises(ValueError, match=r"`cell\[0\]` must span a non-zero volume"):
        neighbor_list("ij", positions, 1.0, lengths, ptr=ptr)
    with pytest.raises(ValueError, match=r"`cell\[1\]` lengths must be >= 0; got -1\.0"):
        neighbor_list("ij", positions, 1.0, lengths[[2, 1, 0]], ptr=ptr)
