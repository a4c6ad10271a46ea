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
from spatialhash.neighbors import _molecular_list as molecular_list
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


# ---------------------------------------------------------------------- batches (ptr)
def _assert_same_bits(got, expected):
    """Every array of ``got`` is that of ``expected``: dtype, shape and bits."""
    assert len(got) == len(expected)
    for array, wanted in zip(got, expected, strict=True):
        array, wanted = np.asarray(array), np.asarray(wanted)
        assert array.dtype == wanted.dtype and array.shape == wanted.shape
        assert array.tobytes() == wanted.tobytes()


def _moved_batch(rng, positions, cells, pbcs, ptr, largest_move):
    """Each system's atoms moved by up to ``largest_move`` sixteenths, some of them by
    whole cell vectors of their system, and now and then wrapped into their cell."""
    positions = positions + rng.integers(-largest_move, largest_move + 1,
                                         positions.shape) * (STEP / 2)
    for b in range(len(ptr) - 1):
        part = slice(ptr[b], ptr[b + 1])
        jumps = rng.integers(-1, 2, positions[part].shape) * pbcs[b]
        positions[part] += jumps @ cells[b]
        if rng.random() < 0.3:
            positions[part] = _wrapped(positions[part], cells[b], pbcs[b])
    return positions


@given(n_dims=st.integers(1, 3), data=st.data(), full_list=st.booleans(),
       sorted=st.booleans(), tight=st.booleans())
def test_every_update_of_a_batch_equals_a_fresh_batched_search(n_dims, data, full_list,
                                                                sorted, tight):
    # `tight`: slots without room to spare, so that a system searched again with more
    # candidates than before moves every system into new slots.
    with pytest.MonkeyPatch.context() as patch:
        if tight:
            patch.setattr(molecular_list, "SLACK_SHARE", 0.0)
            patch.setattr(molecular_list, "SLACK_ROWS", 0)
        _check_batch_updates(n_dims, data, full_list, sorted)


def _check_batch_updates(n_dims, data, full_list, sorted):
    parts = [data.draw(systems(n_dims=n_dims, max_points=5))
             for _ in range(data.draw(st.integers(1, 3)))]
    cells = np.stack([cell for _, cell, _ in parts])
    pbcs = np.stack([pbc for _, _, pbc in parts])
    cutoff = data.draw(cutoffs(*[(cell, pbc) for _, cell, pbc in parts]))
    narrowest = min(oracle.widths(cell, pbc).min(initial=np.inf) for _, cell, pbc in parts)
    mic = 2 * cutoff < narrowest * (1 - 1e-9) and data.draw(st.booleans())
    skin = data.draw(st.integers(0, 8)) * STEP
    ptr = np.cumsum([0] + [len(positions) for positions, _, _ in parts])
    positions = np.concatenate([p for p, _, _ in parts]).reshape(-1, n_dims)
    options = {"full_list": full_list, "sorted": sorted, "mic": mic}
    neighbors = MolecularNeighborList("ijSdDb", cutoff, skin, cells, pbcs, ptr=ptr,
                                      **options)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    for step in range(data.draw(st.integers(1, 5))):
        if step:
            positions = _moved_batch(rng, positions, cells, pbcs, ptr,
                                     data.draw(st.integers(0, 6)))
        if step and rng.random() < 0.25:  # one system's cell grown by an eighth
            cells = cells.copy()
            cells[rng.integers(len(parts))] *= 1.125
        got = neighbors.update(positions, cells)
        fresh = neighbor_list("ijSdDb", positions, cutoff, cells, pbcs, ptr=ptr, **options)
        assert oracle.as_rows(*got[:5]) == oracle.as_rows(*fresh[:5])
        if sorted:
            _assert_same_bits(got, fresh)
        for b in range(len(parts)):  # each row in its system, with its system's letter
            rows = (ptr[b] <= got[0]) & (got[0] < ptr[b + 1])
            assert (got[5][rows] == b).all()
            assert ((ptr[b] <= got[1][rows]) & (got[1][rows] < ptr[b + 1])).all()
        assert (np.diff(got[0]) >= 0).all()


