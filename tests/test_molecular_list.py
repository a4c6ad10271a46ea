"""`spatialhash.neighbors.MolecularNeighborList`: the molecular list kept with a skin, whose
every update must return what a fresh `neighbor_list` call returns at the new positions
(bit for bit, and in the same order when sorted), and whose rows must be the brute-force
oracle's (``molecular_oracle.py``).

Cells, positions, moves, cutoffs and skins are dyadic, so the arithmetic is exact: a pair
at exactly the cutoff, or a move of exactly half the skin, is decided the same way by the
list, the search and the oracle.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import molecular_oracle as oracle
from spatialhash.neighbors import MolecularNeighborList, neighbor_list
from spatialhash.neighbors._kernels.molecular_list import ROWS_PER_CHUNK
from test_molecular import STEP, cutoffs, systems


def _wrapped(positions, cell, pbc):
    """``positions`` moved by whole cell vectors into the cell on the periodic axes (the
    floor of an inexact fractional coordinate may be off by one near a face: the result
    is still the atom moved by a lattice vector, exactly, which is all a wrap is)."""
    axes = np.flatnonzero(pbc)
    if not axes.size:
        return positions.copy()
    fractional = positions @ np.linalg.pinv(cell[axes])
    return positions - np.floor(fractional) @ cell[axes]


def _assert_fresh(got, positions, cutoff, cell, pbc, full_list, sorted, radii=None):
    """``got`` ("ijSdD") equals a fresh `neighbor_list` call and the oracle's rows."""
    fresh = neighbor_list("ijSdD", positions, cutoff, cell, pbc, radii=radii,
                          full_list=full_list, sorted=sorted)
    rows = oracle.as_rows(*got)
    assert rows == oracle.as_rows(*fresh)
    if sorted:  # the same order, to the bit
        for array, expected in zip(got, fresh, strict=True):
            assert array.dtype == expected.dtype and array.shape == expected.shape
            np.testing.assert_array_equal(array, expected)
    assert (np.diff(got[0]) >= 0).all()  # grouped by i, in increasing order
    expected = oracle.pairs(positions, cell, pbc, cutoff, radii)
    if not full_list:
        expected = {key: value for key, value in expected.items() if oracle.is_half_row(*key)}
    assert rows == expected


# ---------------------------------------------------------------------- properties
@given(system=systems(max_points=6), data=st.data(), full_list=st.booleans(),
       sorted=st.booleans())
def test_every_update_equals_a_fresh_search_after_random_moves(system, data, full_list,
                                                                sorted):
    positions, cell, pbc = system
    cutoff = data.draw(cutoffs((cell, pbc)))
    skin = data.draw(st.integers(0, 8)) * STEP
    neighbors = MolecularNeighborList("ijSdD", cutoff, skin, cell, pbc, full_list=full_list,
                                      sorted=sorted)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    n, n_dims = positions.shape
    largest_move = data.draw(st.integers(0, 6))  # in eighths: under and over skin / 2
    for step in range(data.draw(st.integers(1, 5))):
        if step:
            positions = positions + rng.integers(-largest_move, largest_move + 1,
                                                 (n, n_dims)) * (STEP / 2)
            jumps = rng.integers(-1, 2, (n, n_dims)) * pbc  # whole cell vectors
            positions = positions + jumps @ cell
            if rng.random() < 0.5:
                positions = _wrapped(positions, cell, pbc)
        got = neighbors.update(positions)
        _assert_fresh(got, positions, cutoff, cell, pbc, full_list, sorted)
    assert 1 <= neighbors.n_builds <= step + 1


@given(system=systems(max_points=5), data=st.data())
def test_radii_updates_equal_a_fresh_search(system, data):
    positions, cell, pbc = system
    width = oracle.widths(cell, pbc).min(initial=2.0)
    radii = np.array(data.draw(st.lists(
        st.integers(0, max(1, int(width / STEP))).map(lambda k: k * STEP),
        min_size=len(positions), max_size=len(positions))), dtype=np.float64)
    skin = data.draw(st.integers(0, 4)) * STEP
    neighbors = MolecularNeighborList("ijSdD", None, skin, cell, pbc, radii=radii,
                                      sorted=True)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    for _ in range(3):
        got = neighbors.update(positions)
        _assert_fresh(got, positions, None, cell, pbc, True, True, radii)
        positions = positions + rng.integers(-2, 3, positions.shape) * (STEP / 2)


