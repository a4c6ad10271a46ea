"""The cloth demo: its physics (no passing through itself, bounded energy), its contact list
(complete, rebuilt only when it must be), its parts against NumPy, and its command line."""

from __future__ import annotations

import argparse
import math

import numba
import numpy as np
import pytest

pytest.importorskip("PIL")

from PIL import Image  # noqa: E402

from spatialhash import Grid  # noqa: E402
from spatialhash.demos import _cloth_kernels as kernels  # noqa: E402
from spatialhash.demos import _cloth_simulation  # noqa: E402
from spatialhash.demos import _cloth_view as view  # noqa: E402
from spatialhash.demos import cloth as cloth_demo  # noqa: E402
from spatialhash.demos._cloth_view import Renderer  # noqa: E402
from spatialhash.demos.cloth import Cloth  # noqa: E402

#: The most threads numba allows, the upper bound of ``--threads``.
MAX_THREADS = numba.config.NUMBA_NUM_THREADS
#: A small cloth (0.29 m) falls, crumples and piles up within these frames.
SIZE = 30
FRAMES = 60


def _run(self_collision: bool, seed: int) -> tuple[list[int], list[int]]:
    """Interpenetrating pairs after every frame, surface crossings after every other."""
    cloth = Cloth(SIZE, self_collision=self_collision, seed=seed)
    pairs, crossings = [], []
    for frame in range(FRAMES):
        cloth.step_frame()
        pairs.append(cloth.count_interpenetrations())
        if frame % 2:
            crossings.append(cloth.count_crossings())
    return pairs, crossings


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_self_collision_keeps_the_cloth_from_passing_through_itself(seed):
    # Without self-collision the falling cloth sinks through the part already on the
    # ground: its surface crosses itself in hundreds of places, and many pairs from
    # distant parts of the cloth end up nearly on top of each other. With it, the bound
    # is zero for both, in every frame.
    free_pairs, free_crossings = _run(False, seed)
    held_pairs, held_crossings = _run(True, seed)
    assert sum(free_crossings) >= 2500 and max(free_crossings) >= 200
    assert sum(free_pairs) >= 1000 and max(free_pairs) >= 50
    assert max(held_crossings) == 0
    assert max(held_pairs) == 0


@pytest.mark.slow
def test_the_demo_cloth_does_not_pass_through_itself():
    # The demo's own cloth, 100 x 100: checked every tenth frame through the collapse.
    cloth = Cloth()
    for frame in range(90):
        cloth.step_frame()
        if frame % 10 == 9:
            assert cloth.count_crossings() == 0
            assert cloth.count_interpenetrations() == 0
    assert cloth.positions[:, 2].max() < 0.2  # it did fall and fold


def _orient(a, b, c, d):
    """Six times the signed volume of abcd, in the kernel's order of operations."""
    u, v, w = b - a, c - a, d - a
    return (u[..., 0] * (v[..., 1] * w[..., 2] - v[..., 2] * w[..., 1])
            - u[..., 1] * (v[..., 0] * w[..., 2] - v[..., 2] * w[..., 0])
            + u[..., 2] * (v[..., 0] * w[..., 1] - v[..., 1] * w[..., 0]))


def _brute_force_crossings(cloth: Cloth) -> int:
    """Every edge against every triangle, in NumPy."""
    edges, triangles = cloth.mesh()
    positions = cloth.positions
    p, q = (positions[edges[:, k]][:, None, :] for k in range(2))
    a, b, c = (positions[triangles[:, k]][None, :, :] for k in range(3))
    side_p, side_q = _orient(a, b, c, p), _orient(a, b, c, q)
    around = np.stack([_orient(p, q, a, b), _orient(p, q, b, c), _orient(p, q, c, a)])
    pierce = ((side_p > 0) & (side_q < 0)) | ((side_p < 0) & (side_q > 0))
    inside = (around > 0).all(axis=0) | (around < 0).all(axis=0)
    shared = (edges[:, None, :, None] == triangles[None, :, None, :]).any(axis=(2, 3))
    return int((pierce & inside & ~shared).sum())


def test_crossing_count_matches_brute_force():
    cloth = Cloth(12, self_collision=False, seed=4, drop_height=0.0)
    seen = []
    for _ in range(30):
        cloth.step_frame()
        expected = _brute_force_crossings(cloth)
        assert cloth.count_crossings() == expected
        seen.append(expected)
    assert max(seen) > 0  # the comparison covered non-empty answers


