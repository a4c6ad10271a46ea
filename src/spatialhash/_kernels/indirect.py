"""Calls from a parallel driver to a kernel through the kernel's address.

Why. When a numba function calls another, numba links the callee's code into the caller,
and into the function it outlines for each ``prange`` loop, and optimizes and emits that
code again there. A parallel driver whose loop calls one big kernel cost about as much
cold compile again as the kernel (ad hoc, cold cache, CPU time), only to produce the
kernel's code once more. Called through its address instead, the kernel is compiled once,
by itself, and the driver is a loop around a call, a fraction of that compile (the
figures are in ``docs/benchmarks.md``, "Compile time and warm start").

How. `kernel_caller(kernel)` makes intrinsics ``check(target, args)`` and
``call(target, args)``: ``args`` is the tuple of the kernel's arguments, ``target`` an
int64 array of two made by `kernel_target` on the Python side: the address of the
kernel's compiled code for those argument types, and a tag of the argument and result
types. Typing a driver needs the kernel's result type, which the intrinsics take from the
compiled kernel (see `kernel_caller`); at run time they compare the tags, so a target made
for other types raises ``ValueError`` instead of calling code with the wrong layout of
arguments. The address is an argument rather than a constant so that the driver can be
cached on disk: it changes from process to process.

The kernel is called with numba's own calling convention, so arrays pass as they do
between any two numba functions, and the returned arrays are owned by the caller.

Under ``NUMBA_DISABLE_JIT=1`` the kernels are plain Python functions: a target is the
kernel itself and the caller calls it (`_python_caller`).
"""

from __future__ import annotations

import zlib

import numpy as np
from llvmlite import ir
from numba import typeof
from numba.core import cgutils, types
from numba.extending import intrinsic

from .._numba_internals import compiled_address

#: Targets made so far, by (kernel, key) (see `kernel_target`): making one compiles or
#: loads the kernel, and looks its address up.
_targets: dict = {}


def _tag(arg_types, return_type) -> int:
    """A number naming a kernel's argument and return types, the same in every process:
    two kernels of the same types are called alike, through the same intrinsic."""
    return zlib.crc32(f"{tuple(arg_types)} -> {return_type}".encode())


def kernel_target(kernel, args, key) -> np.ndarray:
    """The target (address and tag) of ``kernel`` compiled for the types of ``args``.

    ``args`` are values of the types the driver passes the kernel (Python ints for int64,
    floats for float64, bools, arrays of the same dtype, dimensions and layout). Typing
    them is slow beside a call, so targets are kept by ``key``, a cheap value that
    tells the callers' argument types apart (a grid's index dtype); ``args`` are typed only
    the first time a key is seen. A key that did not tell two sets of types apart gives a
    target whose tag the driver rejects with ``ValueError``, never a wrong call.
    """
    if _python_mode(kernel):
        return kernel
    target = _targets.get((kernel, key))
    if target is None:
        arg_types = tuple(typeof(arg) for arg in args)
        address, return_type = compiled_address(kernel, arg_types)
        target = np.array([address, _tag(arg_types, return_type)], dtype=np.int64)
        target.setflags(write=False)
        _targets[(kernel, key)] = target
    return target


def kernel_caller(kernel, *alike):
    """Two intrinsics for calls of ``kernel``, or of the kernels ``alike`` (of the same
    argument and result types), through their address: ``check(target, args)`` raises
    ``ValueError`` unless ``target`` was made for the types of ``args`` and of the
    kernel's result, and ``call(target, args)`` calls the kernel at ``target``.

    The result's type is taken from whichever of the kernels is already compiled for the
    types of ``args`` (`kernel_target` compiles the one it makes a target of before the
    driver runs), so typing a driver compiles no kernel it does not call; ``kernel`` is
    compiled only when none is.

    A driver checks once, before its ``prange`` loop, with the types its loop passes:
    numba does not carry an exception raised inside a ``prange`` loop out cleanly (the
    caller gets a ``SystemError``). ``call`` checks too, so that no call can read its
    arguments with another layout, but reaches its own check only if the driver did not.
    """
    if _python_mode(kernel):
        return _python_caller()

    def resolve(args):
        arg_types = tuple(types.unliteral(arg) for arg in args.types)
        for candidate in (kernel, *alike):
            if arg_types in candidate.overloads:
                return arg_types, candidate.overloads[arg_types].signature.return_type
        kernel.compile(arg_types)
        return arg_types, kernel.overloads[arg_types].signature.return_type

    def check_target(context, builder, target_type, target_value, arg_types, return_type):
        """Raise ``ValueError`` from the calling function unless the tags match; return
        the address."""
        data = context.make_array(target_type)(context, builder, target_value).data
        seen_tag = builder.load(builder.gep(data, [ir.Constant(ir.IntType(64), 1)]))
        tag = ir.Constant(ir.IntType(64), _tag(arg_types, return_type))
        with cgutils.if_unlikely(builder, builder.icmp_signed("!=", seen_tag, tag)):
            context.call_conv.return_user_exc(
                builder, ValueError,
                (f"the target given for a call like {kernel.py_func.__name__}'s was made "
                 f"for other types than {arg_types} -> {return_type}",))
        return builder.load(data)

    def check_types(target):
        if not (isinstance(target, types.Array) and target.dtype == types.int64
                and target.ndim == 1):
            raise TypeError(f"the target of {kernel.py_func.__name__} must be an int64 array")

    @intrinsic
    def check(typingctx, target, args):
        check_types(target)
        arg_types, return_type = resolve(args)

        def codegen(context, builder, signature, values):
            check_target(context, builder, signature.args[0], values[0], arg_types,
                         return_type)
            return context.get_dummy_value()

        return types.none(target, args), codegen

    @intrinsic
    def call(typingctx, target, args):
        check_types(target)
        arg_types, return_type = resolve(args)

        def codegen(context, builder, signature, values):
            target_value, args_value = values
            address = check_target(context, builder, signature.args[0], target_value,
                                   arg_types, return_type)
            arg_values = cgutils.unpack_tuple(builder, args_value, len(arg_types))
            arg_values = [context.cast(builder, value, seen, wanted) for value, seen, wanted
                          in zip(arg_values, args.types, arg_types, strict=True)]
            function_type = context.call_conv.get_function_type(return_type, arg_types)
            function = builder.inttoptr(address, function_type.as_pointer())
            status, result = context.call_conv.call_function(builder, function, return_type,
                                                             arg_types, arg_values)
            with cgutils.if_unlikely(builder, status.is_error):
                context.call_conv.return_status_propagate(builder, status)
            return result

        return return_type(target, args), codegen

    return check, call


def _python_mode(kernel) -> bool:
    """Whether ``kernel`` is a plain Python function (``NUMBA_DISABLE_JIT=1``)."""
    return not hasattr(kernel, "overloads")


def _python_caller():
    """``(check, call)`` for plain Python kernels: the target is the kernel itself."""

    def check(target, args):
        return None

    def call(target, args):
        return target(*args)

    return check, call
