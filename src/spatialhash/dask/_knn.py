"""k-nearest queries on tiles, exact, in two rounds.

Round one: each tile holds its points and, as ghosts, the points within a halo of its
rectangle (the halo is 1.5 times the distance of the k-th neighbour expected from the
sample's mean density, at most ``r_max``), and answers its queries. A query is *settled*
when the ball of its k-th distance (of ``r_max`` when fewer than k points lie within it)
lies inside the tile's rectangle grown by the halo: every point that could be nearer is
in the tile. Its rows are final.

Round two, for the others (a sparse region, a query near an empty tile): the query's
bound is its k-th distance found in round one, widened by a relative 2**-40 (a distance
squared again can round below the square it came from, and the point at exactly the
k-th distance would be missed), or ``r_max``, or unbounded when round one found fewer
than k. The query goes to every tile whose rectangle the ball of its bound meets; each
tile answers it from its home points only, and the candidates of all tiles are merged by
(distance, index), which gives the global answer: every point within the bound is at
home in exactly one of those tiles, and a tile's k nearest include every point of the
tile that belongs to the global k nearest. Ties go to the smaller index, as in `Grid`,
because a tile's local order is its global order.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._cluster import tile_threads
from ._collect import Limits, check_tile, compute, concatenated, frame_bytes, gather
from ._output import DatasetCommit, Written, write_tile_file
from ._plan import TilePlan, padded
from ._tiles import (
    KNN_COLUMNS,
    POINT,
    QUERY,
    Geometry,
    TileRows,
    coordinate_names,
    tag_block,
    tile_grid,
)

#: Round one's halo, in k-th-neighbour distances expected from the mean density.
HALO_FACTOR = 1.5
#: The relative widening of a round-one k-th distance passed to round two.
BOUND_WIDENING = 2.0 ** -40
#: Unsettled queries per partition of the second round's merge.
MERGE_PARTITION_QUERIES = 1 << 16


def expected_kth_distance(survey, n_dims: int, box3: np.ndarray, k: int) -> float:
    """The k-th neighbour distance of a uniform density over the sample's bounding box
    (the periods on periodic axes)."""
    sample = survey.sample
    if sample.shape[0] == 0 or survey.n_rows == 0:
        return 0.0
    extent = np.ptp(sample, axis=0)
    extent = np.where(np.isfinite(box3[:n_dims]), box3[:n_dims], extent)
    volume = float(np.prod(np.maximum(extent, 1e-300)))
    unit_ball = math.pi ** (n_dims / 2) / math.gamma(n_dims / 2 + 1)
    return (k * volume / (survey.n_rows * unit_ball)) ** (1.0 / n_dims)


def knn_meta(n_dims: int, ids: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Empty frames of answer rows (`KNN_COLUMNS`) and of unsettled queries."""
    rows = pd.DataFrame({name: np.zeros(0, np.float64 if name == "distance" else np.int64)
                         for name in KNN_COLUMNS})
    columns = {"row": np.int64, "bound": np.float64,
               **{n: np.float64 for n in coordinate_names(n_dims)}}
    if ids:
        columns["id"] = np.int64
    return rows, pd.DataFrame({n: np.zeros(0, t) for n, t in columns.items()})


def _answer_rows(queries: TileRows, points: TileRows, which: np.ndarray, found,
                 ) -> pd.DataFrame:
    slots = np.arange(found.indices.shape[1]) < found.counts[which][:, None]
    query, rank = np.nonzero(slots)  # row-major: by query, then rank
    return pd.DataFrame({"query": queries.labels(which[query]),
                         "rank": rank.astype(np.int64),
                         "point": points.labels(found.indices[which][slots]),
                         "distance": found.distances[which][slots]})


def candidates_meta() -> pd.DataFrame:
    """The empty frame of round two's candidates: ``query, point, distance``."""
    return pd.DataFrame({"query": np.zeros(0, np.int64), "point": np.zeros(0, np.int64),
                         "distance": np.zeros(0, np.float64)})


