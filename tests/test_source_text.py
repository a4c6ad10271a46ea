"""The package's comments and docstrings describe the code as it is, not a stopwatch.

A figure such as "4.7 us" or "about 2 s on an idle machine" in a comment is true of one
machine on one day and goes stale without a sign; comments and docstrings keep the reason
and the ratio ("a third of the scan's time", "5-11% faster"), and the measurements with
their machine and date live in ``docs/benchmarks.md``. Only comments and docstrings are
read: code (a constant named ``..._SECONDS``) and messages printed at run time are not.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "spatialhash"

#: A number, or a range of two, followed by a unit of time as a word of its own: "4.7 us",
#: "2-5 s", "2,057 us", "0.3ms" (micro with the micro sign or the Greek letter mu). A
#: number glued to letters before it ("float32s", "x2s") is not a figure.
TIME_FIGURE = re.compile(
    r"(?<![\w.])\d(?:[\d,.]*\d)?\s*(?:(?:-|to)\s*\d(?:[\d,.]*\d)?\s*)?"
    r"(?:ns|us|µs|μs|ms|s|secs?|seconds?|minutes?|mins?)\b")


def _comments(source: str) -> list[tuple[int, str]]:
    # Comments on consecutive lines are one text, as a figure may run from one to the next.
    blocks: list[tuple[int, str]] = []
    last = 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        line, text = token.start[0], token.string.lstrip("#:").strip()
        if blocks and line == last + 1:
            blocks[-1] = (blocks[-1][0], blocks[-1][1] + "\n" + text)
        else:
            blocks.append((line, text))
        last = line
    return blocks


def _docstrings(source: str) -> list[tuple[int, str]]:
    # Every string that stands alone as a statement: the docstrings of modules, classes and
    # functions, and those written under an attribute. A string passed or returned is code.
    return [(node.lineno, node.value.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)]


def time_figures(source: str) -> list[tuple[int, str]]:
    """The lines of ``source``'s comments and docstrings that quote a time, with the text.

    A line is the one where the figure starts (a figure may run on to the next line); a
    docstring's lines count from its opening line, so one continued with a backslash
    escape may be reported a line early, and the text names it.
    """
    hits = set()
    for start, text in _comments(source) + _docstrings(source):
        lines = text.split("\n")
        for match in TIME_FIGURE.finditer(text):
            offset = text.count("\n", 0, match.start())
            hits.add((start + offset, lines[offset].strip()))
    return sorted(hits)


def test_no_comment_or_docstring_quotes_a_time():
    hits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE.parents[1]).as_posix()
        hits += [f"{name}:{line}: {text}"
                 for line, text in time_figures(path.read_text(encoding="utf-8"))]
    assert not hits, (
        "comments and docstrings say what the code is and why; move measured times, with "
        "their machine and date, to docs/benchmarks.md and keep the ratio or the reason:\n"
        + "\n".join(hits))


def test_the_check_finds_a_time_in_a_comment_and_in_a_docstring():
    source = '''
def scan(points):
    """Scan the cells.

    One call takes 4.7 us on a warm cache.
    """
    total = 0  # inlined: the call cost about 2-5 s over a million cells
    # A figure split over two lines of comment: the copy took 0.45
    # ms a row.
    return total
'''
    assert time_figures(source) == [
        (5, "One call takes 4.7 us on a warm cache."),
        (7, "inlined: the call cost about 2-5 s over a million cells"),
        (8, "A figure split over two lines of comment: the copy took 0.45")]


def test_the_check_passes_ratios_reasons_and_code():
    source = '''
"""Module of 2 kernels, float32s and 3-D points."""

LOAD_SAMPLE_SECONDS = 0.5
MESSAGE = "compiling; this takes about 5 s the first time"


def scan(points):
    """A third of the scan's time; 5-11% faster than a call per cell."""
    return len(points) * 2  # inlined: a call costs a reference count per array per cell
'''
    assert time_figures(source) == []


def test_the_pattern_reads_units_as_words():
    for text in ("4.7 us", "0.3 ms", "2,057 us", "2-5 s", "12 to 15 ms", "3 seconds",
                 "1 minute", "5 min", "10ns", "7 µs", "7 μs", "2.5s"):
        assert TIME_FIGURE.search(text), text
    for text in ("3 sets", "2 sizes", "float32s", "10 steps", "x2 speedup", "5 misses",
                 "1e6 points", "n_threads=2 sharing"):
        assert not TIME_FIGURE.search(text), text
