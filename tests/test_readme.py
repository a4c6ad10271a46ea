"""The README's Python examples run as written (they are the first code a user copies)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    namespace = {"np": np}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    assert len(namespace["pairs"]) > 0
    assert len(namespace["world"]) == 1002
    assert (namespace["first"].indices >= -1).all()