def round_one(frame: pd.DataFrame, tile: int, plan: TilePlan, geometry: Geometry, k: int,
              r_max: float, halo: float, n_threads: int | None):
    """Answers of the settled queries of one tile, and its unsettled queries with their
    bounds."""
    n_dims = geometry.n_dims
    points = TileRows.of(frame, POINT, n_dims)
    queries = TileRows.of(frame, QUERY, n_dims)
    rows_meta, open_meta = knn_meta(n_dims, queries.ids is not None)
    if queries.rows.size == 0:
        return rows_meta, open_meta
    if points.rows.size:
        grid = tile_grid(points, geometry, 0.0, n_threads)
        found = grid.query_knn(queries.coords, min(k, points.rows.size),
                               r_max=None if math.isinf(r_max) else r_max)
        kth = found.distances[np.arange(queries.rows.size), found.counts - 1]
        full = found.counts == k
        bound = np.where(full, kth, r_max)
    else:
        found, full = None, np.zeros(queries.rows.size, dtype=bool)
        bound = np.full(queries.rows.size, r_max)
    settled = _inside(plan, tile, padded(queries.coords, plan.box), bound, plan.margin(halo))
    answers = (_answer_rows(queries, points, np.flatnonzero(settled), found)
               if found is not None else rows_meta)
    unsettled = np.flatnonzero(~settled)
    widened = np.where(full[unsettled], bound[unsettled] * (1.0 + BOUND_WIDENING),
                       bound[unsettled])
    columns = {"row": queries.rows[unsettled], "bound": widened}
    for axis, name in enumerate(coordinate_names(n_dims)):
        columns[name] = queries.coords[unsettled, axis]
    if queries.ids is not None:
        columns["id"] = queries.ids[unsettled]
    return answers, pd.DataFrame(columns)


def _inside(plan: TilePlan, tile: int, points3: np.ndarray, bound: np.ndarray,
            margin: float) -> np.ndarray:
    """Whether the ball of ``bound`` around each point lies inside the tile's rectangle
    grown by ``margin`` (with a slack for rounding: unsure means no)."""
    slack = plan.margin(0.0)
    reach = bound * (1.0 + 2.0 ** -19) + slack
    inside = np.isfinite(bound)
    for axis in range(points3.shape[1]):
        low, high = plan.lower[tile, axis], plan.upper[tile, axis]
        if np.isfinite(plan.box[axis]) and low == 0.0 and high == plan.box[axis]:
            continue  # the tile spans this periodic axis: every image is in it
        x = points3[:, axis]
        inside &= (x - reach >= low - margin) & (x + reach <= high + margin)
    return inside


def tag_unsettled(frame: pd.DataFrame, plan: TilePlan, n_dims: int) -> pd.DataFrame:
    """Unsettled queries sent to every tile their bound's ball meets (``kind`` QUERY)."""
    coords = frame[coordinate_names(n_dims)].to_numpy(dtype=np.float64)
    points3 = padded(coords, plan.box)
    bound = frame["bound"].to_numpy()
    margin = np.where(np.isfinite(bound), bound * (1.0 + 2.0 ** -19) + plan.margin(0.0),
                      np.inf)
    rows, tiles = plan.memberships(points3, margin)
    columns = {"tile": tiles, "row": frame["row"].to_numpy()[rows],
               "home": np.ones(rows.size, dtype=bool),
               "kind": np.full(rows.size, QUERY, dtype=np.int8)}
    for axis, name in enumerate(coordinate_names(n_dims)):
        columns[name] = coords[rows, axis]
    columns["bound"] = bound[rows]
    if "id" in frame:
        columns["id"] = frame["id"].to_numpy()[rows]
    return pd.DataFrame(columns)


