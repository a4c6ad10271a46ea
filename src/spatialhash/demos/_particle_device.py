"""The particle demo on a Warp device: the state in ``wp.array``s, a step of Warp kernels.

`DeviceParticleSystem` holds a `ParticleSystem`'s state (positions, velocities, radii,
masses) on a Warp device (``"warp-cpu"``, ``"cuda"``, ``"cuda:N"``: the library's device
names, `spatialhash.grid._devices`) and steps it as the host does, with one difference,
the contact projection:

- The host step sweeps its pairs in Gauss-Seidel order: each pair's push moves both
  particles at once and the next pair reads the result. That order is sequential.
- The device step sweeps them in Jacobi order: every particle, in its own thread, gathers
  the pushes of its own contacts (a list per particle, built from the pairs by a count, a
  scan and a fill, each row then sorted by neighbour index) from the positions at the
  sweep's start, in row order, and writes its new position to a second array. No float
  atomics, so a step gives the same positions on every run. A Jacobi sweep carries a
  correction one contact further per sweep, where one Gauss-Seidel sweep can carry it
  along a whole chain of contacts: with one sweep per substep the demo's own run (5,000
  particles, 600 steps) left deep overlaps, so the device takes `SWEEPS_PER_ITERATION`
  sweeps for each of the host's, with the host's 12 substeps.

Everything else is the host step's: one contact search per step with the radii plus the
skin, gravity, the speed cap at the skin per step, the walls after every sweep, and the
velocity from the position change. The trajectories of the two differ (another solver);
the demo's physical checks hold for both (the tests).

This module imports Warp: `particles` and `ParticleSystem.to_device` import it only when a
Warp device is asked for.
"""

from __future__ import annotations

import time

import numpy as np
import warp as wp

import spatialhash

from ..grid import _devices
from . import _particle_warp as kernels
from ._particle_simulation import ParticleSystem, StepTimes

#: Jacobi sweeps per Gauss-Seidel sweep of the host step (its ``n_iterations``).
SWEEPS_PER_ITERATION = 2


def device_contacts(grid_device: str, positions: wp.array, radii: wp.array,
                    cell_size: float) -> wp.array:
    """Every pair within ``radii[i] + radii[j]`` of each other, on ``positions``' device.

    The search is `spatialhash.Grid` on ``grid_device`` over the device's positions and its
    ``query_pairs(radii=...)``: the grid reads the positions where they lie and answers in
    their kind, a Warp array on their device; the radii, on that device too, are checked
    and put in the grid's order there, so only scalars cross to the host.

    Parameters
    ----------
    grid_device : str
        The library's name of the device the grid runs on (``"warp-cpu"``, ``"cuda"``,
        ``"cuda:N"``).
    positions : warp.array of wp.vec2d, shape (n,)
        Centres.
    radii : warp.array of float64, shape (n,)
        Radii, >= 0.
    cell_size : float
        The grid's cell size: twice the largest radius (any positive size when every
        radius is 0), computed once by the caller, whose radii do not change.

    Returns
    -------
    warp.array of int32, shape (n_pairs, 2)
        Each pair once with ``i < j``, in the grid engine's order, on ``positions.device``
        (the library's indices are int32 below 2**31 points).
    """
    grid = spatialhash.Grid(positions, cell_size=cell_size, device=grid_device)
    return grid.query_pairs(radii=radii).indices


def contact_cell_size(radii: np.ndarray) -> float:
    """The cell size of a contact search with ``radii``: twice the largest, or 1 where every
    radius is 0 (any positive size then finds the coincident pairs)."""
    reach = 2.0 * float(radii.max()) if radii.size else 0.0
    return reach if reach > 0.0 else 1.0


def load(device: str) -> str:
    """Start Warp for ``device`` (a Warp device's name in the library: `ParticleSystem.
    to_device` checked it) and load the demo's kernels on it, compiling them the first
    time; returns Warp's name of the device."""
    warp_device = _devices.warp_device_name(device)
    _devices.load_warp(device, warp_device)
    with wp.ScopedLogLevel(wp.LOG_WARNING):
        wp.load_module(kernels, device=warp_device)
    return warp_device


