"""The Dask engine's queries: pairs and radius queries over point sets larger than one
machine, with the same answers as `Grid`.

The path of a query: open the point sets (`_sources`), survey them in one pass (lengths,
a sample, the largest radius), plan the tiles (`_plan`), tag every row with its tiles,
group the rows by tile with a range shuffle (``set_index("tile", divisions=...)``, which
puts tile ``t`` in partition ``t``), run the CPU engine on each tile (`_tiles`), and
either return the rows as a lazy ``dask.dataframe`` or stream each tile's rows into a
Parquet file of a dataset written all or nothing (`_output`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

from .._validation import as_box, as_count, as_positive_scalar, check_periodic_reach
from . import _cluster
from ._output import ROW_GROUP_ROWS, DatasetCommit, Written, write_tile_file
from ._plan import TilePlan, plan_tiles, survey
from ._sources import Source, open_source
from ._tiles import (
    DISTANCE_COLUMN,
    KNN_COLUMNS,
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


def _geometry(source: Source, box, periodic) -> tuple[Geometry, np.ndarray, np.ndarray]:
    box3, periodic3 = as_box(box, periodic, source.n_dims)
    geometry = Geometry(source.n_dims, None if box is None else box,
                        None if box is None else periodic)
    return geometry, np.where(periodic3, box3, np.inf), periodic3


def _plan(sources: list[Source], box3: np.ndarray, memory, rows_per_tile, client,
          reach) -> tuple[TilePlan, list]:
    """Survey the sources and cut the tiles from the sample of the first (the points);
    ``reach(survey)`` gives the search's reach from the points' survey."""
    surveys = [survey(source) for source in sources]
    if rows_per_tile is None:
        budget = (_cluster.memory_per_worker(client) if memory is None
                  else as_count(memory, "memory_per_worker"))
        # Enough tiles to keep every thread busy, each within the memory budget.
        balanced = surveys[0].n_rows / (_cluster.TILES_PER_THREAD
                                        * _cluster.total_threads(client))
        rows_per_tile = min(_cluster.rows_per_tile(budget),
                            max(_cluster.MIN_TILE_ROWS, int(balanced)))
    else:
        rows_per_tile = as_count(rows_per_tile, "rows_per_tile")
    points = surveys[0]
    return plan_tiles(points.sample, points.weights, box3, rows_per_tile,
                      reach(points)), surveys


def _by_tile(parts: list[tuple[Source, object, float | None, int]], plan: TilePlan,
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


def _frames(tiles, produce: Callable[[pd.DataFrame], Iterator[list[np.ndarray]]],
            names: list[str], dtypes: list[np.dtype]):
    """The rows of every tile as a lazy dask DataFrame."""
    meta = pd.DataFrame({n: np.zeros(0, t) for n, t in zip(names, dtypes, strict=True)})

    def tile_frame(frame: pd.DataFrame) -> pd.DataFrame:
        chunks = list(produce(frame))
        if not chunks:
            return meta.copy()
        return pd.DataFrame({name: np.concatenate([c[k] for c in chunks])
                             for k, name in enumerate(names)})

    return tiles.map_partitions(tile_frame, meta=meta, align_dataframes=False)


def _write(tiles, produce, names, dtypes, output, overwrite: bool, row_group_rows: int,
           parameters: dict, n_tiles: int, seconds: dict, progress: bool) -> Written:
    from dask import delayed

    def tile_file(frame: pd.DataFrame, tile: int, directory: str):
        written = write_tile_file(directory, tile, names, dtypes, produce(frame),
                                  row_group_rows)
        return (*written, len(frame))

    started = time.perf_counter()
    with DatasetCommit(output, overwrite) as target:
        write = delayed(tile_file, pure=True)
        tasks = [write(frame, tile, target.directory)
                 for tile, frame in enumerate(tiles.to_delayed())]
        results = _compute(tasks, progress)
        seconds["search"] = time.perf_counter() - started
        started = time.perf_counter()
        files, rows = [r[0] for r in results], [r[1] for r in results]
        seconds["tiles computing"] = sum(r[2] for r in results)
        seconds["tiles writing"] = sum(r[3] for r in results)
        target.commit(files, rows, parameters)
        seconds["commit"] = time.perf_counter() - started
    return Written(target.output, files, int(sum(rows)), n_tiles, seconds,
                   [r[4] for r in results])


def _compute(tasks: list, progress: bool) -> list:
    """Compute ``tasks`` on the current scheduler, with Dask's progress bar if asked."""
    import dask

    client = _cluster.current_client()
    if client is not None:
        futures = client.compute(tasks)
        if progress:
            from distributed import progress as bar
            bar(futures)
        return client.gather(futures)
    if progress:
        from dask.diagnostics import ProgressBar
        with ProgressBar():
            return list(dask.compute(*tasks))
    return list(dask.compute(*tasks))


