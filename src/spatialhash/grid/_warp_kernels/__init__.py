"""The Warp engine's kernels (`_warp_engine.WarpEngine`), compiled by NVIDIA Warp for a
CUDA GPU or for the CPU.

``cells.py``: the device grid (`cells.DeviceGrid`, the arrays of `GridState` that the
queries read) and the cell arithmetic, written as in ``_kernels/cells.py`` so that a cell
range, a run of cells and an image shift come out the same. ``build.py``: the build's
passes (cell coordinates, sort keys, gathers, the table of occupied cells).
``scan.py``: the one walk of a point's (or a box's) block of cells, and the count and
fill kernels of the radius, box and pair queries on it. ``knn.py``: the k-nearest search,
ring by ring of cells, each query's heap in its own output row. ``ray.py``: the ray casts,
one walk of each ray's cells (first hit, count and fill). ``functions.py``: the kernels
that call a user's Warp function over pairs or neighbours, generated for each function,
on the walk of ``scan.py`` as an iterator of runs. ``arguments.py``: a query's array
arguments on the device converted and checked as the host checks them (radii and
distances, the rows of rays and boxes), and the grid's own points as queries.
``rows.py``: a query's rows made into pairs, or less each point's own index. These two
are compiled (or loaded from Warp's cache) at their first launch, not with the others
when a device is first used: a caller who passes no such argument and asks for no such
rows never compiles them.

Every module takes `MODULE_OPTIONS`: ``fuse_fp`` off, so that the CUDA compiler does not
contract ``a * b + c`` into a fused multiply-add, which rounds once where the CPU engine
rounds twice (squared distances would differ in the last bit, and a point at exactly
``distance == r`` could be decided otherwise); no backward pass, which these kernels never
take and which would double their compile.

Nothing here validates or imports the public layer: arrays and scalars in, arrays out.
Warp is imported at module level: only `_devices` imports these modules, once it has
imported Warp.
"""

#: Warp's options for every module of the engine (see the module docstring).
MODULE_OPTIONS = {"fuse_fp": False, "enable_backward": False}
