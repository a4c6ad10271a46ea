"""The boundary between a caller's arrays and `Grid`: which kind of array came in and
where its memory lies, the device a grid runs on when the caller names none, the points
handed to the Warp engine where they lie, and the results given back in the caller's kind.

Kinds: NumPy (and anything NumPy reads: lists, pandas, host arrays of other libraries
through DLPack), PyTorch tensors, Warp arrays, and the arrays of other libraries on a CUDA
device (CuPy, JAX, ...: anything with ``__dlpack__`` or ``__cuda_array_interface__``). They
are told apart through ``sys.modules``, as ``neighbors/_arrays.py`` finds tensors: torch
and Warp are never imported here unless the caller imported them, and a NumPy array is
recognised by its type before anything else, so NumPy callers pay one type check.

The rules (`Grid`'s docstring and ``docs/gpu.md`` say them to users):

- A grid's device, when ``device`` is left out, is where its points lie: ``"cpu"`` (the
  numba engine) for host memory, ``"cuda:N"`` (the Warp engine) for points on GPU ``N``.
  ``device="cpu"`` with points on a GPU is a `TypeError` naming ``points`` and the device:
  no silent copy to the host. A Warp device other than the points' is the same error.
- On a Warp device whose memory holds the points (a CUDA array on its GPU, or a host
  tensor or Warp array on ``"warp-cpu"``), float32 or float64 points are handed to Warp
  without a copy, converted to float64, padded and wrapped on the device, and checked
  there (`_warp_build.device_points`): only scalars cross to the host, and a sample of at
  most `_build.DEFAULT_SIZE_SAMPLE` * 2 points where the default cell size is asked for.
- A query's array arguments may be of any kind on the host, or on the grid's device; an
  array on another device is a `TypeError` naming the parameter and both devices. Those
  in the memory of the grid's Warp device, float32 or float64, stay there: the
  ``queries`` of radius and k-nearest queries take the points' path (`Boundary.queries`),
  the radii and distances of pair, radius and ray queries (``radii``, a per-query ``r``,
  ``max_distance``) are converted and checked by a kernel (`Boundary.values`), and so
  are the rows of rays and boxes (`Boundary.rays`, `Boundary.boxes`); only scalars cross
  to the host, and for an error the one bad value (radii) or the arguments (rows), which
  the host's check then refuses with its own message. A 1-D row of these (one query,
  ray or box) is taken as one row there. The others (other dtypes or shapes, and
  non-contiguous 1-D rows) are checked on the host (`host_argument`): an argument on a
  GPU is copied there first.
- Results are of the points' kind, in the points' memory: NumPy in, NumPy out (exactly as
  before); a tensor in, tensors out (``wp.to_torch`` over the Warp engine's output, or
  ``torch.from_numpy`` over the CPU engine's: no copy); a Warp array in, Warp arrays out;
  another library's CUDA array in, Warp arrays out, which that library takes without a
  copy through DLPack (``cupy.from_dlpack``, ``jax.dlpack.from_dlpack``).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import NamedTuple

import numpy as np

from .._kernels.cells import N_AXES
from .._results import KNearest, Neighbors, Pairs, RayHits
from .._validation import as_points, grid_points
from . import _build
from ._devices import load_warp, warp_device_name

#: The kinds of arrays told apart (`kind_of`). `OTHER` is another library's device array.
NUMPY, TORCH, WARP, OTHER = "numpy", "torch", "warp", "other"
#: DLPack's device types of CUDA memory (``kDLCUDA``, ``kDLCUDAManaged``).
_DLPACK_CUDA = (2, 13)
#: Arguments handed on as they are: NumPy arrays and Python numbers.
_PLAIN = (np.ndarray, float, int)
#: The dtypes (by Warp's names) of points taken on a device as they lie.
_DEVICE_FLOATS = ("float32", "float64")


def _arrays_module():
    # Imported when first needed: ``spatialhash.neighbors`` imports the grid.
    from ..neighbors import _arrays

    return _arrays


def _warp_array(value) -> bool:
    warp = sys.modules.get("warp")
    return warp is not None and isinstance(value, warp.array)


def kind_of(value) -> str:
    """`NUMPY`, `TORCH`, `WARP` or, for another library's array on a device, `OTHER`."""
    if value is None or type(value) is np.ndarray:
        return NUMPY
    if _arrays_module().is_tensor(value):
        return TORCH
    if _warp_array(value):
        return WARP
    return OTHER if memory_of(value) is not None else NUMPY