def _brute_force_interpenetrations(cloth: Cloth) -> int:
    positions = cloth.positions
    d2 = ((positions[:, None, :] - positions[None, :, :]) ** 2).sum(axis=2)
    rest2 = ((cloth.rows[:, None] - cloth.rows[None, :]) ** 2
             + (cloth.columns[:, None] - cloth.columns[None, :]) ** 2) * cloth.spacing**2
    close = cloth_demo.INTERPENETRATION_FRACTION * cloth.thickness
    far = cloth_demo.INTERPENETRATION_REST_DISTANCE * max(cloth.thickness, cloth.spacing)
    hit = (d2 <= close * close) & (rest2 > far * far)
    return int(np.triu(hit, 1).sum())


def test_interpenetration_count_matches_brute_force():
    cloth = Cloth(SIZE, self_collision=False, seed=0)
    seen = []
    for frame in range(40):
        cloth.step_frame()
        if frame % 4:
            continue
        expected = _brute_force_interpenetrations(cloth)
        assert cloth.count_interpenetrations() == expected
        seen.append(expected)
    assert max(seen) > 0  # the comparison covered non-empty answers


@pytest.mark.parametrize("self_collision", [True, False])
def test_energy_never_grows_and_speeds_stay_bounded(self_collision):
    cloth = Cloth(SIZE, self_collision=self_collision, seed=3)
    start = cloth.energy()
    for _ in range(FRAMES):
        cloth.step_frame()
        assert np.isfinite(cloth.positions).all()
        # Dropped from rest, the cloth can only turn height into motion and lose it.
        assert cloth.energy() <= start
        speeds = np.linalg.norm(cloth.velocities, axis=1)
        # The clamp applies before the constraints; their corrections add a little.
        assert speeds.max() <= 2.0 * cloth.max_speed
    assert cloth.energy() < 0.2 * start  # it fell and came (nearly) to rest
    # The ground is enforced before the constraints, which may pull a particle a little
    # below its resting height (half the thickness), never through the ground.
    assert cloth.positions[:, 2].min() >= 0.25 * cloth.thickness


def _contact_keys(cloth: Cloth) -> np.ndarray:
    """Pairs closer than the thickness that are not neighbours at rest, as ``i * n + j``
    with ``i < j``, found afresh from the current positions."""
    found = Grid(cloth.positions, cell_size=cloth.thickness).query_pairs(cloth.thickness)
    i, j = found.indices.astype(np.int64).T
    distance2 = ((cloth.positions[i] - cloth.positions[j]) ** 2).sum(axis=1)
    rest2 = ((cloth.rows[i] - cloth.rows[j]) ** 2
             + (cloth.columns[i] - cloth.columns[j]) ** 2) * cloth.spacing**2
    touching = (distance2 < cloth.thickness**2) & (rest2 > cloth.thickness**2)
    return i[touching] * len(cloth.positions) + j[touching]


def test_contact_list_holds_every_contact():
    # The list is built from the positions of some earlier substep; every pair that
    # touches now must be in it, or the solver would let that pair pass through each
    # other. One substep per frame at ten times the frame rate is the same simulation
    # (same substep length, same speed limit) with a check after every substep.
    cloth = Cloth(SIZE, seed=1, substeps=1, fps=600.0)
    n_contacts = 0
    for _ in range(400):
        cloth.step_frame()
        listed = np.sort(cloth.pairs.astype(np.int64), axis=1)
        listed_keys = listed[:, 0] * len(cloth.positions) + listed[:, 1]
        contacts = _contact_keys(cloth)
        assert np.isin(contacts, listed_keys).all()
        n_contacts += len(contacts)
    assert n_contacts > 1000
    # ...and the list is rebuilt now and then, not every substep.
    assert 10 < cloth.times.n_builds < 200


def test_contact_list_is_not_rebuilt_while_the_cloth_falls_rigidly():
    # High above the ground, with no tilt, the cloth falls as one piece: nothing moves
    # relative to anything else, so the first list stays valid.
    cloth = Cloth(10, tilt=0.0, drop_height=5.0)
    for _ in range(20):
        cloth.step_frame()
    assert cloth.velocities[:, 2].max() < -1.0
    assert cloth.times.n_builds == 1


def _spread(positions, reference):
    """Largest distance of a displacement from the centre of their bounding box."""
    displacement = positions - reference
    centre = 0.5 * (displacement.min(axis=0) + displacement.max(axis=0))
    return np.sqrt(((displacement - centre) ** 2).sum(axis=1).max())


