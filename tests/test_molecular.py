"""`spatialhash.neighbors.neighbor_list`: molecular neighbour lists in periodic cells of any
shape, against a brute-force oracle over every shift (``molecular_oracle.py``) and against
ASE's ``neighbor_list``.

Cells, positions and cutoffs are dyadic (multiples of 1/4 and 1/8), so the arithmetic is
exact, ties and pairs at exactly the cutoff are common, and the oracle's rows, distances
and vectors must equal the function's bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import molecular_oracle as oracle
from spatialhash.neighbors import neighbor_list

STEP = 1 / 8


# ---------------------------------------------------------------------- strategies
@st.composite
def systems(draw, n_dims=None, max_points=7):
    """``(positions, cell, pbc)``: a right-handed triclinic cell of dyadic vectors, some axes
    open (their vector sometimes zero), points anywhere from a cell below to one above."""
    n_dims = draw(st.integers(1, 3)) if n_dims is None else n_dims
    pbc = np.array(draw(st.lists(st.booleans(), min_size=n_dims, max_size=n_dims)))
    quarters = st.integers(-6, 6).map(lambda q: q / 4)
    while True:
        cell = np.array(draw(st.lists(quarters, min_size=n_dims ** 2,
                                      max_size=n_dims ** 2))).reshape(n_dims, n_dims)
        cell += np.diag(draw(st.lists(st.integers(4, 12).map(lambda q: q / 4),
                                      min_size=n_dims, max_size=n_dims)))
        determinant, norms = np.linalg.det(cell), np.linalg.norm(cell, axis=1)
        if (norms > 0).all() and abs(determinant) > 0.3 * norms.prod():
            break  # not too thin: images stay few
    if determinant < 0:
        cell[0] = -cell[0]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(1, max_points))
    fractional = rng.integers(-8, 16, size=(n, n_dims)) * STEP
    positions = fractional @ cell  # dyadic: exact
    if draw(st.booleans()):
        cell[~pbc] = 0.0  # open axes without a vector, as ASE allows
    return positions, cell, pbc


def cutoffs(*cells):
    """Dyadic cutoffs from a sixth to 3 times the narrowest periodic width of the
    ``(cell, pbc)`` given (up to 6 when every axis is open)."""
    width = min(oracle.widths(cell, pbc).min(initial=2.0) for cell, pbc in cells)
    return st.integers(max(1, int(width / 6 / STEP)), max(1, int(3 * width / STEP))).map(
        lambda k: k * STEP)


def tied_cutoff(data, positions, cell, pbc, cutoff):
    """Now and then, the distance of one of the pairs within ``cutoff`` instead: a cutoff
    that some pair (and its images, or its mirror) meets exactly, to the bit."""
    if not data.draw(st.booleans()):
        return cutoff
    distances = sorted({d for d, _ in oracle.pairs(positions, cell, pbc, cutoff).values()
                        if d > 0})
    return data.draw(st.sampled_from(distances)) if distances else cutoff


def _rows(quantities_arrays):
    i, j, shifts, distances, vectors = quantities_arrays
    return oracle.as_rows(i, j, shifts, distances, vectors)


def _check_types(i, j, shifts, distances, vectors, n_dims):
    assert i.dtype == j.dtype == shifts.dtype == np.int64
    assert distances.dtype == vectors.dtype == np.float64
    assert shifts.shape == vectors.shape == (len(i), n_dims)


# ---------------------------------------------------------------------- properties
@given(system=systems(), data=st.data())
def test_full_list_equals_the_oracle_bit_for_bit(system, data):
    positions, cell, pbc = system
    cutoff = tied_cutoff(data, positions, cell, pbc, data.draw(cutoffs((cell, pbc))))
    got = neighbor_list("ijSdD", positions, cutoff, cell, pbc)
    _check_types(*got, positions.shape[1])
    assert _rows(got) == oracle.pairs(positions, cell, pbc, cutoff)
    assert (np.diff(got[0]) >= 0).all()  # grouped by i, in increasing order
    assert (got[3] <= cutoff).all()  # the test made on the distances returned


@given(system=systems(), data=st.data())
def test_half_list_is_one_row_of_each_pair_by_the_rule(system, data):
    positions, cell, pbc = system
    cutoff = tied_cutoff(data, positions, cell, pbc, data.draw(cutoffs((cell, pbc))))
    got = neighbor_list("ijSdD", positions, cutoff, cell, pbc, full_list=False)
    assert (np.diff(got[0]) >= 0).all()  # grouped by i, in increasing order
    half = _rows(got)
    full = oracle.pairs(positions, cell, pbc, cutoff)
    assert half == {key: value for key, value in full.items() if oracle.is_half_row(*key)}
    mirrored = {(j, i, tuple(-s for s in shift)): (d, tuple(-v for v in vector))
                for (i, j, shift), (d, vector) in half.items()}
    assert half.keys().isdisjoint(mirrored) and {**half, **mirrored} == full


@given(system=systems(), data=st.data())
def test_radii_give_the_pairs_within_the_sum_of_their_radii(system, data):
    positions, cell, pbc = system
    width = oracle.widths(cell, pbc).min(initial=2.0)
    radii = np.array(data.draw(st.lists(
        st.integers(0, max(1, int(1.5 * width / STEP))).map(lambda k: k * STEP),
        min_size=len(positions), max_size=len(positions))), dtype=np.float64)
    full_list = data.draw(st.booleans())
    got = neighbor_list("ijSdD", positions, None, cell, pbc, radii=radii,
                        full_list=full_list)
    assert (np.diff(got[0]) >= 0).all()  # grouped by i, in increasing order
    expected = oracle.pairs(positions, cell, pbc, radii=radii)
    assert _rows(got) == (expected if full_list else {
        key: value for key, value in expected.items() if oracle.is_half_row(*key)})


@given(system=systems(), data=st.data(), full_list=st.booleans())
def test_sorted_rows_are_in_lexicographic_order_of_i_j_s(system, data, full_list):
    positions, cell, pbc = system
    cutoff = data.draw(cutoffs((cell, pbc)))
    unsorted = neighbor_list("ijSdD", positions, cutoff, cell, pbc, full_list=full_list)
    i, j, shifts, distances, vectors = neighbor_list(
        "ijSdD", positions, cutoff, cell, pbc, full_list=full_list, sorted=True)
    keys = [(a, b, *s) for a, b, s in zip(i.tolist(), j.tolist(), shifts.tolist(),
                                           strict=True)]
    assert keys == sorted(keys)
    assert oracle.as_rows(i, j, shifts, distances, vectors) == _rows(unsorted)


@given(n_dims=st.integers(1, 3), data=st.data())
def test_a_batch_is_its_systems_one_after_the_other(n_dims, data):
    parts = [data.draw(systems(n_dims=n_dims)) for _ in range(data.draw(st.integers(1, 3)))]
    cutoff = data.draw(cutoffs(*[(cell, pbc) for _, cell, pbc in parts]))
    full_list = data.draw(st.booleans())
    ptr = np.cumsum([0] + [len(positions) for positions, _, _ in parts])
    got = neighbor_list("ijSdDb", np.concatenate([p for p, _, _ in parts]).reshape(-1, n_dims),
                        cutoff, np.stack([c for _, c, _ in parts]),
                        np.stack([f for _, _, f in parts]), ptr=ptr, full_list=full_list)
    i, j, shifts, distances, vectors, system = got
    for b, (positions, cell, pbc) in enumerate(parts):
        rows = system == b
        assert ((ptr[b] <= i[rows]) & (i[rows] < ptr[b + 1])).all()
        assert ((ptr[b] <= j[rows]) & (j[rows] < ptr[b + 1])).all()  # never across
        alone = neighbor_list("ijSdD", positions, cutoff, cell, pbc, full_list=full_list)
        assert oracle.as_rows(i[rows] - ptr[b], j[rows] - ptr[b], shifts[rows],
                              distances[rows], vectors[rows]) == _rows(alone)
    assert (np.diff(system) >= 0).all()


@given(system=systems(n_dims=3), data=st.data())
def test_translation_by_a_dyadic_vector_keeps_every_row(system, data):
    positions, cell, pbc = system
    cutoff = data.draw(cutoffs((cell, pbc)))
    move = np.array(data.draw(st.lists(st.integers(-40, 40), min_size=3, max_size=3))) * STEP
    before = neighbor_list("ijSd", positions, cutoff, cell, pbc)
    after = neighbor_list("ijSd", positions + move, cutoff, cell, pbc)
    assert oracle.as_rows(*before, np.zeros_like(before[2])) == oracle.as_rows(
        *after, np.zeros_like(after[2]))


# ---------------------------------------------------------------------- named cases
def test_a_single_atom_meets_its_own_images_in_both_lists():
    cell = np.eye(3)
    i, j, shifts = neighbor_list("ijS", [[0.25, 0.5, 0.75]], 1.5, cell)
    assert (i == 0).all() and (j == 0).all()
    assert len(shifts) == 18  # 6 faces at 1, 12 edges at sqrt(2); no corner at sqrt(3)
    half = neighbor_list("S", [[0.25, 0.5, 0.75]], 1.5, cell, full_list=False)
    assert {tuple(s) for s in half} == {
        (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (1, 0, 1), (0, 1, 1),
        (-1, 1, 0), (-1, 0, 1), (0, -1, 1)}  # zero sums: the last non-zero component > 0


def test_a_single_atom_in_a_small_cell_with_a_large_cutoff():
    cell = np.array([[1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.25, 0.5, 1.0]])
    distances = neighbor_list("d", [[3.0, -2.0, 7.5]], 2.75, cell)
    lattice = np.array(np.meshgrid(*[np.arange(-8, 9)] * 3)).reshape(3, -1).T @ cell
    expected = np.sort(np.linalg.norm(lattice, axis=1))
    expected = expected[(expected > 0) & (expected <= 2.75)]
    np.testing.assert_allclose(np.sort(distances), expected, rtol=0, atol=1e-12)


def test_a_pair_at_exactly_the_cutoff_is_kept():
    i, j, distances = neighbor_list("ijd", [[0.0, 0.0, 0.0], [1.5, 0.0, 0.0]], 1.5)
    assert i.tolist() == [0, 1] and j.tolist() == [1, 0] and distances.tolist() == [1.5, 1.5]
    assert neighbor_list("i", [[0.0, 0.0, 0.0], [1.5, 0.0, 0.0]], 1.25).size == 0


def test_minimum_image_gives_the_same_list_or_refuses():
    rng = np.random.default_rng(7)
    cell = np.array([[4.0, 0.0, 0.0], [1.0, 4.0, 0.0], [0.5, 0.5, 4.0]])
    positions = rng.random((30, 3)) @ cell
    for cutoff in (1.0, 1.9323):  # the half width is 1.93230937...
        assert _rows(neighbor_list("ijSdD", positions, cutoff, cell, mic=True)) == _rows(
            neighbor_list("ijSdD", positions, cutoff, cell))
    with pytest.raises(ValueError, match=(
            r"`cutoff` must be at most half the cell's shortest perpendicular width with "
            r"`mic=True` \(1\.9323093716453388, across axis 0\); got 2\.0\. Pass mic=False")):
        neighbor_list("ij", positions, 2.0, cell, mic=True)
    with pytest.raises(ValueError, match=r"`radii` must be at most half .* of cell\[1\]\); "
                                         r"got 2 \* max\(radii\) = 4\.0\."):
        neighbor_list("ij", np.zeros((2, 3)), None, np.stack([np.eye(3) * 10, cell]),
                      radii=[1.0, 2.0], ptr=[0, 1, 2], mic=True)


def test_minimum_image_at_exactly_half_the_width_keeps_both_tied_images():
    i, j, shifts = neighbor_list("ijS", [[0.0, 0.0, 0.0], [0.5, 0.0, 0.0]], 0.5, np.eye(3),
                                 full_list=False, mic=True)
    assert (i == 0).all() and (j == 1).all()
    assert sorted(map(tuple, shifts)) == [(-1, 0, 0), (0, 0, 0)]


def test_open_axes_slabs_and_wires():
    cell = np.array([[2.0, 0.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 0.0]])  # no third vector
    positions = np.array([[0.0, 0.0, 0.0], [0.5, 0.5, 1.5], [1.0, 0.25, -3.0]])
    for pbc in ([True, True, False], [True, False, False], False):
        got = neighbor_list("ijSdD", positions, 3.5, cell, pbc)
        assert (got[2][:, 2] == 0).all()
        assert _rows(got) == oracle.pairs(positions, cell, pbc, 3.5)
    assert _rows(neighbor_list("ijSdD", positions, 3.5)) == oracle.pairs(
        positions, None, False, 3.5)


@pytest.mark.parametrize("cell", [[2.0, 3.0], [[2.0, 0.0], [1.0, 3.0]], 2.5])
def test_two_dimensional_cells(cell):
    positions = np.array([[0.0, 0.0], [0.75, 1.25], [1.5, 2.5], [-4.0, 1.0]])
    got = neighbor_list("ijSdD", positions, 4.0, cell)
    matrix = np.diag(np.broadcast_to(cell, 2)) if np.ndim(cell) < 2 else np.array(cell)
    assert _rows(got) == oracle.pairs(positions, matrix, True, 4.0)


def test_one_dimensional_chain():
    got = neighbor_list("ijSdD", [[0.0], [0.75]], 2.0, [1.0], full_list=False)
    assert _rows(got) == {key: value for key, value in oracle.pairs(
        [[0.0], [0.75]], [[1.0]], True, 2.0).items() if oracle.is_half_row(*key)}


def test_mdanalysis_box_is_the_cell_ase_builds_from_the_same_parameters():
    from ase import geometry
    positions = np.random.default_rng(3).random((12, 3)) * 5
    for box in ([5.0, 6.0, 7.0, 90.0, 90.0, 90.0], [5.0, 6.0, 7.0, 80.0, 95.0, 110.0]):
        _assert_same_rows(_rows(neighbor_list("ijSdD", positions, 8.0, box)),
                          _rows(neighbor_list("ijSdD", positions, 8.0,
                                              geometry.cellpar_to_cell(box))))
    # Right angles are exact: an orthorhombic box gives the cell of its lengths.
    assert _rows(neighbor_list("ijSdD", positions, 3.0, [5.0, 6.0, 7.0, 90, 90, 90])) == (
        _rows(neighbor_list("ijSdD", positions, 3.0, [5.0, 6.0, 7.0])))


def test_float32_input_is_converted_once_and_inputs_are_never_modified():
    rng = np.random.default_rng(5)
    positions = rng.random((20, 3)).astype(np.float32) * 4
    cell = np.array([[4.0, 0.0, 0.0], [1.0, 4.0, 0.0], [0.0, 1.0, 4.0]], dtype=np.float32)
    radii = np.full(20, 0.75)
    for array in (positions, cell, radii):
        array.setflags(write=False)
    kept = positions.copy(), cell.copy(), radii.copy()
    got = neighbor_list("ijSdD", positions, None, cell, radii=radii)
    assert _rows(got) == _rows(neighbor_list("ijSdD", positions.astype(np.float64), None,
                                             cell.astype(np.float64), radii=radii))
    for array, copy in zip((positions, cell, radii), kept, strict=True):
        np.testing.assert_array_equal(array, copy)


def test_outputs_by_letter():
    positions = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    assert neighbor_list("i", positions, 1.0).tolist() == [0, 1]
    d, b, d_again = neighbor_list("dbd", positions, 1.0)
    assert d.tolist() == [1.0, 1.0] and b.tolist() == [0, 0] and d_again is not d
    i, j, shifts, distances, vectors = neighbor_list("ijSdD", np.empty((0, 2)), 1.0, 1.0)
    assert shifts.shape == vectors.shape == (0, 2) and i.dtype == np.int64


def test_a_batch_with_an_empty_system_and_systems_on_top_of_each_other():
    positions = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.0, 0.0]])
    i, j, system = neighbor_list("ijb", positions, 1.0, np.full((3, 3), 2.0),
                                 [[True] * 3, [False] * 3, [True] * 3], ptr=[0, 2, 2, 4])
    assert set(system.tolist()) == {0, 2}
    assert ((i < 2) == (j < 2)).all()
    assert (i[system == 0] < 2).all() and (i[system == 2] >= 2).all()


def test_an_atoms_object_gives_positions_cell_and_pbc():
    from ase import Atoms

    atoms = Atoms("H2", positions=[[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]],
                  cell=np.diag([2.0, 2.0, 0.0]), pbc=[True, True, False])
    shifts = neighbor_list("S", atoms, 1.5)
    assert len(shifts) == 8  # each atom meets the other's 4 images at sqrt(2)
    with pytest.raises(TypeError, match=r"`pbc` must be left out with an ase.Atoms"):
        neighbor_list("S", atoms, 1.5, pbc=True)


# ---------------------------------------------------------------------- errors
BAD_INPUTS = [
    ({"cell": [[1.0, 0, 0], [0, -1.0, 0], [0, 0, 1.0]]}, ValueError,
     r"`cell` must be right-handed \(a determinant > 0\); got determinant -1 for the "
     r"vectors .*Negate one vector, or swap two"),
    ({"cell": [[1.0, 0, 0], [2.0, 0, 0], [0, 0, 1.0]]}, ValueError,
     r"`cell` must span a non-zero volume on its periodic axes \[0, 1, 2\]; got the "
     r"vectors \[\[1.0, 0.0, 0.0\], \[2.0, 0.0, 0.0\], \[0.0, 0.0, 1.0\]\], of relative "
     r"volume 0"),
    ({"cell": np.diag([1.0, 1.0, 0.0])}, ValueError,
     r"`cell` must span a non-zero volume .* Make the axes whose vector is zero"),
    ({"cell": [[1.0, 0, 0], [0, np.nan, 0], [0, 0, 1.0]]}, ValueError,
     r"`cell` must be finite; got nan at cell\[1, 1\]"),
    ({"cell": [1.0, 2.0]}, ValueError,
     r"`cell` must be a \(3, 3\) matrix whose rows are the cell vectors, 3 lengths, \[a, b, "
     r"c, alpha, beta, gamma\] \(degrees\) or one length, for 3-D points; got shape \(2,\)"),
    ({"cell": [1.0, -2.0, 3.0]}, ValueError, r"`cell` lengths must be >= 0; got -2.0 on axis 1"),
    ({"cell": [5.0, 5.0, 5.0, 10.0, 10.0, 90.0]}, ValueError,
     r"must describe a cell of non-zero volume; got \[5.0, 5.0, 5.0, 10.0, 10.0, 90.0\]"),
    ({"cell": [5.0, 5.0, 5.0, 90.0, 180.0, 90.0]}, ValueError,
     r"angles strictly between 0 and 180 degrees"),
    ({"cutoff": np.inf}, ValueError, r"`cutoff` must be finite; got inf"),
    ({"cutoff": 0.0}, ValueError, r"`cutoff` must be > 0; got 0.0"),
    ({"cutoff": -1.0}, ValueError, r"`cutoff` must be > 0; got -1.0"),
    ({"cutoff": np.nan}, ValueError, r"`cutoff` must be > 0; got nan"),
    ({"cutoff": [1.0, 1.0, 1.0]}, TypeError,
     r"`cutoff` must be one distance \(a real number\); got \[1.0, 1.0, 1.0\]\. Per-atom "
     r"cutoffs go in `radii=`"),
    ({"cutoff": None}, TypeError, r"give exactly one of `cutoff` \(a distance\) and `radii`"),
    ({"radii": [1.0, 1.0, 1.0]}, TypeError, r"give exactly one of `cutoff`"),
    ({"cutoff": None, "radii": [1.0, -1.0, 1.0]}, ValueError,
     r"`radii` must hold finite values >= 0; got -1.0 at radii\[1\]"),
    ({"points": [[0.0, 0, 0], [np.nan, 0, 0], [1, 1, 1]]}, ValueError,
     r"`points` must be finite; got nan at points\[1, 0\]"),
    ({"points": np.zeros((3, 4))}, ValueError, r"`points` must have 1, 2 or 3 columns"),
    ({"points": [[0.0, 0, 0], [0, 0, 1], [0, 1.0e10, 0]]}, ValueError,
     r"`points` must lie within 2\*\*30 cells of the origin along the periodic axes .*got a "
     r"point 2.5e\+09 cells away\. Wrap the positions into the cell first"),
    ({"pbc": [True, False]}, ValueError,
     r"`pbc` must be one bool, or one per axis \(3,\); got shape \(2,\)"),
    ({"pbc": [1, 0, 1]}, TypeError, r"`pbc` must be a bool or an array of bools"),
    ({"cell": None, "pbc": [True, False, False]}, ValueError,
     r"`cell` must be given for periodic axes; got cell=None and pbc=\[True, False, False\]"),
    ({"quantities": "ijx"}, ValueError,
     r"`quantities` must be one or more letters from 'ijSdDb' \(i, j, shift S, distance d, "
     r"vector D, system b\); got 'ijx'"),
    ({"quantities": ""}, ValueError, r"`quantities` must be one or more letters"),
    ({"quantities": ["i"]}, TypeError, r"`quantities` must be a string of letters"),
    ({"ptr": [1, 3]}, ValueError,
     r"`ptr` must run from 0 to the number of points \(3\); got ptr\[0\] = 1 and "
     r"ptr\[-1\] = 3"),
    ({"ptr": [0, 2]}, ValueError, r"`ptr` must run from 0 .*ptr\[-1\] = 2"),
    ({"ptr": [0, 2, 1, 3], "cell": np.ones((3, 3))}, ValueError,
     r"`ptr` must be non-decreasing; got ptr\[1\] = 2 > ptr\[2\] = 1"),
    ({"ptr": [0.0, 3.0]}, TypeError, r"`ptr` must hold integers; got dtype float64"),
    ({"ptr": [[0, 3]]}, ValueError, r"`ptr` must be 1-D with B \+ 1 offsets"),
    ({"ptr": [0, 3]}, ValueError,
     r"`cell` must hold one cell per system along its first axis, shape \(1, 3, 3\), "
     r"\(1, 3\) or \(1, 6\), as `ptr` gives 1 systems; got shape \(3, 3\)\. Share one"),
    ({"ptr": [0, 1, 3], "cell": np.ones((2, 3)), "pbc": np.ones((3, 3), bool)}, ValueError,
     r"`pbc` must be one bool, or one per axis \(3,\), or one row per system \(2, 3\)"),
    ({"ptr": [0, 1, 3], "cell": np.stack([np.eye(3), -np.eye(3)])}, ValueError,
     r"`cell\[1\]` must be right-handed"),
]


@pytest.mark.parametrize("changes, error, message", BAD_INPUTS)
def test_bad_inputs_are_refused_naming_the_parameter_and_the_value(changes, error, message):
    arguments = {"quantities": "ij", "points": np.zeros((3, 3)), "cutoff": 1.0,
                 "cell": np.eye(3) * 4, "pbc": None}
    arguments.update(changes)
    with pytest.raises(error, match=message):
        neighbor_list(arguments.pop("quantities"), arguments.pop("points"), **arguments)


# ---------------------------------------------------------------------- against ASE
def _ase_atoms():
    """ASE structures: a triclinic primitive cell, a hexagonal one, a molecular box of
    water-like molecules, a slab open along z, and a small cell with a long cutoff."""
    from ase import Atoms, build

    rng = np.random.default_rng(11)
    water = build.molecule("H2O")
    box = Atoms(cell=np.eye(3) * 9.0, pbc=True)
    for centre in rng.random((24, 3)) * 9.0:
        molecule = water.copy()
        molecule.rotate(rng.random() * 360, rng.normal(size=3))
        molecule.translate(centre)
        box += molecule
    copper = build.bulk("Cu", "fcc", a=3.6)
    rattled = build.bulk("Cu", "fcc", a=3.6) * (2, 2, 2)
    rattled.rattle(0.1, rng=rng)
    rattled.positions[::3] += rattled.cell[0] * 2 - rattled.cell[2]  # outside the cell
    slab = build.fcc111("Cu", size=(2, 2, 3), vacuum=5.0)
    return [("Cu primitive", copper, 5.0), ("Mg hcp", build.bulk("Mg"), 5.0),
            ("water box", box, 3.0), ("rattled, unwrapped", rattled, 4.0),
            ("slab", slab, 4.0), ("Cu, cutoff 3 widths", copper, 6.5)]


def _ase_rows(quantities_arrays):
    i, j, distances, vectors, shifts = quantities_arrays
    return oracle.as_rows(i, j, shifts, distances, vectors)


def _assert_same_rows(got: dict, expected: dict):
    assert got.keys() == expected.keys()
    keys = list(got)
    np.testing.assert_allclose([got[k][0] for k in keys], [expected[k][0] for k in keys],
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose([got[k][1] for k in keys], [expected[k][1] for k in keys],
                               rtol=0, atol=1e-12)


def test_the_lists_of_ase_builders_equal_ase_neighbor_list():
    from ase.neighborlist import neighbor_list as ase_neighbor_list

    for name, atoms, cutoff in _ase_atoms():
        got = _rows(neighbor_list("ijSdD", atoms, cutoff))
        expected = _ase_rows(ase_neighbor_list("ijdDS", atoms, cutoff))
        assert len(got) > 0, name
        _assert_same_rows(got, expected)


def test_per_atom_radii_equal_ase_per_atom_cutoffs():
    from ase.neighborlist import natural_cutoffs
    from ase.neighborlist import neighbor_list as ase_neighbor_list

    for _, atoms, _ in _ase_atoms()[:4]:
        radii = np.array(natural_cutoffs(atoms, mult=1.3))
        got = _rows(neighbor_list("ijSdD", atoms, radii=radii))
        _assert_same_rows(got, _ase_rows(ase_neighbor_list("ijdDS", atoms, list(radii))))


def test_ase_drops_a_pair_at_exactly_the_cutoff_and_this_keeps_it():
    from ase import Atoms
    from ase.neighborlist import neighbor_list as ase_neighbor_list

    atoms = Atoms("H2", positions=[[0.0, 0.0, 0.0], [1.5, 0.0, 0.0]], cell=np.eye(3) * 6,
                  pbc=True)
    assert len(ase_neighbor_list("i", atoms, 1.5)) == 0
    assert len(neighbor_list("i", atoms, 1.5)) == 2


# ---------------------------------------------------------------------- against vesin, matscipy
def _vesin_rows(positions, cell, pbc, cutoff, full_list):
    import vesin

    calculator = vesin.NeighborList(cutoff=cutoff, full_list=full_list)
    return oracle.as_rows(*calculator.compute(np.asarray(positions), np.asarray(cell),
                                              np.asarray(pbc).tolist(), "ijSdD"))


def _as_half_rows(rows: dict) -> dict:
    """Each row of a half list as the one of ``(i, j, S)``, ``(j, i, -S)`` that
    spatialhash's rule keeps: two half lists of the same pairs become equal."""
    canonical = {}
    for (i, j, shift), (distance, vector) in rows.items():
        if not oracle.is_half_row(i, j, shift):
            i, j = j, i
            shift, vector = tuple(-s for s in shift), tuple(-v for v in vector)
        canonical[(i, j, shift)] = (distance, vector)
    assert len(canonical) == len(rows), "a pair appears in both directions"
    return canonical


