"""A damaged numba cache file costs one recompile and one line on stderr, not every call.

A kernel made with `spatialhash._config.jit` lives in a module of its own under a temporary
folder, with its cache in another (``NUMBA_CACHE_DIR``): each process below loads (or
compiles) it as a new user's would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

KERNEL_MODULE = textwrap.dedent("""
    from spatialhash._config import jit

    @jit
    def add_one(x):
        return x + 1.0
""")


def _run(tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", "import kernel; print(kernel.add_one(2.0))"],
                          env=env, capture_output=True, text=True, timeout=300, check=False)


def _truncate(path):
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _zero(path):
    path.write_bytes(bytes(len(path.read_bytes())))


@pytest.mark.slow
@pytest.mark.parametrize(("suffix", "damage"), [
    (".nbi", _truncate), (".nbc", _truncate), (".nbc", _zero), (".nbi", _zero),
])
def test_a_damaged_cache_file_is_recompiled_and_replaced(tmp_path, suffix, damage):
    (tmp_path / "kernel.py").write_text(KERNEL_MODULE)
    first = _run(tmp_path)
    assert (first.returncode, first.stdout.strip(), first.stderr) == (0, "3.0", "")
    files = list((tmp_path / "cache").rglob(f"*add_one*{suffix}"))
    assert len(files) == 1
    damage(files[0])
    damaged = _run(tmp_path)
    assert damaged.returncode == 0, damaged.stderr
    assert damaged.stdout.strip() == "3.0"
    lines = damaged.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("spatialhash: numba's cache entry for add_one in ")
    assert "could not be read (" in lines[0]
    assert lines[0].endswith("; compiling it again and replacing the entry.")
    repaired = _run(tmp_path)  # the entry was saved again: it loads, silently
    assert (repaired.returncode, repaired.stdout.strip(), repaired.stderr) == (0, "3.0", "")
