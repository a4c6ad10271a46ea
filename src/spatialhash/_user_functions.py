"""A user's compiled function called from the kernels: the checks and the messages shared by
`Grid.for_each_pair`, `Grid.for_each_neighbor` and the ray casts with ``fn``
(`Grid.query_ray`, `DynamicHash.query_ray`).

Numba's failure to type ``fn`` with the arguments a kernel passes becomes a `TypeError`
that says how ``fn`` is called (`call_error`, numba's error as its cause). A ray function
must return a bool: `ray_function` types the call before any kernel compiles, so that a
function returning a number (which numba would take for its truth value) is refused with a
message rather than compiled.

On the Warp engine (``Grid(..., device="cuda")`` or ``"warp-cpu"``), ``fn`` is a Warp
function instead (``@wp.func``), which a Warp kernel can call: `pair_function` checks it
given the grid's device, and `warp_arguments` its parameters against the arguments and
the arguments themselves (Warp arrays on the grid's device, or numbers, given Warp's
types as numba gives them: float64 and int64 for Python's, its dtype for a NumPy one).
"""

from __future__ import annotations

import numba
from numba.core import types
from numba.core.errors import TypingError

from ._kernels.ray_functions import return_type_of
from ._numba_internals import is_dispatcher

#: How each kernel calls ``fn``, for the messages.
PAIR_CALL = ("fn(i, j, d2, dx, dy, dz, *args), i and j int64, d2, dx, dy and dz float64, "
             "args the arguments after `fn`")
GRID_RAY_CALL = ("fn(ray, index, distance, *args), ray and index int64, distance float64, "
                 "args the tuple `args`")
DYNAMIC_RAY_CALL = ("fn(ray, id, distance, *args), ray (0) and id int64, distance float64, "
                    "args the tuple `args`")


#: The return type of each ``fn`` for the types of its ``args``, found once: asking numba
#: again (`return_type_of`) took three times as long as a whole `DynamicHash.query_ray`.
#: The kernels compiled for ``fn`` keep it alive anyway.
_RETURN_TYPES: dict = {}


def pair_function(fn, device: str = "cpu"):
    """``fn`` if it is a compiled numba function (any callable under NUMBA_DISABLE_JIT),
    or on a Warp ``device`` (any but ``"cpu"``) a Warp function."""
    if device != "cpu":
        return warp_function(fn, device)
    if is_dispatcher(fn) or (numba.config.DISABLE_JIT and callable(fn)):
        return fn
    raise TypeError(
        "`fn` must be a function compiled with numba's `njit` (it is called from compiled "
        f"code, on every thread); got {fn!r}. Decorate it with `@njit` (`from numba "
        "import njit`); a Warp function (`@wp.func`) runs on a grid with device='cuda' "
        "or 'warp-cpu'."
    )


def warp_function(fn, device: str):
    """``fn`` if it is a Warp function (``@wp.func``), for a grid on the Warp ``device``
    (Warp is then imported)."""
    import warp

    if isinstance(fn, warp.Function) and not fn.is_builtin():
        return fn
    kind = " (a numba function)" if is_dispatcher(fn) else ""
    raise TypeError(
        f"`fn` must be a Warp function (`@wp.func`) on a grid with device={device!r}, "
        f"whose kernels call it; got {fn!r}{kind}. Decorate it with `@wp.func` (`import "
        "warp as wp`), its parameters typed, or build the grid with device='cpu' for a "
        "numba function."
    )


def _check_ray_call(args, all_hits: bool) -> None:
    """The checks of a ray cast's ``args`` and ``all_hits`` with a ``fn``, on any engine."""
    if not isinstance(args, tuple):
        raise TypeError(f"`args` must be a tuple (the arguments passed to `fn` after the "
                        f"hit's); got {type(args).__name__} {args!r:.80}. Pass one argument "
                        "as `args=(value,)`.")
    if all_hits:
        raise TypeError("`all_hits` must be False with `fn`: `fn` picks one hit a ray, the "
                        "first it accepts; got all_hits=True.")


def warp_ray_function(fn, args, all_hits: bool, device: str):
    """`ray_function`'s checks on a Warp ``device``: ``fn`` a Warp function whose declared
    return type, if any, is a bool (a kernel that calls it fails to compile otherwise)."""
    import warp

    fn = warp_function(fn, device)
    _check_ray_call(args, all_hits)
    # The return type as Warp resolved the annotation (a string under `from __future__
    # import annotations`); None where there is none.
    returns = fn.adj.arg_types.get("return")
    if returns is not None and returns not in (bool, warp.bool):
        raise TypeError(
            "`fn` must return a bool (True accepts the hit, False passes over it); got "
            f"{fn.key!r}, declared to return {warp.types.type_repr(returns)}."
        )
    return fn