@pytest.mark.parametrize("full_list", [True, False])
def test_the_lists_of_ase_builders_equal_vesin(full_list):
    beyond_half_width = 0
    for name, atoms, cutoff in _ase_atoms():
        got = _rows(neighbor_list("ijSdD", atoms, cutoff, full_list=full_list))
        expected = _vesin_rows(atoms.positions, atoms.cell[:], atoms.pbc, cutoff, full_list)
        assert len(got) > 0, name
        if not full_list:
            got, expected = _as_half_rows(got), _as_half_rows(expected)
        _assert_same_rows(got, expected)
        beyond_half_width += cutoff > oracle.widths(atoms.cell[:], atoms.pbc).min() / 2
    assert beyond_half_width >= 2  # atoms meeting their own images, pairs at several shifts


@given(system=systems(n_dims=3), data=st.data(), full_list=st.booleans())
def test_random_triclinic_systems_equal_vesin_but_at_the_cutoff(system, data, full_list):
    # vesin's cutoff is strict, decided on squares: it drops a pair at exactly the cutoff
    # (1.5 apart, cutoff 1.5), but keeps one whose distance rounds to the cutoff where the
    # square of the cutoff rounds up (d**2 = 0.03125, cutoff sqrt(0.03125)). Found here,
    # where dyadic inputs put pairs at exactly the cutoff often. So vesin's rows are ours,
    # less some rows at exactly the cutoff.
    positions, cell, pbc = system
    cutoff = tied_cutoff(data, positions, cell, pbc, data.draw(cutoffs((cell, pbc))))
    got = _rows(neighbor_list("ijSdD", positions, cutoff, cell, pbc, full_list=full_list))
    expected = _vesin_rows(positions, cell, pbc, cutoff, full_list)
    if not full_list:
        got, expected = _as_half_rows(got), _as_half_rows(expected)
    assert expected.keys() <= got.keys()
    assert all(got[key][0] == cutoff for key in got.keys() - expected.keys())
    _assert_same_rows({key: got[key] for key in expected}, expected)