def test_spreads_of_displacements_bound_every_pair_and_learn_the_centres(rng):
    positions = rng.normal(size=(40, 3))
    first = positions + rng.normal(size=(40, 3)) * 0.2 + np.array([3.0, -1.0, 0.5])
    second = positions + rng.normal(size=(40, 3)) * 0.05 - 2.0
    centres, spreads = np.zeros((2, 3)), np.empty(2)
    for reference, k in [(first, 0), (second, 1)]:
        displacement = positions - reference
        differences = displacement[:, None, :] - displacement[None, :, :]
        # From any centre (here zero, as for a new reference) a valid bound...
        kernels.spreads_of_displacements(positions, first, second, centres, spreads)
        assert np.sqrt((differences**2).sum(axis=2)).max() <= 2 * spreads[k] + 1e-12
        # ...and from the learned centre (the bounding box's), the exact spread, whose
        # bound holds too.
        kernels.spreads_of_displacements(positions, first, second, centres, spreads)
        assert spreads[k] == pytest.approx(_spread(positions, reference))
        assert np.sqrt((differences**2).sum(axis=2)).max() <= 2 * spreads[k] + 1e-12
        centres[:] = 0.0


def test_solve_contacts_is_the_gauss_seidel_pass_over_the_touching_pairs(rng):
    # The contact pass against the same pass in plain Python, on a crumpled patch where
    # many pairs touch and share particles (so the order matters), some particles pinned.
    cloth = Cloth(9, seed=3)
    n = len(cloth.positions)
    positions = cloth.positions + rng.normal(scale=cloth.spacing, size=(n, 3))
    previous = positions + rng.normal(scale=0.1 * cloth.spacing, size=(n, 3))
    inverse_mass = cloth.inverse_mass.copy()
    inverse_mass[:3] = 0.0
    i, j = np.triu_indices(n, 1)
    pairs = np.stack([i, j], axis=1).astype(np.int32)
    for friction in (0.0, 0.1):
        expected = _contacts_reference(positions, previous, inverse_mass, pairs,
                                       cloth.thickness, friction)
        moved = positions.copy()
        kernels.solve_contacts(moved, previous, inverse_mass, pairs, cloth.thickness,
                               friction, np.empty(len(pairs), dtype=np.int64))
        assert not np.array_equal(moved, positions)
        np.testing.assert_allclose(moved, expected, rtol=0, atol=1e-15)


def _contacts_reference(positions, previous, inverse_mass, pairs, thickness, friction):
    """`_cloth_kernels.solve_contacts` in plain Python: the pairs touching at the start,
    separated one after the other, then the friction step of each."""
    p = positions.copy()
    gaps = p[pairs[:, 1]] - p[pairs[:, 0]]
    for a, b in pairs[(gaps**2).sum(axis=1) < thickness**2]:
        d = p[b] - p[a]
        distance = math.sqrt(float(d @ d))
        weight = inverse_mass[a] + inverse_mass[b]
        if distance >= thickness or distance == 0.0 or weight == 0.0:
            continue
        scale = (thickness - distance) / (distance * weight)
        p[a] -= scale * inverse_mass[a] * d
        p[b] += scale * inverse_mass[b] * d
        relative = (p[b] - previous[b]) - (p[a] - previous[a])
        p[a] += friction * inverse_mass[a] / weight * relative
        p[b] -= friction * inverse_mass[b] / weight * relative
    return p


def test_pairs_within_keeps_exactly_the_close_pairs_in_order(rng):
    positions = rng.uniform(0.0, 1.0, size=(60, 3))
    i, j = np.triu_indices(60, 1)
    pairs = np.stack([i, j], axis=1).astype(np.int32)
    distances = np.linalg.norm(positions[i] - positions[j], axis=1)
    reach = float(np.median(distances))
    kept = np.empty_like(pairs)
    n_kept = kernels.pairs_within(positions, pairs, reach, kept)
    np.testing.assert_array_equal(kept[:n_kept], pairs[distances < reach])
    # The threaded version keeps the same rows for any number of chunks, even more
    # chunks than pairs.
    for n_chunks in (1, 2, 3, 7):
        for chosen, close in ((pairs, distances < reach), (pairs[:5], distances[:5] < reach)):
            kept[:] = -1
            n_kept = kernels.pairs_within_parallel(positions, chosen, reach, kept, n_chunks)
            np.testing.assert_array_equal(kept[:n_kept], chosen[close])


