"""The Dask engine's queries: pairs, radius and k-nearest queries over point sets larger
than one machine, with the same answers as `Grid`.

The path of a query: open the point sets (`_sources`), survey them in one pass (lengths,
a sample, the largest radius), plan the tiles (`_plan`), tag every row with its tiles,
group the rows by tile with a range shuffle (``set_index("tile", divisions=...)``, which
puts tile ``t`` in partition ``t``), run the CPU engine on each tile (`_tiles`), and
either gather every tile's rows to the client as a ``pandas.DataFrame`` (`_collect`) or
stream them into a Parquet file of a dataset written all or nothing (`_output`).

Every query takes its point sets and its own parameters (``r``, ``k``, columns, box) as
arguments, and where its rows go (`Output`) and how the work is cut and run (`Plan`) as
two objects, checked before any data is read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import as_box, as_count, as_positive_scalar, check_periodic_reach
from . import _cluster
from ._collect import USE_OUTPUT, compute, concatenated, gather, limits_of, tile_frame
from ._options import Output, Plan
from ._output import DatasetCommit, Written, write_tile_file
from ._plan import TilePlan, plan_tiles, survey
from ._sources import Source, open_source
from ._tiles import (
    DISTANCE_COLUMN,
    PAIR_COLUMNS,
    POINT,
    QUERY,
    RADIUS_COLUMNS,
    Geometry,
    tag_block,
    tagged_meta,
    tile_neighbors,
    tile_pairs,
)

INDEX = np.dtype(np.int64)
DISTANCE = np.dtype(np.float64)
#: Queries a tile's radius search answers at once.
QUERY_BLOCK = 1 << 16
#: Rows of a chunk of pairs a tile makes at once for a result returned in memory.
ROWS_PER_CHUNK = 1 << 20


@dataclass
class Run:
    """What one query carries from its start to its rows: its `Plan`, its `Output` (None
    for rows in memory), the distributed client (None on the local schedulers) and the
    seconds of its stages."""

    plan: Plan
    output: Output | None
    client: object = None
    seconds: dict[str, float] = field(default_factory=dict)


def start(plan, output) -> Run:
    """Check ``plan`` and ``output`` (an existing output is refused here, before any data
    is read) and find the cluster."""
    run = Run(Plan.of(plan), Output.of(output))
    if run.output is not None:
        run.output.check()
    run.client = _cluster.current_client()
    return run


def _geometry(source: Source, box, periodic) -> tuple[Geometry, np.ndarray, np.ndarray]:
    box3, periodic3 = as_box(box, periodic, source.n_dims)
    geometry = Geometry(source.n_dims, None if box is None else box,
                        None if box is None else periodic)
    return geometry, np.where(periodic3, box3, np.inf), periodic3


def open_with_queries(points, queries, columns, query_columns, id_column,
                      query_id_column) -> tuple[Source, Source]:
    """The points and queries of a radius or k-nearest query, checked against each
    other."""
    source = open_source(points, "points", columns=columns, id_column=id_column)
    targets = open_source(queries, "queries", columns=query_columns,
                          id_column=query_id_column)
    if targets.n_dims != source.n_dims:
        raise ValueError(f"`queries` must have {source.n_dims} coordinates like `points`; "
                         f"got {targets.n_dims}.")
    if (id_column is None) != (query_id_column is None):
        raise TypeError("give both `id_column` and `query_id_column`, or neither.")
    return source, targets


def plan_run(run: Run, sources: list[Source], box3: np.ndarray,
             reach: Callable) -> tuple[TilePlan, list]:
    """Survey the sources and cut the tiles from the sample of the first (the points);
    ``reach(survey)`` gives the search's reach from the points' survey."""
    _cluster.prepare(run.client)
    started = time.perf_counter()
    surveys = [survey(source) for source in sources]
    rows_per_tile = run.plan.rows_per_tile
    if rows_per_tile is None:
        budget = (_cluster.memory_per_worker(run.client) if run.plan.memory_per_worker is None
                  else run.plan.memory_per_worker)
        # Enough tiles to keep every thread busy, each within the memory budget.
        balanced = surveys[0].n_rows / (_cluster.TILES_PER_THREAD
                                        * _cluster.total_threads(run.client))
        rows_per_tile = min(_cluster.rows_per_tile(budget),
                            max(_cluster.MIN_TILE_ROWS, int(balanced)))
    points = surveys[0]
    plan = plan_tiles(points.sample, points.weights, box3, rows_per_tile, reach(points))
    run.seconds["survey+plan"] = time.perf_counter() - started
    return plan, surveys


def by_tile(parts: list[tuple[Source, object, float | None, int]], plan: TilePlan,
            n_dims: int, radii: bool, ids: bool):
    """Tag every block and group the rows by tile: partition ``t`` holds tile ``t``.

    ``parts`` lists (source, survey, margin, kind): points with their margin, queries
    with None (home tile only).
    """
    import dask.dataframe as dd
    from dask import delayed

    tag = delayed(tag_block, pure=True)
    blocks = []
    for source, info, margin, kind in parts:
        blocks += [tag(part, int(offset), plan, margin, kind)
                   for part, offset in zip(source.parts, info.offsets, strict=True)]
    meta = tagged_meta(n_dims, radii, ids)
    frame = dd.from_delayed(blocks, meta=meta, verify_meta=False)
    divisions = list(range(plan.n_tiles + 1))
    return frame.set_index("tile", divisions=divisions, sort=True)


def _rows(run: Run, tiles, produce: Callable, columns: dict[str, np.dtype],
          parameters: dict, sort_rows: int | None = None):
    """The rows ``produce(frame)`` makes of every tile (column chunks): gathered to the
    client as a DataFrame, or written to ``run.output`` as the tiles run. With
    ``sort_rows`` (the points' count), ordered by the first two columns over all tiles
    first."""
    import dask.dataframe as dd
    from dask import delayed

    names, dtypes = list(columns), list(columns.values())
    if run.output is not None and sort_rows is None:
        return write(run, tiles.to_delayed(), produce, columns, parameters)
    remedy = (USE_OUTPUT if run.output is None and sort_rows is None
              else f"{USE_OUTPUT} (without `sort`)" if run.output is None
              else "Without `sort` the tiles write their rows as they run")
    limits = limits_of(run.plan, run.client, run.output is None, remedy,
                       "to be returned in memory" if sort_rows is None else "to be sorted")

    def rows_of(frame: pd.DataFrame, tile: int) -> pd.DataFrame:
        return tile_frame(produce(frame), names, dtypes, tile, limits)

    make = delayed(rows_of, pure=True)
    parts = [make(frame, tile) for tile, frame in enumerate(tiles.to_delayed())]
    meta = pd.DataFrame({name: np.zeros(0, dtype) for name, dtype in columns.items()})
    if sort_rows is not None:
        frame = dd.from_delayed(parts, meta=meta, verify_meta=False)
        parts = _sorted_by_rows(frame, names[0], names[1], sort_rows, len(parts)).to_delayed()
        if run.output is not None:
            return write(run, parts, _whole_frame(names), columns, parameters)
    frames, _ = gather(parts, limits, run.plan.progress)
    return concatenated(frames, meta)


def write(run: Run, parts: list, produce: Callable, columns: dict[str, np.dtype],
          parameters: dict) -> Written:
    """Stream ``produce(part)`` of every part into a file of ``run.output``'s dataset."""
    from dask import delayed

    output = run.output
    names, dtypes = list(columns), list(columns.values())

    def tile_file(frame: pd.DataFrame, tile: int, directory: str):
        written = write_tile_file(directory, tile, names, dtypes, produce(frame),
                                  output.row_group_rows)
        return (*written, len(frame))

    seconds = run.seconds
    started = time.perf_counter()
    with DatasetCommit(output) as target:
        task = delayed(tile_file, pure=True)
        results = compute([task(frame, tile, target.directory)
                           for tile, frame in enumerate(parts)], run.plan.progress)
        seconds["search"] = time.perf_counter() - started
        started = time.perf_counter()
        files, rows = [r[0] for r in results], [r[1] for r in results]
        seconds["tiles computing"] = sum(r[2] for r in results)
        seconds["tiles writing"] = sum(r[3] for r in results)
        target.commit(files, rows, parameters)
        seconds["commit"] = time.perf_counter() - started
    return Written(target.output, files, int(sum(rows)), parameters["n_tiles"], seconds,
                   [r[4] for r in results])


def _sorted_by_rows(frame, first: str, second: str, n_rows: int, n_parts: int):
    """``frame`` ordered by ``(first, second)`` over all partitions: a range shuffle on
    ``first`` (global row numbers in ``[0, n_rows)``), then a sort within each part."""
    bounds = np.unique(np.linspace(0, max(n_rows, 1), max(n_parts, 1) + 1).astype(np.int64))
    columns = list(frame.columns)

    def in_order(part: pd.DataFrame) -> pd.DataFrame:
        part = part.reset_index(drop=True)[columns]
        return part.sort_values([first, second], kind="stable").reset_index(drop=True)

    ranged = frame.set_index(first, divisions=bounds.tolist(), sort=True, drop=False)
    return ranged.map_partitions(in_order, meta=frame._meta, align_dataframes=False)


def _whole_frame(names: list[str]):
    """``produce`` for a partition that is already the rows: one chunk of its columns."""

    def produce(frame: pd.DataFrame):
        if len(frame):
            yield [frame[name].to_numpy() for name in names]

    return produce


def _columns(first: tuple[str, str], return_distances: bool) -> dict[str, np.dtype]:
    return {first[0]: INDEX, first[1]: INDEX,
            **({DISTANCE_COLUMN: DISTANCE} if return_distances else {})}


def query_pairs(points, r: float | None = None, *, radii_column: str | None = None,
                columns=None, id_column: str | None = None, box=None, periodic=None,
                return_distances: bool = False, sort: bool = False,
                output: Output | str | None = None, plan: Plan | None = None):
    """Every pair of points within ``r``, on Dask: the pairs of `Grid.query_pairs`.

    Parameters
    ----------
    points : str, path, list of them, ndarray, pandas or dask DataFrame, or dask array
        A Parquet dataset (a file, a directory of ``*.parquet`` files, a glob, or a list of
        these), a table (pandas or dask DataFrame), or an array of shape (n, d) (NumPy or
        dask).
    r : float, optional
        Distance: pairs with ``distance <= r``. Give ``r`` or ``radii_column``.
    radii_column : str, optional
        A column of per-point radii (tables only): pairs with ``distance <= radii[i] +
        radii[j]``.
    columns : list of str or str, optional
        The coordinate columns (1 to 3; a comma-separated string works); default every
        numeric column but the radius and id columns.
    id_column : str, optional
        An integer column whose values name the points in the output instead of their
        global row numbers (row order of the files, then of row groups, then of rows).
    box, periodic
        As in `Grid`: periods of the axes and which are periodic.
    return_distances : bool, default False
        Add a column ``distance``, the distance of each pair.
    sort : bool, default False
        Order the pairs by ``(i, j)`` over the whole result: the rows (and the files of a
        written dataset, in name order) are then ``Grid.query_pairs(r).sorted()``, row
        for row. Costs a shuffle of the pairs; not with ``id_column``.
    output : Output or str or path, optional
        Write the pairs as a Parquet dataset (one file per tile, as the tiles run) and
        return a `Written` summary; a path stands for ``Output(path)``. Without it, the
        pairs are gathered to the client.
    plan : Plan, optional
        How the work is cut and run: memory per worker, rows per tile, the most bytes the
        rows may take in memory, a progress bar. Default ``Plan()``.

    Returns
    -------
    pandas.DataFrame or Written
        Columns ``i, j`` (int64, ``i < j`` in global row numbers) and ``distance``
        (float64) with ``return_distances``, as ``spatialhash pairs`` writes them. The
        same pairs as ``Grid(points).query_pairs(r)``, each once, computed the same way
        (the distances equal bit for bit); grouped by tile, in a fixed order for a given
        input, ``r`` and plan.

    Raises
    ------
    ResultTooLargeError
        Without ``output``, when the pairs of one tile outgrow its share of a worker's
        memory, or all the pairs outgrow ``plan.max_result_bytes``.

    Notes
    -----
    The data are read twice: once to sample them and plan the tiles, once to search.
    Tiles are rectangles of about equal numbers of points; each gets the points within
    the reach of its rectangle as ghosts, and a pair is kept only in the home tile of its
    lower index. Without ``output`` each tile's pairs travel to the client as the tile
    finishes, and are concatenated there, never on a worker. The output directory must be
    reachable by every worker (a shared file system on a cluster of several machines).
    """
    run = start(plan, output)
    source = open_source(points, "points", columns=columns, radii_column=radii_column,
                         id_column=id_column)
    if (r is None) == (radii_column is None):
        raise TypeError("give exactly one of `r` and `radii_column`.")
    if r is not None:
        r = as_positive_scalar(r, "r", allow_zero=True)
    if sort and id_column is not None:
        raise TypeError("`sort` orders pairs by global row numbers: not with `id_column`.")
    geometry, box3, periodic3 = _geometry(source, box, periodic)

    def reach_of(info) -> float:
        return r if r is not None else 2.0 * info.max_radius

    tiles_plan, (info,) = plan_run(run, [source], box3, reach_of)
    reach = reach_of(info)
    if r is not None:
        check_periodic_reach(box3, periodic3, r, "r", r)
    else:  # named as `Grid` names it
        check_periodic_reach(box3, periodic3, reach, "radii", f"2 * max(radii) = {reach}")
    tiles = by_tile([(source, info, tiles_plan.margin(reach), POINT)], tiles_plan,
                    source.n_dims, radii_column is not None, id_column is not None)
    chunk_rows = ROWS_PER_CHUNK if run.output is None else run.output.row_group_rows

    def produce(frame):
        return tile_pairs(frame, geometry, r, return_distances, chunk_rows,
                          _cluster.tile_threads())

    parameters = {"query": "pairs", "r": r, "radii_column": radii_column, "sort": sort,
                  "n_points": info.n_rows, "n_tiles": tiles_plan.n_tiles,
                  "box": None if box is None else np.broadcast_to(box, source.n_dims).tolist()}
    return _rows(run, tiles, produce, _columns(PAIR_COLUMNS, return_distances), parameters,
                 info.n_rows if sort else None)


def query_radius(points, queries, r: float, *, columns=None, query_columns=None,
                 id_column: str | None = None, query_id_column: str | None = None, box=None,
                 periodic=None, return_distances: bool = False,
                 output: Output | str | None = None, plan: Plan | None = None):
    """For every query point, every point within ``r``, on Dask: the rows of
    `Grid.query_radius`.

    Parameters
    ----------
    points, queries
        Point sets as ``points`` of `query_pairs` (the same kind or not): queries held
        in memory (a NumPy array of shape (m, d), a pandas DataFrame) work as well as a
        Parquet dataset.
    r : float
        Radius; ``distance <= r`` is a match.
    columns, query_columns, id_column, query_id_column
        Coordinate and id columns of each set, as in `query_pairs`.
    box, periodic, return_distances, output, plan
        As in `query_pairs`.

    Returns
    -------
    pandas.DataFrame or Written
        Columns ``query, point`` (int64 global row numbers, or ids) and ``distance``
        (float64) with ``return_distances``, as ``spatialhash neighbors`` writes them;
        within a tile by query, then by point. The rows of
        ``Grid(points).query_radius(queries, r)``.

    Raises
    ------
    ResultTooLargeError
        As in `query_pairs`.
    """
    run = start(plan, output)
    source, targets = open_with_queries(points, queries, columns, query_columns, id_column,
                                        query_id_column)
    r = as_positive_scalar(r, "r", allow_zero=True)
    geometry, box3, periodic3 = _geometry(source, box, periodic)
    check_periodic_reach(box3, periodic3, r, "r", r)
    tiles_plan, (info, query_info) = plan_run(run, [source, targets], box3, lambda info: r)
    tiles = by_tile([(source, info, tiles_plan.margin(r), POINT),
                     (targets, query_info, None, QUERY)], tiles_plan, source.n_dims,
                    False, id_column is not None)

    def produce(frame):
        return tile_neighbors(frame, geometry, r, return_distances, QUERY_BLOCK,
                              _cluster.tile_threads())

    parameters = {"query": "radius", "r": r, "n_points": info.n_rows,
                  "n_queries": query_info.n_rows, "n_tiles": tiles_plan.n_tiles}
    return _rows(run, tiles, produce, _columns(RADIUS_COLUMNS, return_distances),
                 parameters)


def query_knn(points, queries, k: int, *, r_max: float | None = None, columns=None,
              query_columns=None, id_column: str | None = None,
              query_id_column: str | None = None, box=None, periodic=None,
              output: Output | str | None = None, plan: Plan | None = None):
    """The ``k`` nearest points of every query point, exact, on Dask: the answers of
    `Grid.query_knn`.

    Parameters
    ----------
    points, queries
        Point sets as in `query_radius`.
    k : int
        Neighbours wanted per query, >= 1.
    r_max : float, optional
        Only points within ``r_max`` count (default: no limit).
    columns, query_columns, id_column, query_id_column, box, periodic, output, plan
        As in `query_radius`.

    Returns
    -------
    pandas.DataFrame or Written
        Columns ``query, rank, point, distance``, as ``spatialhash knn`` writes them: for
        each query its neighbours nearest first (rank 0, 1, ...), ties broken by the
        smaller index; a query with fewer than ``k`` points within ``r_max`` (or fewer
        than ``k`` points in all) has fewer rows. Rows of one query are contiguous;
        queries come grouped by tile, then the queries of the second round (see Notes).

    Raises
    ------
    ResultTooLargeError
        As in `query_pairs`.

    Notes
    -----
    Two rounds (``spatialhash/dask/_knn.py``): tiles with a halo answer most queries;
    those whose k-th neighbour may lie beyond their tile's halo are sent, with their
    k-th distance as a bound, to every tile within that bound, and the candidates merged.
    """
    from . import _knn

    run = start(plan, output)
    source, targets = open_with_queries(points, queries, columns, query_columns, id_column,
                                        query_id_column)
    k = as_count(k, "k")
    r_max = np.inf if r_max is None else as_positive_scalar(r_max, "r_max", allow_zero=True,
                                                            allow_inf=True)
    geometry, box3, periodic3 = _geometry(source, box, periodic)

    def halo_of(info) -> float:
        halo = min(_knn.HALO_FACTOR * _knn.expected_kth_distance(info, source.n_dims, box3,
                                                                 k), r_max)
        return min(halo, float(box3[periodic3].min()) / 2) if periodic3.any() else halo

    tiles_plan, (info, query_info) = plan_run(run, [source, targets], box3, halo_of)
    halo = halo_of(info)
    tiles = by_tile([(source, info, tiles_plan.margin(halo), POINT),
                     (targets, query_info, None, QUERY)], tiles_plan, source.n_dims, False,
                    id_column is not None)
    query = _knn.KnnTiles(tiles_plan, geometry, k, r_max, halo, id_column is not None)
    if run.output is None:
        limits = limits_of(run.plan, run.client, True)
        return _knn.in_memory(tiles.to_delayed(), query, (source, info), limits,
                              run.plan.progress)
    parameters = {"query": "knn", "k": k, "r_max": None if np.isinf(r_max) else r_max,
                  "n_points": info.n_rows, "n_queries": query_info.n_rows,
                  "n_tiles": tiles_plan.n_tiles}
    return _knn.written(tiles.to_delayed(), query, (source, info), run, parameters)
