"""The Python examples of the README and of every page under ``docs/`` run as written.

They are the first code a user copies. The ```python blocks of one file run in order in one
namespace, as a reader pastes them one after the other; each file starts afresh, so a page's
examples import what they use.
"""

from __future__ import annotations

import linecache
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)


def _check_readme(namespace: dict) -> None:
    assert len(namespace["pairs"]) > 0
    assert len(namespace["contacts"]) > 0
    assert len(namespace["world"]) == 2
    assert len(namespace["touching"]) == 1


def _check_semantics(namespace: dict) -> None:
    assert len(namespace["pairs"]) > 0
    assert len(namespace["world"]) == 1002
    assert (namespace["first"].indices >= -1).all()


#: What each page's examples must leave behind, beyond running without an error.
CHECKS = {"README.md": _check_readme, "docs/semantics.md": _check_semantics}


@pytest.mark.parametrize(
    "page", [page for page in PAGES if _python_blocks(page)],
    ids=lambda page: page.relative_to(ROOT).as_posix())
def test_python_examples_run(page: Path):
    namespace: dict = {"__name__": "__main__"}
    for number, block in enumerate(_python_blocks(page)):
        # Under a name of its own in `linecache`, where code that reads its source finds
        # it (Warp's `@wp.func` compiles a function from its source).
        name = f"<{page.relative_to(ROOT).as_posix()}, example {number + 1}>"
        linecache.cache[name] = (len(block), None, block.splitlines(True), name)
        exec(compile(block, name, "exec"), namespace)  # noqa: S102 (the examples under test)
    check = CHECKS.get(page.relative_to(ROOT).as_posix())
    if check is not None:
        check(namespace)


def test_every_checked_page_has_examples():
    # A check whose page lost its examples (or was renamed) would pass silently.
    for name in CHECKS:
        assert _python_blocks(ROOT / name), f"{name} has no ```python blocks"
