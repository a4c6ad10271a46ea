"""`spatialhash.neighbors.neighbor_list` with PyTorch CPU tensors and DLPack objects: tensors
in, tensors out (over the kernels' arrays, no copy), equal to the NumPy path bit for bit
and to the brute-force oracle (``molecular_oracle.py``); the inputs read in place; the
refusals of other devices and of dtypes that are not real numbers; the gradients of ``d``
and ``D`` with respect to points that require grad (``neighbors/_arrays.py``).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import molecular_oracle as oracle
from spatialhash.neighbors import _arrays, _molecular, neighbor_list
from test_molecular import cutoffs, systems

LETTERS = "ijSdDb"
CELL = np.array([[3.0, 0.0, 0.0], [1.0, 3.0, 0.0], [0.5, 0.5, 3.0]])


def _system(seed: int, n: int = 30) -> np.ndarray:
    return np.random.default_rng(seed).random((n, 3)) @ CELL


def _same_bits(got, expected) -> bool:
    """``got`` (a tensor) holds ``expected`` (an array): same dtype, shape and bits."""
    array = got.numpy()
    return (array.dtype == expected.dtype and array.shape == expected.shape
            and array.tobytes() == expected.tobytes())


class DLPackOnly:
    """An array that shows NumPy nothing but DLPack: no ``__array__``, no buffer."""

    def __init__(self, array, device=(1, 0)):
        self._array, self._device = array, device

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._device


@pytest.fixture
def kernel_arrays(monkeypatch):
    """The positions the kernels were given and the arrays they returned, by call."""
    seen = {}
    original = _molecular.batch_rows

    def spy(positions, *args):
        seen["positions"] = positions
        seen["rows"] = original(positions, *args)
        return seen["rows"]

    monkeypatch.setattr(_molecular, "batch_rows", spy)
    return seen


# ---------------------------------------------------------------------- tensors in, out
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("full_list", [True, False])
@pytest.mark.parametrize("sorted", [False, True])
def test_tensors_give_tensors_equal_to_the_numpy_path_bit_for_bit(seed, full_list, sorted):
    positions = _system(seed)
    expected = neighbor_list(LETTERS, positions, 2.5, CELL, full_list=full_list,
                             sorted=sorted)
    got = neighbor_list(LETTERS, torch.from_numpy(positions), 2.5, torch.from_numpy(CELL),
                        full_list=full_list, sorted=sorted)
    assert all(isinstance(tensor, torch.Tensor) for tensor in got)
    assert [tensor.dtype for tensor in got] == [torch.int64] * 3 + [torch.float64] * 2 + [
        torch.int64]
    assert all(map(_same_bits, got, expected))
    if full_list:
        i, j, shifts, distances, vectors, _ = (tensor.numpy() for tensor in got)
        assert oracle.as_rows(i, j, shifts, distances, vectors) == oracle.pairs(
            positions, CELL, [True] * 3, 2.5)


@given(system=systems(), data=st.data())
def test_tensors_on_dyadic_lattices_equal_the_oracle(system, data):
    positions, cell, pbc = system
    cutoff = data.draw(cutoffs((cell, pbc)))
    got = neighbor_list("ijSdD", torch.from_numpy(positions), cutoff, torch.from_numpy(cell),
                        torch.from_numpy(pbc))
    assert oracle.as_rows(*(tensor.numpy() for tensor in got)) == oracle.pairs(
        positions, cell, pbc, cutoff)


def test_one_letter_gives_the_tensor_itself_and_a_0_d_tensor_is_a_cutoff():
    positions = _system(3)
    got = neighbor_list("d", torch.from_numpy(positions), torch.tensor(2.5), CELL)
    assert isinstance(got, torch.Tensor)
    assert _same_bits(got, neighbor_list("d", positions, 2.5, CELL))


class UserTensor(torch.Tensor):
    """A tensor subclass defined outside torch, as libraries define them."""


def test_a_tensor_subclass_is_a_tensor():
    positions = _system(15)
    got = neighbor_list("ijD", torch.from_numpy(positions).as_subclass(UserTensor), 2.5, CELL)
    assert all(isinstance(tensor, torch.Tensor) for tensor in got)
    assert all(map(_same_bits, got, neighbor_list("ijD", positions, 2.5, CELL)))


def test_the_kind_of_the_results_follows_points_alone():
    positions = _system(4)
    got = neighbor_list("ij", positions, 2.5, torch.from_numpy(CELL))
    assert all(type(array) is np.ndarray for array in got)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_narrow_floats_are_converted_to_float64_once(dtype):
    """As NumPy float32 is: the distances are those of the narrow positions, in float64.
    bfloat16, which NumPy lacks, is widened by torch first."""
    tensor = torch.from_numpy(_system(5)).to(dtype)
    widened = tensor.double().numpy()
    expected = neighbor_list("ijSdD", widened, 2.5, CELL)
    got = neighbor_list("ijSdD", tensor, 2.5, CELL)
    assert got[3].dtype == got[4].dtype == torch.float64
    assert all(map(_same_bits, got, expected))
    if dtype != torch.bfloat16:
        narrow = neighbor_list("ijSdD", tensor.numpy(), 2.5, CELL)  # NumPy's own dtype
        assert all(map(_same_bits, got, narrow))


def test_batches_take_tensors_for_every_argument():
    positions = np.concatenate([_system(6, 20), _system(7, 3)])
    ptr = np.array([0, 20, 20, 23])
    cells = np.stack([CELL, np.eye(3) * 10.0, np.diag([4.0, 4.0, 0.0])])
    pbc = np.array([[True] * 3, [True] * 3, [True, True, False]])
    radii = np.random.default_rng(8).random(23) * 1.2
    expected = neighbor_list(LETTERS, positions, None, cells, pbc, ptr=ptr, radii=radii)
    got = neighbor_list(LETTERS, *map(torch.from_numpy, (positions,)), None,
                        torch.from_numpy(cells), torch.from_numpy(pbc),
                        ptr=torch.from_numpy(ptr), radii=torch.from_numpy(radii))
    assert all(map(_same_bits, got, expected))
    b, j = got[5], got[1]
    assert ((torch.from_numpy(ptr)[b] <= j) & (j < torch.from_numpy(ptr)[b + 1])).all()


# ---------------------------------------------------------------------- no copies
def test_float64_tensors_reach_the_kernels_in_place_and_results_are_their_arrays(
        kernel_arrays):
    tensor = torch.from_numpy(_system(9))
    before = tensor.clone()
    got = neighbor_list("ijSdD", tensor, 2.5, CELL)
    assert kernel_arrays["positions"].ctypes.data == tensor.data_ptr()
    assert torch.equal(tensor, before)  # read, never written
    for letter, result in zip("ijSdD", got, strict=True):
        assert result.data_ptr() == kernel_arrays["rows"][letter].ctypes.data


def test_a_dlpack_object_is_read_in_place_and_gives_arrays(kernel_arrays):
    positions = _system(10)
    got = neighbor_list("ijSdD", DLPackOnly(positions), 2.5, DLPackOnly(CELL))
    assert np.shares_memory(kernel_arrays["positions"], positions)
    for result, expected in zip(got, neighbor_list("ijSdD", positions, 2.5, CELL),
                                strict=True):
        assert type(result) is np.ndarray and result.tobytes() == expected.tobytes()


def test_to_numpy_views_and_to_callers_kind_shares():
    tensor = torch.arange(12, dtype=torch.float64).reshape(4, 3)[:, 1:]  # strided view
    array = _arrays.to_numpy(tensor, "points")
    assert array.ctypes.data == tensor.data_ptr() and array.strides == (24, 8)
    back = _arrays.to_callers_kind((array, array[:, 0]), _arrays.TORCH)
    assert back[0].data_ptr() == tensor.data_ptr()
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    assert _arrays.to_callers_kind(frozen, _arrays.TORCH).data_ptr() != frozen.ctypes.data


def test_numpy_callers_never_import_torch():
    code = ("import sys, numpy as np\n"
            "from spatialhash.neighbors import neighbor_list\n"
            "neighbor_list('ijSdD', np.random.default_rng(0).random((9, 3)), 0.5, np.eye(3))\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------- refusals
def test_a_tensor_on_another_device_is_refused_naming_it():
    with pytest.raises(TypeError, match=r"^`points` must be on the CPU; got a tensor on "
                                        r"meta\. Pass `points\.cpu\(\)`"):
        neighbor_list("ij", torch.empty((4, 3), device="meta"), 1.0)
    with pytest.raises(TypeError, match=r"^`cell` must be on the CPU; got a tensor on meta"):
        neighbor_list("ij", _system(11), 1.0, torch.empty((3, 3), device="meta"))


@pytest.mark.parametrize("name", ["points", "cell", "ptr"])
def test_a_dlpack_array_on_a_gpu_is_refused_naming_the_device(name):
    arrays = {"points": _system(12, 4), "cell": CELL, "ptr": np.array([0, 4])}
    arrays[name] = DLPackOnly(arrays[name], device=(2, 1))
    with pytest.raises(TypeError, match=rf"^`{name}` must be on the CPU; got a DLPackOnly "
                                        r"on device cuda:1 \(DLPack device type 2\)\."):
        neighbor_list("ij", arrays["points"], 1.0, arrays["cell"], ptr=arrays["ptr"])


@pytest.mark.parametrize(("name", "tensor", "message"), [
    ("points", torch.ones((3, 3), dtype=torch.complex64),
     r"^`points` must hold real numbers \(integer or floating dtype\); got dtype complex64"),
    ("points", torch.ones((3, 3), dtype=torch.bool),
     r"^`points` must hold real numbers \(integer or floating dtype\); got dtype bool"),
    ("ptr", torch.tensor([0.0, 3.0]), r"^`ptr` must hold integers; got dtype float32"),
    ("points", torch.eye(3).to_sparse(),
     r"^`points` must be a dense tensor of real numbers; got a torch.sparse_coo tensor"),
])
def test_tensors_of_other_kinds_are_refused_naming_the_dtype(name, tensor, message):
    arguments = {"points": torch.eye(3), "ptr": None} | {name: tensor}
    with pytest.raises(TypeError, match=message):
        neighbor_list("ij", arguments["points"], 1.0, ptr=arguments["ptr"])


# ---------------------------------------------------------------------- autograd
def _gradient(i, j, per_row: np.ndarray, n: int) -> np.ndarray:
    """The gradient with respect to the points of a sum over rows whose gradient with
    respect to each row's vector is ``per_row``: added at ``j``, taken away at ``i``."""
    gradient = np.zeros((n, per_row.shape[1]))
    np.add.at(gradient, j, per_row)
    np.add.at(gradient, i, -per_row)
    return gradient


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("full_list", "sorted"), [(True, False), (False, True)])
def test_vectors_and_distances_of_points_that_require_grad_carry_their_gradient(
        dtype, full_list, sorted):
    """Values to the bit those of detached points; gradients of sum(d) and sum(D**2) those
    of d = |D| and D = x[j] - x[i] + S @ cell, in NumPy. Two atoms at one place (d = 0)
    get a gradient of 0 from their pair, not NaN."""
    positions = _system(16)
    positions[1] = positions[0]
    expected = neighbor_list("ijdD", torch.from_numpy(positions).to(dtype), 2.5, CELL,
                             full_list=full_list, sorted=sorted)
    points = torch.from_numpy(positions).to(dtype).requires_grad_()
    i, j, distances, vectors = neighbor_list("ijdD", points, 2.5, CELL, full_list=full_list,
                                             sorted=sorted)
    assert not i.requires_grad and distances.requires_grad and vectors.requires_grad
    assert all(map(_same_bits, (i, j, distances.detach(), vectors.detach()),
                   (tensor.numpy() for tensor in expected)))
    assert (distances == 0).any()
    i, j, d, D = (tensor.detach().numpy() for tensor in (i, j, distances, vectors))
    units = np.divide(D, d[:, None], out=np.zeros_like(D), where=d[:, None] > 0)
    (distances.sum() + (vectors ** 2).sum()).backward()
    assert points.grad.dtype == dtype
    tolerance = 1e-12 if dtype == torch.float64 else 1e-4
    np.testing.assert_allclose(points.grad.numpy(),
                               _gradient(i, j, units + 2 * D, len(positions)),
                               rtol=tolerance, atol=tolerance)