def test_split_contacts_is_far_in_rest_then_pairs_within(rng):
    cloth = Cloth(8, seed=4)
    positions = cloth.positions + rng.normal(scale=0.5 * cloth.spacing,
                                             size=cloth.positions.shape)
    i, j = np.triu_indices(len(positions), 1)
    pairs = np.stack([i, j], axis=1).astype(np.int32)
    rest, reach = 1.5 * cloth.spacing, 2.0 * cloth.spacing
    far = np.empty_like(pairs)
    n_far = kernels.far_in_rest(pairs, cloth.rows, cloth.columns, cloth.spacing, rest, far)
    close = np.empty_like(pairs)
    n_close = kernels.pairs_within(positions, far[:n_far], reach, close)
    outer, inner = np.empty_like(pairs), np.empty_like(pairs)
    n_outer, n_inner = kernels.split_contacts(positions, pairs, cloth.rows, cloth.columns,
                                              cloth.spacing, rest, reach, outer, inner)
    assert 0 < n_inner < n_outer < len(pairs)
    np.testing.assert_array_equal(outer[:n_outer], far[:n_far])
    np.testing.assert_array_equal(inner[:n_inner], close[:n_close])
    # The threaded version: the same lists for any number of chunks, even more chunks
    # than pairs.
    for n_chunks in (1, 2, 3, 7):
        for chosen in (pairs, pairs[:5]):
            expected = kernels.split_contacts(positions, chosen, cloth.rows, cloth.columns,
                                              cloth.spacing, rest, reach, outer, inner)
            expected_outer, expected_inner = outer[:expected[0]].copy(), inner[:expected[1]].copy()
            threaded = kernels.split_contacts_parallel(
                positions, chosen, cloth.rows, cloth.columns, cloth.spacing, rest, reach,
                outer, inner, n_chunks)
            assert threaded == expected
            np.testing.assert_array_equal(outer[:threaded[0]], expected_outer)
            np.testing.assert_array_equal(inner[:threaded[1]], expected_inner)


def test_inner_list_is_the_close_part_of_the_outer_one():
    # The solver's list (`pairs`) is refreshed from the outer list more often than the
    # outer list is rebuilt, and holds only listed pairs.
    cloth = Cloth(SIZE, seed=2)
    for _ in range(30):
        cloth.step_frame()
    assert cloth.times.n_refreshes > cloth.times.n_builds > 1
    outer = cloth._candidates.astype(np.int64)
    inner = cloth.pairs.astype(np.int64)
    n = len(cloth.positions)
    assert 0 < len(inner) < len(outer)
    assert np.isin(inner[:, 0] * n + inner[:, 1], outer[:, 0] * n + outer[:, 1]).all()


def test_constraints_link_each_neighbour_once_with_disjoint_neighbours():
    n = 7
    cloth = Cloth(n)
    ids = np.arange(n * n).reshape(n, n)
    expected = set()
    for di, dj, length in [(0, 1, 1.0), (1, 0, 1.0), (1, 1, math.sqrt(2)), (1, -1, math.sqrt(2)),
                           (0, 2, 2.0), (2, 0, 2.0)]:
        for i in range(n):
            for j in range(n):
                if 0 <= i + di < n and 0 <= j + dj < n:
                    pair = tuple(sorted((ids[i, j], ids[i + di, j + dj])))
                    expected.add((*pair, round(length * cloth.spacing, 12)))
    found = [(*sorted(pair), round(rest, 12))
             for pair, rest in zip(cloth.constraints.tolist(), cloth.rest_lengths, strict=True)]
    assert len(found) == len(set(found)) == len(expected)
    assert set(found) == expected
    # Consecutive constraints share no particle except where one family ends and the next
    # begins, in each band (the solver overlaps neighbours in the list).
    shared = [k for k in range(len(found) - 1)
              if set(cloth.constraints[k]) & set(cloth.constraints[k + 1])]
    assert len(shared) <= 12 * (len(cloth._band_start) - 1)


