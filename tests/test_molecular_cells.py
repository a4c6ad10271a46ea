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


@pytest.mark.parametrize("form", ["lengths", "mdanalysis"])
def test_a_batch_of_lengths_or_boxes_is_read_as_each_cell_alone(form):
    rng = np.random.default_rng(7)
    lengths = rng.uniform(2.0, 20.0, (30, 3))
    cells = lengths if form == "lengths" else np.hstack(
        [lengths, rng.uniform(70.0, 110.0, (30, 3))])
    pbc = rng.random((30, 3)) < 0.7
    batch = system_cells(cells, pbc, 3, 30)
    assert len(batch) == 30
    for b, cell in enumerate(batch):
        alone = system_cells(cells[b], pbc[b], 3, None)[0]
        for got, expected in zip(cell, alone, strict=True):
            assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


def test_the_first_bad_cell_is_named_across_patterns_of_periodic_axes():
    # System 1 (every axis periodic, left-handed) and system 2 (a slab, flat) are measured
    # in groups of their own, the slab's first; system 1 comes first all the same.
    cells = np.stack([np.eye(3) * 10.0, np.diag([10.0, 10.0, -10.0]), np.zeros((3, 3))])
    pbc = [[True, True, True], [True, True, True], [True, True, False]]
    with pytest.raises(ValueError, match=r"`cell\[1\]` must be right-handed"):
        neighbor_list("ij", np.zeros((3, 3)), 1.0, cells, pbc=pbc, ptr=[0, 1, 2, 3])


def test_minimum_image_names_the_first_system_too_narrow_for_the_cutoff():
    cells = np.stack([np.eye(3) * 20.0, np.eye(3) * 20.0, np.diag([20.0, 9.0, 20.0]),
                      np.diag([8.0, 20.0, 20.0])])
    pbc = [[True] * 3, [False, True, True], [True] * 3, [True] * 3]
    cells[1, 0] = 0.0  # an open axis without a vector
    with pytest.raises(ValueError, match=r"\(4\.5, across axis 1 of cell\[2\]\); got 5\.0"):
        neighbor_list("ij", np.zeros((4, 3)), 5.0, cells, pbc=pbc, ptr=[0, 1, 2, 3, 4],
                      mic=True)
    i = neighbor_list("i", np.zeros((2, 3)), 5.0, cells[:2], pbc=pbc[:2], ptr=[0, 1, 2],
                      mic=True)
    assert len(i) == 0