# ---------------------------------------------------------------------- named cases
TRICLINIC = np.array([[4.0, 0.0, 0.0], [1.0, 4.0, 0.0], [0.5, -0.5, 4.0]])


def test_an_atom_wrapped_back_into_the_cell_has_not_moved():
    positions = np.array([[3.875, 0.25, 0.5], [0.25, 0.5, 0.25], [2.0, 2.0, 2.0]])
    neighbors = MolecularNeighborList("ijSdD", 1.5, 0.5, TRICLINIC, sorted=True)
    before = neighbors.update(positions)
    moved = positions.copy()
    moved[0, 0] += 0.25  # across the face x = 4: now outside the cell
    wrapped = moved.copy()
    wrapped[0] -= TRICLINIC[0]  # and back in, by one cell vector
    for step in (moved, wrapped, positions + TRICLINIC[1] - 2 * TRICLINIC[2]):
        got = neighbors.update(step)
        _assert_fresh(got, step, 1.5, TRICLINIC, True, True, True)
    assert neighbors.n_builds == 1 and not neighbors.rebuilt
    # The pair (0, 1) met across the face: its shift changed by the jump, its vector not.
    after = neighbors.update(wrapped)
    pair_before = (before[0] == 0) & (before[1] == 1)
    pair_after = (after[0] == 0) & (after[1] == 1)
    np.testing.assert_array_equal(before[2][pair_before] - [1, 0, 0], after[2][pair_after])


@pytest.mark.parametrize("cell, pbc", [(None, False), (TRICLINIC * 4, True)])
def test_moves_of_exactly_half_the_skin_keep_the_list_and_more_rebuilds(cell, pbc):
    cutoff, skin = 1.5, 0.5
    # At exactly cutoff + skin: found at the build, and after each atom moves skin / 2
    # towards the other, at exactly the cutoff.
    positions = np.array([[1.0, 1.0, 1.0], [3.0, 1.0, 1.0]])
    neighbors = MolecularNeighborList("ijSdD", cutoff, skin, cell, pbc, sorted=True)
    assert neighbors.update(positions)[0].size == 0
    closer = positions + [[0.25, 0.0, 0.0], [-0.25, 0.0, 0.0]]
    got = neighbors.update(closer)
    assert not neighbors.rebuilt and got[3].tolist() == [1.5, 1.5]
    _assert_fresh(got, closer, cutoff, cell, pbc, True, True)
    beyond = closer + [[STEP / 8, 0.0, 0.0], [0.0, 0.0, 0.0]]
    got = neighbors.update(beyond)
    assert neighbors.rebuilt and neighbors.n_builds == 2
    _assert_fresh(got, beyond, cutoff, cell, pbc, True, True)


@pytest.mark.parametrize("full_list", [True, False])
def test_a_cutoff_beyond_half_the_cell_width_meets_the_atoms_own_images(full_list):
    cell = np.array([[2.0, 0.0, 0.0], [0.5, 2.0, 0.0], [0.25, 0.5, 2.0]])
    rng = np.random.default_rng(4)
    positions = rng.integers(0, 16, (3, 3)) * STEP * 2
    neighbors = MolecularNeighborList("ijSdD", 2.75, 0.25, cell, full_list=full_list,
                                      sorted=True)
    for _ in range(4):
        got = neighbors.update(positions)
        assert (got[0] == got[1]).any()
        _assert_fresh(got, positions, 2.75, cell, True, full_list, True)
        positions = positions + rng.integers(-1, 2, positions.shape) * STEP / 2