def memory_of(value) -> str | None:
    """Where ``value``'s memory lies: None for the host (and anything that is not an array
    of a device library), else the device, ``"cuda:N"`` for a GPU (another device type is
    named as its library names it)."""
    if value is None or type(value) is np.ndarray:
        return None
    if _arrays_module().is_tensor(value):
        device = value.device
        return None if device.type == "cpu" else f"{device.type}:{device.index or 0}"
    if _warp_array(value):
        return None if value.device.is_cpu else f"cuda:{value.device.ordinal}"
    if hasattr(value, "__dlpack_device__"):
        device_type, device_id = (int(part) for part in value.__dlpack_device__())
        if device_type == _arrays_module().DLPACK_CPU:
            return None
        if device_type in _DLPACK_CUDA:
            return f"cuda:{device_id}"
        return f"{_arrays_module().DLPACK_DEVICES.get(device_type, 'unknown')}:{device_id}"
    if hasattr(value, "__cuda_array_interface__"):
        return "cuda"  # the interface names no device: the current one
    return None


def _describe(value) -> str:
    """``value``'s type and device, for messages."""
    memory = memory_of(value)
    return f"a {type(value).__module__.split('.')[0]}.{type(value).__name__} on " + (
        "the host" if memory is None else memory)


def grid_device(device, points) -> str:
    """The device a grid on ``points`` runs on: ``device`` as given, or where ``points``
    lie when it is None (see the module docstring). Raises `TypeError` naming ``points``
    where they lie on a device that ``device`` does not name."""
    memory = memory_of(points)
    if device is None:
        if memory is not None and not memory.startswith("cuda"):
            raise TypeError(f"`points` must be on the host or on a CUDA GPU; got "
                            f"{_describe(points)}.")
        return "cpu" if memory is None else memory
    if memory is not None and device == "cpu":
        raise TypeError(
            f"`points` must be on the host for device='cpu' (the numba engine); got "
            f"{_describe(points)}. Leave `device` out (or pass device={memory!r}) to build "
            "the grid on that GPU, or copy the points to the host.")
    return device


class DeviceValues(NamedTuple):
    """Radii or distances of a query, checked on the grid's Warp device
    (`Boundary.values`): ``values``, float64, shape (n,), a new array there, in the
    caller's order; ``largest``, the largest of them (0 for none)."""

    values: object
    largest: float