def test_a_batch_searches_again_only_the_systems_that_moved_or_changed_cell():
    rng = np.random.default_rng(21)
    cells = np.stack([TRICLINIC, TRICLINIC * 1.25, np.eye(3) * 5.0])
    ptr = np.array([0, 40, 40, 100, 130])  # system 1 is empty
    cells = np.concatenate([cells[:1], cells])
    positions = np.concatenate([rng.random((ptr[b + 1] - ptr[b], 3)) @ cells[b]
                                for b in range(4)])
    pbcs = np.array([[True] * 3, [True] * 3, [True, True, False], [True] * 3])
    neighbors = MolecularNeighborList("ijSdDb", 1.5, 0.5, cells, pbcs, ptr=ptr, sorted=True)
    neighbors.update(positions)
    assert neighbors.rebuilt_systems.tolist() == [0, 1, 2, 3] and neighbors.n_builds == 1

    def check(expected_systems, positions, cells, pbcs=pbcs):
        got = neighbors.update(positions, cells, pbcs)
        assert neighbors.rebuilt_systems.tolist() == expected_systems
        _assert_same_bits(got, neighbor_list("ijSdDb", positions, 1.5, cells, pbcs,
                                             ptr=ptr, sorted=True))

    small = positions + rng.uniform(-0.1, 0.1, positions.shape)
    small[100:] += cells[3, 0]  # a whole cell vector: not a move
    check([], small, cells)
    far = small.copy()
    far[45] += [0.3, 0.0, 0.0]  # beyond skin / 2, in system 2 only
    check([2], far, cells)
    strained = cells.copy()
    strained[0] *= 1.125
    check([0], far, strained)
    slab = pbcs.copy()
    slab[3, 2] = False
    check([3], far, strained, slab)
    check([], far + 0.01, strained, slab)
    assert neighbors.n_builds == 4


def _batch(rng, sizes, cell=TRICLINIC):
    """``(positions, cells, ptr)``: systems of ``sizes`` random atoms, each in ``cell``
    grown by a sixteenth more than the last."""
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    cells = np.stack([cell * (1 + b / 16) for b in range(len(sizes))])
    positions = np.concatenate([rng.random((size, 3)) @ cells[b]
                                for b, size in enumerate(sizes)])
    return positions, cells, ptr


@pytest.mark.parametrize("moving", ["none", "one", "many", "all"])
@pytest.mark.parametrize("sorted", [True, False])
def test_a_batch_with_empty_systems_equals_a_fresh_search_whichever_systems_move(moving,
                                                                                 sorted):
    rng = np.random.default_rng(23)
    sizes = [0, 30, 12, 0, 25, 40, 0, 18, 33, 0]
    positions, cells, ptr = _batch(rng, sizes)
    full = [b for b, size in enumerate(sizes) if size]
    chosen = {"none": [], "one": [4], "many": [1, 5, 7, 8], "all": full}[moving]
    neighbors = MolecularNeighborList("ijSdDb", 1.5, 0.5, cells, ptr=ptr, sorted=sorted)
    for step in range(5):
        if step:
            positions = positions + rng.uniform(-0.05, 0.05, positions.shape)
            for b in chosen:  # beyond skin / 2: its system is searched again
                positions[ptr[b]] += [0.3, 0.0, 0.0]
            if step == 3:  # a wrap of every atom: jumps, no moves
                positions = np.concatenate([
                    _wrapped(positions[ptr[b]:ptr[b + 1]], cells[b], True)
                    for b in range(len(sizes))])
        got = neighbors.update(positions)
        fresh = neighbor_list("ijSdDb", positions, 1.5, cells, ptr=ptr, sorted=sorted)
        if sorted:
            _assert_same_bits(got, fresh)
        assert oracle.as_rows(*got[:5]) == oracle.as_rows(*fresh[:5])
        assert (np.diff(got[0]) >= 0).all() and (np.diff(got[5]) >= 0).all()
        expected = list(range(len(sizes))) if step == 0 else chosen
        assert neighbors.rebuilt_systems.tolist() == expected
    assert neighbors.n_builds == (1 if moving == "none" else 5)