def test_mixed_periodicity_a_slab():
    cell = np.array([[3.0, 0.0, 0.0], [1.0, 3.0, 0.0], [0.0, 0.0, 0.0]])  # no third vector
    pbc = [True, True, False]
    rng = np.random.default_rng(5)
    positions = rng.integers(-8, 24, (6, 3)) * STEP
    neighbors = MolecularNeighborList("ijSdD", 2.0, 0.5, cell, pbc, sorted=True)
    for _ in range(5):
        got = neighbors.update(positions)
        assert (got[2][:, 2] == 0).all()
        _assert_fresh(got, positions, 2.0, cell, np.array(pbc), True, True)
        positions = _wrapped(positions + rng.integers(-1, 2, positions.shape) * STEP,
                             cell, np.array(pbc))


@pytest.mark.parametrize("full_list", [True, False])
def test_two_dimensional_cells(full_list):
    cell = np.array([[2.0, 0.0], [0.75, 2.5]])
    rng = np.random.default_rng(6)
    positions = rng.integers(-8, 24, (5, 2)) * STEP
    neighbors = MolecularNeighborList("ijSdD", 1.75, 0.25, cell, full_list=full_list)
    for _ in range(5):
        got = neighbors.update(positions)
        _assert_fresh(got, positions, 1.75, cell, np.array([True, True]), full_list, False)
        positions = _wrapped(positions + rng.integers(-1, 2, positions.shape) * STEP / 2,
                             cell, np.array([True, True]))


def test_a_changed_cell_rebuilds():
    positions = np.array([[0.5, 0.5, 0.5], [2.0, 1.5, 0.75], [3.5, 3.5, 3.5]])
    neighbors = MolecularNeighborList("ijSdD", 1.5, 0.5, TRICLINIC, sorted=True)
    neighbors.update(positions)
    strained = TRICLINIC * 1.125
    got = neighbors.update(positions, cell=strained)
    assert neighbors.rebuilt and neighbors.n_builds == 2
    _assert_fresh(got, positions, 1.5, strained, True, True, True)
    neighbors.update(positions)  # the cell last given is kept
    assert not neighbors.rebuilt
    neighbors.update(positions, cell=strained.copy())  # the same cell: no rebuild
    assert not neighbors.rebuilt and neighbors.n_builds == 2


def test_outputs_by_letter_are_new_arrays_and_inputs_are_never_modified():
    positions = np.array([[0.5, 0.5, 0.5], [1.5, 0.5, 0.5]], dtype=np.float32)
    cell, radii = np.eye(3) * 4, np.array([0.5, 0.75])
    for array in (positions, cell, radii):
        array.setflags(write=False)
    kept = positions.copy(), cell.copy(), radii.copy()
    neighbors = MolecularNeighborList("dbd", None, 0.5, cell, radii=radii)
    d, b, d_again = neighbors.update(positions)
    assert d.tolist() == [1.0, 1.0] and b.tolist() == [0, 0] and d_again is not d
    d[:] = -1.0
    assert neighbors.update(positions)[0].tolist() == [1.0, 1.0]
    assert MolecularNeighborList("i", 1.0, 0.0).update(positions).tolist() == [0, 1]
    for array, copy in zip((positions, cell, radii), kept, strict=True):
        np.testing.assert_array_equal(array, copy)


def test_no_atoms():
    i, shifts = MolecularNeighborList("iS", 1.0, 0.5, np.eye(2)).update(np.empty((0, 2)))
    assert i.shape == (0,) and shifts.shape == (0, 2)


BAD_CONSTRUCTIONS = [
    ({"skin": -0.5}, ValueError, r"`skin` must be >= 0; got -0\.5\."),
    ({"skin": float("nan")}, ValueError, r"`skin` must be >= 0; got nan\."),
    ({"skin": None}, TypeError, r"give `skin`"),
    ({"cutoff": -1.0}, ValueError, r"`cutoff` must be > 0; got -1\.0\."),
    ({"cutoff": None, "radii": [1.0, -1.0]}, ValueError,
     r"`radii` must hold finite values >= 0; got -1\.0"),
    ({"radii": [1.0]}, TypeError, r"give exactly one of `cutoff` .* and `radii`"),
    ({"quantities": "ijx"}, ValueError, r"`quantities` must be one or more letters"),
]


