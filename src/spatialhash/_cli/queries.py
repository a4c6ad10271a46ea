"""``spatialhash pairs``, ``neighbors`` and ``knn``: point files in, result files out.

Each command reads its point files completely (and validates them) before it computes
anything, then streams the result to the output in chunks: pairs through `Grid.iter_pairs`,
radius and k-nearest queries in blocks of queries, so memory stays bounded by a chunk and a
progress bar can follow the work. Only the public API of spatialhash is used.

A chunk of pairs is never split below one cell of the grid, so points packed closer than
a cell (duplicates) can give a chunk larger than memory; running out of memory, there or
anywhere else, ends the command with a one-line message (naming the pairs of that cell
where numpy says how many they were) instead of a traceback.
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable, Iterator

import numpy as np

from ..grid import Grid
from . import dask_queries, readers, writers
from .common import (
    CommandError,
    add_command,
    allocation,
    out_of_memory,
    progress,
    size_text,
)

#: Most pairs held in memory at once while writing (one cell's pairs may be more).
PAIRS_CHUNK = 1 << 20
#: Queries per block of a radius or k-nearest query.
QUERY_BLOCK = 1 << 16
#: Most result slots (queries x k) in one block of a k-nearest query: a larger k gives
#: blocks of fewer queries, so a block's results stay near 64 MiB.
KNN_BLOCK_SLOTS = 1 << 22
#: The end of the message for a query command that ran out of memory.
MEMORY_REMEDY = "Ask for a smaller result (a smaller -r or -k, fewer queries), or free memory."

INDEX = np.dtype(np.int64)
DISTANCE = np.dtype(np.float64)


# ---------------------------------------------------------------------- option types
def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number; got {text!r}") from None


def distance(text: str) -> float:
    """A finite number >= 0 (``-r``)."""
    value = _number(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0; got {text!r}")
    return value


def distance_limit(text: str) -> float:
    """A number >= 0, ``inf`` allowed (``--r-max``)."""
    value = _number(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0 or inf; got {text!r}")
    return value


def count(text: str) -> int:
    """An integer >= 1 (``-k``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1; got {text!r}")
    return value


def column_names(text: str) -> list[str]:
    """Comma-separated column names (``--columns x,y,z``)."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(
            f"must be column names separated by commas; got {text!r}")
    return names


def box_lengths(text: str) -> float | list[float]:
    """One period for every axis, or one per axis separated by commas (``--box 1,1,2``)."""
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(
                f"must be a period > 0, or one per axis separated by commas; got {text!r}")
        values.append(value)
    return values[0] if len(values) == 1 else values


# ---------------------------------------------------------------------- parsers
def _files(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="INPUT",
                        help="points: a .npy, .csv or .parquet file (see `spatialhash --help`)")
    parser.add_argument("-o", "--output", required=True, metavar="OUTPUT",
                        help="result file: .npy (structured), .csv or .parquet; written "
                             "atomically, replaced if it exists; never an input file")


def _options(parser: argparse.ArgumentParser, queries: bool) -> None:
    parser.add_argument("--columns", type=column_names, metavar="NAMES",
                        help="coordinate columns of INPUT, e.g. x,y,z (default: every "
                             "numeric column; there must be 1 to 3)")
    if queries:
        parser.add_argument("--queries", metavar="FILE",
                            help="query points (default: the points of INPUT themselves, "
                                 "each of which then finds itself)")
        parser.add_argument("--query-columns", type=column_names, metavar="NAMES",
                            help="coordinate columns of --queries (default: --columns)")
    parser.add_argument("--box", type=box_lengths, metavar="L",
                        help="periodic box: one period for every axis, or one per axis "
                             "(L1,L2,L3); distances use the minimum image")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="threads (default: all cores; -1: all)")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar and no summary line")
    dask_queries.add_options(parser)


def _command(subparsers, name: str, handler: Callable, help: str,
             description: str) -> argparse.ArgumentParser:
    """A query command's parser with INPUT and OUTPUT; its own options come next, then
    `_shared`."""
    parser = add_command(subparsers, name, handler, help, description)
    _files(parser)
    return parser


def _shared(parser: argparse.ArgumentParser, queries: bool, distances: bool) -> None:
    """The options a query command shares with the others (``--distances`` where its rows
    can carry them)."""
    if distances:
        parser.add_argument("--distances", action="store_true", help="add a distance column")
    _options(parser, queries=queries)


def add_parsers(subparsers) -> None:
    """Add ``pairs``, ``neighbors`` and ``knn`` to the command line's ``subparsers``."""
    pairs = _command(
        subparsers, "pairs", run_pairs, "all pairs of points within a distance",
        "Every pair of points of INPUT within distance R (distance <= R), or whose spheres "
        "touch (distance <= radius_i + radius_j), written once each with i < j as rows i, "
        "j[, distance] (0-based row numbers of INPUT), in an order that is deterministic "
        "but unspecified.",
    )
    reach = pairs.add_mutually_exclusive_group(required=True)
    reach.add_argument("-r", type=distance, metavar="R", help="the distance")
    reach.add_argument("--radii-column", metavar="NAME",
                       help="column of INPUT with one radius per point")
    reach.add_argument("--radii", metavar="FILE",
                       help="file with one radius per point (one numeric column)")
    _shared(pairs, queries=False, distances=True)

    neighbors = _command(
        subparsers, "neighbors", run_neighbors, "the points within a distance of each query",
        "For each query point, every point of INPUT within distance R (distance <= R), "
        "written as rows query, point[, distance], sorted by query, then point.",
    )
    neighbors.add_argument("-r", type=distance, metavar="R", required=True,
                           help="the distance")
    _shared(neighbors, queries=True, distances=True)

    knn = _command(
        subparsers, "knn", run_knn, "the k nearest points of each query",
        "For each query point, its K nearest points of INPUT, written as rows query, rank, "
        "point, distance (rank 0 is the nearest; ties in distance go to the smaller "
        "index). A query with fewer than K points in reach (INPUT is small, or --r-max) "
        "has fewer rows.",
    )
    knn.add_argument("-k", type=count, metavar="K", required=True,
                     help="neighbours per query")
    knn.add_argument("--r-max", type=distance_limit, metavar="R",
                     help="only points within this distance count (default: no limit)")
    _shared(knn, queries=True, distances=False)


# ---------------------------------------------------------------------- commands
def _library(call: Callable, *args, **kwargs):
    """Call the library; its messages for values it rejects become the command's error."""
    try:
        return call(*args, **kwargs)
    except (ValueError, TypeError) as error:
        raise CommandError(str(error)) from error


def _summary(args: argparse.Namespace, n_rows: int, what: str) -> None:
    if not args.quiet:
        print(f"wrote {n_rows:,} {what} to {args.output}")


def _memory_bounded(command: Callable[[argparse.Namespace], int]):
    """Make a `MemoryError` in ``command`` its one-line error (status 2)."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except MemoryError as error:
            raise out_of_memory(error, MEMORY_REMEDY) from error

    return run


def _too_many_pairs(args: argparse.Namespace, error: MemoryError) -> CommandError | None:
    """The message for pairs of one cell that do not fit in memory, or None when ``error``
    does not show a chunk larger than `PAIRS_CHUNK` (it is then reported as any other)."""
    found = allocation(error)
    if found is None or not found[0] or found[0][0] <= PAIRS_CHUNK:
        return None
    shape, _, n_bytes = found
    if args.r is not None:
        reach, remedy = f"-r {args.r:g}", "a smaller -r"
    elif args.radii_column is not None:
        reach, remedy = f"--radii-column {args.radii_column}", "smaller radii"
    else:
        reach, remedy = f"--radii {args.radii}", "smaller radii"
    return CommandError(
        f"{reach} gives more pairs than memory holds: {shape[0]:,} pairs lie in one cell of "
        f"the grid and need {size_text(n_bytes)} at once (pairs are written in chunks, but "
        f"one cell's pairs are one chunk). Use {remedy}, or remove duplicate points."
    )


@_memory_bounded
def run_pairs(args: argparse.Namespace) -> int:
    """``spatialhash pairs``."""
    if args.dask is not None:
        return dask_queries.run(args, "pairs")
    writers.check_output(args.output)
    writers.check_not_an_input(args.output, {"INPUT": args.input, "--radii": args.radii})
    points, radii = readers.read_points(args.input, columns=args.columns,
                                        radii_column=args.radii_column, quiet=args.quiet)
    if args.radii is not None:
        radii = readers.read_radii(args.radii, points.shape[0], quiet=args.quiet)
    if radii is not None:
        reach = 2.0 * float(radii.max()) if radii.size else 0.0
    else:
        reach = args.r
    grid = _library(Grid, points, reach if reach > 0 else None, box=args.box,
                    n_threads=args.threads)
    chunks = _library(grid.iter_pairs, None if radii is not None else args.r, radii=radii,
                      chunk_size=PAIRS_CHUNK, return_distances=args.distances)
    fields = [("i", INDEX), ("j", INDEX)] + ([("distance", DISTANCE)] if args.distances
                                             else [])

    def columns() -> Iterator[list[np.ndarray]]:
        with progress(args.quiet, unit=" pairs", unit_scale=True, desc="pairs") as bar:
            for chunk in chunks:
                yield [chunk.indices[:, 0], chunk.indices[:, 1]] + (
                    [chunk.distances] if args.distances else [])
                bar.update(len(chunk))

    try:
        n_rows = writers.write_table(args.output, fields, columns(), args.prog)
    except MemoryError as error:
        too_many = _too_many_pairs(args, error)
        if too_many is None:
            raise
        raise too_many from error
    _summary(args, n_rows, "pairs")
    return 0


def _grid_and_queries(args: argparse.Namespace, cell_size: float | None):
    writers.check_output(args.output)
    writers.check_not_an_input(args.output, {"INPUT": args.input, "--queries": args.queries})
    points, _ = readers.read_points(args.input, columns=args.columns, quiet=args.quiet)
    if args.queries is None:
        queries = points
    else:
        own = args.query_columns is not None
        queries, _ = readers.read_points(
            args.queries, "--queries", quiet=args.quiet,
            columns=args.query_columns if own else args.columns,
            columns_option="--query-columns" if own else "--columns",
        )
        if queries.shape[1] != points.shape[1]:
            raise CommandError(
                f"{args.queries}: queries must have as many coordinate columns as INPUT "
                f"({points.shape[1]}); got {queries.shape[1]}."
            )
    grid = _library(Grid, points, cell_size, box=args.box, n_threads=args.threads)
    return grid, queries


def _blocks(args: argparse.Namespace, n_queries: int,
            block: int | None = None) -> Iterator[tuple[int, int]]:
    """(start, stop) of consecutive blocks of ``block`` queries (default `QUERY_BLOCK`),
    with a progress bar."""
    block = QUERY_BLOCK if block is None else block
    with progress(args.quiet, n_queries, unit=" queries", unit_scale=True,
                  desc="queries") as bar:
        for start in range(0, n_queries, block):
            stop = min(start + block, n_queries)
            yield start, stop
            bar.update(stop - start)


@_memory_bounded
def run_neighbors(args: argparse.Namespace) -> int:
    """``spatialhash neighbors``."""
    if args.dask is not None:
        return dask_queries.run(args, "neighbors")
    grid, queries = _grid_and_queries(args, args.r if args.r > 0 else None)
    # Checked once here, so the blocks below cannot fail half-way on a bad value.
    _library(grid.count_radius, queries[:1], args.r)
    fields = [("query", INDEX), ("point", INDEX)] + (
        [("distance", DISTANCE)] if args.distances else [])

    def columns() -> Iterator[list[np.ndarray]]:
        for start, stop in _blocks(args, queries.shape[0]):
            rows = grid.query_radius(queries[start:stop], args.r,
                                     return_distances=args.distances)
            query = start + np.repeat(np.arange(stop - start, dtype=INDEX), rows.counts)
            yield [query, rows.indices] + ([rows.distances] if args.distances else [])

    _summary(args, writers.write_table(args.output, fields, columns(), args.prog),
             "neighbours")
    return 0


@_memory_bounded
def run_knn(args: argparse.Namespace) -> int:
    """``spatialhash knn``."""
    if args.dask is not None:
        return dask_queries.run(args, "knn")
    grid, queries = _grid_and_queries(args, None)
    # A query has at most as many rows as INPUT has points (the help says so): a larger K
    # finds no more, so the search asks for no more than that, not for K slots a query
    # of which all but n would stay empty.
    k = min(args.k, max(grid.n_points, 1))
    _library(grid.query_knn, queries[:1], k, r_max=args.r_max)
    fields = [("query", INDEX), ("rank", INDEX), ("point", INDEX), ("distance", DISTANCE)]
    ranks = np.arange(k, dtype=INDEX)
    block = max(1, min(QUERY_BLOCK, KNN_BLOCK_SLOTS // k))

    def columns() -> Iterator[list[np.ndarray]]:
        for start, stop in _blocks(args, queries.shape[0], block):
            nearest = grid.query_knn(queries[start:stop], k, r_max=args.r_max)
            found = ranks[np.newaxis, :] < nearest.counts[:, np.newaxis]
            query = start + np.repeat(np.arange(stop - start, dtype=INDEX), nearest.counts)
            rank = np.broadcast_to(ranks, found.shape)[found]
            yield [query, rank, nearest.indices[found], nearest.distances[found]]

    _summary(args, writers.write_table(args.output, fields, columns(), args.prog),
             "neighbours")
    return 0
