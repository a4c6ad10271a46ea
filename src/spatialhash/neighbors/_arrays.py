"""The boundary between the caller's arrays and NumPy: PyTorch CPU tensors and DLPack
objects in, NumPy arrays to the checks and kernels, and tensors back out where the caller
gave tensors.

Everything inside the package works on NumPy arrays. `to_numpy` turns a CPU tensor or any
object with ``__dlpack__`` on the CPU into a NumPy array over the same memory (no copy;
the checks of ``_validation.py`` then convert it once, as they convert NumPy input, so a
float64 tensor is read in place and a float32 one converted to float64 once).
`to_callers_kind` gives the results back as tensors over the same memory
(``torch.from_numpy``, no copy) where `callers_kind` saw a tensor. Where the points require
grad, `with_gradients` makes ``d`` and ``D`` differentiable with respect to them (new
tensors, of the same values), and `gradient_letters` refuses them of a cell that requires
grad, whose gradient is not computed.

Tensors are found through ``sys.modules`` (as ``_validation.py`` finds pandas objects), so
that torch is imported only where the caller imported it, and NumPy callers pay nothing for
this layer. An array on another device (a CUDA tensor, a DLPack array whose
``__dlpack_device__`` is not the CPU's) is refused with a `TypeError` naming the parameter
and the device, as torch's own ``Tensor.numpy`` refuses one: the search runs on the CPU.
"""

from __future__ import annotations

import sys

import numpy as np

#: DLPack's device type of the CPU (``kDLCPU``) and the names of the others, for messages.
DLPACK_CPU = 1
DLPACK_DEVICES = {2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal",
                  9: "vpi", 10: "rocm", 11: "rocm_host", 13: "cuda_managed", 14: "oneapi",
                  15: "webgpu", 16: "hexagon", 17: "maia"}

#: The kinds `callers_kind` tells apart.
NUMPY, TORCH = "numpy", "torch"


