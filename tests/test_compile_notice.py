"""The line a first call prints when it compiles kernels (`spatialhash._compile_notice`)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from numba.core import event

from spatialhash import _compile_notice


def _compile_event(status, module_name):
    function = types.SimpleNamespace(__module__=module_name)
    return event.Event("numba:compile", status,
                       data={"dispatcher": types.SimpleNamespace(py_func=function)})


def _compile(listener, module_name, nested=()):
    """The events of one compile of a kernel of ``module_name`` calling ``nested`` ones."""
    listener.notify(_compile_event(event.EventStatus.START, module_name))
    for inner in nested:
        _compile(listener, inner)
    listener.notify(_compile_event(event.EventStatus.END, module_name))


@pytest.mark.parametrize(("module_name", "family"), [
    ("spatialhash.grid._kernels.pairs", "the pair search"),
    ("spatialhash.grid._kernels.pair_scan", "the pair search"),
    ("spatialhash._kernels.ray_sphere", "ray casts"),
    ("spatialhash.grid._kernels.build_parallel", "the grid build"),
    ("spatialhash.dynamic._kernels.sort", "the dynamic hash"),
    ("spatialhash.grid._kernels.knn", "k-nearest queries"),
    ("spatialhash.demos._cloth_kernels", "the cloth demo"),
    ("spatialhash._kernels.something_new", "spatialhash's kernels"),
    ("numba.np.arraymath", None),
    ("__main__", None),
])
def test_kernels_are_named_by_family(module_name, family):
    assert _compile_notice.family_of(module_name) == family


def test_every_kernel_module_is_named_by_a_family():
    package = Path(_compile_notice.__file__).parent
    kernel_modules = [path for path in package.rglob("_kernels/*.py")
                      if path.name != "__init__.py"]
    kernel_modules += list(package.glob("demos/_*_kernels.py"))
    assert kernel_modules
    for path in kernel_modules:
        module = ".".join(("spatialhash",) + path.relative_to(package).with_suffix("").parts)
        assert _compile_notice.family_of(module) != "spatialhash's kernels", module


def test_one_line_per_family_and_none_for_nested_or_foreign_compiles(monkeypatch):
    monkeypatch.delenv("SPATIALHASH_COMPILE_NOTICE", raising=False)
    stream = io.StringIO()
    listener = _compile_notice.CompileNotices(stream)
    _compile(listener, "spatialhash.grid._kernels.pairs",
             nested=["spatialhash._kernels.cells", "numba.np.arraymath"])
    _compile(listener, "spatialhash.grid._kernels.pairs")
    _compile(listener, "numba.np.arraymath")
    _compile(listener, "spatialhash.grid._kernels.knn")
    lines = stream.getvalue().splitlines()
    assert lines == [_compile_notice.notice("the pair search"), _compile_notice.ADVICE,
                     _compile_notice.notice("k-nearest queries")]
    assert lines[0].startswith("spatialhash: compiling the pair search, once (about ")
    assert max(len(lines[0]), len(lines[2])) <= 80
    assert "SPATIALHASH_COMPILE_NOTICE=0" in lines[1]
    assert "spatialhash compile" in lines[1]


def test_the_notice_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("SPATIALHASH_COMPILE_NOTICE", "0")
    stream = io.StringIO()
    listener = _compile_notice.CompileNotices(stream)
    _compile(listener, "spatialhash.grid._kernels.pairs")
    assert stream.getvalue() == ""


def _run(code: str, **env) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items()
                   if key != "SPATIALHASH_COMPILE_NOTICE"}
    environment.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=environment,
                          capture_output=True, text=True, check=True, timeout=600)


@pytest.mark.slow
def test_a_real_compile_of_a_spatialhash_kernel_prints_the_line_once():
    # A throwaway kernel posing as one of ours (not cached): numba's real compile events.
    code = """
        import numba
        import spatialhash._config

        def add_one(x):
            return x + 1

        add_one.__module__ = "spatialhash._kernels.box"
        kernel = numba.njit(add_one)
        assert kernel(1) == 2 and kernel(2.0) == 3.0  # two compiles, one family
    """
    assert _run(code).stderr.splitlines() == [_compile_notice.notice("box queries"),
                                              _compile_notice.ADVICE]
    assert _run(code, SPATIALHASH_COMPILE_NOTICE="0").stderr == ""


@pytest.mark.slow
def test_a_warm_start_prints_nothing():
    code = """
        import numpy as np
        from spatialhash import Grid
        points = np.random.default_rng(0).random((1000, 3))
        assert len(Grid(points, cell_size=0.1).query_pairs(0.1)) > 0
    """
    _run(code)  # fills the cache if this process's kernels are not there yet
    assert _run(code).stderr == ""