def test_one_letter_of_points_that_require_grad_is_differentiable_alone():
    points = torch.from_numpy(_system(17)).requires_grad_()
    distances = neighbor_list("d", points, 2.5, CELL)
    distances.sum().backward()
    i, j, D = (tensor.numpy() for tensor in neighbor_list("ijD", points.detach(), 2.5, CELL))
    d = np.linalg.norm(D, axis=1)
    np.testing.assert_allclose(points.grad.numpy(), _gradient(i, j, D / d[:, None], 30),
                               rtol=1e-12, atol=1e-12)


def test_vectors_of_a_cell_that_requires_grad_are_refused():
    cell = torch.from_numpy(CELL).requires_grad_()
    with pytest.raises(TypeError, match=r"^`cell` must not require grad with 'D' and 'd' "
                                        r"among `quantities`: their gradient with respect "
                                        r"to the cell is not computed; .* Ask for 'ijS' and "
                                        r"compute D = points\[j\] - points\[i\] \+ S"):
        neighbor_list("ijdD", torch.from_numpy(_system(13)), 2.5, cell)
    assert len(neighbor_list("ijS", _system(13), 2.5, cell)[0])


def test_shifts_of_tensors_that_require_grad_give_vectors_with_gradients():
    """The recipe of the refusal for the cell: i, j, S from the list, D in torch; its
    gradient is that of sum(D**2), summed into the atoms in NumPy."""
    positions = torch.nn.Parameter(torch.from_numpy(_system(14)))
    i, j, shifts = neighbor_list("ijS", positions, 2.5, CELL)
    cell = torch.from_numpy(CELL)
    vectors = positions[j] - positions[i] + shifts.to(positions.dtype) @ cell
    expected = neighbor_list("D", positions.detach(), 2.5, CELL).numpy()
    np.testing.assert_allclose(vectors.detach().numpy(), expected, rtol=0, atol=1e-12)
    (vectors ** 2).sum().backward()
    gradient = np.zeros(positions.shape)
    np.add.at(gradient, j.numpy(), 2 * expected)
    np.add.at(gradient, i.numpy(), -2 * expected)
    np.testing.assert_allclose(positions.grad.numpy(), gradient, rtol=0, atol=1e-9)