def is_tensor(value) -> bool:
    """Whether ``value`` is a PyTorch tensor (a `torch.Tensor` or a subclass, such as
    ``torch.nn.Parameter``), found without importing torch: where the caller has not
    imported it, nothing is a tensor."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def callers_kind(value) -> str:
    """`TORCH` where ``value`` is a tensor, else `NUMPY`: the kind `to_callers_kind`
    gives results back as."""
    return TORCH if is_tensor(value) else NUMPY


def requires_grad(value) -> bool:
    """Whether ``value`` is a tensor that records operations for autograd."""
    return is_tensor(value) and bool(value.requires_grad)


def to_numpy(value, name: str):
    """``value`` as a NumPy array over its memory where it is a CPU tensor or a DLPack
    object on the CPU; anything else (NumPy arrays, lists, numbers, None) as given.

    A tensor is read detached from autograd. A floating tensor of a dtype NumPy lacks
    (bfloat16, the float8 types) is converted to float64 first, the one conversion the
    checks would make anyway.

    Raises
    ------
    TypeError
        An array on another device than the CPU, a tensor NumPy cannot view (sparse, or
        of a dtype NumPy lacks and not floating), or a DLPack object NumPy refuses; the
        message names ``name`` and what was seen.
    """
    if value is None or isinstance(value, (np.ndarray, np.generic)):
        return value
    if is_tensor(value):
        return _tensor_to_numpy(value, name)
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        return _dlpack_to_numpy(value, name)
    return value


def _tensor_to_numpy(tensor, name: str) -> np.ndarray:
    """A CPU tensor as a NumPy array over its memory (see `to_numpy`)."""
    if tensor.device.type != "cpu":
        raise TypeError(
            f"`{name}` must be on the CPU; got a tensor on {tensor.device}. Pass "
            f"`{name}.cpu()`: the search runs on the CPU."
        )
    import torch  # imported already: the caller passed a tensor

    tensor = tensor.detach()
    if tensor.is_floating_point() and tensor.dtype not in (torch.float16, torch.float32,
                                                          torch.float64):
        tensor = tensor.double()  # bfloat16, the float8 types: no NumPy dtype
    try:
        return tensor.resolve_conj().resolve_neg().numpy()
    except (TypeError, RuntimeError) as error:
        raise TypeError(
            f"`{name}` must be a dense tensor of real numbers; got a {tensor.layout} tensor "
            f"of dtype {tensor.dtype} ({error})."
        ) from error


def _dlpack_to_numpy(value, name: str) -> np.ndarray:
    """An object with ``__dlpack__`` on the CPU as a NumPy array over its memory."""
    device_type, device_id = value.__dlpack_device__()
    if int(device_type) != DLPACK_CPU:
        device = DLPACK_DEVICES.get(int(device_type), "unknown")
        raise TypeError(
            f"`{name}` must be on the CPU; got a {type(value).__name__} on device "
            f"{device}:{device_id} (DLPack device type {int(device_type)}). Copy it to "
            "the CPU first: the search runs on the CPU."
        )
    try:
        return np.from_dlpack(value)
    except (TypeError, RuntimeError, BufferError, ValueError) as error:
        raise TypeError(
            f"`{name}` must be an array NumPy can read through DLPack; got a "
            f"{type(value).__name__} that NumPy refused ({error})."
        ) from error


def to_callers_kind(outputs, kind: str):
    """``outputs`` (an array or a tuple of arrays) as the caller's kind: as given for
    `NUMPY`, tensors over the same memory for `TORCH` (``torch.from_numpy``; an array
    that is not writable, which torch would share only with a warning, is copied)."""
    if kind == NUMPY:
        return outputs
    import torch  # imported already: the caller passed a tensor

    def tensor(array: np.ndarray):
        return torch.from_numpy(array if array.flags.writeable else np.array(array))

    if isinstance(outputs, tuple):
        return tuple(tensor(array) for array in outputs)
    return tensor(outputs)


def gradient_letters(letters: str, points, cell) -> str:
    """The letters the kernels must compute for `with_gradients`: ``"ijD"`` where
    ``points`` is a tensor that requires grad and ``"d"`` or ``"D"`` is asked, else none.

    Raises
    ------
    TypeError
        ``"d"`` or ``"D"`` asked of a ``cell`` tensor that requires grad: their gradient
        with respect to the cell is not computed (it would be silently missing).
    """
    asked = [letter for letter in "Dd" if letter in letters]
    if asked and requires_grad(cell):
        raise TypeError(
            f"`cell` must not require grad with {' and '.join(map(repr, asked))} among "
            "`quantities`: their gradient with respect to the cell is not computed; got a "
            "tensor with requires_grad=True. Ask for 'ijS' and compute D = points[j] - "
            "points[i] + S.to(points.dtype) @ cell in torch, or pass `cell.detach()`."
        )
    return "ijD" if asked and requires_grad(points) else ""


def with_gradients(letters: str, outputs, points, arrays: dict):
    """``outputs`` (tensors, as `to_callers_kind` gives them) with ``"D"`` and ``"d"``
    differentiable with respect to ``points``: their values those of the kernels, to the
    bit, and their gradients those of ``D = points[j] - points[i] + S @ cell`` and
    ``d = |D|`` (0 for a pair at distance 0).

    Each is the kernels' value less ``y.detach() - y``, where ``y`` is a torch expression
    of ``points`` with the gradient wanted: that difference is +0.0 exactly, so the value
    is unchanged (a -0.0 too), and autograd follows ``y``.
    """
    import torch  # imported already: the caller passed a tensor

    i, j = torch.from_numpy(arrays["i"]), torch.from_numpy(arrays["j"])
    vectors = torch.from_numpy(arrays["D"])
    moved = points[j] - points[i]  # D's gradient: the shift is a constant
    distances = torch.linalg.vector_norm(vectors, dim=1)
    units = torch.where(distances[:, None] > 0, vectors / distances[:, None], 0.0)
    along = (units * moved).sum(dim=1)  # d's gradient: the unit vector along D
    single = not isinstance(outputs, tuple)
    outputs = [outputs] if single else list(outputs)
    for k, letter in enumerate(letters):
        if letter == "D":
            outputs[k] = outputs[k] - (moved.detach() - moved)
        elif letter == "d":
            outputs[k] = outputs[k] - (along.detach() - along)
    return outputs[0] if single else tuple(outputs)