class DeviceParticleSystem:
    """A `ParticleSystem` on a Warp device, advanced by `step` (see the module docstring).

    Made by `ParticleSystem.to_device`; the state is copied from that system, which is
    left as it was.

    Parameters
    ----------
    system : ParticleSystem
        The initial state and the world (box, gravity, skin, substeps).
    device : str
        ``"warp-cpu"``, ``"cuda"`` or ``"cuda:N"``: the step's kernels and its contact
        search run there.

    Attributes
    ----------
    positions, velocities : warp.array of wp.vec2d, shape (n,)
        The state, on the device.
    radii : warp.array of float64, shape (n,)
        Radii, on the device.
    n_sweeps : int
        Jacobi sweeps per substep.
    """

    def __init__(self, system: ParticleSystem, device: str) -> None:
        self._warp_device = load(device)
        self.device = device
        self._host = system.copy()
        self.n_sweeps = SWEEPS_PER_ITERATION * system.n_iterations
        self.n_steps = system.n_steps
        on = self._warp_device
        self.positions = wp.array(system.positions, dtype=wp.vec2d, device=on)
        self.velocities = wp.array(system.velocities, dtype=wp.vec2d, device=on)
        self.radii = wp.array(system.radii, dtype=wp.float64, device=on)
        self._inverse_mass = wp.array(1.0 / system.radii**2, dtype=wp.float64, device=on)
        self._search_radii = wp.array(system.radii + system.skin, dtype=wp.float64, device=on)
        self._search_cell = contact_cell_size(system.radii + system.skin)
        self._contact_cell = contact_cell_size(system.radii)
        n = system.n_particles
        self._previous = wp.empty(n, dtype=wp.vec2d, device=on)
        self._moved = wp.empty(n, dtype=wp.vec2d, device=on)
        self._counts = wp.zeros(n + 1, dtype=wp.int32, device=on)
        self._starts = wp.zeros(n + 1, dtype=wp.int32, device=on)
        self._cursor = wp.zeros(n, dtype=wp.int32, device=on)
        self._grow_rows(1024)

    @property
    def n_particles(self) -> int:
        """Number of discs."""
        return self.radii.shape[0]

    @property
    def width(self) -> float:
        """Width of the box."""
        return self._host.width

    @property
    def height(self) -> float:
        """Height of the box."""
        return self._host.height

    @property
    def n_substeps(self) -> int:
        """Substeps per step (the host system's)."""
        return self._host.n_substeps

    def _grow_rows(self, n_rows: int) -> None:
        """Room for ``n_rows`` contact entries (two per pair)."""
        on = self._warp_device
        self._others = wp.empty(n_rows, dtype=wp.int32, device=on)
        self._rest = wp.empty(n_rows, dtype=wp.float64, device=on)
        self._share = wp.empty(n_rows, dtype=wp.float64, device=on)

    def candidate_pairs(self) -> wp.array:
        """The pairs `step` would resolve now: within ``r_i + r_j + 2 * skin`` (int32,
        shape (n_pairs, 2), on the device)."""
        return device_contacts(self.device, self.positions, self._search_radii,
                               self._search_cell)

    def step(self) -> StepTimes:
        """Advance one step; returns how long the search and the whole step took (the
        device's work finished: the step waits for it)."""
        start = time.perf_counter()
        pairs = self.candidate_pairs()
        searched = time.perf_counter()
        self._contact_rows(pairs)
        host, on = self._host, self._warp_device
        dt = 1.0 / host.n_substeps
        box = wp.vec2d(host.width, host.height)
        rows = (self._starts, self._others, self._rest, self._share)
        for _ in range(host.n_substeps):
            wp.launch(kernels.integrate, self.n_particles,
                      (self.positions, self._previous, self.velocities, host.gravity,
                       host.skin, dt), device=on)
            for _ in range(self.n_sweeps):
                wp.launch(kernels.jacobi_sweep, self.n_particles,
                          (self.positions, self.radii, *rows, box, self._moved),
                          device=on)
                self.positions, self._moved = self._moved, self.positions
            wp.launch(kernels.velocities_from_moves, self.n_particles,
                      (self.positions, self._previous, dt, self.velocities), device=on)
        wp.synchronize_device(on)
        self.n_steps += 1
        return StepTimes(searched - start, time.perf_counter() - start, int(pairs.shape[0]))

    def _contact_rows(self, pairs: wp.array) -> None:
        """Each particle's contacts from ``pairs``: ``_starts`` (CSR offsets), ``_others``
        sorted by index within a row, and each contact's ``_rest`` and ``_share``."""
        n_pairs, on = pairs.shape[0], self._warp_device
        if self._others.shape[0] < 2 * n_pairs:
            self._grow_rows(4 * n_pairs)
        self._counts.zero_()
        self._cursor.zero_()
        if n_pairs:
            wp.launch(kernels.count_contacts, n_pairs, (pairs, self._counts), device=on)
        # Exclusive: ``_starts[n]`` is the number of entries.
        wp.utils.array_scan(self._counts, self._starts, inclusive=False)
        if n_pairs:
            wp.launch(kernels.fill_contacts, n_pairs,
                      (pairs, self._starts, self._cursor, self._others), device=on)
        wp.launch(kernels.sort_contact_rows, self.n_particles,
                  (self._starts, self._others, self.radii, self._inverse_mass, self._rest,
                   self._share), device=on)

    def max_overlap(self) -> float:
        """Largest overlap of two discs now, as a fraction of the smaller radius (a fresh
        contact search, on the device)."""
        pairs = device_contacts(self.device, self.positions, self.radii, self._contact_cell)
        if pairs.shape[0] == 0:
            return 0.0
        overlaps = wp.empty(pairs.shape[0], dtype=wp.float64, device=self._warp_device)
        wp.launch(kernels.pair_overlaps, pairs.shape[0],
                  (self.positions, self.radii, pairs, overlaps), device=self._warp_device)
        return max(float(overlaps.numpy().max()), 0.0)

    def to_host(self) -> ParticleSystem:
        """A host `ParticleSystem` in this state, independent of this one: the system this
        one was made from (its search and threads), at this one's positions, velocities
        and step count."""
        system = self._host.copy()
        system.positions = self.positions.numpy().astype(np.float64, copy=True)
        system.velocities = self.velocities.numpy().astype(np.float64, copy=True)
        system.n_steps = self.n_steps
        return system

    def energy(self) -> float:
        """Kinetic plus potential energy, as `ParticleSystem.energy`."""
        return self.to_host().energy()
