"""The particle demo on a Warp device (``ParticleSystem.to_device``, ``--device``), run on
Warp's CPU device: its contact search finds the host's pairs, its step misses no contact
and keeps the demo's physics, it is deterministic whatever order the pairs come in, and
its command line runs headless and prints the table; without Warp, one line names the
extra."""

from __future__ import annotations

import importlib.util
import os
import re
import sys

import numpy as np
import pytest

from spatialhash.demos import _particle_kernels, particles
from spatialhash.demos.particles import DEEP_OVERLAP, ParticleSystem, find_contacts
from test_demo_particles import contacts_oracle, keys, max_overlap_oracle, parse

#: Warp's kernels compiled for the CPU: the code CUDA runs, on a machine without a GPU.
DEVICE = "warp-cpu"
needs_warp = pytest.mark.skipif(importlib.util.find_spec("warp") is None,
                                reason="the gpu extra")
#: CUDA devices to compare with ``warp-cpu``: a GPU with ``SPATIALHASH_TEST_CUDA=1``
#: (`benchmarks/gpu_check.py`), none otherwise.
CUDA_DEVICES = ["cuda"] if os.environ.get("SPATIALHASH_TEST_CUDA") == "1" else []


def device_contacts(positions: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """`_particle_device.device_contacts` on host arrays, its pairs back on the host."""
    import warp as wp

    from spatialhash.demos import _particle_device

    system = ParticleSystem(1).to_device(DEVICE)  # loads Warp and the demo's kernels
    on = system.positions.device
    found = _particle_device.device_contacts(
        DEVICE, wp.array(positions, dtype=wp.vec2d, device=on),
        wp.array(radii, dtype=wp.float64, device=on), _particle_device.contact_cell_size(radii))
    assert found.dtype == wp.int32 and found.device == on
    return found.numpy()


def host_state(system) -> tuple[np.ndarray, np.ndarray]:
    host = system.to_host()
    return host.positions, host.velocities


# ---------------------------------------------------------------------- the search
@needs_warp
@pytest.mark.parametrize("seed", range(3))
def test_device_search_matches_the_host_and_the_oracle_on_a_dyadic_lattice(seed):
    # Quarter-unit coordinates and radii: many pairs at exactly r_i + r_j, some centres
    # coincide.
    rng = np.random.default_rng(seed)
    n = 400
    positions = rng.integers(0, 80, (n, 2)) * 0.25
    radii = rng.integers(1, 9, n) * 0.25
    found = keys(device_contacts(positions, radii), n)
    assert found.size > 100
    np.testing.assert_array_equal(found, contacts_oracle(positions, radii))
    np.testing.assert_array_equal(found, keys(find_contacts(positions, radii), n))


@needs_warp
def test_device_search_matches_the_host_on_a_settled_pile_and_edge_cases():
    system = ParticleSystem(400, seed=1)
    for _ in range(250):
        system.step()
    on_device = system.to_device(DEVICE)
    found = keys(on_device.candidate_pairs().numpy(), 400)
    assert found.size > 500
    np.testing.assert_array_equal(found, keys(system.candidate_pairs(), 400))
    assert device_contacts(np.array([[1.0, 2.0]]), np.array([0.5])).shape == (0, 2)
    np.testing.assert_array_equal(
        device_contacts(np.array([[1.0, 2.0], [1.0, 2.0]]), np.zeros(2)), [[0, 1]])


# ---------------------------------------------------------------------- the step
@needs_warp
def test_device_step_misses_no_contact_and_keeps_the_physics():
    host = ParticleSystem(400, seed=0)
    system = host.to_device(DEVICE)
    energies = [system.energy()]
    n = system.n_particles
    n_contacts = 0
    for index in range(300):
        before = keys(system.candidate_pairs().numpy(), n)
        system.step()
        positions, _ = host_state(system)
        contacts = find_contacts(positions, host.radii)
        n_contacts += contacts.shape[0]
        # Nothing deeply inside another after any step, and every contact at the end of
        # the step was among the pairs searched at its start.
        worst = _particle_kernels.max_relative_overlap(positions, host.radii, contacts,
                                                       contacts.shape[0])
        assert worst < DEEP_OVERLAP, index
        assert np.isin(keys(contacts, n), before).all(), index
        energies.append(system.energy())
        if index % 60 == 0:
            assert system.max_overlap() == pytest.approx(
                max_overlap_oracle(positions, host.radii), abs=1e-12)
    assert n_contacts > 100 * n  # the pile formed: the sweeps had contacts to resolve
    energies = np.array(energies)
    assert np.diff(energies).max() <= 1e-4 * energies[0]
    assert energies[-1] < 0.5 * energies[0]
    positions, _ = host_state(system)
    radii = host.radii[:, np.newaxis]
    assert (positions >= radii).all()
    assert (positions <= np.array([system.width, system.height]) - radii).all()
    # The system it came from is untouched.
    np.testing.assert_array_equal(host.positions, ParticleSystem(400, seed=0).positions)
    assert system.n_steps == 300 and host.n_steps == 0


@needs_warp
def test_device_step_without_gravity_gains_no_energy():
    system = ParticleSystem(500, seed=2, gravity=0.0).to_device(DEVICE)
    energies = [system.energy()]
    for _ in range(60):
        system.step()
        energies.append(system.energy())
    assert np.diff(energies).max() <= 1e-4 * energies[0]
    positions, _ = host_state(system)
    assert max_overlap_oracle(positions, system.to_host().radii) < DEEP_OVERLAP


@needs_warp
def test_device_step_is_deterministic_whatever_the_order_of_the_pairs(monkeypatch):
    # On a GPU the contact lists are filled in an order of the threads' own; the step
    # sorts each list, so pairs found in another order (here: shuffled, and each pair
    # turned round) give the same positions, bit for bit, as do two plain runs.
    import warp as wp

    from spatialhash.demos import _particle_device

    start = ParticleSystem(300, seed=5)
    for _ in range(200):
        start.step()
    runs = [start.to_device(DEVICE) for _ in range(3)]
    search = _particle_device.device_contacts
    rng = np.random.default_rng(0)

    def shuffled(grid_device, positions, radii, cell_size):
        pairs = search(grid_device, positions, radii, cell_size).numpy()
        pairs = pairs[rng.permutation(pairs.shape[0])][:, ::-1]
        return wp.array(np.ascontiguousarray(pairs), dtype=wp.int32, device=positions.device)

    n_pairs = 0
    for _ in range(20):
        n_pairs += sum(system.step().n_pairs for system in runs[:2])
    monkeypatch.setattr(_particle_device, "device_contacts", shuffled)
    for _ in range(20):
        runs[2].step()
    assert n_pairs > 40 * 300
    for system in runs[1:]:
        for got, expected in zip(host_state(system), host_state(runs[0]), strict=True):
            np.testing.assert_array_equal(got, expected)


@needs_warp
@pytest.mark.parametrize("cuda", CUDA_DEVICES)
def test_warp_cpu_and_cuda_steps_give_the_same_positions(cuda):
    # The same pairs (the grid engine's promise), each contact list in one order, no
    # fused multiply-adds (fuse_fp off) and IEEE square roots and divisions on both.
    start = ParticleSystem(2000, seed=3)
    for _ in range(150):
        start.step()
    runs = [start.to_device(device) for device in (DEVICE, cuda)]
    n_pairs = [sum(system.step().n_pairs for _ in range(20)) for system in runs]
    assert n_pairs[0] == n_pairs[1] > 20 * 2000
    for got, expected in zip(host_state(runs[1]), host_state(runs[0]), strict=True):
        np.testing.assert_array_equal(got, expected)


@needs_warp
def test_device_step_parts_coincident_centres_as_the_host_does():
    host = ParticleSystem(2, seed=0, gravity=0.0)
    host.positions[:] = [[10.0, 10.0], [10.0, 10.0]]
    host.velocities[:] = 0.0
    system = host.to_device(DEVICE)
    system.step()
    host.step()
    positions, _ = host_state(system)
    # Along x, the smaller index to +x, and out of contact, as on the host.
    assert positions[0, 0] > 10.0 > positions[1, 0]
    np.testing.assert_array_equal(positions[:, 1], [10.0, 10.0])
    assert positions[0, 0] - positions[1, 0] >= host.radii.sum() * (1 - 1e-12)
    assert host.positions[0, 0] > 10.0 > host.positions[1, 0]


# ---------------------------------------------------------------------- errors
@pytest.mark.parametrize(("device", "error", "message"), [
    ("cpu", ValueError, "`device` must be a Warp device ('warp-cpu', 'cuda' or 'cuda:N'); "
                        "got 'cpu'. The host step runs on 'cpu'."),
    ("gpu", ValueError, "`device` must be 'cpu', 'cuda', 'cuda:N' (N the number of a GPU) "
                        "or 'warp-cpu'; got 'gpu'."),
    (0, TypeError, "`device` must be a str"),
])
def test_to_device_rejects_what_is_not_a_warp_device(device, error, message):
    with pytest.raises(error, match=re.escape(message)):
        ParticleSystem(3).to_device(device)


def test_to_device_without_warp_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "warp", None)
    with pytest.raises(ImportError) as caught:
        ParticleSystem(3).to_device(DEVICE)
    assert str(caught.value) == ("`device` is 'warp-cpu', which runs on NVIDIA Warp "
                                 "(warp-lang), not installed: pip install 'spatialhash[gpu]'.")


