"""The batch grid: points sorted into cells once, then queried many times.

Where the code is
-----------------
``_grid.py``: `Grid`, the public class: it validates, picks the engine, calls it, and
returns its result; its calls of a user's function (`for_each_pair`,
`for_each_neighbor`) and its ray casts are its base classes in ``_grid_functions.py`` and
``_grid_rays.py``. ``_engine.py``: the engine interface (`GridEngine`) and the registry
of engines by ``algorithm``. ``_cpu_engine.py``: the CPU engine and the brute-force
engine (the radius, k-nearest, box and ray queries). ``_pair_search.py``: the pair
searches. ``_build.py``: the host side of the build. ``_inputs.py``: the input checks of
the queries. ``_pair_functions.py``: a user's function over pairs. ``_kernels/``: the
numba kernels, one module per query family. A query's whole path, public method to distance loop, is
``_grid.py`` -> ``_cpu_engine.py`` -> ``_kernels/<family>.py``; for pairs, ``_grid.py`` ->
``_pair_search.py`` (the engine's `query_pairs` and `iter_pairs`) -> ``_kernels/pairs.py``
-> ``_kernels/pair_scan.py``; for a user's function over pairs, ``_grid_functions.py`` ->
``_pair_functions.py`` -> ``_kernels/pair_functions.py`` -> ``_kernels/pair_scan.py``
(the one scan of pairs, its consumers as visitors); for ``query_ray``'s function over
each ray's hits, ``_grid_rays.py`` -> ``_cpu_engine.py`` -> ``_pair_functions.py`` ->
``_kernels/ray_functions.py``.
The Warp engine (``Grid(..., device="cuda")``, or ``"warp-cpu"`` on Warp's CPU device):
``_devices.py`` picks the engine by ``device`` and ``algorithm`` and starts Warp;
``_warp_engine.py`` answers the queries, ``_warp_build.py`` builds, ``_warp_kernels/``
holds the Warp kernels (its ``__init__.py`` says why ``fuse_fp`` is off).
The neighbour lists built on a grid are a package of their own, ``spatialhash/neighbors``:
they take from the grid only what `Grid` and `_engine.GridEngine` declare
(`GridEngine.found_pairs`), and run their functions over pairs through
``_pair_functions.run_scan``.

Design
------
Building. Each point gets an integer cell coordinate ``floor((x - origin) / cell_size)``
per axis (1-D and 2-D points are padded to three axes with zeros, so one set of kernels
serves every dimension). The occupied cells are numbered in row-major order of their
coordinates and the points are sorted by cell with a stable counting sort: ``cell_start``
gives each cell's slice of the sorted points and ``order`` maps a sorted point back to the
caller's index. The sorted copy keeps every cell's points contiguous in memory. The box of
cells is known before any pass (the largest coordinate has the largest cell coordinate), so
a dense build sorts by each point's linear cell index, computed in its counting pass, and
stores no per-point coordinates. Large dense grids are sorted on every thread (per-thread
histograms of the box of cells, then each thread scatters its share of the points); a
stable counting sort is unique, so the grid is the same, byte for byte, whatever the thread
count.

Finding a cell. There are no world bounds. When the box of cells spanned by the points is
small next to the number of points (at most ``max(4 n, 65536)`` cells), a dense array maps
each cell of that box to its occupied-cell id: one load per lookup. Otherwise (an outlier
far from the rest, coordinates around 1e9 with a small cell, a few clusters far apart) an
open-addressing hash table of the occupied rows of cells, keyed by their exact integer
coordinates ``(y, z)``, gives each row's run of occupied cells, and a binary search over
their x finds a cell or a row segment: memory stays proportional to the number of points
and two cells never share an entry. One probe per row rather than per cell, into a table
that holds rows rather than cells: with a table of cells, 100,000 radius queries among a
million points with one far outlier take 2.2 times as long as without the outlier (the
``radius_outlier`` workload of ``benchmarks/bench_batch.py``).

Cell size. The cell size should be at least the query radius, so that a radius query or a
pair search looks at the 3 x 3 x 3 block around a cell. Any radius works with any grid:
a larger radius searches more cells, a much smaller one scans more points per cell. The
size is enlarged internally by a relative 2**-20 so that ``r == cell_size`` still needs
only one ring of cells despite rounding. On a periodic axis the cells tile the box
exactly, so the cell size there is ``box / floor(box / cell_size)``.

Queries. Radius and box queries (and `iter_pairs`) have a count pass that sizes the
output exactly and a fill pass that writes it, both parallel over cells or queries. Work
is split into fixed chunks and each row (or cell) writes to an offset fixed by the count
pass, so the output is identical for any thread count. `query_pairs` skips the count
pass: the cells are cut into regions, each appending its pairs to rows of its own, sized
from a count over a sixteenth of its cells (rows reserved but never written cost no
memory); the regions' rows are then moved down into one block, in order. Same rows, same
order, about a third less time (the ``pairs3d`` workload of ``benchmarks/bench_batch.py``).
Coordinates are float64 throughout; float32 input is converted once.

Compiling. Numba compiles a kernel once by itself and again inside every function that
calls it (it links the callee in, optimizes the whole again and emits its machine code
once more). So small inputs call the sequential kernels directly rather than through a
sequential driver, and each parallel driver is one ``prange`` loop that calls its one
kernel through the kernel's address (``spatialhash/_kernels/indirect.py``): the kernel is
compiled once, and the driver's cold compile takes about a quarter of the CPU time it
takes with the kernel compiled into it (``benchmarks/bench_compile.py`` measures the cold
compile). Calls between kernels are typed without literal constants (`_config.jit`), so a
flag passed as ``True`` does not compile a kernel a second time.

Engines. `Grid` keeps what does not depend on how queries run: the validation of every
input into canonical float64 arrays (padded to three columns, wrapped into the periodic
box), the checks of a search's reach in a periodic box and of a result's size, and the
public API. It hands the canonical arrays to an engine chosen by ``algorithm`` from the
registry `_engine.ENGINES`; the engine owns the grid's arrays, runs the kernels (and sets
the thread count around them) and returns the result objects. `_engine.GridEngine`
writes down the interface a CUDA or a Dask engine implements to plug in.

Brute force. ``algorithm="brute"`` (`_cpu_engine.BruteEngine`) puts every point into a
single cell, so every query compares every candidate pair: the same arithmetic with no
spatial pruning, which is the fastest choice for a handful of points and a second opinion
for checking.
"""

from ._grid import Grid

__all__ = ["Grid"]