def test_vesin_half_lists_keep_the_same_row_of_each_pair():
    # The same rule, not only the same pairs: i < j whatever the shift; an atom and its own
    # image with the shift of positive sum, ties to the last non-zero component.
    for _, atoms, cutoff in _ase_atoms():
        got = _rows(neighbor_list("ijSdD", atoms, cutoff, full_list=False))
        _assert_same_rows(got, _vesin_rows(atoms.positions, atoms.cell[:], atoms.pbc, cutoff,
                                           False))
    shifts = _vesin_rows([[0.25, 0.5, 0.75]], np.eye(3), True, 1.5, False).keys()
    assert {shift for _, _, shift in shifts} == {
        tuple(s) for s in neighbor_list("S", [[0.25, 0.5, 0.75]], 1.5, np.eye(3),
                                        full_list=False)}


def test_the_lists_of_ase_builders_equal_matscipy():
    from ase.neighborlist import natural_cutoffs
    from matscipy.neighbours import neighbour_list

    for name, atoms, cutoff in _ase_atoms():
        got = _rows(neighbor_list("ijSdD", atoms, cutoff))
        assert len(got) > 0, name
        _assert_same_rows(got, _ase_rows(neighbour_list("ijdDS", atoms, cutoff)))
    for _, atoms, _ in _ase_atoms()[:4]:
        radii = natural_cutoffs(atoms, mult=1.3)  # matscipy: spheres that overlap
        _assert_same_rows(_rows(neighbor_list("ijSdD", atoms, radii=radii)),
                          _ase_rows(neighbour_list("ijdDS", atoms, radii)))