def query_pairs(points, r: float | None = None, *, radii_column: str | None = None,
                columns=None, id_column: str | None = None, box=None, periodic=None,
                return_distances: bool = False, sort: bool = False, output=None,
                overwrite: bool = False, memory_per_worker: int | None = None,
                rows_per_tile: int | None = None, row_group_rows: int = ROW_GROUP_ROWS,
                progress: bool = False):
    """Every pair of points within ``r``, on Dask: the pairs of `Grid.query_pairs`.

    Parameters
    ----------
    points : str, path, list of them, dask.dataframe.DataFrame or dask.array.Array
        A Parquet dataset (a file, a directory of ``*.parquet`` files, a glob, or a list of
        these), a dask DataFrame, or a dask array of shape (n, d).
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
        Order the pairs by ``(i, j)`` over the whole output: the partitions (and the
        files, in name order) then concatenate to ``Grid.query_pairs(r).sorted()``, row
        for row. Costs a second shuffle, of the pairs; not with ``id_column``.
    output : str or path, optional
        Write the pairs as a Parquet dataset there (one file per tile) and return a
        `Written` summary. Without it, return a lazy ``dask.dataframe.DataFrame``.
    overwrite : bool, default False
        Replace an existing ``output`` (once the new dataset is complete).
    memory_per_worker : int, optional
        Bytes a tile may use; default the cluster's smallest memory limit per worker
        thread (2 GiB without a distributed cluster). Tiles are planned to fit.
    rows_per_tile : int, optional
        Plan tiles of at most this many rows (ghosts included) instead.
    row_group_rows : int, default 1,048,576
        Most rows in a Parquet row group of the output.
    progress : bool, default False
        Show Dask's progress bar while the tiles run.

    Returns
    -------
    dask.dataframe.DataFrame or Written
        Columns ``i, j`` (int64, ``i < j`` in global row numbers) and ``distance``
        (float64) with ``return_distances``, as ``spatialhash pairs`` writes them. The
        same pairs as ``Grid(points).query_pairs(r)``, each once, computed the same way
        (the distances equal bit for bit); grouped by tile, in a fixed order for a given
        input, ``r`` and plan.

    Notes
    -----
    The data are read twice: once to sample them and plan the tiles, once to search.
    Tiles are rectangles of about equal numbers of points; each gets the points within
    the reach of its rectangle as ghosts, and a pair is kept only in the home tile of its
    lower index. The output directory must be reachable by every worker (a shared file
    system on a cluster of several machines).
    """
    source = open_source(points, "points", columns=columns, radii_column=radii_column,
                         id_column=id_column)
    if (r is None) == (radii_column is None):
        raise TypeError("give exactly one of `r` and `radii_column`.")
    if r is not None:
        r = as_positive_scalar(r, "r", allow_zero=True)
    if sort and id_column is not None:
        raise TypeError("`sort` orders pairs by global row numbers: not with `id_column`.")
    row_group_rows = as_count(row_group_rows, "row_group_rows")
    geometry, box3, periodic3 = _geometry(source, box, periodic)
    client = _cluster.current_client()
    _cluster.prepare(client)

    seconds: dict[str, float] = {}
    started = time.perf_counter()
    plan, (info,) = _plan([source], box3, memory_per_worker, rows_per_tile, client,
                          lambda info: r if r is not None else 2.0 * info.max_radius)
    seconds["survey+plan"] = time.perf_counter() - started
    reach = r if r is not None else 2.0 * info.max_radius
    if r is not None:
        check_periodic_reach(box3, periodic3, r, "r", r)
    else:  # named as `Grid` names it
        check_periodic_reach(box3, periodic3, reach, "radii", f"2 * max(radii) = {reach}")
    tiles = _by_tile([(source, info, plan.margin(reach), POINT)], plan, source.n_dims,
                     radii_column is not None, id_column is not None)
    threads = _cluster.tile_threads

    def produce(frame):
        return tile_pairs(frame, geometry, r, return_distances, row_group_rows, threads())

    names = [*PAIR_COLUMNS, *([DISTANCE_COLUMN] if return_distances else [])]
    dtypes = [INDEX, INDEX, *([DISTANCE] if return_distances else [])]
    pairs = _frames(tiles, produce, names, dtypes)
    if sort:
        pairs = _sorted_by_rows(pairs, *PAIR_COLUMNS, info.n_rows, plan.n_tiles)
        tiles, produce = pairs, _whole_frame(names)
    if output is None:
        return pairs
    parameters = {"query": "pairs", "r": r, "radii_column": radii_column, "sort": sort,
                  "n_points": info.n_rows, "n_tiles": plan.n_tiles,
                  "box": None if box is None else np.broadcast_to(box, source.n_dims).tolist()}
    return _write(tiles, produce, names, dtypes, output, overwrite, row_group_rows,
                  parameters, plan.n_tiles, seconds, progress)


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