def round_two(frame: pd.DataFrame, geometry: Geometry, k: int,
              n_threads: int | None) -> pd.DataFrame:
    """Candidates ``query, point, distance`` of one tile for the unsettled queries sent to
    it, from its home points."""
    n_dims = geometry.n_dims
    points = TileRows.of(frame[frame["home"].to_numpy()], POINT, n_dims)
    part = frame[frame["kind"].to_numpy() == QUERY]
    queries = TileRows.of(part, QUERY, n_dims)
    empty = candidates_meta()
    if queries.rows.size == 0 or points.rows.size == 0:
        return empty
    limit = float(part["bound"].max())  # one limit for the tile: any bound at least works
    grid = tile_grid(points, geometry, 0.0, n_threads)
    found = grid.query_knn(queries.coords, min(k, points.rows.size),
                           r_max=None if math.isinf(limit) else limit)
    slots = np.arange(found.indices.shape[1]) < found.counts[:, None]
    return pd.DataFrame({"query": np.repeat(queries.labels(np.arange(queries.rows.size)),
                                            found.counts),
                         "point": points.labels(found.indices[slots]),
                         "distance": found.distances[slots]})


def merge_candidates(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """The k best candidates of each query by (distance, index), ranked."""
    q, i, d = (frame[c].to_numpy() for c in ("query", "point", "distance"))
    order = np.lexsort((i, d, q))
    q, i, d = q[order], i[order], d[order]
    first = np.ones(q.size, dtype=bool)
    first[1:] = q[1:] != q[:-1]
    starts = np.flatnonzero(first)
    rank = np.arange(q.size) - np.repeat(starts, np.diff(np.append(starts, q.size)))
    keep = rank < k
    return pd.DataFrame({"query": q[keep], "rank": rank[keep].astype(np.int64),
                         "point": i[keep], "distance": d[keep]})


def second_round(unsettled: pd.DataFrame, source, info, plan: TilePlan, k: int, answer):
    """Send the unsettled queries to the tiles their bounds meet, with those tiles' home
    points (of the `Source` ``source`` surveyed as ``info``), answer them there with
    ``answer`` (`round_two` on one tile) and merge the candidates: a lazy DataFrame of
    `KNN_COLUMNS`."""
    import dask.dataframe as dd
    from dask import delayed

    n_dims = source.n_dims
    sent = tag_unsettled(unsettled, plan, n_dims)
    needed = np.unique(sent["tile"].to_numpy())
    tag = delayed(_home_points, pure=True)
    point_blocks = [tag(part, int(offset), plan, needed)
                    for part, offset in zip(source.parts, info.offsets, strict=True)]
    meta = sent.iloc[:0]
    frames = dd.from_delayed([*point_blocks, delayed(sent)], meta=meta, verify_meta=False)
    tiles = frames.set_index("tile", divisions=list(range(plan.n_tiles + 1)), sort=True)
    candidates = tiles.map_partitions(answer, meta=candidates_meta(),
                                      align_dataframes=False)
    parts = max(1, len(unsettled) // MERGE_PARTITION_QUERIES)
    rows_meta, _ = knn_meta(n_dims, False)
    return (candidates.shuffle(on="query", npartitions=parts)
            .map_partitions(merge_candidates, k, meta=rows_meta))


def _home_points(block, offset: int, plan: TilePlan, needed: np.ndarray) -> pd.DataFrame:
    """A block's points at their home tiles, for the tiles in ``needed`` only."""
    frame = tag_block(block, offset, plan, None, POINT)
    frame = frame[np.isin(frame["tile"].to_numpy(), needed)]
    frame.insert(len(frame.columns) - ("id" in frame), "bound", np.nan)
    return frame


#: The dtypes of `KNN_COLUMNS`.
KNN_DTYPES = [np.dtype(np.int64)] * 3 + [np.dtype(np.float64)]


@dataclass(frozen=True)
class KnnTiles:
    """What every tile of one k-nearest query needs: the tile plan, the geometry, ``k``,
    ``r_max``, round one's halo, and whether the queries carry ids."""

    plan: TilePlan
    geometry: Geometry
    k: int
    r_max: float
    halo: float
    ids: bool

    def first(self, frame: pd.DataFrame, tile: int):
        """Round one on one tile: its settled answers and its unsettled queries."""
        return round_one(frame, tile, self.plan, self.geometry, self.k, self.r_max,
                         self.halo, tile_threads())

    def second(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Round two's candidates of one tile."""
        return round_two(frame, self.geometry, self.k, tile_threads())

    def merged(self, unsettled: pd.DataFrame, points) -> object:
        """The merged answers of ``unsettled`` queries, lazily; ``points`` is the points'
        (`Source`, survey)."""
        return second_round(unsettled, *points, self.plan, self.k, self.second)


def _both_bytes(result) -> int:
    return frame_bytes(result[0]) + frame_bytes(result[1])


def in_memory(parts: list, query: KnnTiles, points, limits: Limits,
              progress: bool) -> pd.DataFrame:
    """Both rounds over the tiles ``parts`` (delayed frames), every answer gathered to
    the client (`_collect.gather`)."""
    from dask import delayed

    rows_meta, open_meta = knn_meta(query.geometry.n_dims, query.ids)

    def first(frame: pd.DataFrame, tile: int):
        answers, unsettled = query.first(frame, tile)
        check_tile(frame_bytes(answers), tile, limits)
        return answers, unsettled

    task = delayed(first, pure=True)
    results, held = gather([task(frame, tile) for tile, frame in enumerate(parts)], limits,
                           progress, _both_bytes)
    answers = [result[0] for result in results]
    unsettled = pd.concat([result[1] for result in results] or [open_meta])
    if not unsettled.empty:
        more, _ = gather(list(query.merged(unsettled, points).to_delayed()), limits,
                         progress, held=held)
        answers += more
    return concatenated(answers, rows_meta)


def written(parts: list, query: KnnTiles, points, run, parameters: dict) -> Written:
    """Both rounds over the tiles ``parts`` (delayed frames), the answers written to
    ``run.output`` (round one's by tile, round two's by merged part)."""
    from dask import delayed

    output, seconds = run.output, run.seconds
    names, dtypes = list(KNN_COLUMNS), KNN_DTYPES
    _, open_meta = knn_meta(query.geometry.n_dims, query.ids)

    def chunks(frame: pd.DataFrame) -> list:
        return [[frame[c].to_numpy() for c in names]] if len(frame) else []

    def first_file(frame: pd.DataFrame, tile: int, directory: str):
        answers, unsettled = query.first(frame, tile)
        name, rows, _, _ = write_tile_file(directory, tile, names, dtypes, chunks(answers),
                                           output.row_group_rows)
        return name, rows, unsettled

    def merged_file(frame: pd.DataFrame, part: int, directory: str):
        return write_tile_file(directory, query.plan.n_tiles + part, names, dtypes,
                               chunks(frame), output.row_group_rows)[:2]

    started = time.perf_counter()
    with DatasetCommit(output) as target:
        task = delayed(first_file, pure=True)
        results = compute([task(frame, tile, target.directory)
                           for tile, frame in enumerate(parts)], run.plan.progress)
        files, rows = [r[0] for r in results], [r[1] for r in results]
        unsettled = pd.concat([r[2] for r in results] or [open_meta])
        seconds["first round"] = time.perf_counter() - started
        started = time.perf_counter()
        if not unsettled.empty:
            task = delayed(merged_file, pure=True)
            more = compute([task(part, number, target.directory) for number, part
                            in enumerate(query.merged(unsettled, points).to_delayed())],
                           run.plan.progress)
            files += [m[0] for m in more]
            rows += [m[1] for m in more]
        seconds["second round"] = time.perf_counter() - started
        target.commit(files, rows, {**parameters, "second_round_queries": len(unsettled)})
    return Written(target.output, files, int(sum(rows)), query.plan.n_tiles, seconds)