@pytest.mark.parametrize("sorted", [True, False])
def test_a_system_outgrowing_its_room_moves_every_system_into_new_slots(sorted):
    rng = np.random.default_rng(24)
    positions, cells, ptr = _batch(rng, [20, 30, 25], TRICLINIC * 2)
    neighbors = MolecularNeighborList("ijSdD", 1.5, 0.5, cells, ptr=ptr, sorted=sorted)
    rooms = []
    for squeeze in (1.0, 0.9, 0.5, 0.25, 0.5, 1.0):
        # System 1's atoms drawn towards their centre: more candidates than its room.
        moved = positions.copy()
        centre = positions[20:50].mean(axis=0)
        moved[20:50] = centre + squeeze * (positions[20:50] - centre)
        moved += rng.uniform(-0.05, 0.05, moved.shape)
        got = neighbors.update(moved)
        fresh = neighbor_list("ijSdD", moved, 1.5, cells, ptr=ptr, sorted=sorted)
        if sorted:
            _assert_same_bits(got, fresh)
        assert oracle.as_rows(*got) == oracle.as_rows(*fresh)
        rooms.append(len(neighbors._candidates[0]))  # the slots of all systems
    # Grown when squeezed, kept when spread out again (the rows are the same either way).
    assert rooms[3] > rooms[0] and rooms[-1] == rooms[3]
    assert neighbors.n_builds == 6


def test_a_batch_with_radii_equals_a_fresh_batched_search():
    rng = np.random.default_rng(22)
    ptr = np.array([0, 30, 70])
    cells = np.stack([TRICLINIC, np.eye(3) * 4.5])
    positions = np.concatenate([rng.random((30, 3)) @ cells[0], rng.random((40, 3)) @ cells[1]])
    radii = rng.uniform(0.2, 0.9, 70)
    neighbors = MolecularNeighborList("ijSdDb", None, 0.4, cells, radii=radii, ptr=ptr,
                                      full_list=False, sorted=True)
    for step in range(6):
        got = neighbors.update(positions)
        _assert_same_bits(got, neighbor_list("ijSdDb", positions, None, cells, radii=radii,
                                             ptr=ptr, full_list=False, sorted=True))
        positions = positions + rng.normal(0.0, 0.02 if step < 4 else 0.2, positions.shape)
    assert neighbors.n_builds == 2 and neighbors.rebuilt_systems.tolist() == [0, 1]


def test_ptr_is_fixed_for_the_lists_life():
    positions = np.zeros((5, 3))
    cells = np.stack([np.eye(3) * 4] * 2)
    neighbors = MolecularNeighborList("ij", 1.0, 0.5, cells, ptr=[0, 2, 5])
    neighbors.update(positions, ptr=np.array([0, 2, 5]))  # the same offsets: taken
    with pytest.raises(ValueError, match=r"^`ptr` must stay the offsets the list was given "
                                         r"\(\[0, 2, 5\]\) for the list's life; got "
                                         r"ptr=\[0, 3, 5\]\. Make a new list"):
        neighbors.update(positions, ptr=[0, 3, 5])
    with pytest.raises(ValueError, match=r"`points` must keep the shape \(5, 3\)"):
        neighbors.update(np.zeros((6, 3)), ptr=[0, 3, 6])
    with pytest.raises(ValueError, match=r"^`ptr` must stay the offsets the list was given "
                                         r"\(\[0, 2, 5\]\)"):
        MolecularNeighborList("ij", 1.0, 0.5, cells, ptr=[0, 2, 5]).update(
            positions, ptr=[0, 1, 5])
    single = MolecularNeighborList("ij", 1.0, 0.5, np.eye(3) * 4)
    single.update(positions)
    with pytest.raises(ValueError, match=r"^`ptr` must stay the offsets the list was given "
                                         r"\(None\)"):
        single.update(positions, ptr=[0, 5])
    with pytest.raises(ValueError, match=r"`ptr` must run from 0 to the number of points "
                                         r"\(5\); got ptr\[0\] = 0 and ptr\[-1\] = 4"):
        MolecularNeighborList("ij", 1.0, 0.5, np.eye(3) * 4, ptr=[0, 4]).update(positions)
    with pytest.raises(ValueError, match=r"`cell` must hold one cell per system"):
        MolecularNeighborList("ij", 1.0, 0.5, np.eye(3) * 4, ptr=[0, 2, 5]).update(positions)
    batch = MolecularNeighborList("ij", 1.0, 0.5, cells, ptr=[0, 2, 5])
    batch.update(positions)
    with pytest.raises(ValueError, match=r"`cell` must hold one cell per system"):
        batch.update(positions, np.eye(3) * 4)
    assert batch.update(positions)[0].size == 2 + 6  # the list kept its cells