def warp_arguments(fn, args: tuple, warp_device: str, call: str) -> tuple:
    """``args`` as the Warp kernels calling the Warp function ``fn`` take them, typed as
    numba types them: Python numbers as Warp's float64, int64 or bool, NumPy numbers as
    Warp scalars of their dtype; Warp arrays and values as they are, Warp arrays checked
    to be on ``warp_device``.
    ``fn`` must take the values of ``call`` (those before its ``*args``) and then
    ``args``."""
    import inspect

    import numpy as np
    import warp

    n_params = len(inspect.signature(fn.func).parameters)
    n_values = call[: call.index(")")].count(",")  # before ``*args``
    if n_params != n_values + len(args):
        raise TypeError(
            f"`fn` must take {call}: {n_values + len(args)} parameters with the "
            f"{len(args)} arguments given after it; got {fn.key!r}, which takes {n_params}."
        )
    converted = []
    for k, arg in enumerate(args):
        if isinstance(arg, np.generic) and arg.dtype.kind in "biuf":
            arg = warp.dtype_from_numpy(arg.dtype)(arg.item())
        elif isinstance(arg, bool):
            arg = warp.bool(arg)
        elif isinstance(arg, int):
            arg = warp.int64(arg)
        elif isinstance(arg, float):
            arg = warp.float64(arg)
        elif isinstance(arg, warp.array):
            if str(arg.device) != str(warp.get_device(warp_device)):
                raise TypeError(
                    f"`args[{k}]` must be on the grid's device, {warp_device!r} (a Warp "
                    f"array `fn` reads or writes there); got an array on {str(arg.device)!r}."
                    " Create it with `device=` the grid's device."
                )
        elif not (warp.types.is_value(arg) or warp.types.is_struct(arg)):
            raise TypeError(
                f"`args[{k}]` must be a Warp array or a number (an argument of the Warp "
                f"function `fn`); got {type(arg).__name__}. Wrap an array as "
                "`wp.array(values, device=...)`."
            )
        converted.append(arg)
    return tuple(converted)


def ray_function(fn, args, all_hits: bool, call: str, device: str = "cpu"):
    """``fn`` checked for a ray cast: None without one (and without ``args``), else a
    numba function (any callable under NUMBA_DISABLE_JIT) that numba can call as ``call``
    says with the tuple ``args`` and that returns a bool, or on a Warp ``device`` (any but
    ``"cpu"``) a Warp function (`warp_ray_function`); ``all_hits`` must be False."""
    if fn is None:
        if not (isinstance(args, tuple) and len(args) == 0):
            raise TypeError(f"`args` are passed to `fn`, which is None; got args={args!r:.80}. "
                            "Give `fn` too, or leave `args` out.")
        return None
    if device != "cpu":
        return warp_ray_function(fn, args, all_hits, device)
    if not (is_dispatcher(fn) or (numba.config.DISABLE_JIT and callable(fn))):
        raise TypeError(
            "`fn` must be a function compiled with numba's `njit` (it is called from compiled "
            f"code); got {fn!r}. Decorate it with `@njit` (`from numba import njit`)."
        )
    _check_ray_call(args, all_hits)
    if numba.config.DISABLE_JIT:
        return fn
    key = (fn, arg_types(fn, args, call))
    return_type = _RETURN_TYPES.get(key)
    if return_type is None:
        try:
            return_type = types.unliteral(return_type_of(fn, args))
        except TypingError as error:
            raise call_error(fn, args, call) from error
        _RETURN_TYPES[key] = return_type
    if return_type != types.boolean:
        raise TypeError(
            "`fn` must return a bool (True accepts the hit, False passes over it); got "
            f"{fn!r}, which returns {return_type} when called as {call[: call.index(')') + 1]}."
        )
    return fn


def typed_call(fn, args, call: str, function, *function_args):
    """``function(*function_args)``, where numba's failure to type ``fn`` with ``args``
    raises `call_error` instead (numba's error as its cause)."""
    try:
        return function(*function_args)
    except TypingError as error:
        raise call_error(fn, args, call) from error


def arg_types(fn, args, call: str) -> tuple:
    """The numba types of ``args``; a `call_error` when numba cannot type one."""
    try:
        return tuple(numba.typeof(arg) for arg in args)
    except ValueError as error:
        raise call_error(fn, args, call) from error


def call_error(fn, args, call: str) -> TypeError:
    """The error for an ``fn`` numba cannot compile with the arguments it is given, called
    as ``call`` describes."""
    described = []
    for arg in args:
        try:
            described.append(str(numba.typeof(arg)))
        except ValueError:
            described.append(f"{type(arg).__name__}, which numba cannot type")
    return TypeError(
        f"`fn` must take {call} (here: {', '.join(described) or 'none'}); got {fn!r}, which "
        "numba could not compile for that call (numba's error is the cause above)."
    )
