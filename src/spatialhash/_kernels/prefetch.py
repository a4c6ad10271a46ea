"""``prefetch_write(array, index)`` and ``prefetch_read(array, index)``: ask the
processor to bring the cache line of ``array[index]`` (a 1-D array) into its caches, to
be written or read, without waiting for it.

Why: a kernel that writes short runs of rows at places it reads from memory (the rows of
the atoms of a molecular list, grouped by atom in the caller's order, written in the
order of the atoms' bins) waits for each run's lines; its hardware prefetchers follow
streams, not jumps. Asked a few runs ahead, the lines are there when written. Emitted
as LLVM's ``llvm.prefetch`` (a hint: no fault, no effect on results; an index past the
end asks nothing useful but is harmless), through numba's extension API
(``numba.extending.intrinsic``, ``numba.core.cgutils``). Under ``NUMBA_DISABLE_JIT=1``,
where the kernels run as Python, both do nothing.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic


def _prefetch(write: int):
    """The intrinsic prefetching for writing (``write`` 1) or reading (0); a function
    doing nothing where the kernels run as Python."""
    if numba.config.DISABLE_JIT:
        return lambda array, index: None

    @intrinsic
    def prefetch(typingctx, array, index):
        if not (isinstance(array, types.Array) and array.ndim == 1
                and isinstance(index, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            array_type, index_type = signature.args
            value = context.make_array(array_type)(context, builder, args[0])
            at = context.cast(builder, args[1], index_type, types.intp)
            byte, int32 = ir.IntType(8).as_pointer(), ir.IntType(32)
            # The typed-pointer name: LLVM 14 (numba 0.59's) needs it; later versions
            # read it as their opaque-pointer one.
            function = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [byte, int32, int32, int32]),
                "llvm.prefetch.p0i8")
            # Kept close (3: in all cache levels), data (1).
            builder.call(function, [builder.bitcast(builder.gep(value.data, [at]), byte),
                                    int32(write), int32(3), int32(1)])
            return context.get_dummy_value()

        return types.none(array, index), codegen

    return prefetch


#: Prefetch the line of ``array[index]`` to be written.
prefetch_write = _prefetch(1)
#: Prefetch the line of ``array[index]`` to be read.
prefetch_read = _prefetch(0)
