"""Kernels compile once per layout of their arguments, not once more per call site.

Numba compiles a separate specialization of a kernel for each set of argument types it is
called with, and between kernels it types constants as literals (``Literal[bool](True)``)
and ``prange`` indices as unsigned: each of those cost seconds of cold compile for
nothing (see `_config.jit`). This runs the main paths, sequential and multi-threaded, and
then looks at every kernel's specializations.
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
from numba.core import types
from numba.core.registry import CPUDispatcher

from spatialhash import DynamicHash, Grid
from spatialhash._warmup import KERNEL_PACKAGES
from spatialhash.demos import _cloth_kernels, _particle_kernels
from spatialhash.neighbors import MolecularNeighborList, neighbor_list


def _dispatchers():
    modules = []
    for package_name in KERNEL_PACKAGES:
        package = importlib.import_module(package_name)
        modules += [importlib.import_module(f"{package_name}.{info.name}")
                    for info in pkgutil.iter_modules(package.__path__)]
    for module in [*modules, _cloth_kernels, _particle_kernels]:
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.__module__ == module.__name__:
                yield f"{module.__name__}.{name}", value


def _run_main_paths():
    rng = np.random.default_rng(5)
    for n in (1_000, 30_000):  # sequential kernels, then the parallel drivers
        points = rng.random((n, 3))
        r = (90 / (4 * np.pi * n)) ** (1 / 3)
        grid = Grid(points, cell_size=r)
        grid.query_pairs(r, return_distances=True)
        grid.query_pairs(radii=np.full(n, r / 2))
        list(grid.iter_pairs(r, chunk_size=10_000))
        queries = rng.random((min(n, 3_000), 3))
        grid.query_radius(queries, r, return_distances=True)
        grid.query_knn(queries, 4)
        grid.query_box(queries, queries + r)
        grid.query_ray(queries, rng.normal(size=queries.shape), r / 4)
    hash_ = DynamicHash(0.05, n_dims=3)
    lower = rng.random((12_000, 3))
    hash_.insert_many(np.arange(12_000), lower, lower + 0.02)
    hash_.query_pairs()
    hash_.move_many(np.arange(6_000), lower[:6_000] + 0.01, lower[:6_000] + 0.03)
    hash_.query_pairs()


def test_no_kernel_is_compiled_for_literal_or_unsigned_call_site_types():
    _run_main_paths()
    problems = []
    for name, dispatcher in _dispatchers():
        signatures = dispatcher.signatures
        for signature in signatures:
            if any(isinstance(arg, types.Literal) for arg in signature):
                problems.append(f"{name} compiled for literal arguments: {signature}")
        # Two specializations that differ only in int64 against uint64 scalars.
        unsigned_as_signed = {tuple(types.int64 if arg == types.uint64 else arg
                                    for arg in signature) for signature in signatures}
        if len(unsigned_as_signed) < len(set(signatures)):
            problems.append(f"{name} compiled for int64 and uint64 alike: {signatures}")
    assert not problems, "\n".join(problems)
    compiled = [name for name, dispatcher in _dispatchers() if dispatcher.signatures]
    assert len(compiled) > 30, compiled


def _molecular_calls(positions, radii):
    """The molecular lists' kernels, each once, on ``positions`` and ``radii``: a sorted
    search (its short rows, then rows too many to rank), a skin list's updates (moves, a
    jump by a cell vector) and a batch's partial search."""
    cell = np.array([[3.0, 0.0, 0.0], [0.5, 3.0, 0.0], [0.0, 0.5, 3.0]])
    neighbor_list("ijSdDb", positions, 1.0, cell, sorted=True)
    neighbor_list("ijSdDb", positions[:2], 9.0, cell, sorted=True)
    neighbor_list("ijSdD", positions, cell=cell, radii=radii)
    skin = MolecularNeighborList("ijSdD", None, 0.2, cell, radii=radii)
    moved = np.array(positions)
    for step in range(3):
        moved[step] += cell[0] if step == 2 else 0.05
        skin.update(moved if step else positions)
    ptr = np.array([0, len(positions) // 2, len(positions)])
    batch = MolecularNeighborList("ij", 1.0, 0.2, np.stack([cell, cell]), ptr=ptr)
    batch.update(positions)
    batch.update(moved)


def test_molecular_kernels_compile_once_whatever_the_layout_of_the_inputs():
    # Read-only, Fortran-ordered and strided arrays are types of their own to numba: each
    # would compile every kernel of the molecular lists again.
    rng = np.random.default_rng(6)
    positions = rng.random((40, 3)) * 3.0
    radii = rng.uniform(0.3, 0.6, 40)
    _molecular_calls(positions, radii)
    molecular = [(name, dispatcher) for name, dispatcher in _dispatchers()
                 if ".neighbors._kernels.molecular" in name or "row_sort" in name]
    before = {name: set(dispatcher.signatures) for name, dispatcher in molecular}
    frozen, frozen_radii = positions.copy(), radii.copy()
    frozen.flags.writeable = frozen_radii.flags.writeable = False
    wide = np.concatenate([positions, positions], axis=1)
    for other, other_radii in [(frozen, frozen_radii), (np.asfortranarray(positions), radii),
                               (wide[:, :3], wide[:, 0] / 10.0 + 0.3)]:
        _molecular_calls(other, other_radii)
    after = {name: set(dispatcher.signatures) for name, dispatcher in molecular}
    assert after == before