# ---------------------------------------------------------------------- mic
def test_mic_refuses_a_cutoff_beyond_half_a_width_at_the_first_update_and_new_cells():
    rng = np.random.default_rng(23)
    positions = rng.random((20, 3)) * 4.0
    message = (r"`cutoff` must be at most half the cell's shortest perpendicular width with "
               r"`mic=True` \(2, across axis 0\); got 2\.5\. Pass mic=False")
    with pytest.raises(ValueError, match=message):
        MolecularNeighborList("ij", 2.5, 0.5, np.eye(3) * 4, mic=True).update(positions)
    # The skin may reach past half the width: the rows are those of mic=True.
    neighbors = MolecularNeighborList("ijSdD", 1.75, 1.0, np.eye(3) * 4, mic=True,
                                      sorted=True)
    _assert_same_bits(neighbors.update(positions),
                      neighbor_list("ijSdD", positions, 1.75, np.eye(3) * 4, mic=True,
                                    sorted=True))
    with pytest.raises(ValueError, match=r"`cutoff` must be at most half .* \(1\.5, across "
                                         r"axis 1\); got 1\.75"):
        neighbors.update(positions, [4.0, 3.0, 4.0])
    assert neighbors.update(positions + 0.01)[0].size  # the list kept its cell
    batch = MolecularNeighborList("ij", None, 0.5, np.stack([np.eye(3) * 4, np.eye(3) * 3]),
                                  radii=np.full(20, 0.875), mic=True, ptr=[0, 10, 20])
    with pytest.raises(ValueError, match=r"`radii` must be at most half .* \(1\.5, across "
                                         r"axis 0 of cell\[1\]\); got 2 \* max\(radii\) = "
                                         r"1\.75"):
        batch.update(positions)


# ---------------------------------------------------------------------- inputs
def test_an_ase_atoms_gives_positions_cell_and_pbc_at_each_update():
    from ase import build

    atoms = build.bulk("Cu", "fcc", a=3.6) * (3, 3, 3)
    atoms.rattle(0.05, rng=np.random.default_rng(24))
    neighbors = MolecularNeighborList("ijSdD", 3.0, 0.4, sorted=True)
    rng = np.random.default_rng(25)
    for step in range(6):
        got = neighbors.update(atoms)
        _assert_same_bits(got, neighbor_list("ijSdD", atoms, 3.0, sorted=True))
        atoms.positions += rng.normal(0.0, 0.03, atoms.positions.shape)
        if step == 2:
            atoms.wrap()
        if step == 3:
            atoms.set_cell(atoms.cell * 1.01, scale_atoms=True)
        if step == 4:
            atoms.pbc = [True, True, False]
    assert 2 <= neighbors.n_builds <= 5
    with pytest.raises(TypeError, match=r"`cell` must be left out with an ase.Atoms"):
        neighbors.update(atoms, cell=np.eye(3))
    batch = MolecularNeighborList("ij", 3.0, 0.4, np.stack([atoms.cell[:]] * 2),
                                  ptr=[0, 10, len(atoms)])
    with pytest.raises(TypeError, match=r"`ptr` must be left out with an ase.Atoms or an "
                                        r"MDAnalysis group as `points`"):
        batch.update(atoms)
    batch.update(atoms.positions)
    with pytest.raises(TypeError, match=r"`points` must be an array with the `ptr` the "
                                        r"list was given"):
        batch.update(atoms)