# ---------------------------------------------------------------------- the kernels
def _crowded_batch(n_dims: int):
    """Three systems (one empty) of hundreds of atoms, more than a thread's chunk of
    them, in cells of several shapes, slabs among them, with points outside the cells."""
    rng = np.random.default_rng(7)
    cell = np.array([[6.0, 0.0, 0.0], [1.5, 5.5, 0.0], [-1.0, 0.5, 7.0]])[:n_dims, :n_dims]
    cells = np.stack([cell, np.eye(n_dims) * 9.0, cell])
    pbc = np.array([[True] * 3, [True, False, True], [True, True, False]])[:, :n_dims]
    positions = rng.uniform(-3.0, 10.0, (700, n_dims))
    radii = rng.uniform(0.3, 1.2, 700)
    return positions, cells, pbc, radii, [0, 300, 300, 700]


@pytest.mark.parametrize("full_list", [True, False])
def test_the_rows_are_the_same_for_any_thread_count(full_list, monkeypatch):
    import numba

    from spatialhash import _threads

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one thread is all numba has here")
    # Two threads even on a busy or one-CPU machine, where a call would take fewer.
    monkeypatch.setattr(_threads, "process_cpus", lambda: 64)
    monkeypatch.setenv("SPATIALHASH_ADAPT_THREADS", "0")
    _threads.adapts_to_load.cache_clear()
    positions, cells, pbc, radii, ptr = _crowded_batch(3)
    previous = numba.get_num_threads()
    results = []
    try:
        for n_threads in (1, 2):
            numba.set_num_threads(n_threads)
            results.append(neighbor_list("ijSdDb", positions, 2.5, cells, pbc, ptr=ptr,
                                         full_list=full_list)
                           + neighbor_list("ijSdD", positions, None, cells, pbc, ptr=ptr,
                                           radii=radii, full_list=full_list)
                           + neighbor_list("ijSdD", positions, 2.5, cells, pbc, ptr=ptr,
                                           full_list=full_list, sorted=True))
    finally:
        numba.set_num_threads(previous)
        _threads.adapts_to_load.cache_clear()
    assert len(results[0][0]) > 10_000
    for one, two in zip(*results, strict=True):
        assert one.dtype == two.dtype and one.shape == two.shape
        assert one.tobytes() == two.tobytes()  # to the bit, the sign of a zero included


