"""The package cache locator (`spatialhash._cache`): relocatable, and never stale."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from spatialhash import _cache

PACKAGE = Path(_cache.__file__).parent


def test_stamp_covers_every_file_with_compiled_code():
    compiled = {path for path, _, _ in _cache._compiled_sources()}
    defining = {str(path) for path in PACKAGE.rglob("*.py")
                if re.search(r"@(jit|jit_parallel|intrinsic)\b|numba\.njit",
                             path.read_text())}
    assert defining, "no file with compiled code found"
    assert defining <= compiled, sorted(defining - compiled)
    assert str(PACKAGE / "_config.py") in compiled


def test_stamp_changes_with_any_compiled_source(tmp_path):
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    first.write_text("x = 1\n")
    second.write_text("y = 2\n")

    def stamp():
        return _cache._hash_sources(tuple(
            (str(path), path.stat().st_mtime_ns, path.stat().st_size)
            for path in (first, second)))

    before = stamp()
    assert stamp() == before
    second.write_text("y = 3\n")
    os.utime(second, ns=(second.stat().st_atime_ns, second.stat().st_mtime_ns + 10**9))
    assert stamp() != before


_CHILD = """
import json
from spatialhash._kernels.cells import floor_to_int
assert floor_to_int(-2.5) == -3
print(json.dumps([sum(floor_to_int.stats.cache_hits.values()),
                  sum(floor_to_int.stats.cache_misses.values())]))
"""


def test_second_process_loads_kernels_from_the_package_cache(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path),
               NUMBA_CACHE_LOCATOR_CLASSES="spatialhash._cache.PackageCacheLocator")

    def run():
        done = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                              text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert run() == [0, 1]  # compiled and saved
    assert run() == [1, 0]  # loaded
    assert list((tmp_path / "spatialhash" / "_kernels").glob("cells.floor_to_int-*.nbi"))
