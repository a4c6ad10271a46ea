"""The package's surface: what ``import spatialhash`` exports, and what it loads."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import spatialhash


def test_import_leaves_the_dynamic_hash_unloaded_until_it_is_used():
    # A warm start pays for every kernel module imported; code using only `Grid` skips the
    # dynamic hash's. A fresh process, since the tests import everything.
    code = ("import sys, spatialhash; loaded = 'spatialhash.dynamic' in sys.modules; "
            "from spatialhash import DynamicHash; "
            "print(loaded, 'spatialhash.dynamic' in sys.modules, DynamicHash.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["False", "True", "spatialhash.dynamic._hash"]


def test_every_public_name_is_exported_listed_and_importable():
    from spatialhash import dynamic

    assert spatialhash.DynamicHash is dynamic.DynamicHash
    assert spatialhash.UnknownIdError is dynamic.UnknownIdError
    assert issubclass(spatialhash.UnknownIdError, KeyError)
    for name in spatialhash.__all__:
        assert name in dir(spatialhash)
        assert getattr(spatialhash, name) is not None
    namespace: dict = {}
    exec("from spatialhash import *", namespace)  # noqa: S102 (the star import under test)
    assert set(spatialhash.__all__) <= set(namespace)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Grids'"):
        spatialhash.Grids  # noqa: B018 (the lookup under test)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


def test_numba_is_within_the_versions_the_internals_were_checked_against():
    # `_numba_internals` names the numba versions its hooks were checked against; the
    # dependency's bounds must say the same, and the numba installed must lie between them.
    import numba

    from spatialhash import _numba_internals

    pyproject = (Path(spatialhash.__file__).parents[2] / "pyproject.toml").read_text()
    lowest, below = re.search(r'"numba>=([\d.]+),<([\d.]+)"', pyproject).groups()
    checked = re.search(r"Checked against numba ([\d.]+) to ([\d.]+);", _numba_internals.__doc__)
    assert checked is not None and _version(checked[1]) == _version(lowest)
    assert f"``numba < {below}``" in " ".join(_numba_internals.__doc__.split())
    assert _version(checked[2]) < _version(below)
    assert _version(lowest) <= _version(numba.__version__) < _version(below)