def query_radius(points, queries, r: float, *, columns=None, query_columns=None,
                 id_column: str | None = None, query_id_column: str | None = None, box=None,
                 periodic=None, return_distances: bool = False, output=None,
                 overwrite: bool = False, memory_per_worker: int | None = None,
                 rows_per_tile: int | None = None, row_group_rows: int = ROW_GROUP_ROWS,
                 progress: bool = False):
    """For every query point, every point within ``r``, on Dask: the rows of
    `Grid.query_radius`.

    Parameters
    ----------
    points, queries
        Point sets as ``points`` of `query_pairs` (the same kind or not).
    r : float
        Radius; ``distance <= r`` is a match.
    columns, query_columns, id_column, query_id_column
        Coordinate and id columns of each set, as in `query_pairs`.
    box, periodic, return_distances, output, overwrite, memory_per_worker, rows_per_tile,
    row_group_rows, progress
        As in `query_pairs`.

    Returns
    -------
    dask.dataframe.DataFrame or Written
        Columns ``query, point`` (int64 global row numbers, or ids) and ``distance``
        (float64) with ``return_distances``, as ``spatialhash neighbors`` writes them;
        within a tile by query, then by point. The rows of
        ``Grid(points).query_radius(queries, r)``.
    """
    source = open_source(points, "points", columns=columns, id_column=id_column)
    targets = open_source(queries, "queries", columns=query_columns, id_column=query_id_column)
    if targets.n_dims != source.n_dims:
        raise ValueError(f"`queries` must have {source.n_dims} coordinates like `points`; "
                         f"got {targets.n_dims}.")
    if (id_column is None) != (query_id_column is None):
        raise TypeError("give both `id_column` and `query_id_column`, or neither.")
    r = as_positive_scalar(r, "r", allow_zero=True)
    row_group_rows = as_count(row_group_rows, "row_group_rows")
    geometry, box3, periodic3 = _geometry(source, box, periodic)
    check_periodic_reach(box3, periodic3, r, "r", r)
    client = _cluster.current_client()
    _cluster.prepare(client)

    seconds: dict[str, float] = {}
    started = time.perf_counter()
    plan, (info, query_info) = _plan([source, targets], box3, memory_per_worker,
                                     rows_per_tile, client, lambda info: r)
    seconds["survey+plan"] = time.perf_counter() - started
    tiles = _by_tile([(source, info, plan.margin(r), POINT),
                      (targets, query_info, None, QUERY)], plan, source.n_dims,
                     False, id_column is not None)
    threads = _cluster.tile_threads

    def produce(frame):
        return tile_neighbors(frame, geometry, r, return_distances, QUERY_BLOCK, threads())

    names = [*RADIUS_COLUMNS, *([DISTANCE_COLUMN] if return_distances else [])]
    dtypes = [INDEX, INDEX, *([DISTANCE] if return_distances else [])]
    if output is None:
        return _frames(tiles, produce, names, dtypes)
    parameters = {"query": "radius", "r": r, "n_points": info.n_rows,
                  "n_queries": query_info.n_rows, "n_tiles": plan.n_tiles}
    return _write(tiles, produce, names, dtypes, output, overwrite, row_group_rows,
                  parameters, plan.n_tiles, seconds, progress)