class Boundary(NamedTuple):
    """What a grid keeps of its caller's points to hand its arguments to the engine and
    its results back.

    Attributes
    ----------
    kind : str
        The points' kind (`kind_of`): its results' kind.
    memory : str or None
        Where the points lie (`memory_of`): where its results lie.
    warp_device : str or None
        Warp's name of the grid's device, None on the numba engine.
    """

    kind: str
    memory: str | None
    warp_device: str | None

    @classmethod
    def of(cls, points, device: str) -> Boundary:
        """The boundary of a grid on ``points`` run on ``device`` (`Grid`'s, resolved by
        `grid_device`), with Warp started for a Warp device; raises `TypeError` where the
        points lie on another device."""
        warp_device = warp_device_name(device)
        if warp_device is not None:
            load_warp(device, warp_device)
        boundary = cls(kind_of(points), memory_of(points), warp_device)
        if boundary.memory is not None and not boundary.same_memory(warp_device):
            raise TypeError(
                f"`points` must be on the grid's device ({_warp_name(warp_device)}); got "
                f"{_describe(points)}. Leave `device` out to build on the points' device.")
        return boundary

    @property
    def on_device(self) -> bool:
        """Whether the points go to the Warp engine where they lie, without a copy: a
        Warp device whose memory is theirs, points not of NumPy's kind."""
        return (self.kind != NUMPY and self.warp_device is not None
                and self.same_memory(self.warp_device))

    def same_memory(self, warp_device: str | None) -> bool:
        """Whether the points' memory is that of ``warp_device`` (``"cpu"``: the host)."""
        if warp_device is None or warp_device == "cpu":
            return self.memory is None
        if self.memory is None:
            return False
        import warp  # imported already: the grid is on a Warp device

        return warp.get_device(warp_device) == warp.get_device(self.memory)

    def points(self, points):
        """The caller's points, checked as far as their shape and dtype: an (n, d) Warp
        array over their memory where they go to the device as they lie (float32 or
        float64), else a float64 NumPy array through `as_points`."""
        if not self.on_device:
            return as_points(self.host_argument(points, "points"), finite=False)
        coords = as_warp(points, "points", self.warp_device)
        dtype = getattr(points, "dtype", coords.dtype)
        if coords.dtype.__name__ not in _DEVICE_FLOATS:
            if self.memory is None:  # on the host: NumPy converts them, as any input
                return as_points(self.host_argument(points, "points"), finite=False)
            raise TypeError(f"`points` on a GPU must be float32 or float64; got dtype "
                            f"{dtype}. Convert them on the device first.")
        if coords.ndim != 2 or not 1 <= coords.shape[1] <= N_AXES:
            raise ValueError(f"`points` must be a 2-D array of shape (n, d), d = 1, 2 or "
                             f"3; got shape {tuple(coords.shape)} ({_describe(points)}).")
        return coords

    def grid_points(self, coords, box: np.ndarray):
        """``(points3, lowest, highest)`` of `_validation.grid_points`, for the points
        `points` gave: on the device for a Warp array (`_warp_build.device_points`)."""
        if isinstance(coords, np.ndarray):
            return grid_points(coords, box)
        from ._warp_build import device_points

        return device_points(coords, box, self.warp_device)

    @staticmethod
    def default_cell_size(points3, lowest, highest, box: np.ndarray, n_dims: int) -> float:
        """`_build.default_cell_size` of the points `grid_points` gave; for points on a
        device, from the sample it takes, the only points brought to the host."""
        if isinstance(points3, np.ndarray):
            return _build.default_cell_size(points3, lowest, highest, box, n_dims)
        n = points3.shape[0]
        sample = points3[::_build.sample_step(n)].numpy() if n else np.zeros((0, 3))
        return _build.default_cell_size(sample, lowest, highest, box, n_dims, n_points=n)

    def host_argument(self, value, name: str):
        """A query's array argument ``value`` as NumPy reads it: host arrays as NumPy
        views, arrays on the grid's device copied to the host; None and numbers as
        given. Raises `TypeError` naming ``name`` for an array on another device."""
        if value is None or isinstance(value, _PLAIN):
            return value  # the common cases, at no cost
        memory = memory_of(value)
        if memory is None:
            if _warp_array(value):
                return value.numpy()
            return _arrays_module().to_numpy(value, name)
        if not self._on_grid_gpu(memory):
            grid = ("the host" if self.warp_device in (None, "cpu")
                    else self.memory or self.warp_device)
            raise TypeError(f"`{name}` must be on the host or on the grid's device "
                            f"({grid}); got {_describe(value)}.")
        if _arrays_module().is_tensor(value):
            return value.detach().cpu().numpy()
        return as_warp(value, name, self.warp_device).numpy()

    def queries(self, value, n_dims: int, box: np.ndarray):
        """The ``queries`` of a radius or k-nearest query (or of `for_each_neighbor`):
        an (m, n_dims) float32 or float64 array in the memory of the grid's Warp device
        as its (m,) float64 vectors there, padded, wrapped and checked as
        `_inputs.canonical_queries` checks them on the host
        (`_warp_build.device_points`); anything else as `host_argument` gives it, for
        `canonical_queries`. A 1-D array of n_dims values is one query."""
        coords = self._device_array(value, "queries", 2, n_dims)
        if coords is None or coords.shape[1] != n_dims:
            return self.host_argument(value, "queries")  # converted or refused there
        from ._inputs import canonical_queries
        from ._warp_build import device_points

        return device_points(coords, box, self.warp_device, lambda host: canonical_queries(
            host, n_dims, box))[0]

    def values(self, value, name: str, n: int, *, allow_inf: bool = False):
        """A query's radii or distances (``r``, ``radii``, ``max_distance``), one per
        point or per query: an (n,) float32 or float64 array in the memory of the grid's
        Warp device as `DeviceValues`, converted to float64 and checked there as
        `_validation.as_radii` checks them on the host (`_warp_arguments.device_values`,
        ``allow_inf`` as there); anything else (a number, an array of another shape or
        dtype, host arrays on a GPU grid) as `host_argument` gives it, for the host's
        checks."""
        array = self._device_array(value, name, 1)
        if array is None or array.shape[0] != n:
            return self.host_argument(value, name)  # converted or refused there
        from ._warp_arguments import device_values

        return DeviceValues(*device_values(array, name, allow_inf, self.warp_device))

    def rays(self, origins, directions, n_dims: int):
        """``(origins3, units3)`` of `_validation.as_rays` as (m,) float64 vectors on the
        grid's Warp device, converted and checked there (`_warp_arguments.device_rays`),
        where ``origins`` and ``directions`` are (m, n_dims) arrays of its memory, float32
        or float64, of one dtype; else None: the host's path."""
        arrays = self._row_pairs(origins, directions, ("origins", "directions"), n_dims)
        if arrays is None:
            return None
        from ._warp_arguments import device_rays

        return device_rays(*arrays, n_dims, self.warp_device)

    def boxes(self, lower, upper, n_dims: int, box: np.ndarray):
        """``(lower3, upper3, width)`` of `_inputs.box_inputs` as (m,) float64 vectors on
        the grid's Warp device, converted and checked there
        (`_warp_arguments.device_boxes`), where ``lower`` and ``upper`` are (m, n_dims)
        arrays of its memory, float32 or float64, of one dtype; else None: the host's
        path."""
        arrays = self._row_pairs(lower, upper, ("lower", "upper"), n_dims)
        if arrays is None:
            return None
        from ._warp_arguments import device_boxes

        return device_boxes(*arrays, n_dims, box, self.warp_device)

    def _row_pairs(self, first, second, names: tuple[str, str], n_dims: int):
        """Two (m, n_dims) arrays (or one row each, 1-D) of the memory of the grid's Warp
        device, of one float dtype, as Warp arrays over it (`_device_array`), or None."""
        arrays = (self._device_array(first, names[0], 2, n_dims),
                  self._device_array(second, names[1], 2, n_dims))
        if (None in arrays or arrays[0].shape != arrays[1].shape
                or arrays[0].shape[1] != n_dims or arrays[0].dtype != arrays[1].dtype):
            return None
        return arrays

    def _device_array(self, value, name: str, n_dims: int, row_length: int | None = None):
        """``value`` as a Warp array over its memory where it is an ``n_dims``-D float32
        or float64 array of the grid's Warp device's memory (a CUDA array on its GPU, a
        host tensor or Warp array on ``"warp-cpu"``), else None: the host's path, which
        converts it, or refuses it naming ``name``. With ``row_length``, a contiguous 1-D
        array of that length is one row (`_validation.as_rows`), of shape (1, length)."""
        if (value is None or isinstance(value, _PLAIN) or self.warp_device is None
                or kind_of(value) == NUMPY):
            return None
        memory = memory_of(value)
        if not (self.warp_device == "cpu" if memory is None else self._on_grid_gpu(memory)):
            return None
        array = as_warp(value, name, self.warp_device)
        if (row_length is not None and array.ndim == 1 and array.shape[0] == row_length
                and array.is_contiguous):
            array = array.reshape((1, row_length))
        if array.dtype.__name__ not in _DEVICE_FLOATS or array.ndim != n_dims:
            return None
        return array

    def _on_grid_gpu(self, memory: str) -> bool:
        """Whether ``memory`` (a device's, not the host's) is the GPU the grid runs on."""
        if self.warp_device in (None, "cpu"):
            return False
        if memory == "cuda" or memory == self.memory:
            return True
        import warp  # imported already: the grid is on a Warp device

        try:
            return warp.get_device(memory) == warp.get_device(self.warp_device)
        except (RuntimeError, ValueError):  # a device Warp does not know
            return False

    def results(self, found):
        """``found`` (a result object or an array of an engine) in the points' kind and
        memory (see the module docstring)."""
        if self.kind == NUMPY and self.warp_device is None:
            return found  # the CPU engine's NumPy results, as they are
        if self.memory is not None:
            import warp  # imported already: the grid is on a Warp device

            # Warp's kernels run on Warp's stream; the caller's library reads on its own.
            warp.synchronize_device(self.warp_device)
        if isinstance(found, Pairs | Neighbors | KNearest | RayHits):
            changes = {field.name: self.array(getattr(found, field.name))
                       for field in dataclasses.fields(found)
                       if field.name not in ("shape", "n_points")}
            return dataclasses.replace(found, **changes)
        return self.array(found)

    def array(self, array):
        """One array of an engine's result (NumPy, or a Warp array on the grid's device)
        in the points' kind and memory."""
        if array is None:
            return None
        warp_array = not isinstance(array, np.ndarray)
        if warp_array and self.memory is None and not array.device.is_cpu:
            array, warp_array = array.numpy(), False  # a host caller of a GPU grid
        if self.kind == NUMPY:
            # A Warp array on Warp's CPU device gives a view of its memory: copied, so
            # that the result owns its values.
            return array.numpy().copy() if warp_array else array
        if self.kind == TORCH:
            import torch  # imported already: the caller passed a tensor

            if warp_array:
                import warp  # imported already: the grid is on a Warp device

                return warp.to_torch(array, requires_grad=False)
            tensor = torch.from_numpy(array if array.flags.writeable else array.copy())
            return tensor if self.memory is None else tensor.to(self.memory)
        if warp_array:
            return array
        import warp  # imported already: the caller passed a Warp or a device array

        return warp.array(array, device=self.memory or "cpu", copy=self.memory is not None)


