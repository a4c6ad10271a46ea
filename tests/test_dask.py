"""The Dask engine (`spatialhash.dask`): the answers of `Grid`, exactly, on every kind of
data that stresses tiles, from every kind of input; Parquet datasets written all or
nothing; clear errors.

Most tests run on Dask's synchronous scheduler (one process, fast); the tests at the end
run on a real `LocalCluster` of two worker processes, one of which is killed mid-run.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spatialhash import Grid

dask = pytest.importorskip("dask", reason="the dask extra")
pa = pytest.importorskip("pyarrow")
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import spatialhash.dask as sd  # noqa: E402


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="sync"):
        yield


# ------------------------------------------------------------------------------ data
def uniform(n, d=3, seed=0):
    return np.random.default_rng(seed).random((n, d))


def clustered(n, d=3, seed=0):
    rng = np.random.default_rng(seed)
    dense = rng.normal(0.5, 0.01, (n * 4 // 5, d))
    return np.concatenate([dense, rng.random((n - dense.shape[0], d))])


def lattice(side, d=3, step=0.125):
    """A cubic lattice: every neighbour exactly ``step`` away, tiles cut on lattice planes."""
    axes = np.meshgrid(*[np.arange(side) * step] * d, indexing="ij")
    return np.stack(axes, -1).reshape(-1, d)


def duplicated(n, d=3, seed=0):
    rng = np.random.default_rng(seed)
    return np.repeat(rng.random((n // 10, d)), 10, axis=0)[rng.permutation(n // 10 * 10)]


def offset(n, d=3, seed=0):
    return 1e6 + uniform(n, d, seed) * 0.5


DATASETS = {
    "uniform": (uniform(6000), 0.06),
    "clustered": (clustered(6000), 0.01),
    "lattice": (lattice(16), 0.125),
    "duplicated": (duplicated(3000), 0.05),
    "offset": (offset(6000), 0.03),
    "2-D": (uniform(6000, 2), 0.02),
    "1-D": (uniform(3000, 1), 0.001),
}


def as_array(points, chunk=1500):
    return da.from_array(points, chunks=(chunk, points.shape[1]))


def sorted_frame(frame, keys):
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


def assert_pairs_equal(frame, expected):
    """``frame`` (columns i, j[, distance]) holds exactly ``expected``'s pairs and
    distances."""
    got = sorted_frame(frame, ["i", "j"])
    expected = expected.sorted()
    np.testing.assert_array_equal(got[["i", "j"]].to_numpy(), expected.indices)
    if expected.distances is not None:
        np.testing.assert_array_equal(got["distance"].to_numpy(), expected.distances)


def knn_rows(result, k):
    slots = np.arange(k) < result.counts[:, None]
    q, rank = np.nonzero(slots)
    return q, rank, result.indices[slots], result.distances[slots]


def assert_knn_equal(frame, expected, k):
    got = sorted_frame(frame, ["query", "rank"])
    for column, values in zip(("query", "rank", "point", "distance"), knn_rows(expected, k),
                              strict=True):
        np.testing.assert_array_equal(got[column].to_numpy(), values, err_msg=column)


# ------------------------------------------------------------------- equal to Grid
@pytest.mark.parametrize("name", list(DATASETS))
@pytest.mark.parametrize("rows_per_tile", [400, 2500])
def test_pairs_equal_the_grid(name, rows_per_tile):
    points, r = DATASETS[name]
    frame = sd.query_pairs(as_array(points), r, plan=sd.Plan(rows_per_tile=rows_per_tile),
                           return_distances=True)
    assert_pairs_equal(frame, Grid(points, cell_size=r).query_pairs(r, return_distances=True))


@pytest.mark.slow
@pytest.mark.parametrize("periodic", [True, [True, False, True], [False, True, False]])
@pytest.mark.parametrize("name", ["uniform", "lattice", "clustered"])
def test_periodic_pairs_equal_the_grid(name, periodic):
    points, r = DATASETS[name]
    box = [1.0, 2.0, 2.0] if name != "lattice" else 2.0
    frame = sd.query_pairs(as_array(points), r, box=box, periodic=periodic,
                           plan=sd.Plan(rows_per_tile=500), return_distances=True)
    grid = Grid(points, cell_size=r, box=box, periodic=periodic)
    assert_pairs_equal(frame, grid.query_pairs(r, return_distances=True))


def test_tiles_thinner_than_r_still_give_every_pair(monkeypatch):
    from spatialhash.dask import _plan, _queries

    plans = []

    def plan_ignoring_reach(sample, weights, box, rows_per_tile, reach=0.0):
        plans.append(_plan.plan_tiles(sample, weights, box, rows_per_tile, 0.0))
        return plans[-1]

    # The planner leaves tiles at least a reach wide; cut them far thinner here.
    monkeypatch.setattr(_queries, "plan_tiles", plan_ignoring_reach)
    points, r = uniform(2000, 2, seed=3), 0.2
    frame = sd.query_pairs(as_array(points), r, plan=sd.Plan(rows_per_tile=100))
    assert_pairs_equal(frame, Grid(points, cell_size=r).query_pairs(r))
    inner = np.clip(plans[0].upper, 0, 1) - np.clip(plans[0].lower, 0, 1)
    assert (inner[:, :2].min(axis=1) < r).sum() >= 10


def test_pairs_with_radii_equal_the_grid():
    rng = np.random.default_rng(4)
    points = uniform(5000, 3, seed=4)
    radii = rng.uniform(0.0, 0.03, 5000)
    table = dd.from_pandas(pd.DataFrame({"x": points[:, 0], "y": points[:, 1],
                                         "z": points[:, 2], "radius": radii}), npartitions=3)
    frame = sd.query_pairs(table, radii_column="radius", plan=sd.Plan(rows_per_tile=800),
                           return_distances=True)
    expected = Grid(points, cell_size=0.06).query_pairs(radii=radii, return_distances=True)
    assert_pairs_equal(frame, expected)


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 300), d=st.integers(1, 3),
       rows_per_tile=st.integers(10, 400), r=st.sampled_from([0.0, 0.125, 0.25, 0.5]),
       periodic=st.booleans())
def test_pairs_equal_the_grid_on_random_lattice_points(seed, n, d, rows_per_tile, r,
                                                        periodic):
    rng = np.random.default_rng(seed)
    points = rng.integers(0, 16, (n, d)) * 0.125  # ties, duplicates, points on cuts
    box = 2.0 if periodic else None
    frame = sd.query_pairs(as_array(points, 64), r, box=box,
                           plan=sd.Plan(rows_per_tile=rows_per_tile),
                           return_distances=True)
    assert_pairs_equal(frame, Grid(points, box=box).query_pairs(r, return_distances=True))


@pytest.mark.parametrize("name", ["uniform", "clustered", "lattice", "offset", "2-D"])
def test_radius_queries_equal_the_grid(name):
    points, r = DATASETS[name]
    queries = points[::7] + r / 3
    frame = sd.query_radius(as_array(points), as_array(queries, 500), r,
                            plan=sd.Plan(rows_per_tile=700),
                            return_distances=True)
    expected = Grid(points, cell_size=r).query_radius(queries, r, return_distances=True)
    got = sorted_frame(frame, ["query", "point"])
    np.testing.assert_array_equal(got["query"].to_numpy(),
                                  np.repeat(np.arange(len(queries)), np.diff(expected.indptr)))
    np.testing.assert_array_equal(got["point"].to_numpy(), expected.indices)
    np.testing.assert_array_equal(got["distance"].to_numpy(), expected.distances)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["uniform", "clustered", "lattice", "duplicated", "offset",
                                  "2-D", "1-D"])
@pytest.mark.parametrize("k", [1, 9])
def test_knn_equals_the_grid(name, k):
    points, _ = DATASETS[name]
    queries = np.concatenate([points[::11], points[:50] + 0.01])
    frame = sd.query_knn(as_array(points), as_array(queries, 400), k,
                         plan=sd.Plan(rows_per_tile=600))
    assert_knn_equal(frame, Grid(points).query_knn(queries, k), k)


@pytest.mark.parametrize("r_max", [0.0, 0.02, np.inf])
def test_knn_with_r_max_and_periodic_boxes_equals_the_grid(r_max):
    points = uniform(4000, 3, seed=5)
    queries = uniform(600, 3, seed=6)
    frame = sd.query_knn(as_array(points), as_array(queries), 6, r_max=r_max, box=1.0,
                         plan=sd.Plan(rows_per_tile=500))
    assert_knn_equal(frame, Grid(points, box=1.0).query_knn(queries, 6, r_max=r_max), 6)


@pytest.mark.slow
def test_knn_needing_the_second_round_equals_the_grid():
    # Queries far from every point: no tile's halo holds their neighbours.
    points = clustered(3000, 2, seed=7)
    queries = np.array([[5.0, 5.0], [-3.0, 0.5], [0.5, 40.0]])
    frame = sd.query_knn(as_array(points), as_array(queries), 4,
                         plan=sd.Plan(rows_per_tile=300))
    assert_knn_equal(frame, Grid(points).query_knn(queries, 4), 4)


def test_knn_with_more_k_than_points_returns_every_point():
    points = uniform(30, 2, seed=8)
    frame = sd.query_knn(as_array(points, 7), as_array(points[:5]), 50,
                         plan=sd.Plan(rows_per_tile=10))
    assert_knn_equal(frame, Grid(points).query_knn(points[:5], 50), 50)
    assert len(frame) == 5 * 30


@pytest.mark.slow
def test_sorted_pairs_concatenate_to_the_grids_sorted_pairs(tmp_path):
    points, r = DATASETS["clustered"]
    frame = sd.query_pairs(as_array(points), r, plan=sd.Plan(rows_per_tile=800), sort=True,
                           return_distances=True)
    expected = Grid(points, cell_size=r).query_pairs(r, return_distances=True).sorted()
    np.testing.assert_array_equal(frame[["i", "j"]].to_numpy(), expected.indices)
    np.testing.assert_array_equal(frame["distance"].to_numpy(), expected.distances)
    written = sd.query_pairs(as_array(points), r, plan=sd.Plan(rows_per_tile=800), sort=True,
                             output=tmp_path / "sorted")
    files = sorted(written.files)
    assert files == written.files and len(files) > 1
    whole = pd.concat([pd.read_parquet(tmp_path / "sorted" / f) for f in files])
    np.testing.assert_array_equal(whole[["i", "j"]].to_numpy(), expected.indices)


def test_a_dense_cluster_is_cut_into_more_tiles_not_one_large_one(tmp_path):
    # Four fifths of the points in a ball of radius ~0.03: tiles follow the points, and
    # hold at most about their target, ghosts included (a reach-wide cube at the centre
    # holds about 100 points).
    points, r = clustered(20_000, seed=15), 0.002
    written = sd.query_pairs(as_array(points, 5000), r, plan=sd.Plan(rows_per_tile=2000),
                             output=tmp_path / "pairs")
    assert written.n_tiles >= 10
    assert max(written.tile_rows) <= 2 * 2000


def test_columns_are_named_as_the_command_line_names_them():
    points = uniform(300, 2, seed=16)
    for distances in (False, True):
        tail = ["distance"] if distances else []
        for r in (0.1, 0.0):  # some rows, and none
            pairs = sd.query_pairs(as_array(points, 100), r, return_distances=distances)
            radius = sd.query_radius(as_array(points, 100), as_array(points[:20] + 0.5), r,
                                     return_distances=distances)
            for frame, names in ((pairs, ["i", "j", *tail]),
                                 (radius, ["query", "point", *tail])):
                assert isinstance(frame, pd.DataFrame)
                assert list(frame.columns) == names
                assert [str(t) for t in frame.dtypes] == ["int64", "int64",
                                                          *["float64"] * distances]
    nearest = sd.query_knn(as_array(points, 100), as_array(points[:20]), 3)
    assert list(nearest.columns) == ["query", "rank", "point", "distance"]


# ------------------------------------------------------------------------- inputs
@pytest.fixture
def parquet_points(tmp_path):
    """Uniform 3-D points in three Parquet files of several row groups, with an id column."""
    points = uniform(5000, 3, seed=9)
    directory = tmp_path / "points"
    directory.mkdir()
    for number, rows in enumerate(np.array_split(np.arange(5000), 3)):
        table = pa.table({"x": points[rows, 0], "y": points[rows, 1], "z": points[rows, 2],
                          "name": (rows * 10 + 7).astype(np.int64),
                          "label": [f"p{i}" for i in rows]})
        pq.write_table(table, directory / f"part-{number}.parquet", row_group_size=600)
    return directory, points


@pytest.mark.parametrize("form", ["directory", "glob", "list"])
def test_parquet_inputs_give_global_row_numbers_in_file_order(parquet_points, form):
    directory, points = parquet_points
    files = sorted(glob.glob(str(directory / "*.parquet")))
    source = {"directory": directory, "glob": str(directory / "*.parquet"),
              "list": files}[form]
    frame = sd.query_pairs(source, 0.05, columns="x,y,z", plan=sd.Plan(rows_per_tile=900))
    assert_pairs_equal(frame, Grid(points, cell_size=0.05).query_pairs(0.05))


def test_an_id_column_names_the_points(parquet_points):
    directory, points = parquet_points
    frame = sd.query_pairs(directory, 0.05, columns=["x", "y", "z"], id_column="name",
                           plan=sd.Plan(rows_per_tile=900))
    expected = Grid(points, cell_size=0.05).query_pairs(0.05).sorted().indices * 10 + 7
    np.testing.assert_array_equal(sorted_frame(frame, ["i", "j"])[["i", "j"]].to_numpy(),
                                  expected)


def test_a_dask_dataframe_input_equals_the_array_input():
    points = uniform(3000, 2, seed=10)
    table = dd.from_pandas(pd.DataFrame(points, columns=["a", "b"]), npartitions=4)
    from_table = sd.query_pairs(table, 0.03, plan=sd.Plan(rows_per_tile=500))
    from_array = sd.query_pairs(as_array(points), 0.03, plan=sd.Plan(rows_per_tile=500))
    pd.testing.assert_frame_equal(sorted_frame(from_table, ["i", "j"]),
                                  sorted_frame(from_array, ["i", "j"]))


def test_inputs_are_not_modified():
    points = uniform(2000, 3, seed=11)
    copy = points.copy()
    sd.query_pairs(as_array(points), 0.05, box=1.0, plan=sd.Plan(rows_per_tile=300))
    np.testing.assert_array_equal(points, copy)


# ------------------------------------------------------------------------- output
def read_dataset(path):
    return pd.read_parquet(path)


def test_written_pairs_equal_the_grid_with_a_manifest(parquet_points, tmp_path):
    directory, points = parquet_points
    output = tmp_path / "pairs"
    written = sd.query_pairs(directory, 0.05, columns="x,y,z",
                             output=sd.Output(output, row_group_rows=1000),
                             return_distances=True, plan=sd.Plan(rows_per_tile=900))
    assert_pairs_equal(read_dataset(output),
                       Grid(points, cell_size=0.05).query_pairs(0.05, return_distances=True))
    manifest = pd.read_json(output / "_manifest.json", typ="series")
    assert sorted(f["path"] for f in manifest["files"]) == sorted(
        os.path.basename(p) for p in glob.glob(str(output / "*.parquet")))
    assert manifest["rows"] == written.rows == len(read_dataset(output))
    assert written.n_tiles == len(written.files) > 1
    for file in written.files:
        metadata = pq.ParquetFile(output / file).metadata
        assert all(metadata.row_group(g).num_rows <= 1000
                   for g in range(metadata.num_row_groups))
    assert not [p for p in os.listdir(tmp_path) if "incomplete" in p]


def test_the_same_run_writes_the_same_bytes(parquet_points, tmp_path):
    directory, _ = parquet_points
    outputs = [tmp_path / "first", tmp_path / "second"]
    for output in outputs:
        sd.query_pairs(directory, 0.05, columns="x,y,z", output=output,
                       plan=sd.Plan(rows_per_tile=900))
    names = sorted(os.listdir(outputs[0]))
    assert names == sorted(os.listdir(outputs[1]))
    for name in names:
        assert (outputs[0] / name).read_bytes() == (outputs[1] / name).read_bytes(), name


def test_knn_and_radius_write_datasets(parquet_points, tmp_path):
    directory, points = parquet_points
    queries = uniform(500, 3, seed=12)
    sd.query_knn(directory, as_array(queries, 100), 5, columns="x,y,z",
                 output=tmp_path / "knn", plan=sd.Plan(rows_per_tile=900))
    assert_knn_equal(read_dataset(tmp_path / "knn"), Grid(points).query_knn(queries, 5), 5)
    sd.query_radius(directory, as_array(queries, 100), 0.05, columns="x,y,z",
                    output=tmp_path / "radius", plan=sd.Plan(rows_per_tile=900))
    expected = Grid(points).query_radius(queries, 0.05)
    got = sorted_frame(read_dataset(tmp_path / "radius"), ["query", "point"])
    np.testing.assert_array_equal(got["point"].to_numpy(), expected.indices)


def test_an_existing_output_is_refused_unless_overwritten(parquet_points, tmp_path):
    directory, _ = parquet_points
    output = tmp_path / "pairs"
    output.mkdir()
    (output / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="overwrite"):
        sd.query_pairs(directory, 0.05, columns="x,y,z", output=output)
    assert (output / "keep.txt").read_text() == "mine"
    sd.query_pairs(directory, 0.05, columns="x,y,z", output=sd.Output(output, overwrite=True))
    assert not (output / "keep.txt").exists() and (output / "_manifest.json").exists()


def test_a_failed_run_leaves_no_output(tmp_path):
    directory = tmp_path / "points"
    directory.mkdir()
    good = uniform(1000, 2, seed=13)
    pq.write_table(pa.table({"x": good[:, 0], "y": good[:, 1]}), directory / "a.parquet")
    bad = good.copy()
    bad[700, 1] = np.nan
    pq.write_table(pa.table({"x": bad[:, 0], "y": bad[:, 1]}), directory / "b.parquet",
                   row_group_size=300)
    with pytest.raises(ValueError, match=r"b\.parquet, row group 2, row 100"):
        sd.query_pairs(directory, 0.05, output=tmp_path / "pairs")
    assert sorted(os.listdir(tmp_path)) == ["points"]


# ------------------------------------------------------------------------- errors
def test_missing_datasets_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        sd.query_pairs(tmp_path / "nowhere", 0.1)
    with pytest.raises(FileNotFoundError, match=r"no file matches"):
        sd.query_pairs(str(tmp_path / "*.parquet"), 0.1)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no \\*.parquet file"):
        sd.query_pairs(tmp_path / "empty", 0.1)


def test_unreadable_and_mismatched_files_are_named(tmp_path):
    (tmp_path / "a.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match=r"a\.parquet.*as Parquet"):
        sd.query_pairs(tmp_path / "a.parquet", 0.1)
    pq.write_table(pa.table({"x": [0.0], "y": [1.0]}), tmp_path / "b.parquet")
    pq.write_table(pa.table({"x": [0.0], "z": [1.0]}), tmp_path / "c.parquet")
    with pytest.raises(ValueError, match=r"c\.parquet.*no column 'y'"):
        sd.query_pairs([tmp_path / "b.parquet", tmp_path / "c.parquet"], 0.1)
    pq.write_table(pa.table({"x": [0.0], "y": ["text"]}), tmp_path / "d.parquet")
    with pytest.raises(TypeError, match=r"column 'y' of .*d\.parquet.*numeric"):
        sd.query_pairs([tmp_path / "b.parquet", tmp_path / "d.parquet"], 0.1)


def test_bad_parameters_are_named():
    points = as_array(uniform(100, 2))
    with pytest.raises(ValueError, match="`r`"):
        sd.query_pairs(points, -1.0)
    with pytest.raises(TypeError, match="exactly one of `r` and `radii_column`"):
        sd.query_pairs(points)
    with pytest.raises(ValueError, match="half the periodic box"):
        sd.query_pairs(points, 0.6, box=1.0)
    with pytest.raises(TypeError, match="`points` is an array: `columns`"):
        sd.query_pairs(points, 0.1, columns="x,y")
    with pytest.raises(TypeError, match="Parquet path.*NumPy or dask array.*got dict"):
        sd.query_pairs({"x": [0.0]}, 0.1)
    with pytest.raises(ValueError, match=r"`points` must be an array of shape \(n, d\) with "
                                         r"d = 1, 2 or 3; got shape \(3, 4\)"):
        sd.query_pairs(np.zeros((3, 4)), 0.1)
    with pytest.raises(TypeError, match="`queries` must hold real numbers; got dtype bool"):
        sd.query_knn(points, np.zeros((3, 2), dtype=bool), 2)
    with pytest.raises(TypeError, match="`plan` must be None or a Plan; got dict"):
        sd.query_pairs(points, 0.1, plan={"rows_per_tile": 10})
    with pytest.raises(TypeError, match="`output` must be None, an Output or a path; got int"):
        sd.query_pairs(points, 0.1, output=3)
    with pytest.raises(ValueError, match="`k`"):
        sd.query_knn(points, points, 0)
    with pytest.raises(ValueError, match="`queries` must have 2 coordinates"):
        sd.query_radius(points, as_array(uniform(10, 3)), 0.1)


def test_output_and_plan_check_their_values(tmp_path):
    assert sd.Output(tmp_path / "x") == sd.Output(str(tmp_path / "x"))
    assert sd.Plan(progress=np.True_).progress is True
    with pytest.raises(TypeError, match=r"`path` must be a str or os.PathLike naming a "
                                        r"directory; got int 3\."):
        sd.Output(3)
    with pytest.raises(ValueError, match="`path` must name a directory; got ''"):
        sd.Output("")
    with pytest.raises(TypeError, match="`overwrite` must be True or False; got 'yes'"):
        sd.Output("x", overwrite="yes")
    with pytest.raises(ValueError, match="`row_group_rows` must be >= 1; got 0"):
        sd.Output("x", row_group_rows=0)
    for name in ("memory_per_worker", "rows_per_tile", "max_result_bytes"):
        with pytest.raises(ValueError, match=f"`{name}` must be >= 1; got -5"):
            sd.Plan(**{name: -5})
        with pytest.raises(TypeError, match=f"`{name}` must be an integer; got 1.5"):
            sd.Plan(**{name: 1.5})
    with pytest.raises(TypeError, match="`progress` must be True or False; got 1"):
        sd.Plan(progress=1)
    with pytest.raises(AttributeError):
        sd.Plan().rows_per_tile = 3


def test_an_output_that_exists_is_refused_before_the_data_are_read(tmp_path):
    (tmp_path / "pairs").mkdir()
    with pytest.raises(FileExistsError, match="the output .*pairs' exists; remove it or"):
        sd.query_pairs(tmp_path / "missing.parquet", 0.1, output=tmp_path / "pairs")
    with pytest.raises(FileNotFoundError, match="the directory of the output does not exist"):
        sd.query_pairs(tmp_path / "missing.parquet", 0.1, output=tmp_path / "no" / "pairs")


def test_queries_held_in_memory_equal_the_grid():
    points = uniform(4000, 3, seed=17)
    queries = np.concatenate([uniform(300, 3, seed=18), points[:40]])
    near = sd.query_radius(as_array(points), queries, 0.05, return_distances=True,
                           plan=sd.Plan(rows_per_tile=900))
    expected = Grid(points).query_radius(queries, 0.05, return_distances=True)
    got = sorted_frame(near, ["query", "point"])
    np.testing.assert_array_equal(got["query"].to_numpy(),
                                  np.repeat(np.arange(len(queries)), expected.counts))
    np.testing.assert_array_equal(got["point"].to_numpy(), expected.indices)
    np.testing.assert_array_equal(got["distance"].to_numpy(), expected.distances)
    table = pd.DataFrame(queries.astype(np.float32), columns=["x", "y", "z"])
    for form in (queries, queries.astype(np.float32), table):
        nearest = sd.query_knn(points, form, 5, plan=sd.Plan(rows_per_tile=900))
        exact = np.asarray(form, dtype=np.float64)
        assert_knn_equal(nearest, Grid(points).query_knn(exact, 5), 5)


def pairs_bytes(points, r):
    """Bytes of the rows ``i, j`` of the pairs of ``points`` within ``r``."""
    return 16 * len(Grid(points).query_pairs(r))


def test_results_in_memory_past_their_limits_name_output():
    points, r = uniform(3000, 3, seed=19), 0.06
    whole = pairs_bytes(points, r)
    tiles = sd.Plan(rows_per_tile=600)
    assert len(sd.query_pairs(points, r, plan=tiles)) == whole // 16
    # The whole result against `max_result_bytes` (on the local schedulers every tile's
    # rows are in this process, so one tile is held to it as well).
    small = sd.Plan(rows_per_tile=600, max_result_bytes=whole - 1)
    with pytest.raises(sd.ResultTooLargeError, match=(
            rf"the rows returned in memory must fit in `max_result_bytes` = {whole - 1:,} "
            rf"bytes; got {whole:,} bytes from \d+ of \d+ tiles\. Pass `output=` \(a "
            r"directory\) to have the tiles write their rows to a Parquet dataset as they "
            r"run, or raise `Plan.max_result_bytes`\.")):
        sd.query_pairs(points, r, plan=small)
    # One tile against its share of `memory_per_worker`.
    tight = sd.Plan(rows_per_tile=600, memory_per_worker=400)
    with pytest.raises(sd.ResultTooLargeError, match=(
            r"the rows of one tile must fit in 100 bytes \(0.25 of `memory_per_worker`\) to "
            r"be returned in memory; got [\d,]+ bytes in tile \d+ before it finished\. Pass "
            r"`output=` .*, or give the workers more memory\.")):
        sd.query_pairs(points, r, plan=tight)
    with pytest.raises(sd.ResultTooLargeError, match=r"to be sorted; .* \(without `sort`\)"):
        sd.query_pairs(points, r, plan=tight, sort=True)
    with pytest.raises(sd.ResultTooLargeError, match="`max_result_bytes`"):
        sd.query_knn(points, points, 4, plan=sd.Plan(rows_per_tile=600,
                                                     max_result_bytes=1000))


def test_nan_in_a_dask_array_names_its_block():
    points = uniform(100, 2)
    points[57, 0] = np.inf
    with pytest.raises(ValueError, match="block 1, row 7, coordinate 0"):
        sd.query_pairs(as_array(points, 50), 0.1)


# --------------------------------------------------------------------- command line
@pytest.mark.slow
def test_the_command_line_runs_pairs_and_knn_on_a_local_cluster(parquet_points, tmp_path):
    import subprocess
    import sys

    directory, points = parquet_points
    for command in (["pairs", directory, "-r", "0.05", "--distances"],
                    ["knn", directory, "-k", "3"]):
        output = tmp_path / command[0]
        finished = subprocess.run(
            [sys.executable, "-m", "spatialhash", *map(str, command), "--columns", "x,y,z",
             "-o", str(output), "--dask", "local", "--workers", "1",
             "--memory-per-worker", "1G"],
            capture_output=True, text=True, check=False)
        assert finished.returncode == 0, finished.stderr
        assert f"to {output}" in finished.stdout
    assert_pairs_equal(read_dataset(tmp_path / "pairs"),
                       Grid(points, cell_size=0.05).query_pairs(0.05, return_distances=True))
    assert_knn_equal(read_dataset(tmp_path / "knn"), Grid(points).query_knn(points, 3), 3)


def test_the_command_line_names_what_does_not_apply_with_dask(parquet_points, tmp_path,
                                                              capsys, monkeypatch):
    from spatialhash import cli
    from spatialhash._cli import dask_queries

    directory, _ = parquet_points
    base = ["pairs", str(directory), "-r", "0.05", "-o", str(tmp_path / "out")]
    assert cli.main([*base, "--dask", "tcp://127.0.0.1:9", "--threads", "2"]) == 2
    assert "--threads does not apply with --dask" in capsys.readouterr().err
    assert cli.main([*base, "--dask", "tcp://127.0.0.1:9", "--workers", "2"]) == 2
    assert "--workers applies to --dask local only" in capsys.readouterr().err
    monkeypatch.setattr(dask_queries, "CONNECT_TIMEOUT", "0.5s")
    assert cli.main([*base, "--dask", "tcp://127.0.0.1:9"]) == 2
    assert "cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_dask_refuses_csv_and_npy_inputs_before_a_cluster_starts(parquet_points, tmp_path,
                                                                 capsys, monkeypatch):
    # Reading CSV on the workers as the command without --dask reads it would take a
    # second CSV reader that could parse other points from the same file: refused instead.
    from spatialhash import cli
    from spatialhash._cli import dask_queries

    def no_cluster(*args):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(dask_queries, "_connect", no_cluster)
    directory, _ = parquet_points
    (tmp_path / "points.csv").write_text("x,y\n0,0\n1,1\n")
    np.save(tmp_path / "queries.npy", np.zeros((2, 2)))
    (tmp_path / "fake.parquet").write_text("x,y\n0,0\n")
    output = str(tmp_path / "out")
    csv = str(tmp_path / "points.csv")
    assert cli.main(["pairs", csv, "-r", "0.1", "-o", output, "--dask", "local"]) == 2
    target = str(tmp_path / "points.parquet")
    assert capsys.readouterr().err == (
        f"spatialhash pairs: error: INPUT must be Parquet with --dask (a .parquet file, a "
        f"directory of them or a glob); got {csv}, a CSV file. Convert it once: python -c "
        f"\"import pyarrow.csv as c, pyarrow.parquet as p; p.write_table(c.read_csv({csv!r}), "
        f"{target!r})\", or run without --dask, which reads it as it is.\n")
    npy = str(tmp_path / "queries.npy")
    assert cli.main(["knn", str(directory), "--queries", npy, "-k", "2", "-o", output,
                     "--dask", "local"]) == 2
    assert (f"--queries must be Parquet with --dask (a .parquet file, a directory of them "
            f"or a glob); got {npy}, a .npy file. Write its columns to a .parquet file once "
            "(pyarrow.parquet.write_table), or run without --dask") in capsys.readouterr().err
    fake = str(tmp_path / "fake.parquet")
    assert cli.main(["pairs", fake, "-r", "0.1", "-o", output, "--dask", "local"]) == 2
    assert (f"INPUT must be Parquet with --dask; got {fake}, which pyarrow cannot read as "
            "Parquet (") in capsys.readouterr().err
    missing = str(tmp_path / "missing.parquet")
    assert cli.main(["pairs", missing, "-r", "0.1", "-o", output, "--dask", "local"]) == 2
    assert (f"INPUT: no such Parquet file or directory: {missing!r}."
            in capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_dask_checks_output_before_a_cluster_starts(parquet_points, tmp_path, capsys,
                                                   monkeypatch):
    from spatialhash import cli
    from spatialhash._cli import dask_queries

    def no_cluster(*args):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(dask_queries, "_connect", no_cluster)
    base = ["pairs", str(parquet_points[0]), "-r", "0.05", "--dask", "local", "-q"]
    taken = tmp_path / "taken"
    taken.mkdir()
    assert cli.main([*base, "-o", str(taken)]) == 2
    assert capsys.readouterr().err == (
        f"spatialhash pairs: error: OUTPUT: the output {str(taken)!r} exists; remove it or "
        "pass `overwrite=True` to `Output` (--overwrite).\n")
    nowhere = tmp_path / "no" / "pairs"
    assert cli.main([*base, "-o", str(nowhere)]) == 2
    assert (f"OUTPUT: the directory of the output does not exist: {str(nowhere.parent)!r}."
            in capsys.readouterr().err)
    for name, kind in (("pairs.csv", "a CSV file"), ("pairs.npy", "a .npy file")):
        output = str(tmp_path / name)
        assert cli.main([*base, "-o", output]) == 2
        assert capsys.readouterr().err == (
            f"spatialhash pairs: error: OUTPUT must be a directory with --dask, written as a "
            f"Parquet dataset; got {output}, the name of {kind}. Name a directory (pairs/, "
            f"pairs.parquet), or run without --dask to write {kind}.\n")
    assert sorted(os.listdir(tmp_path)) == ["points", "taken"]


def test_dask_says_when_the_command_without_it_is_likely_faster(parquet_points, tmp_path,
                                                                capsys, monkeypatch):
    from spatialhash import cli
    from spatialhash._cli import dask_queries
    from spatialhash._cli.common import CommandError

    def no_cluster(*args):
        raise CommandError("no cluster in this test.")

    monkeypatch.setattr(dask_queries, "_connect", no_cluster)
    directory = str(parquet_points[0])
    output = str(tmp_path / "out")
    advice = ("without --dask the command is likely faster for a dataset this size (a "
              "cluster costs seconds to start and to hand the work to).")
    assert cli.main(["pairs", directory, "-r", "0.05", "-o", output, "--dask", "local"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"spatialhash pairs: INPUT holds 5,000 points, fewer than 1,000,000: {advice}",
        "spatialhash pairs: error: no cluster in this test."]
    assert cli.main(["knn", directory, "--queries", directory, "-k", "2", "-o", output,
                     "--dask", "local"]) == 2
    assert (f"spatialhash knn: INPUT and --queries hold 10,000 points, fewer than 1,000,000: "
            f"{advice}") in capsys.readouterr().err
    assert cli.main(["pairs", directory, "-r", "0.05", "-o", output, "--dask", "local",
                     "-q"]) == 2
    assert advice not in capsys.readouterr().err
    monkeypatch.setattr(dask_queries, "SMALL_INPUT_POINTS", 5000)
    assert cli.main(["pairs", directory, "-r", "0.05", "-o", output, "--dask", "local"]) == 2
    assert advice not in capsys.readouterr().err


# ------------------------------------------------------------------ a real cluster
@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with dask.config.set({"distributed.worker.daemon": False,
                          "distributed.admin.tick.limit": "1h"}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=":0", silence_logs=40)
        client = distributed.Client(cluster)
        yield client
        client.close()
        cluster.close()


@pytest.mark.slow
def test_a_local_cluster_gives_the_grid_answers(cluster, parquet_points, tmp_path):
    directory, points = parquet_points
    with dask.config.set(scheduler=None):
        written = sd.query_pairs(directory, 0.05, columns="x,y,z", output=tmp_path / "pairs",
                                 plan=sd.Plan(rows_per_tile=900), return_distances=True)
        knn = sd.query_knn(directory, directory, 4, columns="x,y,z",
                           query_columns="x,y,z", plan=sd.Plan(rows_per_tile=900))
    assert written.n_tiles > 2
    assert_pairs_equal(read_dataset(tmp_path / "pairs"),
                       Grid(points, cell_size=0.05).query_pairs(0.05, return_distances=True))
    assert_knn_equal(knn, Grid(points).query_knn(points, 4), 4)


@pytest.mark.slow
def test_a_result_larger_than_a_worker_is_gathered_to_the_client(cluster, parquet_points):
    # Each tile's rows travel to the client on their own: with tiles held to a quarter of
    # `memory_per_worker`, a result as large as that memory comes back whole; a tile
    # past its share stops with an error naming `output=`, and no worker dies.
    directory, points = parquet_points
    whole = pairs_bytes(points, 0.05)
    with dask.config.set(scheduler=None):
        pairs = sd.query_pairs(directory, 0.05, columns="x,y,z",
                               plan=sd.Plan(rows_per_tile=1000, memory_per_worker=whole))
        assert_pairs_equal(pairs, Grid(points, cell_size=0.05).query_pairs(0.05))
        with pytest.raises(sd.ResultTooLargeError, match="tile .* Pass `output=`"):
            sd.query_pairs(directory, 0.05, columns="x,y,z",
                           plan=sd.Plan(rows_per_tile=1000, memory_per_worker=whole // 8))
        with pytest.raises(sd.ResultTooLargeError, match="`max_result_bytes` = 1,000 bytes"):
            sd.query_radius(directory, points, 0.05, columns="x,y,z",
                            plan=sd.Plan(rows_per_tile=1000, max_result_bytes=1000))
    assert len(cluster.scheduler_info()["workers"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize(("command", "columns"), [
    (["pairs", "-r", "0.25", "--distances"], ["i", "j", "distance"]),
    (["neighbors", "-r", "0.25", "--distances"], ["query", "point", "distance"]),
    (["knn", "-k", "5"], ["query", "rank", "point", "distance"]),
])
def test_the_command_line_writes_the_same_columns_and_rows_with_and_without_dask(
        cluster, tmp_path, capsys, command, columns):
    from spatialhash import cli

    # Points on a 1/8 lattice: exact distances, many ties and pairs at exactly r. The text
    # column is left out by both engines' default choice of coordinates.
    points = np.random.default_rng(15).integers(0, 16, (400, 3)) / 8.0
    source = tmp_path / "points.parquet"
    pq.write_table(pa.table({"x": points[:, 0], "y": points[:, 1], "z": points[:, 2],
                             "label": [f"p{i}" for i in range(400)]}), source,
                   row_group_size=150)
    name, *options = command
    plain, on_dask = tmp_path / f"{name}.parquet", tmp_path / f"{name}-dask"
    assert cli.main([name, str(source), *options, "-o", str(plain)]) == 0
    assert "likely faster" not in capsys.readouterr().err
    with dask.config.set(scheduler=None):
        assert cli.main([name, str(source), *options, "-o", str(on_dask),
                         "--dask", cluster.scheduler.address]) == 0
    assert "INPUT holds 400 points" in capsys.readouterr().err
    expected, got = pq.read_table(plain).to_pandas(), read_dataset(on_dask)
    assert list(expected.columns) == list(got.columns) == columns
    assert len(expected) > 400
    pd.testing.assert_frame_equal(sorted_frame(got, columns), sorted_frame(expected, columns))


@pytest.mark.slow
def test_a_worker_killed_mid_run_leaves_a_complete_output_or_none(cluster, tmp_path):
    import signal
    import threading

    points = uniform(200_000, 3, seed=14)
    r = 0.02
    output = tmp_path / "pairs"
    workers = list(cluster.scheduler_info()["workers"])

    victim = cluster.run(os.getpid, workers=[workers[0]])[workers[0]]
    killed = threading.Event()

    def kill_one():
        os.kill(victim, signal.SIGKILL)
        killed.set()

    timer = threading.Timer(1.0, kill_one)
    with dask.config.set(scheduler=None):
        sd.query_pairs(as_array(points[:1000]), r)  # the workers warmed first
        timer.start()
        try:
            sd.query_pairs(as_array(points, 20_000), r, output=output,
                           plan=sd.Plan(rows_per_tile=20_000))
        except Exception:  # the run may fail (the worker's tasks exhausted their retries)
            assert not output.exists()
        else:
            assert_pairs_equal(read_dataset(output), Grid(points, cell_size=r).query_pairs(r))
            manifest = pd.read_json(output / "_manifest.json", typ="series")
            assert sorted(os.listdir(output)) == sorted(
                ["_manifest.json", *(f["path"] for f in manifest["files"])])
        finally:
            timer.cancel()
    assert killed.is_set(), "the run ended before the worker was killed: make it longer"
    assert not [p for p in os.listdir(tmp_path) if "incomplete" in p]
    cluster.wait_for_workers(2, timeout=60)