@pytest.mark.parametrize("n_dims", [1, 2, 3])
@pytest.mark.parametrize("full_list", [True, False])
def test_each_letter_alone_is_its_array_among_all(n_dims, full_list):
    # The kernels make a vector only where one is asked for or its distance is near the
    # bound: the rows must not depend on it.
    positions, cells, pbc, radii, ptr = _crowded_batch(n_dims)
    for reach in ({"cutoff": 2.5}, {"radii": radii}):
        every = neighbor_list("ijSdDb", positions, cell=cells, pbc=pbc, ptr=ptr,
                              full_list=full_list, **reach)
        for letter, expected in zip("ijSdDb", every, strict=True):
            alone = neighbor_list(letter, positions, cell=cells, pbc=pbc, ptr=ptr,
                                  full_list=full_list, **reach)
            assert alone.tobytes() == expected.tobytes(), letter


def test_points_spread_far_apart_get_wider_bins_and_every_pair():
    # Clusters 2**20 apart along the open axis of a slab, or of an open system: a bin of
    # the cutoff's width each would be a million bins for 60 points, so the bins widen.
    rng = np.random.default_rng(3)
    cluster = rng.integers(0, 16, size=(20, 3)) * STEP
    positions = np.concatenate([cluster, cluster + [0, 0, 2.0**20],
                                cluster - [0, 0, 2.0**20]])
    cell = np.diag([2.0, 2.0, 0.0])
    for pbc in ([False] * 3, [True, True, False]):
        for full_list in (True, False):
            expected = oracle.pairs(positions, cell, pbc, 1.0)
            if not full_list:
                expected = {row: value for row, value in expected.items()
                            if oracle.is_half_row(*row)}
            got = neighbor_list("ijSdD", positions, 1.0, cell, pbc, full_list=full_list)
            assert _rows(got) == expected and len(expected) > 100


