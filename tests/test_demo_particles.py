"""The colliding-particles demo: its three contact searches agree with a brute-force oracle,
its physics holds (no deep overlaps, energy that never grows, walls), and its command line
and interactive window run headless."""

from __future__ import annotations

import argparse
import re

import numba
import numpy as np
import pytest

import spatialhash
from spatialhash.demos import _particle_kernels, _particle_view, particles
from spatialhash.demos._particle_view import InteractiveView, render_frame
from spatialhash.demos.particles import (
    DEEP_OVERLAP,
    SEARCHES,
    ParticleSystem,
    find_contacts,
)

CONTRACT_SEEDS = range(5)


#: The most threads numba allows, the upper bound of ``--threads``.
MAX_THREADS = numba.config.NUMBA_NUM_THREADS


def contacts_oracle(positions: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Sorted keys ``i * n + j`` of the pairs with ``dx*dx + dy*dy <= (r_i + r_j)**2``."""
    n = positions.shape[0]
    dx = positions[:, np.newaxis, 0] - positions[np.newaxis, :, 0]
    dy = positions[:, np.newaxis, 1] - positions[np.newaxis, :, 1]
    limit = radii[:, np.newaxis] + radii[np.newaxis, :]
    i, j = np.nonzero(np.triu(dx * dx + dy * dy <= limit * limit, k=1))
    return np.sort(i * n + j)


def keys(pairs: np.ndarray, n: int) -> np.ndarray:
    assert (pairs[:, 0] < pairs[:, 1]).all()
    return np.sort(pairs[:, 0] * n + pairs[:, 1])


def max_overlap_oracle(positions: np.ndarray, radii: np.ndarray) -> float:
    """Largest overlap over all pairs as a fraction of the smaller radius (0 when none)."""
    dx = positions[:, np.newaxis, 0] - positions[np.newaxis, :, 0]
    dy = positions[:, np.newaxis, 1] - positions[np.newaxis, :, 1]
    overlap = radii[:, np.newaxis] + radii[np.newaxis, :] - np.sqrt(dx * dx + dy * dy)
    relative = overlap / np.minimum(radii[:, np.newaxis], radii[np.newaxis, :])
    np.fill_diagonal(relative, -np.inf)
    return max(float(relative.max()), 0.0)


# ---------------------------------------------------------------------- searches
@pytest.mark.parametrize("seed", CONTRACT_SEEDS)
@pytest.mark.parametrize("search", SEARCHES)
def test_search_matches_oracle_on_a_dyadic_lattice(search, seed):
    # Quarter-unit coordinates and radii: many pairs touch at exactly r_i + r_j, and some
    # centres coincide; every search must decide them as the oracle does.
    rng = np.random.default_rng(seed)
    n = 400
    positions = rng.integers(0, 80, (n, 2)) * 0.25
    radii = rng.integers(1, 9, n) * 0.25
    found = find_contacts(positions, radii, search)
    expected = contacts_oracle(positions, radii)
    assert expected.size > 100
    np.testing.assert_array_equal(keys(found, n), expected)


@pytest.mark.parametrize("seed", CONTRACT_SEEDS)
@pytest.mark.parametrize("search", SEARCHES)
def test_search_matches_oracle_on_random_floats(search, seed):
    rng = np.random.default_rng(seed)
    n = 600
    positions = rng.normal(0.0, 10.0, (n, 2))
    radii = 0.1 * 4.0 ** rng.random(n)
    expected = contacts_oracle(positions, radii)
    assert expected.size > 50
    np.testing.assert_array_equal(keys(find_contacts(positions, radii, search), n), expected)


def test_searches_agree_on_a_settled_pile():
    system = ParticleSystem(800, seed=1)
    for _ in range(150):
        system.step()
    reference = keys(system.copy(search="brute").candidate_pairs(), 800)
    assert reference.size > 1000
    for search in ("hash", "sorted"):
        np.testing.assert_array_equal(
            keys(system.copy(search=search).candidate_pairs(), 800), reference)


def test_every_search_hands_the_solver_int32_pairs():
    # The hash search passes the library's int32 indices on unconverted and the baselines
    # write int32 too, so the step's solver is compiled for one type of pairs.
    system = ParticleSystem(300, seed=2)
    for search in SEARCHES:
        clone = system.copy(search=search)
        assert clone.candidate_pairs().dtype == np.int32
        clone.step()
    pair_types = {str(signature[0]) for signature in _particle_kernels.sweep_order.signatures}
    assert pair_types == {"array(int32, 2d, C)"}
    # The public function keeps its int64 result.
    assert find_contacts([[0.0, 0.0], [0.5, 0.0]], [0.5, 0.5]).dtype == np.int64


@pytest.mark.parametrize("search", SEARCHES)
def test_search_edge_cases(search):
    # One particle; two coincident ones; zero radii touching only when coincident.
    assert find_contacts([[1.0, 2.0]], [0.5], search).shape == (0, 2)
    np.testing.assert_array_equal(find_contacts([[1.0, 2.0], [1.0, 2.0]], [0.0, 0.0], search),
                                  [[0, 1]])
    assert find_contacts([[0.0, 0.0], [1.0, 0.0]], [0.5, 0.25], search).shape == (0, 2)
    np.testing.assert_array_equal(find_contacts([[0.0, 0.0], [0.75, 0.0]], [0.5, 0.25], search),
                                  [[0, 1]])


def test_search_buffer_grows():
    # Everything overlaps everything: far more pairs than the first buffer holds.
    positions = np.random.default_rng(0).random((100, 2))
    for search in ("sorted", "brute"):
        assert find_contacts(positions, np.full(100, 1.0), search).shape == (4950, 2)


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda: find_contacts(np.zeros((3, 3)), np.ones(3)), ValueError,
         r"`positions` must have shape (n, 2); got shape (3, 3)."),
        (lambda: find_contacts(np.zeros((3, 2)), np.ones(4)), ValueError,
         r"`radii` must have shape (3,); got shape (4,)."),
        (lambda: find_contacts(np.zeros((3, 2)), np.ones(3), "kdtree"), ValueError,
         r"`search` must be one of ('hash', 'sorted', 'brute'); got 'kdtree'."),
        (lambda: find_contacts([[0.0, 1.0], [np.nan, 0.0]], np.ones(2)), ValueError,
         "`positions` must be finite; got nan at positions[1, 0]."),
        (lambda: find_contacts(np.zeros((2, 2)), [1.0, -0.5]), ValueError,
         "`radii` must be finite and >= 0; got -0.5 at radii[1]."),
        (lambda: find_contacts(np.zeros((2, 2)), [np.inf, 0.5], "brute"), ValueError,
         "`radii` must be finite and >= 0; got inf at radii[0]."),
        (lambda: ParticleSystem(0), ValueError, "`n_particles` must be at least 1; got 0."),
        (lambda: ParticleSystem(2.5), TypeError, "`n_particles` must be an integer; got 2.5."),
        (lambda: ParticleSystem(10, n_substeps=True), TypeError,
         "`n_substeps` must be an integer; got True."),
        (lambda: ParticleSystem(10, gravity=-1.0), ValueError,
         "`gravity` must be finite and at least 0.0; got -1.0."),
        (lambda: ParticleSystem(10, skin=0.0), ValueError,
         "`skin` must be finite and greater than 0.0; got 0.0."),
        (lambda: ParticleSystem(10, radius_ratio="4"), TypeError,
         "`radius_ratio` must be a real number; got '4'."),
        (lambda: ParticleSystem(10, search="grid"), ValueError,
         r"`search` must be one of ('hash', 'sorted', 'brute'); got 'grid'."),
        (lambda: ParticleSystem(10, n_threads=0), ValueError,
         f"`n_threads` must be -1 or between 1 and {MAX_THREADS} (NUMBA_NUM_THREADS); "
         "got 0."),
        (lambda: find_contacts(np.zeros((2, 2)), np.ones(2), n_threads=1.5), TypeError,
         "`n_threads` must be an integer or None; got 1.5."),
    ],
)
def test_error_messages(call, error, pattern):
    with pytest.raises(error, match=re.escape(pattern)):
        call()


# ---------------------------------------------------------------------- physics
def test_initial_state():
    system = ParticleSystem(1000, seed=4)
    assert system.radii.min() == 1.0
    assert system.radii.max() == pytest.approx(4.0)
    assert max_overlap_oracle(system.positions, system.radii) == 0.0
    assert (system.positions >= system.radii[:, np.newaxis]).all()
    assert (system.positions[:, 0] <= system.width - system.radii).all()
    assert (system.positions[:, 1] <= system.height - system.radii).all()


@pytest.mark.parametrize(("n_particles", "n_steps", "seed"), [
    (1000, 360, 0),
    pytest.param(1000, 360, 7, marks=pytest.mark.slow),
    # The demo's own run (`spatialhash demo particles`: 5,000 particles, 600 steps).
    pytest.param(5000, 600, 0, marks=pytest.mark.slow),
])
def test_falling_pile_has_no_deep_overlaps_and_loses_energy(n_particles, n_steps, seed):
    system = ParticleSystem(n_particles, seed=seed)
    energies = [system.energy()]
    for index in range(n_steps):
        before = system.candidate_pairs()
        system.step()
        # After the collision handling of every step, nothing is deeply inside another.
        contacts = find_contacts(system.positions, system.radii)
        worst = _particle_kernels.max_relative_overlap(system.positions, system.radii,
                                                       contacts, contacts.shape[0])
        assert worst < DEEP_OVERLAP, index
        # Every contact at the end of the step was among the pairs searched at its start:
        # the speed cap keeps particles within the search's skin.
        n = system.n_particles
        assert np.isin(keys(contacts, n), keys(before, n)).all(), index
        energies.append(system.energy())
        if index % 70 == 0:
            assert system.max_overlap() == pytest.approx(
                max_overlap_oracle(system.positions, system.radii), abs=1e-12)
    energies = np.array(energies)
    # Energy never grows beyond a rounding-sized tolerance, and the pile comes to rest.
    assert np.diff(energies).max() <= 1e-4 * energies[0]
    assert energies[-1] < 0.5 * energies[0]
    kinetic = 0.5 * np.sum(system.radii**2 * np.sum(system.velocities**2, axis=1))
    assert kinetic < 5e-3 * energies[-1]
    radii = system.radii[:, np.newaxis]
    assert (system.positions >= radii).all()
    assert (system.positions <= np.array([system.width, system.height]) - radii).all()


def test_no_gravity_kinetic_energy_never_grows():
    system = ParticleSystem(1000, seed=2, gravity=0.0)
    energies = [system.energy()]
    for _ in range(200):
        system.step()
        energies.append(system.energy())
    assert np.diff(energies).max() <= 1e-4 * energies[0]
    assert max_overlap_oracle(system.positions, system.radii) < DEEP_OVERLAP


def test_searches_give_the_same_trajectory():
    # Same pairs in different orders; the solver sorts them, so the runs agree bit for bit.
    runs = [ParticleSystem(300, seed=5, search=search) for search in SEARCHES]
    n_pairs = 0
    for _ in range(60):
        n_pairs += sum(system.step().n_pairs for system in runs)
    assert n_pairs > 3 * 1000  # the sweeps had pairs to order
    for system in runs[1:]:
        np.testing.assert_array_equal(system.positions, runs[0].positions)
        np.testing.assert_array_equal(system.velocities, runs[0].velocities)


@pytest.mark.parametrize("n_pairs", [0, 1, 63, 64, 65, 1000])
def test_sweep_order_sorts_then_interleaves(n_pairs):
    rng = np.random.default_rng(n_pairs)
    # int32 pairs, as the searches hand the solver: an int64 call would compile a second
    # signature, which `test_every_search_hands_the_solver_int32_pairs` rules out.
    pairs = np.sort(rng.integers(0, 50, (n_pairs, 2)), axis=1).astype(np.int32)
    radii = rng.random(50) + 0.5
    inverse_mass = 1.0 / radii**2
    out = np.full((n_pairs + 3, 2), -7, dtype=np.int64)
    constants = np.full((n_pairs + 3, 3), -7.0)
    _particle_kernels.sweep_order(pairs, radii, inverse_mass, 64, np.empty_like(out), out,
                                  constants)
    ordered = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    interleaved = np.concatenate([ordered[phase::64] for phase in range(64)]).reshape(-1, 2)
    np.testing.assert_array_equal(out[:n_pairs], interleaved)
    assert (out[n_pairs:] == -7).all() and (constants[n_pairs:] == -7.0).all()
    i, j = interleaved[:, 0], interleaved[:, 1]
    total = inverse_mass[i] + inverse_mass[j]
    np.testing.assert_array_equal(constants[:n_pairs, 0], radii[i] + radii[j])
    np.testing.assert_array_equal(constants[:n_pairs, 1], inverse_mass[i] / total)
    np.testing.assert_array_equal(constants[:n_pairs, 2], inverse_mass[j] / total)


def test_copy_is_independent():
    system = ParticleSystem(200, seed=0)
    clone = system.copy(search="sorted")
    clone.step()
    assert clone.search == "sorted" and system.search == "hash"
    assert not np.array_equal(clone.positions, system.positions)
    assert system.n_steps == 0 and clone.n_steps == 1


def test_render_frame_colours_discs_by_radius():
    system = ParticleSystem(50, seed=0)
    image = render_frame(system, 128)
    assert image.size == (128, 128) and image.mode == "P"
    pixels = np.asarray(image)
    scale = 128 / system.width
    smallest, largest = system.radii.argmin(), system.radii.argmax()
    for index in (smallest, largest):
        x, y = system.positions[index] * scale
        assert pixels[int(128 - y), int(x)] != 0
    x, y = system.positions[largest] * scale
    assert pixels[int(128 - y), int(x)] > pixels[int(128 - system.positions[smallest, 1] * scale),
                                                 int(system.positions[smallest, 0] * scale)]


# ---------------------------------------------------------------------- window
def test_interactive_highlights_particles_near_the_pointer(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    system = ParticleSystem(500, seed=3)
    view = InteractiveView(system, size=300, highlight_radius=20.0)
    pygame = view.pygame
    view.open()
    try:
        assert view.frame()
        assert view.highlighted.size == 0  # no pointer yet
        for pixel in [(150, 150), (40, 260)]:
            pygame.event.post(pygame.event.Event(pygame.MOUSEMOTION, pos=pixel, rel=(0, 0),
                                                 buttons=(0, 0, 0)))
            assert view.frame()
            assert view.frame()
            pointer = view.to_world(pixel)
            distances = np.linalg.norm(system.positions - pointer, axis=1)
            expected = np.flatnonzero(distances <= 20.0)
            assert expected.size > 0
            np.testing.assert_array_equal(view.highlighted, expected)
            # The highlighted discs are drawn white where nothing else covers them.
            surface = pygame.surfarray.array3d(pygame.display.get_surface())
            x, y = system.positions[expected[0]] * view.scale
            assert surface[int(x), int(300 - y)].tolist() == [255, 255, 255]
        pygame.event.post(pygame.event.Event(pygame.QUIT))
        assert not view.frame()
    finally:
        view.close()


def test_interactive_escape_ends_the_loop(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    view = InteractiveView(ParticleSystem(100, seed=0), size=100)
    view.open()
    try:
        view.pygame.event.post(view.pygame.event.Event(view.pygame.KEYDOWN,
                                                       key=view.pygame.K_ESCAPE))
        assert not view.frame()
    finally:
        view.close()


# ---------------------------------------------------------------------- command line
def parse(*argv: str, headless: bool = True) -> argparse.Namespace:
    """Parsed demo options; ``--headless`` unless told otherwise, so no window ever opens
    on a developer's desktop."""
    parser = argparse.ArgumentParser()
    particles.add_arguments(parser)
    return parser.parse_args([*argv, *(["--headless"] if headless else [])])


def test_command_line_writes_the_animation_and_prints_the_table(tmp_path, capsys):
    from PIL import Image

    output = tmp_path / "particles.gif"
    status = particles.run(parse("--count", "400", "--steps", "20", "--timing-steps", "3",
                                 "--size", "64", "--output", str(output)))
    assert status == 0
    with Image.open(output) as animation:
        assert animation.n_frames == 5
        assert animation.size == (64, 64)
    printed = capsys.readouterr().out
    for search in SEARCHES:
        assert re.search(rf"\| 400 \| {search} \| [\d.]+ \| [\d.]+ \| [\d,]+ \|", printed)
    assert [p.name for p in tmp_path.iterdir()] == ["particles.gif"]


def test_command_line_without_output_and_one_search(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    status = particles.run(parse("--count", "200", "--steps", "3", "--timing-steps", "2",
                                 "--output", "none", "--search", "sorted"))
    assert status == 0
    printed = capsys.readouterr().out
    assert "| 200 | sorted |" in printed and "| hash |" not in printed
    assert list(tmp_path.iterdir()) == []


def test_command_line_skips_brute_force_above_the_limit(monkeypatch, capsys):
    monkeypatch.setattr(particles, "BRUTE_FORCE_MAX_PARTICLES", 100)
    assert particles.run(parse("--count", "150", "--steps", "2", "--timing-steps", "2",
                               "--output", "none")) == 0
    assert "| 150 | brute | | | | skipped above 100 particles |" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--count", "0"], "error: --count must be at least 1; got 0."),
        (["--steps", "-3"], "error: --steps must be at least 1; got -3."),
        (["--frames", "0"], "error: --frames must be at least 1; got 0."),
        (["--output", "missing/out.gif"],
         "error: --output must be in an existing folder; got missing/out.gif."),
        (["--output", "out.mp4"],
         "error: --output must name a .gif file (or be 'none'); got out.mp4."),
        (["--output", "folder.gif"],
         "error: --output must name a file, not a folder; got folder.gif."),
        (["--seed", "-1"], "error: --seed must be at least 0; got -1."),
        (["--fps", "0"], "error: --fps must be a positive number; got 0."),
        (["--fps", "nan"], "error: --fps must be a positive number; got nan."),
        (["--fps=-inf"], "error: --fps must be a positive number; got -inf."),
        (["--threads", "0"], "error: --threads must be -1 (all) or an integer from 1 to "
                             f"{MAX_THREADS} (NUMBA_NUM_THREADS); got 0."),
        (["--threads", "-2"], "error: --threads must be -1 (all) or an integer from 1 to "
                              f"{MAX_THREADS} (NUMBA_NUM_THREADS); got -2."),
        (["--threads", str(MAX_THREADS + 1)],
         "error: --threads must be -1 (all) or an integer from 1 to "
         f"{MAX_THREADS} (NUMBA_NUM_THREADS); got {MAX_THREADS + 1}."),
    ],
)
def test_command_line_rejects_bad_values(tmp_path, monkeypatch, capsys, argv, message):
    """Checked before any work: one line, status 2, nothing written, nothing simulated."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder.gif").mkdir()
    monkeypatch.setattr(particles, "ParticleSystem", None)  # never reached
    assert particles.run(parse("--output", "out.gif", *argv)) == 2
    assert capsys.readouterr().err.strip() == message
    assert [p.name for p in tmp_path.iterdir()] == ["folder.gif"]


def test_command_line_failed_animation_write_leaves_nothing(tmp_path, monkeypatch, capsys):
    from PIL import Image

    def fail_midway(image, path, *args, **kwargs):
        with open(path, "wb") as partial:
            partial.write(b"GIF89a")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Image.Image, "save", fail_midway)
    output = tmp_path / "particles.gif"
    status = particles.run(parse("--count", "100", "--steps", "4", "--timing-steps", "1",
                                 "--size", "32", "--output", str(output)))
    assert status == 1
    assert capsys.readouterr().err.strip() == (
        f"error: could not write {output}: [Errno 28] No space left on device"
    )
    assert list(tmp_path.iterdir()) == []


def test_command_line_interactive_needs_a_display(tmp_path, monkeypatch, capsys):
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER"):
        monkeypatch.delenv(name, raising=False)
    output = tmp_path / "out.gif"
    assert particles.run(parse("--interactive", "--output", str(output), headless=False)) == 2
    assert "--interactive needs a display" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_command_line_interactive_headless(monkeypatch, capsys):
    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    status = particles.run(parse("--count", "200", "--steps", "2", "--timing-steps", "2",
                                 "--output", "none", "--interactive", "--frames", "3"))
    assert status == 0
    assert "interactive window closed after 3 frames" in capsys.readouterr().out
    import os

    assert "SDL_VIDEODRIVER" not in os.environ  # restored after the window closed


def test_sorted_search_rejects_a_spread_its_keys_cannot_number():
    positions = np.array([[0.0, 0.0], [1e12, 0.0]])
    with pytest.raises(ValueError, match=re.escape(
            "`positions` must span fewer than 2**31 cells of the sorted index per axis "
            "(cell size 0.5); got a spread of 1e+12. Use the hash search.")):
        find_contacts(positions, [0.25, 0.25], "sorted")
    assert find_contacts(positions, [0.25, 0.25], "hash").shape == (0, 2)


def test_command_line_opens_the_window_where_a_display_is(monkeypatch, capsys):
    # A display "is available" (patched); SDL's dummy driver stands in for it.
    monkeypatch.setattr(_particle_view, "has_display", lambda: True)
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    status = particles.run(parse("--count", "200", "--steps", "2", "--timing-steps", "2",
                                 "--output", "none", "--frames", "2", headless=False))
    assert status == 0
    assert "interactive window closed after 2 frames" in capsys.readouterr().out


def test_command_line_headless_opens_no_window(monkeypatch, capsys):
    monkeypatch.setattr(_particle_view, "has_display", lambda: True)
    assert particles.run(parse("--count", "200", "--steps", "2", "--timing-steps", "2",
                               "--output", "none")) == 0
    assert "interactive window" not in capsys.readouterr().out


def test_command_line_unasked_window_that_cannot_open_is_a_note(monkeypatch, capsys):
    # DISPLAY names no server: the automatic window fails to open; the run still succeeds.
    monkeypatch.setenv("DISPLAY", ":97")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setenv("SDL_VIDEODRIVER", "x11")
    assert particles.run(parse("--count", "200", "--steps", "2", "--timing-steps", "2",
                               "--output", "none", "--frames", "2", headless=False)) == 0
    assert "note: the interactive window could not open" in capsys.readouterr().err


class _RecordingGrid(spatialhash.Grid):
    """`spatialhash.Grid` that records the ``n_threads`` of every grid made."""

    made: list = []

    def __init__(self, *args, **kwargs) -> None:
        _RecordingGrid.made.append(kwargs.get("n_threads"))
        super().__init__(*args, **kwargs)


@pytest.mark.parametrize("threads", [1, -1])
def test_command_line_threads_reach_every_grid_and_the_table(monkeypatch, capsys, threads):
    monkeypatch.setattr(spatialhash, "Grid", _RecordingGrid)
    monkeypatch.setattr(_RecordingGrid, "made", [])
    assert particles.run(parse("--count", "200", "--steps", "2", "--timing-steps", "1",
                               "--output", "none", "--threads", str(threads))) == 0
    expected = 1 if threads == 1 else MAX_THREADS
    # The steps' searches, the overlap checks and the timed steps of the hash search.
    assert len(_RecordingGrid.made) >= 6
    assert set(_RecordingGrid.made) == {expected}
    unit = "thread" if expected == 1 else "threads"
    assert f"the hash search on up to {expected} {unit} (--threads)" in capsys.readouterr().out


def test_command_line_table_says_the_default_thread_count(monkeypatch, capsys):
    monkeypatch.setattr(spatialhash, "Grid", _RecordingGrid)
    monkeypatch.setattr(_RecordingGrid, "made", [])
    assert particles.run(parse("--count", "200", "--steps", "2", "--timing-steps", "1",
                               "--output", "none", "--search", "hash")) == 0
    assert set(_RecordingGrid.made) == {None}
    with spatialhash._config.threads(None):
        default = numba.get_num_threads()
    unit = "thread" if default == 1 else "threads"
    assert f"on up to {default} {unit} (--threads)" in capsys.readouterr().out


def test_interactive_highlight_uses_the_systems_threads(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    monkeypatch.setenv("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    monkeypatch.setattr(spatialhash, "Grid", _RecordingGrid)
    monkeypatch.setattr(_RecordingGrid, "made", [])
    view = InteractiveView(ParticleSystem(50, n_threads=1), size=64, headless=True)
    view.pointer = (32, 32)
    view._update_highlight()
    assert _RecordingGrid.made == [1]