def query_knn(points, queries, k: int, *, r_max: float | None = None, columns=None,
              query_columns=None, id_column: str | None = None,
              query_id_column: str | None = None, box=None, periodic=None, output=None,
              overwrite: bool = False, memory_per_worker: int | None = None,
              rows_per_tile: int | None = None, row_group_rows: int = ROW_GROUP_ROWS,
              progress: bool = False):
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
    columns, query_columns, id_column, query_id_column, box, periodic, output, overwrite,
    memory_per_worker, rows_per_tile, row_group_rows, progress
        As in `query_radius`.

    Returns
    -------
    dask.dataframe.DataFrame or Written
        Columns ``query, rank, point, distance``, as ``spatialhash knn`` writes them: for
        each query its neighbours nearest first (rank 0, 1, ...), ties broken by the
        smaller index; a query with fewer than ``k`` points within ``r_max`` (or fewer
        than ``k`` points in all) has fewer rows. Rows of one query are contiguous;
        queries come grouped by tile, then the queries of the second round (see Notes).

    Notes
    -----
    Two rounds (``spatialhash/dask/_knn.py``): tiles with a halo answer most queries;
    those whose k-th neighbour may lie beyond their tile's halo are sent, with their
    k-th distance as a bound, to every tile within that bound, and the candidates merged.
    The lazy DataFrame computes the first round once to find those queries, and again
    when it is computed; a written dataset runs it once.
    """
    from dask import delayed

    from . import _knn

    source = open_source(points, "points", columns=columns, id_column=id_column)
    targets = open_source(queries, "queries", columns=query_columns, id_column=query_id_column)
    if targets.n_dims != source.n_dims:
        raise ValueError(f"`queries` must have {source.n_dims} coordinates like `points`; "
                         f"got {targets.n_dims}.")
    if (id_column is None) != (query_id_column is None):
        raise TypeError("give both `id_column` and `query_id_column`, or neither.")
    k = as_count(k, "k")
    r_max = np.inf if r_max is None else as_positive_scalar(r_max, "r_max", allow_zero=True,
                                                            allow_inf=True)
    row_group_rows = as_count(row_group_rows, "row_group_rows")
    geometry, box3, periodic3 = _geometry(source, box, periodic)
    client = _cluster.current_client()
    _cluster.prepare(client)
    ids = id_column is not None

    seconds: dict[str, float] = {}
    started = time.perf_counter()
    def halo_of(info) -> float:
        halo = min(_knn.HALO_FACTOR * _knn.expected_kth_distance(info, source.n_dims, box3,
                                                                 k), r_max)
        return min(halo, float(box3[periodic3].min()) / 2) if periodic3.any() else halo

    plan, (info, query_info) = _plan([source, targets], box3, memory_per_worker,
                                     rows_per_tile, client, halo_of)
    seconds["survey+plan"] = time.perf_counter() - started
    halo = halo_of(info)
    tiles = _by_tile([(source, info, plan.margin(halo), POINT),
                      (targets, query_info, None, QUERY)], plan, source.n_dims, False, ids)
    rows_meta, open_meta = _knn.knn_meta(source.n_dims, ids)

    def first(frame: pd.DataFrame, tile: int):
        return _knn.round_one(frame, tile, plan, geometry, k, r_max, halo,
                              _cluster.tile_threads())

    def second(frame: pd.DataFrame) -> pd.DataFrame:
        return _knn.round_two(frame, geometry, k, _cluster.tile_threads())

    def round_two(unsettled: pd.DataFrame):
        """The merged answers of the unsettled queries, lazily."""
        return _knn.second_round(unsettled, source, info, plan, k, second)

    names, dtypes = list(KNN_COLUMNS), [INDEX, INDEX, INDEX, DISTANCE]
    run_first = delayed(first, pure=True, nout=2)
    if output is None:
        import dask.dataframe as dd

        firsts = [run_first(frame, tile) for tile, frame in enumerate(tiles.to_delayed())]
        unsettled = pd.concat(_compute([f[1] for f in firsts], False) or [open_meta])
        answers = dd.from_delayed([f[0] for f in firsts], meta=rows_meta, verify_meta=False)
        return answers if unsettled.empty else dd.concat([answers, round_two(unsettled)])

    def first_file(frame: pd.DataFrame, tile: int, directory: str):
        answers, unsettled = first(frame, tile)
        name, rows, _, _ = write_tile_file(
            directory, tile, names, dtypes,
            [[answers[c].to_numpy() for c in names]] if len(answers) else [], row_group_rows)
        return name, rows, unsettled

    def merged_file(frame: pd.DataFrame, part: int, directory: str):
        chunk = [[frame[c].to_numpy() for c in names]] if len(frame) else []
        return write_tile_file(directory, plan.n_tiles + part, names, dtypes, chunk,
                               row_group_rows)[:2]

    started = time.perf_counter()
    with DatasetCommit(output, overwrite) as target:
        write = delayed(first_file, pure=True)
        results = _compute([write(frame, tile, target.directory)
                            for tile, frame in enumerate(tiles.to_delayed())], progress)
        files, rows = [r[0] for r in results], [r[1] for r in results]
        unsettled = pd.concat([r[2] for r in results] or [open_meta])
        seconds["first round"] = time.perf_counter() - started
        started = time.perf_counter()
        if not unsettled.empty:
            merged = round_two(unsettled)
            write = delayed(merged_file, pure=True)
            more = _compute([write(part, number, target.directory)
                             for number, part in enumerate(merged.to_delayed())], progress)
            files += [m[0] for m in more]
            rows += [m[1] for m in more]
        seconds["second round"] = time.perf_counter() - started
        parameters = {"query": "knn", "k": k, "r_max": None if np.isinf(r_max) else r_max,
                      "n_points": info.n_rows, "n_queries": query_info.n_rows,
                      "n_tiles": plan.n_tiles, "second_round_queries": len(unsettled)}
        target.commit(files, rows, parameters)
    return Written(target.output, files, int(sum(rows)), plan.n_tiles, seconds)