@pytest.mark.parametrize("changes, error, message", BAD_CONSTRUCTIONS)
def test_bad_construction_is_refused_naming_the_parameter(changes, error, message):
    arguments = {"quantities": "ij", "cutoff": 1.0, "skin": 0.5, "cell": np.eye(3) * 4}
    arguments.update(changes)
    with pytest.raises(error, match=message):
        MolecularNeighborList(arguments.pop("quantities"), **arguments)


def test_bad_updates_are_refused_naming_the_parameter():
    neighbors = MolecularNeighborList("ij", 1.0, 0.5, np.eye(3) * 4)
    neighbors.update(np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"`points` must keep the shape \(3, 3\) of the "
                                         r"first positions \(the same atoms\); got shape "
                                         r"\(4, 3\)"):
        neighbors.update(np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"`points` must keep the shape .* got shape \(3, 2\)"):
        neighbors.update(np.zeros((3, 2)))
    nan = np.zeros((3, 3))
    nan[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"`points` must be finite"):
        neighbors.update(nan)
    with pytest.raises(ValueError, match=r"`cell` must be right-handed"):
        neighbors.update(np.zeros((3, 3)), cell=-np.eye(3))
    with pytest.raises(ValueError, match=r"`cell` must be finite"):
        neighbors.update(np.zeros((3, 3)), cell=[4.0, np.nan, 4.0])
    with pytest.raises(ValueError, match=r"`radii` must be a scalar or an array of shape "
                                         r"\(3,\); got"):
        MolecularNeighborList("ij", None, 0.5, radii=[1.0, 1.0]).update(np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"`cutoff` and `cell` must need at most .* got "
                                         r"cutoff \+ skin = 1000\.5"):
        MolecularNeighborList("ij", 1000.0, 0.5, np.eye(3)).update(np.zeros((3, 3)))
    # A refused first update leaves the list as it was: refused again, the same way.
    left_handed = MolecularNeighborList("ij", 1.0, 0.5, -np.eye(3))
    for _ in range(2):
        with pytest.raises(ValueError, match=r"`cell` must be right-handed"):
            left_handed.update(np.zeros((3, 3)))
    # A refused search keeps the list it had, and a later update still answers.
    neighbors.update(np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"`cutoff` and `cell` must need at most"):
        neighbors.update(np.zeros((3, 3)), cell=np.eye(3) * 1e-3)
    assert neighbors.update(np.zeros((3, 3)))[0].size == 6  # three atoms at one place


@pytest.mark.parametrize("full_list", [True, False])
def test_the_rows_are_the_same_for_any_thread_count_and_equal_a_fresh_search(full_list,
                                                                             monkeypatch):
    import numba

    from spatialhash import _threads

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one thread is all numba has here")
    # Two threads even on a busy or one-CPU machine, where a call would take fewer.
    monkeypatch.setattr(_threads, "process_cpus", lambda: 64)
    monkeypatch.setenv("SPATIALHASH_ADAPT_THREADS", "0")
    _threads.adapts_to_load.cache_clear()
    rng = np.random.default_rng(8)
    cell = TRICLINIC * 2
    positions = rng.random((3_000, 3)) @ cell  # more than one chunk of rows
    # Small moves, and all atoms by 0, 1 and 2 cell vectors.
    steps = [positions + rng.normal(0.0, 0.03, positions.shape) + k * cell[k]
             for k in range(3)]
    previous = numba.get_num_threads()
    results = []
    try:
        for n_threads in (1, 2):
            numba.set_num_threads(n_threads)
            neighbors = MolecularNeighborList("ijSdD", 1.5, 0.5, cell, full_list=full_list)
            neighbors.update(positions)
            results.append([neighbors.update(step) for step in steps])
            assert neighbors.n_builds == 1
    finally:
        numba.set_num_threads(previous)
        _threads.adapts_to_load.cache_clear()
    for step, one, two in zip(steps, *results, strict=True):
        assert len(one[0]) > ROWS_PER_CHUNK
        fresh = neighbor_list("ijSdD", step, 1.5, cell, full_list=full_list)
        for first, second, expected in zip(one, two, fresh, strict=True):
            assert first.tobytes() == second.tobytes()  # the sign of a zero included
            assert first.shape == expected.shape
        assert oracle.as_rows(*one) == oracle.as_rows(*fresh)
