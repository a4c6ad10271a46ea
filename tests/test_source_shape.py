"""The package's source stays small enough to read: modules, function bodies, parameters.

Limits, for every module under ``src/spatialhash``: at most `MAX_MODULE_LINES` lines; a
function body (from its first statement after the docstring to its last line, nested
functions included) at most `MAX_BODY_LINES` lines; at most `MAX_PARAMETERS` parameters
(a kernel that needs more takes tuples, a public function option objects).

`HELD_OVER` names the functions kept over a limit, each with the reason. A function over a
limit that is not named there fails, and so does one named there that is back within its
limits, so that the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "spatialhash"

MAX_MODULE_LINES = 500
MAX_BODY_LINES = 120
MAX_PARAMETERS = 12

_WRITTEN_OUT = (
    "a scan with its loops written out: a helper called per cell, even inlined, cost the "
    "pair kernel 16-38% on small cells; the cell's visits as helpers inlined at numba's IR "
    "level cost a new function of `Grid.for_each_pair` a fifth more cold compile (numba "
    "copies an inlined function's IR block by block); finding the half stencil's runs 32 "
    "cells a call into a CSR of runs, the copied candidates and the runs scanned by one "
    "loop, made pairs5k, particles and pairs5k_2d of benchmarks/bench_ab.py 1.08, 1.25 "
    "and 1.7 times slower")
_FULL_STENCIL = (
    "a scan with its loops written out (see the half stencil's reason); one call in place "
    "of the three a query or cell makes for its runs, returning the grown buffers, made "
    "neighbors_fn of benchmarks/bench_ab.py 1.21 times slower")
#: ``"module path:function qualname"`` -> why it stays over a limit.
HELD_OVER = {
    "demos/_cloth_simulation.py:Cloth.__init__": (
        "a demo's public constructor: each option a keyword of its own, as the command "
        "line's flags"),
    "grid/_kernels/pair_scan.py:half_stencil_scan": _WRITTEN_OUT,
    "grid/_kernels/pair_scan.py:half_stencil_scan.scan": _WRITTEN_OUT,
    "grid/_kernels/pair_functions.py:_scan_kernel": _FULL_STENCIL,
    "grid/_kernels/pair_functions.py:_scan_kernel.scan": _FULL_STENCIL,
    "grid/_kernels/radius.py:radius_scan_queries": (
        "a query's loops written out: a helper called per query, even inlined, counts a "
        "reference per array it is passed, for every query (moving the block's scan into "
        "one made radius200k in benchmarks/bench_ab.py 1.06-1.09 times slower); and an "
        "inlined helper for the runs path alone, as fast, added a third of a second to the "
        "family's cold compile (numba copies an inlined function's IR block by block); and "
        "ordinary helpers in place of the calls it makes per query and per block (the "
        "query's block test, the block's rows, the query's runs) made the family's first "
        "call compile 12-30% longer (each helper a module of its own, its callees linked "
        "in)"),
}


def _functions(tree: ast.AST, prefix: str = ""):
    """``(qualname, node)`` of every function in ``tree``, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def _body_lines(node) -> int:
    body = node.body
    first = body[0]
    if (len(body) > 1 and isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        first = body[1]
    return node.end_lineno - first.lineno + 1


def _parameters(node) -> int:
    arguments = node.args
    return len(arguments.posonlyargs) + len(arguments.args) + len(arguments.kwonlyargs)


def _over_limits() -> dict[str, str]:
    over = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        module = path.relative_to(PACKAGE).as_posix()
        n_lines = len(source.splitlines())
        if n_lines > MAX_MODULE_LINES:
            over[module] = f"{n_lines} lines"
        for name, node in _functions(ast.parse(source)):
            problems = []
            if _body_lines(node) > MAX_BODY_LINES:
                problems.append(f"a body of {_body_lines(node)} lines")
            if _parameters(node) > MAX_PARAMETERS:
                problems.append(f"{_parameters(node)} parameters")
            if problems:
                over[f"{module}:{name}"] = ", ".join(problems)
    return over


def test_modules_and_functions_within_their_limits():
    over = _over_limits()
    new = {name: what for name, what in over.items() if name not in HELD_OVER}
    assert not new, (
        f"over the limits ({MAX_MODULE_LINES} lines a module, {MAX_BODY_LINES} a function "
        f"body, {MAX_PARAMETERS} parameters): {new}")


def test_functions_held_over_are_still_over():
    over = _over_limits()
    back = sorted(name for name in HELD_OVER if name not in over)
    assert not back, f"within the limits now: remove from HELD_OVER: {back}"