def _warp_name(warp_device: str | None) -> str:
    return {None: "the host, device='cpu'", "cpu": "the host, device='warp-cpu'"}.get(
        warp_device, warp_device)


def as_warp(value, name: str, warp_device: str):
    """``value``, an array on ``warp_device``'s memory, as a Warp array over that memory
    (``wp.from_torch``, DLPack, the CUDA array interface, or itself; a Warp array of
    vectors, as NumPy reads it, an (n, length) array of their scalars, `_vector_rows`)."""
    import warp

    if _warp_array(value):
        return _vector_rows(value)
    try:
        if _arrays_module().is_tensor(value):
            if value.device.type == "cuda":
                # Written on torch's stream, read on Warp's: wait for the writes. (DLPack
                # makes the producer wait for the consumer's stream itself.)
                sys.modules["torch"].cuda.current_stream(value.device).synchronize()
            return warp.from_torch(value.detach(), requires_grad=False)
        if hasattr(value, "__dlpack__"):
            return warp.from_dlpack(value)
        return warp.array(value, device=warp_device, copy=False)
    except (TypeError, RuntimeError, ValueError, BufferError) as error:
        raise TypeError(f"`{name}` must be an array Warp can read in place; got "
                        f"{_describe(value)} that Warp refused ({error}).") from error


def _vector_rows(array):
    """A 1-D Warp array of vectors (``wp.vec2d``, ``wp.vec3f``, ...) as an (n, length)
    view of their scalars over the same memory, which the caller's array keeps alive
    (as ``array.numpy()`` gives it on the host); any other array as it is."""
    import warp

    if array.ndim != 1 or not warp.types.type_is_vector(array.dtype) or array.ptr is None:
        return array
    scalar = array.dtype._wp_scalar_type_
    rows = warp.array(ptr=array.ptr, dtype=scalar, shape=(array.shape[0], array.dtype._length_),
                      strides=(array.strides[0], warp.types.type_size_in_bytes(scalar)),
                      device=array.device)
    rows._ref = array  # the memory's owner, alive as long as the view
    return rows