def test_an_mdanalysis_universe_gives_positions_and_box_at_each_update():
    from test_molecular import MDANALYSIS_BOX, _universe

    rng = np.random.default_rng(26)
    positions = (rng.random((60, 3)) * 9.0).astype(np.float32)
    universe = _universe(positions, MDANALYSIS_BOX)
    neighbors = MolecularNeighborList("ijSdD", 3.0, 0.5, sorted=True)
    for step in range(5):
        got = neighbors.update(universe.atoms)
        _assert_same_bits(got, neighbor_list("ijSdD", universe.atoms, 3.0, sorted=True))
        universe.atoms.positions += rng.normal(0.0, 0.05, (60, 3)).astype(np.float32)
        if step == 2:
            universe.dimensions = None  # no box: every axis open
    assert neighbors.n_builds >= 2
    universe.dimensions = [5.0, 5.0, 5.0, 10.0, 10.0, 90.0]
    with pytest.raises(ValueError, match=r"`points.dimensions` as \[a, b, c, alpha, beta, "
                                         r"gamma\] must describe a cell"):
        neighbors.update(universe)


def test_tensors_give_tensors_equal_to_a_fresh_call_with_the_same_gradients():
    import torch

    rng = np.random.default_rng(27)
    cell = torch.from_numpy(TRICLINIC)
    start = rng.random((40, 3)) @ TRICLINIC
    for sorted in (True, False):
        neighbors = MolecularNeighborList("ijSdDb", 1.5, 0.3, cell, sorted=sorted)
        for step in range(5):
            moved = start + rng.normal(0.0, 0.02 if step < 4 else 0.3, start.shape)
            results = []
            for new_call in (False, True):
                points = torch.from_numpy(moved).requires_grad_()
                got = (neighbor_list("ijSdDb", points, 1.5, cell, sorted=sorted) if new_call
                       else neighbors.update(points))
                assert all(isinstance(tensor, torch.Tensor) for tensor in got)
                i, j, S, d, D, b = got
                assert d.requires_grad and D.requires_grad and not i.requires_grad
                (d.sum() + (D**2).sum()).backward()
                results.append(([tensor.detach().numpy() for tensor in got], points.grad))
            (ours, our_grad), (fresh, fresh_grad) = results
            if sorted:
                _assert_same_bits(ours, fresh)
                assert torch.equal(our_grad, fresh_grad)
            else:
                assert oracle.as_rows(*ours[:5]) == oracle.as_rows(*fresh[:5])
                torch.testing.assert_close(our_grad, fresh_grad, rtol=1e-12, atol=1e-12)
        assert neighbors.n_builds == 2
    with pytest.raises(TypeError, match=r"^`cell` must not require grad with 'D' and 'd'"):
        MolecularNeighborList("dD", 1.5, 0.3, cell.clone().requires_grad_())
    neighbors = MolecularNeighborList("ijS", 1.5, 0.3, cell)
    neighbors.update(torch.from_numpy(start))
    with pytest.raises(TypeError, match=r"^`cell` must not require grad with 'D'"):
        MolecularNeighborList("D", 1.5, 0.3).update(start, cell.clone().requires_grad_())


def test_dlpack_objects_and_float32_tensors_are_read_as_neighbor_list_reads_them():
    import torch

    from test_molecular_torch import DLPackOnly

    rng = np.random.default_rng(28)
    positions = rng.random((30, 3)) @ TRICLINIC
    neighbors = MolecularNeighborList("ijSdD", 1.5, 0.3, DLPackOnly(TRICLINIC), sorted=True)
    got = neighbors.update(DLPackOnly(positions))
    assert all(type(array) is np.ndarray for array in got)
    _assert_same_bits(got, neighbor_list("ijSdD", positions, 1.5, TRICLINIC, sorted=True))
    single = torch.from_numpy(positions).float()
    neighbors = MolecularNeighborList("ijSdD", 1.5, 0.3, TRICLINIC, sorted=True)
    _assert_same_bits([t.numpy() for t in neighbors.update(single)],
                      [t.numpy() for t in neighbor_list("ijSdD", single, 1.5, TRICLINIC,
                                                         sorted=True)])
    with pytest.raises(TypeError, match=r"`points` must be on the CPU"):
        neighbors.update(DLPackOnly(positions, device=(2, 0)))