# ---------------------------------------------------------------------- command line
@needs_warp
def test_command_line_runs_headless_on_the_device_and_prints_the_table(capsys):
    status = particles.run(parse("--device", DEVICE, "--count", "300", "--steps", "5",
                                 "--timing-steps", "2", "--output", "none"))
    assert status == 0
    printed = capsys.readouterr().out
    assert "300 particles" in printed and "5 steps on warp-cpu" in printed
    assert re.search(r"\| 300 \| cpu \| [\d.]+ \| [\d.]+ \| [\d,]+ \| 1\.00x \|", printed)
    assert re.search(r"\| 300 \| warp-cpu \| [\d.]+ \| [\d.]+ \| [\d,]+ \| [\d.]+x \|",
                     printed)


@needs_warp
def test_command_line_on_the_device_writes_frames_from_host_copies(tmp_path, capsys):
    from PIL import Image

    output = tmp_path / "particles.gif"
    assert particles.run(parse("--device", DEVICE, "--count", "100", "--steps", "8",
                               "--timing-steps", "1", "--size", "32", "--output",
                               str(output))) == 0
    with Image.open(output) as animation:
        assert animation.n_frames == 2 and animation.size == (32, 32)
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "headless", "message"), [
    (["--device", "gpu"], True,
     "error: --device must be cpu, warp-cpu, cuda or cuda:N (N the number of a GPU); "
     "got gpu."),
    (["--device", DEVICE], False,
     "error: --device warp-cpu runs headless only: add --headless (and leave out "
     "--interactive); the window runs with --device cpu."),
    (["--device", DEVICE, "--interactive"], True,
     "error: --device warp-cpu runs headless only: add --headless (and leave out "
     "--interactive); the window runs with --device cpu."),
    (["--device", "cuda:1", "--search", "sorted"], True,
     "error: --search sorted runs with --device cpu only; a Warp device's step searches "
     "with Grid(..., device=...)."),
])
def test_command_line_rejects_device_options(monkeypatch, capsys, argv, headless, message):
    monkeypatch.setattr(particles, "ParticleSystem", None)  # never reached
    assert particles.run(parse("--output", "none", *argv, headless=headless)) == 2
    assert capsys.readouterr().err.strip() == message


def test_command_line_without_warp_is_one_line_naming_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "warp", None)
    assert particles.run(parse("--device", DEVICE, "--output", "none")) == 2
    assert capsys.readouterr().err.strip() == (
        "error: spatialhash demo particles needs warp-lang (for --device warp-cpu); install "
        "it with: pip install 'spatialhash[gpu]'")


@needs_warp
def test_command_line_without_a_gpu_names_what_cuda_lacks(monkeypatch, capsys):
    from spatialhash.grid import _devices

    # As on a machine without a CUDA driver, whatever this one has.
    monkeypatch.setattr(_devices, "cuda_facts", lambda warp: (None, 0))
    monkeypatch.setattr(_devices, "_LOADED", set())
    assert particles.run(parse("--device", "cuda", "--count", "10", "--output", "none")) == 2
    assert capsys.readouterr().err.strip().startswith(
        "error: `device` is 'cuda', which needs a CUDA driver")