# ---------------------------------------------------------------------- too many images
def test_a_search_needing_too_many_images_is_refused_before_any_is_made():
    # One atom in a unit cube, cutoff 1000.5: 2001 shifts on each axis, 2001**3 images.
    with pytest.raises(ValueError, match=(
            r"`cutoff` and `cell` must need at most 50,000,000 periodic images of the "
            r"points \(each a search of the cell's atoms, and rows of the list\); got "
            r"cutoff = "
            r"1000\.5 "
            r"in a cell 1, 1, 1 wide across its periodic axes \[0, 1, 2\], which needs "
            r"8,012,006,001 images \(1,000\.5 times the narrowest width\)\. Check that the "
            r"cutoff and the cell are in the same units, or make a thin axis open")):
        neighbor_list("ij", [[0.25, 0.5, 0.75]], 1000.5, np.eye(3))
    # A flat cell (not degenerate: its volume is 1e-6 of its vectors' product), open along
    # its thin axis, needs few images.
    flat = np.diag([1.0, 1.0, 1e-6])
    with pytest.raises(ValueError, match=r"got cutoff = 10\.0 in a cell 1, 1, 1e-06 wide"):
        neighbor_list("ij", [[0.5, 0.5, 0.0]], 10.0, flat)
    assert len(neighbor_list("i", [[0.5, 0.5, 0.0]], 10.0, flat, [True, True, False])) == 316