@pytest.mark.parametrize("size", [9, 40])
def test_constraint_bands_share_no_particle_and_solve_the_same_on_threads(rng, size):
    cloth = Cloth(size, seed=3)
    starts, n_first = cloth._band_start, cloth._n_even_bands
    assert starts[0] == 0 and starts[-1] == len(cloth.constraints)
    assert 1 < n_first < len(starts) - 1
    bands = [cloth.constraints[begin:end].ravel()
             for begin, end in zip(starts[:-1], starts[1:], strict=True)]
    assert all(len(band) for band in bands)
    for half in (bands[:n_first], bands[n_first:]):
        # Within a band particles repeat; in two bands of one half, never.
        particles = np.concatenate([np.unique(band) for band in half])
        assert len(np.unique(particles)) == len(particles)
    positions = cloth.positions + rng.normal(scale=0.2 * cloth.spacing,
                                             size=cloth.positions.shape)
    sequential = positions.copy()
    kernels.solve_distances(sequential, cloth.constraints, cloth.rest_lengths,
                            cloth._share_a, cloth._share_b)
    previous_threads = numba.get_num_threads()
    try:
        for n_threads in range(1, numba.config.NUMBA_NUM_THREADS + 1):
            numba.set_num_threads(n_threads)
            parallel = positions.copy()
            kernels.solve_distances_parallel(parallel, cloth.constraints, cloth.rest_lengths,
                                             cloth._share_a, cloth._share_b, starts, n_first)
            np.testing.assert_array_equal(parallel, sequential)
    finally:
        numba.set_num_threads(previous_threads)
    assert not np.array_equal(sequential, positions)


def test_cloth_starts_at_rest_with_its_rest_lengths():
    cloth = Cloth(12, seed=5)
    a, b = cloth.constraints.T
    lengths = np.linalg.norm(cloth.positions[a] - cloth.positions[b], axis=1)
    np.testing.assert_allclose(lengths, cloth.rest_lengths, atol=4e-3 * cloth.spacing)
    assert (cloth.velocities == 0).all()
    assert cloth.positions[:, 2].min() == pytest.approx(0.05 + 0.5 * cloth.thickness,
                                                       abs=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"size": 1}, ValueError, "`size` must be >= 2; got 1."),
        ({"size": 2.5}, TypeError, "`size` must be an integer; got 2.5."),
        ({"thickness": 0.0}, ValueError, "`thickness` must be > 0; got 0.0."),
        ({"spacing": -1.0}, ValueError, "`spacing` must be > 0; got -1.0."),
        ({"substeps": 0}, ValueError, "`substeps` must be >= 1; got 0."),
        ({"fps": math.inf}, ValueError, "`fps` must be finite; got inf."),
        ({"margin": 0.0}, ValueError, "`margin` must be > 0; got 0.0."),
        ({"friction": 2}, ValueError, "`friction` must be between 0 and 1; got 2.0."),
        ({"friction": "a"}, TypeError, "`friction` must be a real number; got 'a'."),
        ({"tilt": math.nan}, ValueError, "`tilt` must be finite; got nan."),
        ({"drop_height": -1}, ValueError, "`drop_height` must be >= 0; got -1.0."),
        ({"bend_compliance": -1e-3}, ValueError, "`bend_compliance` must be >= 0; got -0.001."),
        ({"n_threads": 0}, ValueError,
         f"`n_threads` must be -1 or between 1 and {MAX_THREADS} (NUMBA_NUM_THREADS); got 0."),
    ],
)
def test_bad_parameters_are_named(kwargs, error, message):
    with pytest.raises(error) as caught:
        Cloth(**kwargs)
    assert str(caught.value) == message


def test_renderer_draws_both_sides_of_the_cloth():
    cloth = Cloth(20, seed=0)
    renderer = Renderer(cloth, 160, 120)
    for _ in range(30):
        cloth.step_frame()
    image = renderer.render()
    assert image.size == (160, 120)
    counts = np.bincount(np.asarray(image).ravel(), minlength=256)
    front = counts[view._FRONT:view._FRONT + view._N_SHADES].sum()
    back = counts[view._BACK:view._BACK + view._N_SHADES].sum()
    # Folded on the ground, the cloth shows both its sides.
    assert front > 0 and back > 0


# ---------------------------------------------------------------------- command line
def _args(**overrides) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cloth_demo.add_arguments(parser)
    args = parser.parse_args([])
    for name, value in overrides.items():
        setattr(args, name, value)
    return args


def test_run_writes_the_animation_and_prints_the_timing(tmp_path, capsys):
    output = tmp_path / "cloth.gif"
    status = cloth_demo.run(_args(size=12, frames=6, render_every=2, output=str(output)))
    assert status == 0
    with Image.open(output) as gif:
        assert gif.n_frames == 3
        assert gif.size == (480, 360)
    printed = capsys.readouterr().out
    for words in ("neighbour search", "solve", "x real time", "render:", "wrote"):
        assert words in printed
    assert [path.name for path in tmp_path.iterdir()] == ["cloth.gif"]


