"""
Benchmarks: time against the number of points
=============================================

How the time of each query family grows with the number of points, for spatialhash and
the peers that answer the same query: scipy's ``cKDTree``, vesin, freud and scikit-learn.
The points are uniform in the unit cube (3-D), ``r`` holds 30 expected neighbours, the
boxes 30 expected points, and radius, k-nearest, box and ray queries are as many as the
points. Each time is the median of several calls that build the index and answer the query;
every peer's answer was checked equal to ours before it was timed.

This example draws the figures of ``docs/_static/benchmarks/scaling.json``; it runs no
benchmark. The JSON comes from ``benchmarks/bench_scaling.py``, whose command line it
records with the machine, the versions and the date: rerun it to redraw the figure.
"""

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from scipy.spatial import cKDTree

from spatialhash import Grid

# sphinx-gallery runs an example in its own folder and defines no ``__file__``; a plain
# run may start from the repository root.
RUN = Path("docs", "_static", "benchmarks", "scaling.json")
start = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
path = next(folder / RUN for folder in (start, *start.parents) if (folder / RUN).is_file())
run = json.loads(path.read_text())

# %%
# Before anything is drawn: every peer's answer in the run agreed with ours (the
# benchmark compares them before it times them), every family has our time at every size,
# and, as a reminder of what "agreed" means, the same calls on 2,000 points agree here with
# ``cKDTree``: the pairs within ``r``, the counts within ``r`` and the 16 nearest.

rows = run["rows"]
families = run["settings"]["families"]
sizes = run["settings"]["sizes"]
assert all(row["check_ok"] for row in rows if "check_ok" in row)
for family in families:
    timed = [row["n"] for row in rows if row["family"] == family
             and row["library"] == "spatialhash" and row["status"] == "timed"]
    assert timed == sizes, (family, timed)

rng = np.random.default_rng(0)
points, queries = rng.random((2000, 3)), rng.random((2000, 3))
r = (3 * 30 / (4 * np.pi * 2000)) ** (1 / 3)
grid, tree = Grid(points, cell_size=r), cKDTree(points)
ours, theirs = grid.query_pairs(r).indices, tree.query_pairs(r, output_type="ndarray")
assert np.array_equal(ours[np.lexsort(ours.T[::-1])], theirs[np.lexsort(theirs.T[::-1])])
assert np.array_equal(grid.count_radius(queries, r),
                      tree.query_ball_point(queries, r, return_length=True))
assert np.allclose(grid.query_knn(queries, 16).distances, tree.query(queries, k=16)[0])

# %%
# The machine, the versions and the date of the run, as the JSON records them. The load
# average says how busy the machine was with other work; on a shared machine the times
# move from run to run by tens of percent. Compare the curves of one run with each other.

machine, versions = run["machine"], run["versions"]
peers = ", ".join(f"{name} {versions[name]}" for name in ("scipy", "vesin", "freud", "sklearn")
                  if versions.get(name))
print(f"{machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB; load "
      f"average (1, 5, 15 min) {machine['load_average_before']} before the run, "
      f"{machine['load_average_after']} after")
print(f"Python {versions['python']}, numpy {versions['numpy']}, numba {versions['numba']} "
      f"({run['numba_threads']} threads), spatialhash {versions['spatialhash']} "
      f"({run['spatialhash_source']['commit'][:7]}); {peers}")
print(f"{run['date']}: {run['command']}")
for row in rows:
    if row["status"].startswith("skipped"):
        print(f"{row['library']} at n = {row['n']:,} ({row['family']}): {row['status']}")

# %%
# One panel per query family, log-log. The dotted line grows in proportion to ``n``,
# through our time at the smallest size: a curve parallel to it grows linearly. The title
# gives the range of the one-minute load average at the start of each size.

styles = {"spatialhash": ("black", "o"), "cKDTree": ("tab:orange", "s"),
          "vesin": ("tab:green", "^"), "freud": ("tab:red", "v"),
          "scikit-learn": ("tab:purple", "D")}
fig, axes = plt.subplots(2, 3, figsize=(12, 7.5), sharex=True, layout="constrained")
for ax, family in zip(axes.flat, families, strict=False):
    for library, (colour, marker) in styles.items():
        timed = sorted((row["n"], row["seconds"]) for row in rows
                       if row["family"] == family and row["library"] == library
                       and row["status"] == "timed")
        if timed:
            n, seconds = np.array(timed).T
            ax.loglog(n, seconds, color=colour, marker=marker, markersize=4,
                      linewidth=2.5 if library == "spatialhash" else 1.2, label=library)
            if library == "spatialhash":
                ax.loglog(n, seconds[0] * n / n[0], color="gray", linestyle=":",
                          linewidth=1, label="in proportion to n")
    reasons = {row["status"].removeprefix("not applicable: ") for row in rows
               if row["family"] == family and row["status"].startswith("not applicable")}
    if len(reasons) == 1 and all(row["library"] == "spatialhash" for row in rows
                                 if row["family"] == family and row["status"] == "timed"):
        ax.text(0.95, 0.05, f"no peer: {reasons.pop()}", transform=ax.transAxes,
                ha="right", fontsize=9, color="gray")
    ax.yaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_title(run["titles"][family])
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
for ax in axes[1]:
    ax.set_xlabel("points n (and as many queries)")
for ax in axes[:, 0]:
    ax.set_ylabel("seconds, build + query")
for ax in axes.flat[len(families):]:
    ax.set_visible(False)
loads = [size["load_average_before"][0] for size in run["loads"]]
fig.suptitle(f"{machine['cpu']}, {machine['cores']} cores (shared, load average "
             f"{min(loads):g}-{max(loads):g}); "
             f"numba {versions['numba']}, numpy {versions['numpy']}; {run['date'][:10]}",
             fontsize=10)
plt.show()

# %%
# At the largest size, how many times longer each peer took than spatialhash (peer time
# over ours):

largest = max(sizes)
ours = {row["family"]: row["seconds"] for row in rows
        if row["n"] == largest and row["library"] == "spatialhash"}
for family in families:
    ratios = [f"{row['library']} {row['seconds'] / ours[family]:.1f}x" for row in rows
              if row["n"] == largest and row["family"] == family
              and row["library"] != "spatialhash" and row["status"] == "timed"]
    print(f"{family:13s} n = {largest:,}: " + (", ".join(ratios) or "no peer"))