def test_the_image_limit_names_radii_and_the_cell_of_a_batch():
    cells = np.stack([np.eye(3) * 10.0, np.eye(3) * 1e-3])
    with pytest.raises(ValueError, match=r"`radii` and `cell\[1\]` must need at most "
                                         r".*; got 2 \* max\(radii\) = 2\.0 in a cell 0\.001"):
        neighbor_list("ij", np.zeros((2, 3)), None, cells, radii=[1.0, 1.0], ptr=[0, 1, 2])


def test_the_image_count_is_the_images_the_search_makes(monkeypatch):
    # One atom, cutoff 1.5 in a unit cube: the shifts -1, 0, 1 on each axis, 27 images.
    from spatialhash.neighbors import _images

    monkeypatch.setattr(_images, "MAX_IMAGES", 27)
    assert len(neighbor_list("i", [[0.25, 0.5, 0.75]], 1.5, np.eye(3))) == 18
    monkeypatch.setattr(_images, "MAX_IMAGES", 26)
    with pytest.raises(ValueError, match=r"which needs 27 images"):
        neighbor_list("i", [[0.25, 0.5, 0.75]], 1.5, np.eye(3))


# ---------------------------------------------------------------------- MDAnalysis
def _universe(positions, dimensions):
    import MDAnalysis

    universe = MDAnalysis.Universe.empty(len(positions), trajectory=True)
    universe.atoms.positions = positions
    universe.dimensions = dimensions
    return universe


