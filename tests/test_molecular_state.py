"""The molecular list's state before any scan (``_images._state``): the atoms wrapped,
given their query shifts and sorted into bins by the kernels of
``_kernels/molecular_state.py``, against plain NumPy with the same arithmetic, bit for bit.

The kernels cut each system's atoms into pieces of at most `ATOMS_PER_STATE_CHUNK`, hand
runs of pieces to all threads and merge each system's reductions in order: systems of
several pieces, small systems sharing a chunk, empty systems and 1-, 2- and 3-D cells with
open axes, on one thread and on two, must give the state of one pass over the atoms in
order.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

from spatialhash._config import threads
from spatialhash.neighbors import _images
from spatialhash.neighbors._cells import system_cells
from spatialhash.neighbors._kernels.molecular_state import ATOMS_PER_STATE_CHUNK

CUTOFF = 2.5


def _fraction(dual: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Fractional coordinates ``dual @ x`` of the rows of ``x`` (n, d), the kernels' way:
    the terms summed from 0.0 in axis order."""
    value = np.zeros((len(x), len(dual)))
    for k in range(x.shape[1]):
        value = value + dual[:, k] * x[:, k, np.newaxis]
    return value


def _expected(positions, cells, offsets):
    """``{name: array}``: what the state holds of each system, computed system by system
    (the search radius, the bins' origin and widths taken from the state under test:
    `_images._bins` and the margins are NumPy already)."""
    n, n_dims = positions.shape
    wraps = np.zeros((n, n_dims), np.int64)
    wrapped = positions.copy()
    fractional = np.zeros((n, n_dims))
    for b in range(len(offsets) - 1):
        atoms = slice(offsets[b], offsets[b + 1])
        periodic = cells.periodic[b]
        value = _fraction(cells.dual[b], positions[atoms])
        wrap = np.where(np.abs(value) < 2.0**62, -np.floor(value), 0.0).astype(np.int64)
        wraps[atoms] = np.where(periodic, wrap, 0)
        for a in np.flatnonzero(periodic):
            wrapped[atoms] = wrapped[atoms] + wraps[atoms, a, np.newaxis] * cells.vectors[b, a]
        fractional[atoms] = np.where(periodic, _fraction(cells.dual[b], wrapped[atoms]), 0.0)
    return {"wraps": wraps, "wrapped": wrapped, "fractional": fractional}


def _batch(n_dims: int, seed: int):
    """Atoms up to three cells away from their cells (several wraps each), in systems of
    several pieces, one atom, none, and a few (the three in one chunk), with some axes
    open."""
    rng = np.random.default_rng(seed)
    sizes = [2 * ATOMS_PER_STATE_CHUNK + 17, 1, 0, 40, ATOMS_PER_STATE_CHUNK]
    cells, pbc = [], []
    for _ in sizes:
        cell = np.diag(rng.uniform(6.0, 9.0, n_dims)) + np.triu(
            rng.uniform(-1.5, 1.5, (n_dims, n_dims)), 1)
        cells.append(cell)
        pbc.append(rng.random(n_dims) < 0.75)
    positions = np.concatenate([
        rng.uniform(-3.0, 4.0, (size, n_dims)) @ cell for size, cell in zip(sizes, cells,
                                                                            strict=True)])
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return positions, system_cells(np.stack(cells), np.stack(pbc), n_dims, len(sizes)), offsets


@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("n_threads", sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}))
def test_state_equals_one_pass_over_the_atoms(n_dims, n_threads):
    positions, cells, offsets = _batch(n_dims, seed=n_dims)
    with threads(n_threads):
        state, crowding = _images._state(positions, cells, offsets, CUTOFF, None,
                                         ("cutoff", str(CUTOFF), "cell", True))
    expected = _expected(positions, cells, offsets)
    for name in ("wraps", "wrapped"):
        got = getattr(state, name)
        assert got.dtype == expected[name].dtype
        assert got.tobytes() == expected[name].tobytes(), name

    system = np.repeat(np.arange(len(cells)), np.diff(offsets))
    periodic = cells.periodic[system]
    fractional = expected["fractional"]
    # Each system's range of fractional coordinates, and the shifts asked from it.
    low = np.full(cells.periodic.shape, np.inf)
    high = np.full(cells.periodic.shape, -np.inf)
    np.minimum.at(low, system, fractional)
    np.maximum.at(high, system, fractional)
    low[~cells.periodic], high[~cells.periodic] = 0.0, 0.0
    k = (state.search[:, np.newaxis] / cells.widths)[system]
    assert np.array_equal(state.lower, np.ceil(fractional - k - high[system]).astype(np.int64))
    assert np.array_equal(state.upper, np.floor(fractional + k - low[system]).astype(np.int64))
    assert not state.lower[~periodic].any() and not state.upper[~periodic].any()

    # The bins: from each system's bounding box of wrapped atoms.
    wrapped = expected["wrapped"]
    wrapped_min = np.full(cells.periodic.shape, np.inf)
    np.minimum.at(wrapped_min, system, wrapped)
    occupied = np.diff(offsets) > 0
    assert np.array_equal(state.origin[occupied], wrapped_min[occupied])
    place = np.floor((wrapped - state.origin[system]) * state.inv_bin[system, np.newaxis])
    place = np.clip(place, 0.0, state.n_bins[system] - 1).astype(np.int64)
    linear = np.zeros(len(positions), np.int64)
    for a in range(n_dims):
        linear = linear * state.n_bins[system, a] + place[:, a]
    bins = state.bin_offset[system] + linear
    n_bins_all = int(state.bin_offset[-1])
    occupancy = np.bincount(bins, minlength=n_bins_all)
    assert np.array_equal(state.bin_start, np.concatenate([[0], np.cumsum(occupancy)]))
    order = np.argsort(bins, kind="stable")
    assert np.array_equal(state.order, order)
    assert state.binned[:n_dims].tobytes() == np.ascontiguousarray(wrapped[order].T).tobytes()
    assert not state.binned[n_dims:].any()
    assert state.binned_positions.tobytes() == positions[order].tobytes()
    assert np.array_equal(state.binned_wraps, expected["wraps"][order])
    bin_system = np.repeat(np.arange(len(cells)), np.diff(state.bin_offset))
    assert np.array_equal(crowding, np.bincount(bin_system, occupancy.astype(float) ** 2,
                                                minlength=len(cells)))


def test_state_of_a_point_too_far_is_refused():
    # Its system's extent would overflow the bins' sizing: refused, with its message.
    positions = np.array([[1.5e308, 0.0, 0.0], [-1.5e308, 0.0, 0.0]])
    cells = system_cells(np.eye(3) * 4.0, None, 3, None)
    with pytest.raises(ValueError, match="within 2\\*\\*30 cells"):
        _images._state(positions, cells, np.array([0, 2]), CUTOFF, None,
                       ("cutoff", str(CUTOFF), "cell", False))
