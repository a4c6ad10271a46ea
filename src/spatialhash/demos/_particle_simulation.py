"""The particle demo's simulation: colliding discs in a 2-D box, with the contact search switchable.

Thousands of discs (radii spread ``radius_ratio`` times, mass proportional to area) start
on a jittered lattice with random velocities, fall under gravity and pile up. Every step
finds the candidate contacts once, with the library's pairs-with-radii query by default::

    spatialhash.Grid(positions, cell_size=2 * search_radii.max()).query_pairs(radii=search_radii)

and then runs position-based substeps: integrate, push overlapping pairs apart in
proportion to inverse mass (Gauss-Seidel sweeps), clamp to the walls, and take the velocity
from the position change.

Why one search per step is enough. The search radii are the radii plus a skin, and the
speed of every particle is capped at ``skin`` per step, so two discs that touch at any
substep were within ``r_i + r_j + 2 * skin`` of each other when the step began (contact
corrections move particles a little more; the tests check that no contact is missed). The
skin costs a larger search reach; the cap acts like air drag on the fastest particles.

Deep overlap: two discs overlapping by more than `DEEP_OVERLAP` (20%) of the smaller
radius after a step. Overlaps in a pile shrink with the square of the substep, so the
default is 12 substeps of one sweep each; with 5,000 particles the largest overlap seen
over the demo is about 13% (during impacts; about 5% once the pile rests).

The two other searches are demo-side baselines in numba (`_particle_kernels`): brute force
over all pairs, and a sorted index (particles sorted by packed cell key, neighbouring cells
found by binary search). All three return the same pairs, in different orders; the solver
sorts them before its sweeps, so the trajectory does not depend on the search.

`ParticleSystem.to_device` copies the state to a Warp device, whose step is Warp kernels
with Jacobi sweeps in place of the Gauss-Seidel ones (`_particle_device`).
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

import spatialhash

from .. import _config
from . import _particle_kernels as kernels

#: The contact searches, fastest first.
SEARCHES = ("hash", "sorted", "brute")
#: Relative enlargement of the sorted index's cells, as the library does: two discs at
#: exactly the contact distance stay within one cell of each other despite rounding.
CELL_SIZE_MARGIN = 2.0**-20
#: A particle overlapping another by more than this fraction of the smaller radius after
#: the collision handling of a step is "deeply inside" it.
DEEP_OVERLAP = 0.2
#: Sorted pairs are swept in the order 0, 64, 128, ..., 1, 65, ... (see `sweep_order`).
SWEEP_STRIDE = 64


# ---------------------------------------------------------------------- searches
class ContactSearch:
    """Finds every pair of discs in contact, by one of the `SEARCHES`.

    Pairs are those with ``distance <= radii[i] + radii[j]``, each once with ``i < j``, as
    an array of shape (n_pairs, 2) of the library's index type: int32 while the particles
    fit it, int64 beyond (the library's convention, which the baselines follow, so the
    step's solver is compiled for one type). The baselines keep their output buffer
    between calls, so the returned array is overwritten by the next call.

    Parameters
    ----------
    method : {"hash", "sorted", "brute"}
        ``"hash"``: the library's `Grid.query_pairs` with ``radii``; ``"sorted"``: particles
        sorted by packed cell key, neighbouring cells found by binary search; ``"brute"``:
        every pair compared.
    n_threads : int, optional
        Threads of the library's grid (``"hash"``); default the library's (it follows the
        load), -1 for all. The two baselines run on one thread.
    """

    def __init__(self, method: str = "hash", n_threads: int | None = None) -> None:
        if method not in SEARCHES:
            raise ValueError(f"`search` must be one of {SEARCHES}; got {method!r}.")
        self.method = method
        self.n_threads = _config.check_n_threads(n_threads)
        self._buffer = np.empty((1024, 2), dtype=np.int32)

    def __call__(self, positions: np.ndarray, radii: np.ndarray) -> np.ndarray:
        """Pairs in contact among ``positions`` (n, 2) float64 with ``radii`` (n,) float64."""
        # The contact reach; any positive cell works when every radius is zero.
        reach = 2.0 * float(radii.max()) if radii.size else 0.0
        reach = reach if reach > 0.0 else 1.0
        if self.method == "hash":
            # The library's indices as they are: converting them to int64 took a sizeable
            # share of a step's search (5,000 particles, the solver then compiled for int64).
            grid = spatialhash.Grid(positions, cell_size=reach, n_threads=self.n_threads)
            return grid.query_pairs(radii=radii).indices
        index_dtype = np.int32 if positions.shape[0] <= np.iinfo(np.int32).max else np.int64
        if self._buffer.dtype != index_dtype:
            self._buffer = np.empty((1024, 2), dtype=index_dtype)
        while True:
            if self.method == "brute":
                count = kernels.contacts_brute(positions, radii, self._buffer)
            else:
                count = kernels.contacts_sorted(positions, radii,
                                                reach * (1.0 + CELL_SIZE_MARGIN), self._buffer)
                if count < 0:
                    spread = float(np.max(positions.max(axis=0) - positions.min(axis=0)))
                    raise ValueError(
                        "`positions` must span fewer than 2**31 cells of the sorted index "
                        f"per axis (cell size {reach}); got a spread of {spread:g}. Use the "
                        "hash search."
                    )
            if count <= self._buffer.shape[0]:
                return self._buffer[:count]
            self._buffer = np.empty((2 * count, 2), dtype=index_dtype)


def find_contacts(positions, radii, search: str = "hash",
                  n_threads: int | None = None) -> np.ndarray:
    """Every pair of discs in contact, ``distance <= radii[i] + radii[j]``.

    Parameters
    ----------
    positions : array_like of float, shape (n, 2)
        Centres.
    radii : array_like of float, shape (n,)
        Radii, >= 0.
    search : {"hash", "sorted", "brute"}, default "hash"
        The search to use; all three return the same pairs.
    n_threads : int, optional
        Threads of the library's grid (``"hash"``); default the library's (it follows the
        load), -1 for all.

    Returns
    -------
    ndarray of int64, shape (n_pairs, 2)
        Each pair once with ``i < j``, in an order that depends on ``search``.
    """
    positions = np.ascontiguousarray(positions, dtype=np.float64)
    radii = np.ascontiguousarray(radii, dtype=np.float64)
    if positions.ndim != 2 or positions.shape[1] != 2:
        raise ValueError(f"`positions` must have shape (n, 2); got shape {positions.shape}.")
    if radii.shape != (positions.shape[0],):
        raise ValueError(
            f"`radii` must have shape ({positions.shape[0]},); got shape {radii.shape}."
        )
    if not np.isfinite(positions).all():
        bad = np.argwhere(~np.isfinite(positions))[0]
        raise ValueError(f"`positions` must be finite; got {positions[tuple(bad)]} at "
                         f"positions[{bad[0]}, {bad[1]}].")
    if not (np.isfinite(radii) & (radii >= 0)).all():
        bad = np.flatnonzero(~(np.isfinite(radii) & (radii >= 0)))[0]
        raise ValueError(f"`radii` must be finite and >= 0; got {radii[bad]} at radii[{bad}].")
    return ContactSearch(search, n_threads)(positions, radii).astype(np.int64)


# ---------------------------------------------------------------------- the simulation
@dataclasses.dataclass(frozen=True)
class StepTimes:
    """Wall-clock seconds of one step: the contact search, and the whole step with it."""

    search: float
    step: float
    n_pairs: int


class ParticleSystem:
    """Discs of mixed sizes in a box under gravity, colliding, advanced by `step`.

    Lengths are in units of the smallest radius and time in steps: a step is one unit of
    time, split into ``n_substeps`` substeps.

    Parameters
    ----------
    n_particles : int, default 5000
        Number of discs.
    seed : int, default 0
        Seed of the initial state (lattice jitter, radii order, velocities).
    search : {"hash", "sorted", "brute"}, default "hash"
        The contact search used every step (see `ContactSearch`).
    radius_ratio : float, default 4.0
        Largest over smallest radius; radii are spread log-uniformly over that range and
        include both ends. Mass is proportional to area (``radius ** 2``).
    gravity : float, default 0.01
        Downward acceleration, smallest radii per step squared (0: no gravity). Overlaps
        in a resting pile grow with ``gravity / n_substeps ** 2``.
    skin : float, default 1.0
        Extra reach of the search, in smallest radii; also the speed cap per step.
    n_substeps : int, default 12
        Position-based substeps per step, all using the step's candidate pairs. Small
        substeps make contacts stiff: more substeps beat more iterations for the same
        work (12 x 1 leaves smaller overlaps than 4 x 4).
    n_iterations : int, default 1
        Gauss-Seidel sweeps over the pairs per substep.
    n_threads : int, optional
        Threads of the library's grids (the hash search, `max_overlap`); default the
        library's (it follows the load), -1 for all. The solver and the baseline searches
        run on one thread.
    """

    def __init__(self, n_particles: int = 5000, *, seed: int = 0, search: str = "hash",
                 radius_ratio: float = 4.0, gravity: float = 0.01, skin: float = 1.0,
                 n_substeps: int = 12, n_iterations: int = 1,
                 n_threads: int | None = None) -> None:
        n_particles = _check_int(n_particles, "n_particles", 1)
        self.n_substeps = _check_int(n_substeps, "n_substeps", 1)
        self.n_iterations = _check_int(n_iterations, "n_iterations", 1)
        radius_ratio = _check_real(radius_ratio, "radius_ratio", 1.0)
        self.gravity = _check_real(gravity, "gravity", 0.0)
        self.skin = _check_real(skin, "skin", 0.0, inclusive=False)
        self._search = ContactSearch(search, n_threads)
        rng = np.random.default_rng(seed)
        # Log-uniform radii from 1 to radius_ratio, both ends included, in random order.
        spread = np.linspace(0.0, 1.0, n_particles) if n_particles > 1 else np.zeros(1)
        self.radii = rng.permutation(radius_ratio**spread)
        # A jittered square lattice with room for the largest disc at every site.
        spacing = 2.0 * radius_ratio * 1.05
        n_columns = math.ceil(math.sqrt(n_particles))
        self.width = self.height = n_columns * spacing
        # Sites in row order: particles that start close have close indices, so the
        # solver's memory accesses stay local.
        sites = np.sort(rng.choice(n_columns * n_columns, size=n_particles, replace=False))
        jitter = rng.uniform(-0.02, 0.02, (n_particles, 2)) * spacing
        self.positions = np.column_stack(
            [(sites % n_columns + 0.5) * spacing, (sites // n_columns + 0.5) * spacing]
        ) + jitter
        angle = rng.uniform(0.0, 2.0 * math.pi, n_particles)
        speed = 0.5 * self.skin * np.sqrt(rng.random(n_particles))
        self.velocities = np.column_stack([speed * np.cos(angle), speed * np.sin(angle)])
        self._previous = np.empty_like(self.positions)
        self._inverse_mass = 1.0 / self.radii**2
        self._search_radii = self.radii + self.skin
        self._sweep_order = np.empty((1024, 2), dtype=np.int64)
        self._scratch = np.empty_like(self._sweep_order)
        self._pair_constants = np.empty((1024, 3))
        self.n_steps = 0

    @property
    def n_particles(self) -> int:
        """Number of discs."""
        return self.radii.shape[0]

    @property
    def search(self) -> str:
        """The contact search used by `step`."""
        return self._search.method

    @search.setter
    def search(self, method: str) -> None:
        self._search = ContactSearch(method, self.n_threads)

    @property
    def n_threads(self) -> int | None:
        """Threads of the library's grids (None: numba's default)."""
        return self._search.n_threads

    def copy(self, search: str | None = None) -> ParticleSystem:
        """An independent copy of the state, optionally with another search."""
        clone = object.__new__(ParticleSystem)
        clone.__dict__.update(self.__dict__)
        for name in ("positions", "velocities", "radii", "_previous", "_inverse_mass",
                     "_search_radii", "_sweep_order", "_scratch", "_pair_constants"):
            setattr(clone, name, getattr(self, name).copy())
        clone._search = ContactSearch(search or self.search, self.n_threads)
        return clone

    def to_device(self, device: str):
        """This state on a Warp device, as a `DeviceParticleSystem` (this one unchanged).

        Parameters
        ----------
        device : {"warp-cpu", "cuda", "cuda:N"}
            Where the copy's state lives and its step runs (the library's device names:
            ``"warp-cpu"`` is Warp's kernels compiled for the CPU).

        Returns
        -------
        DeviceParticleSystem
            Its step is the host step's with a Jacobi contact projection (see
            ``spatialhash.demos._particle_device``).

        Raises
        ------
        ValueError, TypeError
            For a ``device`` that is not one of those.
        ImportError
            Without Warp (the ``gpu`` extra), in one line naming it.
        RuntimeError
            For a CUDA device without a CUDA driver or that GPU.
        """
        from ..grid import _devices

        warp_device = _devices.warp_device_name(device)
        if warp_device is None:
            raise ValueError(f"`device` must be a Warp device ('warp-cpu', 'cuda' or "
                             f"'cuda:N'); got {device!r}. The host step runs on 'cpu'.")
        # Imports Warp, or raises the line naming the extra, before the module that
        # imports Warp at its top.
        _devices.load_warp(device, warp_device)
        from ._particle_device import DeviceParticleSystem

        return DeviceParticleSystem(self, device)

    def candidate_pairs(self) -> np.ndarray:
        """The pairs `step` would resolve now: within ``r_i + r_j + 2 * skin``."""
        return self._search(self.positions, self._search_radii).copy()

    def step(self) -> StepTimes:
        """Advance one step; returns how long the search and the whole step took."""
        start = time.perf_counter()
        pairs = self._search(self.positions, self._search_radii)
        searched = time.perf_counter()
        if self._sweep_order.shape[0] < pairs.shape[0]:
            self._sweep_order = np.empty((2 * pairs.shape[0], 2), dtype=np.int64)
            self._scratch = np.empty_like(self._sweep_order)
            self._pair_constants = np.empty((2 * pairs.shape[0], 3))
        kernels.sweep_order(pairs, self.radii, self._inverse_mass, SWEEP_STRIDE, self._scratch,
                            self._sweep_order, self._pair_constants)
        dt = 1.0 / self.n_substeps
        for _ in range(self.n_substeps):
            kernels.substep(self.positions, self._previous, self.velocities, self.radii,
                            self._sweep_order, self._pair_constants, pairs.shape[0],
                            (self.gravity, self.skin, dt, self.width, self.height,
                             self.n_iterations))
        end = time.perf_counter()
        self.n_steps += 1
        return StepTimes(searched - start, end - start, int(pairs.shape[0]))

    def max_overlap(self) -> float:
        """Largest overlap of two discs now, as a fraction of the smaller radius."""
        pairs = find_contacts(self.positions, self.radii, n_threads=self.n_threads)
        return float(kernels.max_relative_overlap(self.positions, self.radii, pairs,
                                                  pairs.shape[0]))

    def energy(self) -> float:
        """Kinetic plus potential energy, with mass ``radius ** 2`` and height above the floor."""
        mass = self.radii**2
        kinetic = 0.5 * mass * np.einsum("ij,ij->i", self.velocities, self.velocities)
        return float(np.sum(kinetic + mass * self.gravity * self.positions[:, 1]))


def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be an integer; got {value!r}.")
    if value < minimum:
        raise ValueError(f"`{name}` must be at least {minimum}; got {value}.")
    return int(value)


def _check_real(value, name: str, minimum: float, *, inclusive: bool = True) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"`{name}` must be a real number; got {value!r}.")
    value = float(value)
    if not math.isfinite(value) or value < minimum or (not inclusive and value == minimum):
        relation = "at least" if inclusive else "greater than"
        raise ValueError(f"`{name}` must be finite and {relation} {minimum}; got {value}.")
    return value
