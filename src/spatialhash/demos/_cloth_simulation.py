"""The cloth demo's simulation: a cloth that folds onto itself without passing through (XPBD).

Design
------
The cloth is a square grid of particles joined by distance constraints: stretch (grid
neighbours), shear (diagonals) and bending (two apart), each with an XPBD compliance. Each
frame is split into substeps ("small steps", Macklin et al. 2019), and every substep predicts
the positions under gravity, pushes particles out of the ground, runs one Gauss-Seidel pass
over the constraints, separates touching particles and takes the velocities from the
displacement. This is the scheme of Mueller's "Ten Minute Physics" self-collision demo.

Self-collision is particle against particle: two particles of the cloth must stay
``thickness`` apart, unless they are closer than that in the flat rest cloth (grid
neighbours, which the constraints look after). The thickness is a little more than the
spacing, so the particles tile the sheet densely enough that no particle slips between
others even where the cloth is stretched.

The contact list comes from the library: ``Grid(positions, cell_size=r).query_pairs(r)``
with ``r = thickness + margin``, built on the first substep and reused for as long as it
provably holds, like a Verlet neighbour list. With ``d_i`` the displacement of particle ``i``
since the list was built and ``c`` the centre of all displacements, a pair missing from the
list was farther apart than ``thickness + margin`` and has closed in by at most
``|d_i - d_j| <= 2 max_i |d_i - c|``; so while that bound stays within ``margin``, no
missing pair can touch. It is checked before every substep's contact pass (one O(n) loop)
and the list is rebuilt when it fails. A rigid drift (the whole cloth falling) never
triggers a rebuild; speeds are clamped to ``0.2 * thickness`` per substep, as in Mueller's
demo, so that particles cannot tunnel through a layer between two contact passes. The
relative motion that forces rebuilds is local (where the falling cloth folds onto the part
already down), so a per-region version of the bound rebuilt as often; it was dropped.

Two lists. Most listed pairs never touch: in a flat part of the sheet, the pairs within
``2 * thickness`` are about four per particle, those within ``1.5 * thickness`` one. So the
solver runs over an inner list, the outer list's pairs within ``thickness + hot margin``
(half the margin), refreshed from the outer list by the same bound with the smaller
margin. Both bounds come from one pass over the positions, taken around the previous
substep's centres (any centre bounds every pair; the bounding box's, which would need a
second pass, only makes the bound smallest), and a rebuild filters the rest neighbours
and makes the inner list in one pass (`split_contacts`). At 100 x 100 the inner list holds
about a third of the outer one and is refreshed about five times a frame, against two to
three rebuilds of the outer one. Ad hoc, CPU time per frame on one thread, 120 frames,
runs alternated: an inner margin of half the margin took 17-18% less time than one list,
0.4 of it only 4-7% less (the times are in ``docs/benchmarks.md``, "Demos").

Threads. The constraints come in bands of rows (`_cloth_grid`), and bands two apart share
no particle, so `solve_distances_parallel` runs the even bands at once, then the odd ones,
with the same result as one thread, bit for bit (two parallel regions a pass; twelve, one
per group of constraints sharing no particle, took a quarter more time a pass, ad hoc). The
neighbour search's `query_pairs` runs on every thread too, and so do the list filters
(`split_contacts` and `pairs_within`, by chunks whose kept rows are then moved together:
the same lists; ad hoc, 164,000 pairs, order alternated: 27% and 38% less time).
``Cloth(n_threads=...)`` (``--threads``) sets the thread count of these parallel parts.
The rest is sequential: the contact pass is Gauss-Seidel over pairs that share particles.
Shares of a frame (ad hoc, seed 0, two threads, each kernel call timed, after the
constraints went into bands): `query_pairs` 27%, the constraint pass 20%, the list filters
18%, the contact pass 11%, the grid build 10%, the bounds and the prediction 4% each, the
rest 7% (the times are in ``docs/benchmarks.md``, "Demos").

Measuring "passing through". `Cloth.count_crossings` meshes the grid into triangles and
counts edges that pierce a triangle (candidates from the spatial hash); a surface that has
gone through itself intersects itself along curves. `Cloth.count_interpenetrations` counts
pairs of particles from distant parts of the cloth closer than half the thickness. Without
self-collision the demo's cloth shows thousands of both; with it, none.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numba
import numpy as np

from .. import Grid, _config
from .._validation import as_count, as_positive_scalar
from . import _cloth_kernels as kernels
from ._cloth_grid import grid_constraints, hanging_positions

#: Gravity along -z, m/s^2.
GRAVITY = 9.81
#: Share of a particle's sideways motion the ground takes away (1: it sticks).
GROUND_FRICTION = 1.0
#: Default margin of the contact list, in thicknesses. At 100 x 100 (120 frames), with
#: one list, a margin of 0.5 rebuilt the list about 4.3 times a frame, 0.75: 3.7, 1: 2.0,
#: 1.5: 1.7, 2: 1.1 (with 2.7 times the pairs of 1 to check every substep); 1 took the
#: least time. With the inner list (its margin half a thickness), 1.25 and 1.5 rebuilt
#: less but were no faster (ad hoc, seed 0: 1.25 took as long a frame as 1, within the
#: spread of its runs, and 1.5 a fifth longer).
MARGIN = 1.0
#: Reach of the inner contact list beyond the thickness, as a fraction of the margin.
HOT_MARGIN_FRACTION = 0.5
#: The constraint pass runs on every thread from this many constraints (below, starting
#: the threads costs more than it saves).
PARALLEL_MIN_CONSTRAINTS = 20_000
#: Largest distance a particle may move in one substep, as a fraction of the thickness.
MAX_STEP_FRACTION = 0.2
#: A pair is interpenetrating when closer than this fraction of the thickness...
INTERPENETRATION_FRACTION = 0.5
#: ...and farther apart than this many thicknesses (or spacings) in the rest cloth.
INTERPENETRATION_REST_DISTANCE = 2.0


@dataclass
class FrameTimes:
    """Wall seconds spent so far, by phase."""

    search: float = 0.0
    solve: float = 0.0
    n_builds: int = 0
    n_refreshes: int = 0


class Cloth:
    """A square cloth of ``size`` x ``size`` particles dropped edge-first onto the ground.

    Parameters
    ----------
    size : int, default 100
        Particles per side, >= 2.
    spacing : float, default 0.01
        Distance between grid neighbours at rest, in metres.
    thickness : float, default 0.012
        Closest two particles of the cloth may come (unless neighbours at rest). Keep it at
        least the spacing, or particles slip through the gaps between others; a little more
        covers the gaps of a stretched cloth (at 0.01, as much as the spacing, the surface
        of a 100 x 100 cloth crossed itself in a few dozen places in two of four seeds).
    substeps : int, default 10
        XPBD substeps per frame.
    fps : float, default 60
        Frames per simulated second; a frame advances ``1 / fps`` seconds.
    self_collision : bool, default True
        Separate touching particles. Without it the cloth passes through itself.
    margin : float, optional
        Extra reach of the contact list beyond the thickness (default: the thickness).
        Larger margins rebuild the list less often but list more pairs.
    friction : float, default 0.1
        Share (0..1) of the relative sideways motion that a contact removes per substep.
    seed : int, default 0
        Seed of the small random jitter of the initial positions (it breaks the symmetry
        that decides which way the cloth folds).
    tilt : float, default 5
        Lean of the hanging cloth from the vertical, in degrees.
    drop_height : float, default 0.05
        Height of the cloth's lower edge above the ground at the start, in metres.
    stretch_compliance, shear_compliance, bend_compliance : float
        XPBD compliances (inverse stiffness) of the three kinds of constraint, with the
        particle masses set by an areal density of 1 kg/m^2. Defaults 0, 1e-6 and 1e-3.
    n_threads : int, optional
        Threads of the library's grids and of the solver's parallel kernels; default the
        library's (numba's), -1 for all. The result is the same for any thread count.

    Attributes
    ----------
    positions, velocities : ndarray of float64, shape (size * size, 3)
        Particle ``row * size + column``; z is up and the ground is the plane z = 0.
    pairs : ndarray of int, shape (n_pairs, 2)
        The contact list the solver reads: the pairs of the outer list (every pair within
        ``thickness + margin`` when it was built, less those that touch at rest) within
        ``thickness + margin / 2`` when it was last refreshed (empty without
        self-collision).
    frame : int
        Frames simulated so far.
    times : FrameTimes
        Wall time spent in the neighbour search and in the solver.
    """

    def __init__(
        self,
        size: int = 100,
        *,
        spacing: float = 0.01,
        thickness: float = 0.012,
        substeps: int = 10,
        fps: float = 60.0,
        self_collision: bool = True,
        margin: float | None = None,
        friction: float = 0.1,
        seed: int = 0,
        tilt: float = 5.0,
        drop_height: float = 0.05,
        stretch_compliance: float = 0.0,
        shear_compliance: float = 1e-6,
        bend_compliance: float = 1e-3,
        n_threads: int | None = None,
    ) -> None:
        self.size = as_count(size, "size")
        if self.size < 2:
            raise ValueError(f"`size` must be >= 2; got {size}.")
        self.spacing = as_positive_scalar(spacing, "spacing")
        self.thickness = as_positive_scalar(thickness, "thickness")
        self.substeps = as_count(substeps, "substeps")
        self.fps = as_positive_scalar(fps, "fps")
        self.margin = (MARGIN * self.thickness if margin is None
                       else as_positive_scalar(margin, "margin"))
        self.friction = _as_fraction(friction, "friction")
        self.self_collision = bool(self_collision)
        self.n_threads = _config.check_n_threads(n_threads)
        self.dt = 1.0 / (self.fps * self.substeps)
        self.max_speed = MAX_STEP_FRACTION * self.thickness / self.dt
        tilt = _as_real(tilt, "tilt")
        drop_height = as_positive_scalar(drop_height, "drop_height", allow_zero=True)
        compliances = [
            as_positive_scalar(value, name, allow_zero=True)
            for value, name in [
                (stretch_compliance, "stretch_compliance"),
                (shear_compliance, "shear_compliance"),
                (bend_compliance, "bend_compliance"),
            ]
        ]

        n = self.size
        rows, columns = np.divmod(np.arange(n * n, dtype=np.int64), n)
        self.rows, self.columns = rows, columns
        self.positions = hanging_positions(
            rows, columns, self.spacing, math.radians(tilt),
            drop_height + 0.5 * self.thickness, np.random.default_rng(seed),
        )
        self.velocities = np.zeros_like(self.positions)
        self._previous = self.positions.copy()
        self.inverse_mass = np.full(n * n, 1.0 / (self.spacing * self.spacing))
        (self.constraints, self.rest_lengths, self.compliances, self._band_start,
         self._n_even_bands) = grid_constraints(n, self.spacing, *compliances)
        # Each end's share of a constraint's correction (see `solve_distances`).
        a, b = self.constraints[:, 0], self.constraints[:, 1]
        weight = (self.inverse_mass[a] + self.inverse_mass[b]
                  + self.compliances / (self.dt * self.dt))
        movable = weight > 0.0  # two pinned ends (inverse mass 0) stay where they are
        self._share_a = np.divide(self.inverse_mass[a], weight, where=movable,
                                  out=np.zeros_like(weight))
        self._share_b = np.divide(self.inverse_mass[b], weight, where=movable,
                                  out=np.zeros_like(weight))
        self.pairs = np.empty((0, 2), dtype=np.int32)
        self._candidates = self.pairs  # the outer list, from the spatial hash
        self._close = self.pairs  # room for the inner list
        self._touching = np.empty(0, dtype=np.int64)  # the contact pass's buffer
        self._reference = None  # positions when the outer list was built
        self._hot_reference = None  # ...and when the inner one was
        self._hot_margin = HOT_MARGIN_FRACTION * self.margin
        self._spreads = np.zeros(2)  # since the outer and the inner list were made
        self._centres = np.zeros((2, 3))  # of the displacements since then
        self.frame = 0
        self.times = FrameTimes()
        self._mesh_cache = None

    # ------------------------------------------------------------------ simulation
    def step_frame(self) -> None:
        """Advance the cloth by one frame, ``1 / fps`` seconds, in ``substeps`` substeps."""
        with _config.threads(self.n_threads):
            self._step_frame()

    def _step_frame(self) -> None:
        positions, previous, velocities = self.positions, self._previous, self.velocities
        clock = time.perf_counter
        ground = 0.5 * self.thickness
        for substep in range(self.substeps):
            start = clock()
            # The velocity update of the substep before runs in the same pass.
            kernels.predict(positions, previous, velocities, self.inverse_mass, GRAVITY,
                            self.dt, self.max_speed, ground, GROUND_FRICTION, substep > 0)
            self._solve_distances()
            self.times.solve += clock() - start
            if self.self_collision:
                self._update_contact_lists()
                start = clock()
                kernels.solve_contacts(positions, previous, self.inverse_mass, self.pairs,
                                       self.thickness, self.friction, self._touching)
                self.times.solve += clock() - start
        start = clock()
        kernels.update_velocities(positions, previous, velocities, self.dt)
        self.times.solve += clock() - start
        self.frame += 1

    def _solve_distances(self) -> None:
        if len(self.constraints) >= PARALLEL_MIN_CONSTRAINTS and numba.get_num_threads() > 1:
            kernels.solve_distances_parallel(
                self.positions, self.constraints, self.rest_lengths, self._share_a,
                self._share_b, self._band_start, self._n_even_bands)
        else:
            kernels.solve_distances(self.positions, self.constraints, self.rest_lengths,
                                    self._share_a, self._share_b)

    def _update_contact_lists(self) -> None:
        """Rebuild the outer list, or refresh the inner one, where it may miss a contact:
        each holds while twice the spread of the displacements since it was made stays
        within its margin (both spreads from one pass over the positions)."""
        clock = time.perf_counter
        start = clock()
        if self._reference is not None:
            kernels.spreads_of_displacements(self.positions, self._reference,
                                             self._hot_reference, self._centres, self._spreads)
        if self._reference is None or 2.0 * self._spreads[0] > self.margin:
            self.times.solve += clock() - start
            start = clock()
            self._build_contact_list()
            self.times.search += clock() - start
            return
        if 2.0 * self._spreads[1] > self._hot_margin:
            self._refresh_contact_list()
        self.times.solve += clock() - start

    def _build_contact_list(self) -> None:
        reach = self.thickness + self.margin
        found = Grid(self.positions, cell_size=reach,
                     n_threads=self.n_threads).query_pairs(reach).indices
        # Pairs that touch at rest (grid neighbours) are the constraints' business; the
        # inner list is made in the same pass.
        self._candidates = np.empty_like(found)
        self._close = np.empty_like(found)
        # On every thread (the same lists; see the module docstring).
        n_outer, n_inner = kernels.split_contacts_parallel(
            self.positions, found, self.rows, self.columns, self.spacing, self.thickness,
            self.thickness + self._hot_margin, self._candidates, self._close,
            numba.get_num_threads())
        self._candidates = self._candidates[:n_outer]
        self.pairs = self._close[:n_inner]
        self._touching = np.empty(n_outer, dtype=np.int64)
        self._reference = self.positions.copy()
        self._hot_reference = self._reference.copy()
        self._centres[:] = 0.0
        self.times.n_builds += 1
        self.times.n_refreshes += 1

    def _refresh_contact_list(self) -> None:
        """The inner list: the listed pairs within ``thickness + hot margin`` now."""
        n_close = kernels.pairs_within_parallel(self.positions, self._candidates,
                                                self.thickness + self._hot_margin,
                                                self._close, numba.get_num_threads())
        self.pairs = self._close[:n_close]
        self._hot_reference = self.positions.copy()
        self._centres[1] = 0.0
        self.times.n_refreshes += 1

    # ------------------------------------------------------------------ measurements
    @property
    def time(self) -> float:
        """Simulated seconds so far."""
        return self.frame / self.fps

    def energy(self) -> float:
        """Kinetic plus gravitational energy in joules (ground level zero)."""
        mass = 1.0 / self.inverse_mass
        kinetic = 0.5 * np.sum(mass * np.einsum("ij,ij->i", self.velocities, self.velocities))
        return float(kinetic + GRAVITY * np.sum(mass * self.positions[:, 2]))

    def count_interpenetrations(self) -> int:
        """Pairs of particles far apart in the cloth but nearly on top of each other now.

        Counts the pairs closer than half the thickness whose distance in the flat rest
        cloth exceeds twice the thickness (and twice the spacing): two layers of cloth that
        have passed into each other. With self-collision such pairs are pushed a full
        thickness apart; without it, layers that fall onto each other produce many.
        """
        close = INTERPENETRATION_FRACTION * self.thickness
        grid = Grid(self.positions, cell_size=close, n_threads=self.n_threads)
        found = grid.query_pairs(close)
        far = INTERPENETRATION_REST_DISTANCE * max(self.thickness, self.spacing)
        return int(kernels.far_in_rest(found.indices, self.rows, self.columns, self.spacing,
                                       far, np.empty_like(found.indices)))

    def count_crossings(self) -> int:
        """Places where the cloth's surface passes through itself now.

        The cloth is meshed into two triangles per grid square; this counts the pairs of a
        mesh edge and a triangle that share no particle where the edge pierces the
        triangle. Candidates come from the spatial hash: every edge midpoint within reach of
        a triangle centroid. A surface that has passed through itself intersects itself
        along curves, which cross many edges; layers pressed flat into one plane (on the
        ground) do not count, as their edges lie in the triangles' plane.
        """
        edges, triangles = self.mesh()
        positions = self.positions
        midpoints = 0.5 * (positions[edges[:, 0]] + positions[edges[:, 1]])
        centroids = positions[triangles].mean(axis=1)
        longest = float(np.linalg.norm(positions[edges[:, 0]] - positions[edges[:, 1]],
                                       axis=1).max())
        # An edge lies within half its length of its midpoint and a triangle within its
        # longest edge of its centroid, so crossing pairs are this close.
        reach = max(1.5 * longest, self.spacing)
        candidates = Grid(centroids, cell_size=reach, n_threads=self.n_threads).query_pairs(
            reach, queries=midpoints)
        return int(kernels.count_crossings(positions, edges, triangles, candidates.indices))

    def mesh(self) -> tuple[np.ndarray, np.ndarray]:
        """The cloth as a triangle mesh over the particles, two triangles per grid square.

        Returns
        -------
        edges : ndarray of int64, shape (n_edges, 2)
            Grid links along rows and columns, and one diagonal per square.
        triangles : ndarray of int64, shape (n_triangles, 3)
            Particle indices of each triangle, all wound the same way.
        """
        if self._mesh_cache is None:
            ids = np.arange(self.size * self.size, dtype=np.int64).reshape(self.size, -1)
            a, b, c, d = ids[:-1, :-1], ids[1:, :-1], ids[1:, 1:], ids[:-1, 1:]
            edges = np.concatenate([
                np.stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()], axis=1),
                np.stack([ids[:-1, :].ravel(), ids[1:, :].ravel()], axis=1),
                np.stack([a.ravel(), c.ravel()], axis=1),
            ])
            triangles = np.concatenate([np.stack([a, b, c], axis=-1).reshape(-1, 3),
                                        np.stack([a, c, d], axis=-1).reshape(-1, 3)])
            self._mesh_cache = (edges, triangles)
        return self._mesh_cache


def _as_real(value, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"`{name}` must be a real number; got {value!r}.")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"`{name}` must be finite; got {value}.")
    return value


def _as_fraction(value, name: str) -> float:
    value = _as_real(value, name)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"`{name}` must be between 0 and 1; got {value}.")
    return value
