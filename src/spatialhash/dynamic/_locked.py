"""`locked`: a method of `DynamicHash` run holding the hash's lock.

Every call of `DynamicHash` holds its lock (``self._lock``, a `FairLock`): the methods are
written without it and wrapped here, so the lock's handling is written once.
"""

from __future__ import annotations

import functools
import inspect

__all__ = ["locked"]


def locked(method):
    """``method`` run holding the hash's lock (``self._lock``, a `FairLock`).

    Parameters
    ----------
    method : function
        A method of `DynamicHash` whose parameters are positional-or-keyword or
        keyword-only, none named ``lock`` or ``method``.

    Returns
    -------
    function
        The wrapper, with ``method``'s name, docstring, parameters and defaults.

    Notes
    -----
    The wrapper is made from ``method``'s parameter names and passes each on by name: a
    wrapper taking ``*args, **kwargs`` passes them through C, which cost about twice the
    lock's own acquire and release on each call (`DynamicHash.bounds` a quarter slower,
    ad hoc); this one is a plain Python call. It takes the lock with `FairLock.acquire`
    and `FairLock.release` in ``try``/``finally`` rather than a ``with``, which calls the
    Python `FairLock.acquire` through C too. `DynamicHash.move`, the cheapest call and the
    one a simulation makes most often, writes the same block out, without the wrapper's
    call.
    """
    names, passed = [], []
    for parameter in inspect.signature(method).parameters.values():
        name = parameter.name
        assert parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
        assert name not in ("lock", "method"), name  # the wrapper's own names
        if parameter.kind is parameter.KEYWORD_ONLY:
            if "*" not in names:
                names.append("*")
            passed.append(f"{name}={name}")
        else:
            passed.append(name)
        names.append(name)
    source = (f"def locked({', '.join(names)}):\n"
              "    lock = self._lock\n"
              "    lock.acquire()\n"
              "    try:\n"
              f"        return method({', '.join(passed)})\n"
              "    finally:\n"
              "        lock.release()\n")
    namespace = {"method": method}
    exec(source, namespace)
    locked = namespace["locked"]
    locked.__defaults__ = method.__defaults__
    locked.__kwdefaults__ = method.__kwdefaults__
    return functools.wraps(method)(locked)