def test_run_without_self_collision_and_without_output(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status = cloth_demo.run(_args(size=8, frames=3, output="none", no_self_collision=True))
    assert status == 0
    assert "self-collision off" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"size": 1}, "error: --size must be at least 2; got 1."),
        ({"frames": 0}, "error: --frames must be at least 1; got 0."),
        ({"substeps": 0}, "error: --substeps must be at least 1; got 0."),
        ({"render_every": 0}, "error: --render-every must be at least 1; got 0."),
        ({"seed": -1}, "error: --seed must be at least 0; got -1."),
        ({"threads": 0}, "error: --threads must be -1 (all) or an integer from 1 to "
                         f"{MAX_THREADS} (NUMBA_NUM_THREADS); got 0."),
        ({"threads": MAX_THREADS + 1},
         "error: --threads must be -1 (all) or an integer from 1 to "
         f"{MAX_THREADS} (NUMBA_NUM_THREADS); got {MAX_THREADS + 1}."),
        ({"threads": "2"}, "error: --threads must be -1 (all) or an integer from 1 to "
                           f"{MAX_THREADS} (NUMBA_NUM_THREADS); got '2'."),
    ],
)
def test_run_rejects_bad_options(tmp_path, monkeypatch, capsys, overrides, message):
    output = tmp_path / "cloth.gif"
    monkeypatch.setattr(cloth_demo, "_warm_up", None)  # checked before any work
    assert cloth_demo.run(_args(output=str(output), **overrides)) == 2
    assert capsys.readouterr().err.strip() == message
    assert not output.exists()


def test_run_rejects_outputs_it_cannot_write_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cloth_demo, "_warm_up", None)
    (tmp_path / "folder.gif").mkdir()
    for output, message in [
        (tmp_path / "cloth.mp4",
         f"error: --output must name a .gif file (or be 'none'); got {tmp_path / 'cloth.mp4'}."),
        (tmp_path / "folder.gif",
         f"error: --output must name a file, not a folder; got {tmp_path / 'folder.gif'}."),
    ]:
        assert cloth_demo.run(_args(output=str(output))) == 2
        assert capsys.readouterr().err.strip() == message
    assert [p.name for p in tmp_path.iterdir()] == ["folder.gif"]


def test_steps_is_another_name_for_frames():
    parser = argparse.ArgumentParser()
    cloth_demo.add_arguments(parser)
    assert parser.parse_args(["--steps", "7"]).frames == 7


def test_run_rejects_an_output_in_a_missing_folder(tmp_path, capsys):
    output = tmp_path / "missing" / "cloth.gif"
    assert cloth_demo.run(_args(size=4, frames=1, output=str(output))) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --output must be in an existing folder; got {output}."
    )
    assert not output.parent.exists()


def test_threads_set_the_count_of_every_parallel_part(monkeypatch):
    """``n_threads`` reaches the grids and the parallel kernels, for the frame only; the
    cloth moves the same on one thread as on the default count."""
    seen = {"grids": [], "kernels": []}

    class RecordingGrid(Grid):
        def __init__(self, *args, **kwargs) -> None:
            seen["grids"].append(kwargs.get("n_threads"))
            super().__init__(*args, **kwargs)

    def recording(kernel):
        def call(*args):
            seen["kernels"].append((args[-1], numba.get_num_threads()))  # n_chunks last
            return kernel(*args)
        return call

    reference = Cloth(12, seed=3)
    for _ in range(4):
        reference.step_frame()
    before = numba.get_num_threads()
    monkeypatch.setattr(_cloth_simulation, "Grid", RecordingGrid)
    for name in ("split_contacts_parallel", "pairs_within_parallel"):
        monkeypatch.setattr(kernels, name, recording(getattr(kernels, name)))
    cloth = Cloth(12, seed=3, n_threads=1)
    for _ in range(4):
        cloth.step_frame()
    assert numba.get_num_threads() == before
    assert seen["grids"] and set(seen["grids"]) == {1}
    assert seen["kernels"] and set(seen["kernels"]) == {(1, 1)}
    np.testing.assert_array_equal(cloth.positions, reference.positions)
    cloth.count_interpenetrations()
    cloth.count_crossings()
    assert set(seen["grids"]) == {1}


def test_run_says_its_thread_count(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cloth_demo.run(_args(size=6, frames=2, output="none", threads=1)) == 0
    assert ", 1 thread (--threads);" in capsys.readouterr().out
