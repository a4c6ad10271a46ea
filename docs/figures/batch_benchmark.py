"""Draw the batch benchmark's table of docs/benchmarks.md as docs/figures/batch_benchmark.png.

The numbers are read from the page itself, the table under "Batch queries, a million
points" (written from a run of ``./dev bench --repeat 3``), so the figure and the table
cannot disagree: after a new run, paste its table into the page and run, from the
repository root (needs matplotlib: the docs extra),

    python docs/figures/batch_benchmark.py

A peer's time is its ratio times ours, as the table gives it; a blank or "skipped" cell
is a bar left out.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)
from matplotlib.ticker import FuncFormatter  # noqa: E402

HERE = Path(__file__).resolve().parent
PAGE = HERE.parent / "benchmarks.md"
OUTPUT = HERE / "batch_benchmark.png"
SECTION = "## Batch queries, a million points"
#: The workloads drawn: the million-point rows of the README's table.
WORKLOADS = ["all pairs, 3-D", "all pairs, 2-D", "all pairs, 3-D periodic",
             "all pairs, clustered (216 M pairs)", "radius, CSR", "16 nearest"]
COLORS = {"spatialhash": "#1f5fa8", "cKDTree": "#e08a2c", "vesin": "#4a9c5d",
          "freud": "#b04a8f", "scikit-learn": "#8c8c8c"}


def read_table(page: Path) -> dict[str, dict[str, float]]:
    """Workload -> contender -> seconds, from the first table after ``SECTION``."""
    text = page.read_text(encoding="utf-8")
    lines = text[text.index(SECTION):].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    times: dict[str, dict[str, float]] = {}
    for row in rows[2:]:
        cells = dict(zip(header, (cell.strip() for cell in row.strip("|").split("|")),
                         strict=True))
        ours = float(cells["spatialhash (s)"])
        found = {"spatialhash": ours, "cKDTree": float(cells["cKDTree (s)"])}
        for peer in ("vesin", "freud", "scikit-learn"):
            ratio = re.fullmatch(r"([0-9.]+)x", cells[f"{peer} ratio"])
            if ratio:
                found[peer] = ours * float(ratio.group(1))
        times[cells["workload"]] = found
    return times


def main() -> None:
    times = read_table(PAGE)
    figure, axes = plt.subplots(figsize=(8, 5), layout="constrained")
    height = 0.8 / len(COLORS)
    labelled = set()
    for w, workload in enumerate(WORKLOADS):
        for c, (contender, color) in enumerate(COLORS.items()):
            seconds = times[workload].get(contender)
            if seconds is None:
                continue
            y = w + (c - (len(COLORS) - 1) / 2) * height
            axes.barh(y, seconds, height=height, color=color,
                      label=None if contender in labelled else contender)
            labelled.add(contender)
    figure.legend(loc="outside lower center", ncol=len(COLORS), fontsize=9, frameon=False)
    axes.set_xscale("log")
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axes.set_yticks(range(len(WORKLOADS)), WORKLOADS)
    axes.invert_yaxis()
    axes.set_xlabel("seconds, index build and query (log scale; shorter is faster)")
    axes.set_title("A million uniform random points, 2 cores: spatialhash and its peers",
                   fontsize=11)
    axes.grid(axis="x", which="major", alpha=0.3)
    figure.savefig(OUTPUT, dpi=110)
    print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()