MDANALYSIS_BOX = [8.0, 9.0, 10.0, 80.0, 95.0, 110.0]


def test_an_mdanalysis_universe_or_atomgroup_gives_its_positions_and_box():
    from MDAnalysis.lib.mdamath import triclinic_vectors

    positions = (np.random.default_rng(13).random((40, 3)) * 9.0).astype(np.float32)
    universe = _universe(positions, MDANALYSIS_BOX)
    # The float32 positions MDAnalysis holds, converted once; the box parsed as a cell. The
    # cutoff is beyond the box's narrowest width (7.51): atoms meet their own images.
    expected = _rows(neighbor_list("ijSdD", positions, 8.5, MDANALYSIS_BOX))
    assert any(i == j for i, j, _ in expected)
    assert _rows(neighbor_list("ijSdD", universe, 8.5)) == expected
    assert _rows(neighbor_list("ijSdD", universe.atoms, 8.5)) == expected
    group = universe.atoms[10:25]  # indices into the group, as MDAnalysis' own functions
    assert _rows(neighbor_list("ijSdD", group, 8.5, full_list=False)) == _rows(
        neighbor_list("ijSdD", positions[10:25], 8.5, MDANALYSIS_BOX, full_list=False))
    # The box laid out as MDAnalysis lays it out (a along x, b in the xy plane).
    _assert_same_rows(expected, _rows(neighbor_list(
        "ijSdD", positions, 8.5, triclinic_vectors(universe.dimensions, dtype=np.float64))))
    np.testing.assert_array_equal(universe.atoms.positions, positions)


def test_mdanalysis_pairs_below_half_the_box_equal_its_capped_distances():
    from MDAnalysis.lib.distances import self_capped_distance

    positions = (np.random.default_rng(17).random((200, 3)) * 9.0).astype(np.float32)
    universe = _universe(positions, MDANALYSIS_BOX)
    i, j, distances = neighbor_list("ijd", universe, 3.0, full_list=False, mic=True)
    pairs, theirs = self_capped_distance(positions, 3.0, box=universe.dimensions)
    ours = dict(zip(zip(i.tolist(), j.tolist(), strict=True), distances.tolist(), strict=True))
    expected = {(min(a, b), max(a, b)): d
                for (a, b), d in zip(pairs.tolist(), theirs.tolist(), strict=True)}
    assert len(ours) > 100 and ours.keys() == expected.keys()
    np.testing.assert_allclose([ours[k] for k in ours], [expected[k] for k in ours],
                               rtol=0, atol=1e-5)  # MDAnalysis computes in float32


def test_an_mdanalysis_universe_without_a_box_is_open():
    positions = (np.random.default_rng(19).random((30, 3)) * 6.0).astype(np.float32)
    i, j, shifts = neighbor_list("ijS", _universe(positions, None), 2.0)
    assert len(i) > 0 and not shifts.any()
    assert _rows(neighbor_list("ijSdD", _universe(positions, None), 2.0)) == _rows(
        neighbor_list("ijSdD", positions, 2.0))


def test_an_mdanalysis_group_refuses_a_cell_and_names_a_bad_box():
    universe = _universe(np.zeros((2, 3), dtype=np.float32), MDANALYSIS_BOX)
    with pytest.raises(TypeError, match=r"`cell` must be left out with an MDAnalysis "
                                        r"AtomGroup or Universe as `points`"):
        neighbor_list("ij", universe.atoms, 1.0, np.eye(3))
    universe.dimensions = [5.0, 5.0, 5.0, 10.0, 10.0, 90.0]
    with pytest.raises(ValueError, match=r"`points.dimensions` as \[a, b, c, alpha, beta, "
                                         r"gamma\] must describe a cell of non-zero volume"):
        neighbor_list("ij", universe, 1.0)
