"""The command line, tested by calling it: ``main([...])`` in-process, the console script and
``python -m spatialhash`` in a subprocess.

Results are checked against the brute-force oracles on dyadic-lattice points (exact
distances, so ties and ``distance == r`` are decided identically); every error message is
pinned; failed runs must leave neither the output nor a temporary file behind.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tempfile
import types
from importlib import metadata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import spatialhash
from spatialhash import cli
from spatialhash._cli import bench, common, info, readers, writers

import oracles

FORMATS = ("npy", "csv", "parquet")


# ---------------------------------------------------------------------- helpers
def lattice_points(seed: int, n: int = 120, n_dims: int = 3) -> np.ndarray:
    """Points on a 1/8 lattice: exact squared distances, many ties."""
    return np.random.default_rng(seed).integers(0, 16, (n, n_dims)) / 8.0


def write_points(path: Path, columns: dict[str, np.ndarray], header: bool = True) -> Path:
    """``columns`` as a point file in the format of ``path``'s extension."""
    suffix = path.suffix
    if suffix == ".npy":
        np.save(path, np.column_stack(list(columns.values())))
    elif suffix == ".csv":
        lines = [",".join(columns)] if header else []
        rows = zip(*columns.values(), strict=True)
        lines += [",".join(repr(float(value)) for value in row) for row in rows]
        path.write_text("\n".join(lines) + "\n")
    else:
        pq.write_table(pa.table(columns), path)
    return path


def named(points: np.ndarray) -> dict[str, np.ndarray]:
    return {name: points[:, axis] for axis, name in enumerate("xyz"[: points.shape[1]])}


def read_result(path: Path) -> dict[str, np.ndarray]:
    """A result file's columns by name."""
    if path.suffix == ".npy":
        array = np.load(path)
        return {name: array[name] for name in array.dtype.names}
    if path.suffix == ".csv":
        lines = path.read_text().splitlines()
        names = lines[0].split(",")
        rows = [line.split(",") for line in lines[1:]]
        return {
            name: np.array([float(row[k]) if name == "distance" else int(row[k])
                            for row in rows], dtype=np.float64 if name == "distance" else
                           np.int64)
            for k, name in enumerate(names)
        }
    table = pq.read_table(path)
    return {name: table.column(name).to_numpy() for name in table.column_names}


def run(*argv) -> int:
    return cli.main([str(arg) for arg in argv])


def files_in(folder: Path) -> set[str]:
    return {path.name for path in folder.iterdir()}


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    return err[-1] if err else ""


# ---------------------------------------------------------------------- good runs
@pytest.mark.parametrize("input_format", FORMATS)
@pytest.mark.parametrize("output_format", FORMATS)
def test_pairs_in_every_format_equal_the_oracle(tmp_path, input_format, output_format):
    points = lattice_points(1)
    source = write_points(tmp_path / f"points.{input_format}", named(points))
    output = tmp_path / f"pairs.{output_format}"
    assert run("pairs", source, "-r", 0.25, "-o", output, "--distances", "-q") == 0
    result = read_result(output)
    assert list(result) == ["i", "j", "distance"]
    assert all(column.dtype == (np.float64 if name == "distance" else np.int64)
               for name, column in result.items())
    order = np.lexsort((result["j"], result["i"]))
    expected, distances = oracles.pairs(points, 0.25)
    np.testing.assert_array_equal(np.column_stack([result["i"], result["j"]])[order], expected)
    # Exact, bit for bit, through every format (CSV writes the shortest round-trip repr).
    np.testing.assert_array_equal(result["distance"][order], distances)
    assert files_in(tmp_path) == {source.name, output.name}


def test_pairs_without_distances_has_two_columns(tmp_path, capsys):
    points = lattice_points(2, n_dims=2)
    source = write_points(tmp_path / "points.npy", named(points))
    assert run("pairs", source, "-r", 0.125, "-o", tmp_path / "pairs.csv") == 0
    expected, _ = oracles.pairs(points, 0.125)
    assert capsys.readouterr().out == f"wrote {len(expected):,} pairs to {tmp_path}/pairs.csv\n"
    result = read_result(tmp_path / "pairs.csv")
    assert list(result) == ["i", "j"]
    assert {tuple(pair) for pair in zip(result["i"], result["j"], strict=True)} == {
        tuple(pair) for pair in expected.tolist()}


@pytest.mark.parametrize("source", ["column", "file"])
def test_pairs_with_radii_equal_the_oracle(tmp_path, source):
    points = lattice_points(3)
    radii = np.random.default_rng(3).integers(0, 3, len(points)) / 16.0
    if source == "column":
        path = write_points(tmp_path / "points.parquet", {**named(points), "radius": radii})
        options = ["--radii-column", "radius"]
    else:
        path = write_points(tmp_path / "points.csv", named(points))
        options = ["--radii", write_points(tmp_path / "radii.npy", {"r": radii})]
    assert run("pairs", path, *options, "-o", tmp_path / "out.npy", "--distances", "-q") == 0
    result = read_result(tmp_path / "out.npy")
    order = np.lexsort((result["j"], result["i"]))
    expected, distances = oracles.pairs(points, radii=radii)
    assert len(expected) > 0
    np.testing.assert_array_equal(np.column_stack([result["i"], result["j"]])[order], expected)
    np.testing.assert_array_equal(result["distance"][order], distances)


def test_pairs_in_a_periodic_box(tmp_path):
    points = lattice_points(4)
    source = write_points(tmp_path / "points.npy", named(points))
    assert run("pairs", source, "-r", 0.25, "--box", "2,2,4", "-o", tmp_path / "out.npy",
               "-q", "--distances") == 0
    result = read_result(tmp_path / "out.npy")
    box3 = np.array([2.0, 2.0, 4.0])
    expected, distances = oracles.pairs(points, 0.25, box3=box3)
    order = np.lexsort((result["j"], result["i"]))
    np.testing.assert_array_equal(np.column_stack([result["i"], result["j"]])[order], expected)
    np.testing.assert_array_equal(result["distance"][order], distances)
    # The wrap-around finds pairs the open box does not.
    assert len(expected) > len(oracles.pairs(points, 0.25)[0])


def test_pairs_stream_in_chunks(tmp_path, monkeypatch):
    from spatialhash._cli import queries

    monkeypatch.setattr(queries, "PAIRS_CHUNK", 7)
    points = lattice_points(5)
    source = write_points(tmp_path / "points.npy", named(points))
    for output in ("out.npy", "out.csv", "out.parquet"):
        assert run("pairs", source, "-r", 0.25, "-o", tmp_path / output, "-q") == 0
        result = read_result(tmp_path / output)
        expected, _ = oracles.pairs(points, 0.25)
        order = np.lexsort((result["j"], result["i"]))
        np.testing.assert_array_equal(np.column_stack([result["i"], result["j"]])[order],
                                      expected)
    assert pq.ParquetFile(tmp_path / "out.parquet").num_row_groups > 1


@pytest.mark.parametrize("with_queries", [False, True])
def test_neighbors_equal_the_oracle(tmp_path, monkeypatch, with_queries):
    from spatialhash._cli import queries as query_commands

    monkeypatch.setattr(query_commands, "QUERY_BLOCK", 16)  # several blocks
    points = lattice_points(6, n_dims=2)
    source = write_points(tmp_path / "points.csv", named(points))
    query_points = lattice_points(7, n=50, n_dims=2) if with_queries else points
    options = (["--queries", write_points(tmp_path / "q.parquet", named(query_points))]
               if with_queries else [])
    output = tmp_path / "near.csv"
    assert run("neighbors", source, "-r", 0.25, *options, "-o", output, "--distances",
               "-q") == 0
    result = read_result(output)
    assert list(result) == ["query", "point", "distance"]
    indptr, indices, distances = oracles.radius(points, query_points, 0.25)
    np.testing.assert_array_equal(result["query"], np.repeat(np.arange(len(query_points)),
                                                             np.diff(indptr)))
    np.testing.assert_array_equal(result["point"], indices)
    np.testing.assert_array_equal(result["distance"], distances)


@pytest.mark.parametrize("r_max", [None, 0.25])
def test_knn_equals_the_oracle(tmp_path, monkeypatch, r_max):
    from spatialhash._cli import queries as query_commands

    monkeypatch.setattr(query_commands, "QUERY_BLOCK", 16)
    points = lattice_points(8)
    query_points = lattice_points(9, n=40)
    source = write_points(tmp_path / "points.npy", named(points))
    queries = write_points(tmp_path / "q.csv", named(query_points))
    options = [] if r_max is None else ["--r-max", r_max]
    output = tmp_path / "knn.parquet"
    assert run("knn", source, "-k", 5, "--queries", queries, *options, "-o", output,
               "-q") == 0
    result = read_result(output)
    assert list(result) == ["query", "rank", "point", "distance"]
    indices, distances, counts = oracles.knn(points, query_points, 5, r_max)
    if r_max is not None:
        assert (counts < 5).any()  # some queries have fewer rows
    found = np.arange(5)[np.newaxis, :] < counts[:, np.newaxis]
    np.testing.assert_array_equal(result["query"], np.repeat(np.arange(40), counts))
    np.testing.assert_array_equal(result["rank"], np.nonzero(found)[1])
    np.testing.assert_array_equal(result["point"], indices[found])
    np.testing.assert_array_equal(result["distance"], distances[found])


def test_knn_without_queries_finds_each_point_first(tmp_path):
    points = np.unique(lattice_points(10), axis=0)
    source = write_points(tmp_path / "points.npy", named(points))
    assert run("knn", source, "-k", 2, "-o", tmp_path / "k.npy", "-q") == 0
    result = read_result(tmp_path / "k.npy")
    nearest = result["rank"] == 0
    np.testing.assert_array_equal(result["point"][nearest], np.arange(len(points)))
    np.testing.assert_array_equal(result["distance"][nearest], 0.0)


@settings(max_examples=25)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 40),
    n_dims=st.integers(1, 3),
    r=st.sampled_from([0.0, 0.125, 0.25, 0.5]),
    input_format=st.sampled_from(FORMATS),
    output_format=st.sampled_from(FORMATS),
)
def test_pairs_property_any_format(seed, n, n_dims, r, input_format, output_format):
    points = np.random.default_rng(seed).integers(-4, 4, (n, n_dims)) / 8.0
    with tempfile.TemporaryDirectory() as folder:
        source = write_points(Path(folder) / f"p.{input_format}", named(points))
        output = Path(folder) / f"out.{output_format}"
        assert run("pairs", source, "-r", r, "-o", output, "--distances", "-q") == 0
        result = read_result(output)
    expected, distances = oracles.pairs(points, r)
    order = np.lexsort((result["j"], result["i"]))
    np.testing.assert_array_equal(
        np.column_stack([result["i"], result["j"]])[order].reshape(-1, 2), expected)
    np.testing.assert_array_equal(result["distance"][order], distances)


# ---------------------------------------------------------------------- point files
def test_csv_without_header_blank_lines_quotes_and_bom(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text('\ufeff0,0.5\n\n"0.25", 0.5\n  \n1,0.5\r\n', encoding="utf-8")
    points, radii = readers.read_points(str(path))
    np.testing.assert_array_equal(points, [[0, 0.5], [0.25, 0.5], [1, 0.5]])
    assert radii is None


def test_csv_default_columns_skip_text_and_columns_pick_in_order(tmp_path):
    path = tmp_path / "points.csv"
    path.write_text("id,label,x,y,r\n0,a,1,2,0.5\n1,b,3,4,0.25\n")
    points, radii = readers.read_points(str(path), radii_column="r")
    # "id" is numeric, so the default takes id, x, y; r is the radius column.
    np.testing.assert_array_equal(points, [[0, 1, 2], [1, 3, 4]])
    np.testing.assert_array_equal(radii, [0.5, 0.25])
    points, _ = readers.read_points(str(path), columns=["y", "x"])
    np.testing.assert_array_equal(points, [[2, 1], [4, 3]])


@pytest.mark.parametrize("first", ["N/A", "0x10", "1_0", "0 # c", ""])
def test_csv_column_with_text_in_its_first_row_only_is_numeric_and_reported(tmp_path, first):
    # The first data row alone must not decide which columns are text: "N/A" there once
    # silently dropped the column `y` from the coordinates (a 1-D search, exit status 0).
    path = tmp_path / "points.csv"
    path.write_text(f"x,y\n0,{first}\n0,0\n0,10\n")
    output = tmp_path / "out.npy"
    assert run("pairs", path, "-r", 0.5, "-o", output, "-q") == 2
    assert not output.exists()
    with pytest.raises(readers.CommandError, match=r"column 'y' must hold numbers.* line 2"):
        readers.read_points(str(path))
    # A column with text in every row stays text, and is left out by default.
    path.write_text("x,name,y\n0,a,0\n1,,1\n2,c,2\n")
    points, _ = readers.read_points(str(path))
    np.testing.assert_array_equal(points, [[0, 0], [1, 1], [2, 2]])


def test_structured_npy_and_parquet_integer_columns(tmp_path):
    records = np.array([(1, 2.5, b"a"), (3, 4.5, b"b")],
                       dtype=[("x", "i4"), ("y", "f4"), ("tag", "S1")])
    np.save(tmp_path / "points.npy", records)
    points, _ = readers.read_points(str(tmp_path / "points.npy"))
    np.testing.assert_array_equal(points, [[1, 2.5], [3, 4.5]])
    pq.write_table(pa.table({"x": np.array([1, 2], dtype=np.int16), "name": ["a", "b"]}),
                   tmp_path / "points.parquet")
    points, _ = readers.read_points(str(tmp_path / "points.parquet"))
    assert points.dtype == np.float64
    np.testing.assert_array_equal(points, [[1], [2]])


@pytest.mark.parametrize("output_format", FORMATS)
@pytest.mark.parametrize("command", ["pairs", "neighbors", "knn"])
def test_zero_points_give_an_empty_result(tmp_path, command, output_format):
    source = tmp_path / "points.csv"
    source.write_text("x,y\n")
    output = tmp_path / f"out.{output_format}"
    option = {"pairs": ["-r", 1], "neighbors": ["-r", 1], "knn": ["-k", 3]}[command]
    assert run(command, source, *option, "-o", output, "-q") == 0
    result = read_result(output)
    assert all(column.shape == (0,) for column in result.values())
    assert len(result) == {"pairs": 2, "neighbors": 2, "knn": 4}[command]


def test_inputs_are_not_modified(tmp_path):
    points = lattice_points(11)
    source = write_points(tmp_path / "points.npy", named(points))
    before = source.read_bytes()
    assert run("pairs", source, "-r", 0.25, "-o", tmp_path / "out.npy", "-q") == 0
    assert source.read_bytes() == before


# ---------------------------------------------------------------------- bad input
def _npy(array):
    return lambda path: np.save(path, array)


def _npy_bytes(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _text(text, encoding="utf-8"):
    return lambda path: path.write_bytes(text.encode(encoding) if isinstance(text, str)
                                         else text)


def _parquet(**columns):
    return lambda path: pq.write_table(pa.table(columns), path)


GOOD_CSV = _text("x,y\n0,0\n1,1\n")

BAD_INPUTS = [
    # (name of INPUT, how to make it, extra options, the message after "error: ")
    ("missing.csv", None, [], r"missing.csv: no such file \(INPUT\)\."),
    ("points.txt", _text("1,2\n"), [], r"INPUT must be a .npy, .csv or .parquet file; got "
                                       r"'.*points.txt' \(extension '.txt'\)\."),
    ("folder.npy", lambda path: path.mkdir(), [], r"folder.npy: is a folder, not a file "
                                                  r"\(INPUT\)\."),
    ("bad.npy", _text(b"\x00garbage" * 10), [],
     r"bad.npy: not a valid .npy file \(it does not start with the .npy magic string\)\."),
    ("cut.npy", lambda path: path.write_bytes(_npy_bytes(np.zeros((5, 2)))[:90]), [],
     r"cut.npy: not a valid .npy file \(.*\)\."),
    ("objects.npy", lambda path: np.save(path, np.array([{}, 1], dtype=object)), [],
     r"objects.npy: not a numeric .npy file \(it holds Python objects\)\."),
    ("zipped.npy", lambda path: np.savez(path.with_suffix(".npz"), a=np.zeros(3))
     or path.with_suffix(".npz").rename(path), [],
     r"zipped.npy: is an .npz archive, not a .npy array\."),
    ("complex.npy", _npy(np.zeros((3, 2), complex)), [],
     r"complex.npy: must hold real numbers; got dtype complex128\."),
    ("flags.npy", _npy(np.zeros((3, 2), bool)), [],
     r"flags.npy: must hold real numbers; got dtype bool\."),
    ("cube.npy", _npy(np.zeros((3, 2, 2))), [],
     r"cube.npy: must be a 2-D array of shape \(n, d\); got shape \(3, 2, 2\)\."),
    ("flat.npy", _npy(np.zeros(3)), [],
     r"flat.npy: must be a 2-D array of shape \(n, d\); got shape \(3,\)\."),
    ("wide.npy", _npy(np.zeros((3, 4))), [],
     r"wide.npy: points must have 1, 2 or 3 coordinate columns; got 4 \(an array of shape "
     r"\(3, 4\)\)\. Pick them with --columns\."),
    ("none.npy", _npy(np.zeros((3, 0))), [],
     r"none.npy: points must have 1, 2 or 3 coordinate columns; got 0 \(an array of shape "
     r"\(3, 0\)\)\."),
    ("nan.npy", _npy(np.array([[0.0, 1.0], [2.0, np.nan]])), [],
     r"nan.npy: coordinates must be finite; got nan in column '1' at row 1\."),
    ("inf.parquet", _parquet(x=[0.0, -np.inf], y=[1.0, 2.0]), [],
     r"inf.parquet: coordinates must be finite; got -inf in column 'x' at row 1\."),
    ("null.parquet", _parquet(x=[0.0, None, 2.0]), [],
     r"null.parquet: column 'x' must have a value in every row; got null at row 1\."),
    ("text.parquet", _parquet(x=[0.0], name=["a"]), ["--columns", "x,name"],
     r"text.parquet: column 'name' must hold numbers; got type string\."),
    ("garbled.parquet", _text("PAR1 not really"), [],
     r"garbled.parquet: not a valid .parquet file \(.*\)\."),
    ("empty.csv", _text(""), [], r"empty.csv: the file is empty \(no header and no rows\)\."),
    ("blank.csv", _text("\n  \n"), [], r"blank.csv: the file is empty \(no header and no rows\)\."),
    ("nan.csv", _text("x,y\n0,0\n\n1,nan\n"), [],
     r"nan.csv: coordinates must be finite; got nan in column 'y' at line 4\."),
    ("word.csv", _text("x,y,label\n0,0,a\n1,1,b\n2,oops,c\n"), [],
     r"word.csv: column 'y' must hold numbers; got 'oops' at line 4\."),
    ("label.csv", _text("x,label\n0,a\n"), ["--columns", "x,label"],
     r"label.csv: column 'label' must hold numbers; got 'a' at line 2\."),
    ("empty_value.csv", _text("x,y\n0,\n"), [],
     r"empty_value.csv: column 'y' must hold numbers; got '' at line 2\."),
    ("underscore.csv", _text("0,1\n2,1_0\n"), [],
     r"underscore.csv: column '1' must hold numbers; got '1_0' at line 2\."),
    ("short.csv", _text("x,y\n0,0\n1\n"), [], r"short.csv: line 3 has 1 fields; the header "
                                              r"has 2\."),
    ("long.csv", _text("0,0\n1,1,1\n"), [], r"long.csv: line 2 has 3 fields; the first "
                                            r"line has 2\."),
    ("quoted.csv", _text('x,y\n"0,5",1\n'), ["--columns", "x,y"],
     r"quoted.csv: column 'x' must hold numbers; got '0,5' at line 2\."),
    ("twice.csv", _text("x,x\n0,0\n"), [], r"twice.csv: column names must be unique; got "
                                           r"'x' more than once in the header\."),
    ("binary.csv", _text(b"x,y\n\xff\xfe\x00\x01\n"), [],
     r"binary.csv: not a readable .csv file \(.*\)\."),
    ("four.csv", _text("a,b,c,d\n0,0,0,0\n"), [],
     r"four.csv: points must have 1, 2 or 3 coordinate columns; got 4 \(columns a, b, c, "
     r"d\)\. Pick them with --columns\."),
    ("text_only.csv", _text("name\nabc\n"), [],
     r"text_only.csv: points must have 1, 2 or 3 coordinate columns; got 0 \(no columns\)\."),
    ("good.csv", GOOD_CSV, ["--columns", "x,z"],
     r"--columns must name columns of .*good.csv; got 'z' \(the file has columns x, y\)\."),
]


@pytest.mark.parametrize(("name", "make", "options", "message"), BAD_INPUTS,
                         ids=[case[0] for case in BAD_INPUTS])
def test_bad_input_fails_with_one_line_and_status_2(tmp_path, capsys, name, make, options,
                                                     message):
    source = tmp_path / name
    if make is not None:
        make(source)
    before = files_in(tmp_path)
    status = run("pairs", source, "-r", 1, "-o", tmp_path / "out.npy", *options)
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("spatialhash pairs: error: "), lines[0]
    if not message.startswith(("INPUT", "--")):  # the message starts with the file's path
        message = re.escape(f"{tmp_path}/") + message
    assert re.fullmatch(message, lines[0].removeprefix("spatialhash pairs: error: ")), lines[0]
    assert files_in(tmp_path) == before  # no output, no temporary file


BAD_RUNS = [
    # (argv after the command's INPUT and -o, the message after "error: ")
    (["pairs", "-r", 1, "--radii-column", "r"], r"usage: .*argument --radii-column: not "
                                                r"allowed with argument -r"),
    (["pairs", "--radii-column", "r"], r"--radii-column must name columns of .*good.csv; "
                                       r"got 'r' \(the file has columns x, y\)\."),
    (["pairs", "--radii", "RADII_SHORT"], r".*radii.npy: --radii must hold one radius per "
                                          r"point of INPUT \(2\); got 1\."),
    (["pairs", "--radii", "RADII_NEGATIVE"], r".*radii.npy: radii must be finite and >= 0; "
                                             r"got -1.0 in column '0' at row 1\."),
    (["pairs", "--radii", "RADII_WIDE"], r".*radii.npy: --radii must hold one numeric column; "
                                         r"got 2 \(an array of shape \(2, 2\)\)\."),
    (["pairs", "-r", "0.75", "--box", "1"], r"`r` must be at most half the periodic box "
                                            r"\(0.5 on axis 0\); got 0.75\. Use a larger box "
                                            r"or a smaller radius\."),
    (["pairs", "-r", "1", "--box", "1,1,1"], r"`box` must be a scalar or hold one length per "
                                             r"dimension \(2\); got an array of shape \(3,\) "
                                             r"and dtype float64\."),
    (["pairs", "-r", "1", "--threads", "0"], r"`n_threads` must be -1 or between 1 and \d+ "
                                             r"\(NUMBA_NUM_THREADS\); got 0\."),
    (["neighbors", "-r", 1, "--queries", "QUERIES_3D"],
     r".*q.npy: queries must have as many coordinate columns as INPUT \(2\); got 3\."),
    (["knn", "-k", 1, "--queries", "missing.csv"], r"missing.csv: no such file "
                                                   r"\(--queries\)\."),
]


@pytest.mark.parametrize(("argv", "message"), BAD_RUNS)
def test_bad_options_fail_with_status_2(tmp_path, capsys, argv, message):
    source = tmp_path / "good.csv"
    GOOD_CSV(source)
    np.save(tmp_path / "q.npy", np.zeros((2, 3)))
    replacements = {
        "RADII_SHORT": _npy(np.ones(1)), "RADII_NEGATIVE": _npy(np.array([1.0, -1.0])),
        "RADII_WIDE": _npy(np.ones((2, 2))), "QUERIES_3D": None,
    }
    argv = [str(arg) for arg in argv]
    for index, arg in enumerate(argv):
        if arg in replacements:
            if replacements[arg] is None:
                argv[index] = str(tmp_path / "q.npy")
            else:
                argv[index] = str(tmp_path / "radii.npy")
                replacements[arg](tmp_path / "radii.npy")
    before = files_in(tmp_path)
    assert run(argv[0], source, "-o", tmp_path / "out.csv", *argv[1:]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err, flags=re.S), err
    assert files_in(tmp_path) == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["pairs", "p.csv", "-r", "-1", "-o", "o.csv"],
         "argument -r: must be a finite number >= 0; got '-1'"),
        (["pairs", "p.csv", "-r", "nan", "-o", "o.csv"],
         "argument -r: must be a finite number >= 0; got 'nan'"),
        (["pairs", "p.csv", "-r", "one", "-o", "o.csv"],
         "argument -r: must be a number; got 'one'"),
        (["pairs", "p.csv", "-o", "o.csv"],
         "one of the arguments -r --radii-column --radii is required"),
        (["pairs", "p.csv", "-r", "1"], "the following arguments are required: -o/--output"),
        (["pairs", "p.csv", "-r", "1", "-o", "o.csv", "--box", "0"],
         "argument --box: must be a period > 0, or one per axis separated by commas; got '0'"),
        (["pairs", "p.csv", "-r", "1", "-o", "o.csv", "--columns", "x,,y"],
         "argument --columns: must be column names separated by commas; got 'x,,y'"),
        (["knn", "p.csv", "-k", "0", "-o", "o.csv"],
         "argument -k: must be an integer >= 1; got '0'"),
        (["knn", "p.csv", "-k", "2.5", "-o", "o.csv"],
         "argument -k: must be an integer >= 1; got '2.5'"),
        (["knn", "p.csv", "-k", "2", "--r-max", "-0.5", "-o", "o.csv"],
         "argument --r-max: must be a number >= 0 or inf; got '-0.5'"),
        (["neighbors", "p.csv", "-o", "o.csv"], "the following arguments are required: -r"),
        (["pairs", "p.csv", "-r", "1", "-o", "o.csv", "--bogus"],
         "unrecognized arguments: --bogus"),
        ([], "the following arguments are required: COMMAND"),
        (["frobnicate"], "argument COMMAND: invalid choice: 'frobnicate'"),
        (["demo"], "the following arguments are required: NAME"),
    ],
)
def test_usage_errors_exit_2(capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: spatialhash")
    assert message in err


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("out.txt", r"OUTPUT must be a .npy, .csv or .parquet file; got '.*out.txt' "
                    r"\(extension '.txt'\)\."),
        ("nowhere/out.csv", r".*nowhere/out.csv: the folder '.*nowhere' does not exist "
                            r"\(OUTPUT\)\."),
        ("sub.csv", r".*sub.csv: is a folder, not a file \(OUTPUT\)\."),
    ],
)
def test_bad_output_fails_before_any_work(tmp_path, capsys, output, message):
    source = tmp_path / "good.csv"
    GOOD_CSV(source)
    (tmp_path / "sub.csv").mkdir()
    assert run("pairs", source, "-r", 1, "-o", tmp_path / output) == 2
    assert re.fullmatch("spatialhash pairs: error: " + message,
                                      capsys.readouterr().err.strip())


SAME_FILE_CASES = [
    # (command and its options, the input the output names, how the output spells it)
    (["pairs", "-r", 1], "INPUT", "as given"),
    (["pairs", "-r", 1], "INPUT", "another spelling"),
    (["pairs", "-r", 1], "INPUT", "a symbolic link"),
    (["pairs", "--radii", "RADII"], "--radii", "as given"),
    (["neighbors", "-r", 1], "INPUT", "as given"),
    (["neighbors", "-r", 1, "--queries", "QUERIES"], "--queries", "a hard link"),
    (["knn", "-k", 2], "INPUT", "another spelling"),
    (["knn", "-k", 2, "--queries", "QUERIES"], "--queries", "as given"),
]


@pytest.mark.parametrize(("argv", "role", "spelling"), SAME_FILE_CASES)
def test_output_that_is_an_input_is_refused_before_any_work(tmp_path, capsys, monkeypatch,
                                                            argv, role, spelling):
    """Regression: ``pairs pts.csv -o pts.csv`` replaced its own input with the result."""
    inputs = {"INPUT": tmp_path / "points.csv", "--queries": tmp_path / "queries.csv",
              "--radii": tmp_path / "radii.csv"}
    for path in inputs.values():
        write_points(path, named(lattice_points(5, n=6, n_dims=2 if path.stem != "radii"
                                                else 1)))
    before = {path: path.read_bytes() for path in inputs.values()}
    target = inputs[role]
    output = {"as given": target, "another spelling": f"{tmp_path}/./{target.name}",
              "a symbolic link": tmp_path / "link.csv",
              "a hard link": tmp_path / "hard.csv"}[spelling]
    if spelling == "a symbolic link":
        os.symlink(target, output)
    elif spelling == "a hard link":
        os.link(target, output)
    argv = [{"QUERIES": inputs["--queries"], "RADII": inputs["--radii"]}.get(arg, arg)
            for arg in argv]
    monkeypatch.setattr(readers, "read_points", None)  # never reached
    names = files_in(tmp_path)
    assert run(argv[0], inputs["INPUT"], *argv[1:], "-o", output) == 2
    captured = capsys.readouterr()
    also = "" if str(output) == str(target) else f" ({target})"
    assert captured.err == (
        f"spatialhash {argv[0]}: error: -o/--output must not be an input file; got "
        f"{output}, the same file as {role}{also}. Write the result to another file.\n")
    assert captured.out == ""
    assert {path: path.read_bytes() for path in inputs.values()} == before
    assert files_in(tmp_path) == names


def test_output_beside_an_input_is_written(tmp_path):
    source = write_points(tmp_path / "points.csv", named(lattice_points(6, n=8)))
    before = source.read_bytes()
    output = tmp_path / "points.csv.csv"
    assert run("pairs", source, "-r", 0.5, "-o", output, "-q") == 0
    assert source.read_bytes() == before and output.is_file()


@pytest.mark.parametrize("role", ["reading", "writing"])
def test_missing_pyarrow_is_a_clear_message(tmp_path, capsys, monkeypatch, role):
    source = write_points(tmp_path / ("p.parquet" if role == "reading" else "p.npy"),
                          {"x": np.zeros(2)})
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    output = tmp_path / ("out.npy" if role == "reading" else "out.parquet")
    assert run("pairs", source, "-r", 1, "-o", output) == 2
    assert capsys.readouterr().err == (
        f"spatialhash pairs: error: {role} .parquet needs pyarrow: pip install "
        "'spatialhash[parquet]'\n")
    assert not output.exists()


# ---------------------------------------------------------------------- nothing half-written
@pytest.mark.parametrize("output_format", FORMATS)
@pytest.mark.parametrize("failure", [OSError("No space left on device"), KeyboardInterrupt()])
def test_failure_while_writing_leaves_nothing(tmp_path, capsys, monkeypatch, output_format,
                                              failure):
    from spatialhash._cli import queries

    monkeypatch.setattr(queries, "PAIRS_CHUNK", 5)
    writer_class = {"npy": writers.NpyWriter, "csv": writers.CsvWriter,
                    "parquet": writers.ParquetWriter}[output_format]
    original = writer_class.write
    calls = []

    def write_then_fail(self, columns):
        original(self, columns)  # a first chunk really reaches the temporary file
        calls.append(len(columns[0]))
        if len(calls) == 2:
            raise failure

    monkeypatch.setattr(writer_class, "write", write_then_fail)
    source = write_points(tmp_path / "points.npy", named(lattice_points(12)))
    output = tmp_path / f"out.{output_format}"
    status = run("pairs", source, "-r", 0.25, "-o", output, "-q")
    err = capsys.readouterr().err
    if isinstance(failure, OSError):
        assert status == 1
        assert err == (f"spatialhash pairs: error: {output}: could not write the output "
                       "(No space left on device).\n")
    else:
        assert status == 130
        assert err == "spatialhash pairs: interrupted\n"
    assert len(calls) == 2
    assert files_in(tmp_path) == {"points.npy"}


def test_bad_value_late_in_a_csv_keeps_the_old_output(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(readers, "CSV_BLOCK_CHARS", 64)  # many blocks; the bad one is last
    rows = [f"{i / 8},{i / 4}" for i in range(200)]
    source = tmp_path / "points.csv"
    source.write_text("x,y\n" + "\n".join(rows) + "\n3,inf\n")
    output = tmp_path / "out.csv"
    output.write_text("the previous result\n")
    assert run("pairs", source, "-r", 0.5, "-o", output) == 2
    assert capsys.readouterr().err == (
        f"spatialhash pairs: error: {source}: coordinates must be finite; got inf in column "
        "'y' at line 202.\n")
    assert output.read_text() == "the previous result\n"
    assert files_in(tmp_path) == {"points.csv", "out.csv"}


def test_npy_header_is_rewritten_with_the_row_count(tmp_path):
    fields = [("i", np.int64), ("distance", np.float64)]
    chunks = [(np.arange(3), np.full(3, 0.5)), (np.arange(2), np.full(2, np.inf))]
    assert writers.write_table(str(tmp_path / "t.npy"), fields, chunks) == 5
    array = np.load(tmp_path / "t.npy")
    assert array.dtype == np.dtype([("i", "<i8"), ("distance", "<f8")])
    np.testing.assert_array_equal(array["i"], [0, 1, 2, 0, 1])
    np.testing.assert_array_equal(array["distance"], [0.5, 0.5, 0.5, np.inf, np.inf])
    assert np.load(tmp_path / "t.npy", mmap_mode="r").shape == (5,)
    header_length = int.from_bytes((tmp_path / "t.npy").read_bytes()[8:10], "little")
    assert (10 + header_length) % 64 == 0  # the data stays aligned, as numpy writes it


# ---------------------------------------------------------------------- progress bars
def test_progress_bar_shows_on_a_terminal_only(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(common, "PROGRESS_DELAY_S", 0.0)
    source = write_points(tmp_path / "points.csv", named(lattice_points(13)))
    assert run("pairs", source, "-r", 0.25, "-o", tmp_path / "out.npy") == 0
    assert capsys.readouterr().err == ""  # stderr is not a terminal here
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert run("pairs", source, "-r", 0.25, "-o", tmp_path / "out.npy") == 0
    err = capsys.readouterr().err
    assert "reading points.csv" in err and "pairs" in err
    assert run("pairs", source, "-r", 0.25, "-o", tmp_path / "out.npy", "--quiet") == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


# ---------------------------------------------------------------------- info, bench, demos
def test_version_and_help(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"spatialhash {spatialhash.__version__}\n"
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("pairs", "neighbors", "knn", "demo", "bench", "info", "compile"):
        assert f"\n    {command}" in out
    for command, option in [("pairs", "--radii-column"), ("neighbors", "--queries"),
                            ("knn", "--r-max"), ("info", "--json"), ("demo", "NAME")]:
        assert cli.main([command, "--help"]) == 0
        assert option in capsys.readouterr().out


def test_info_reports_versions_threads_and_cache(capsys, monkeypatch):
    import numba
    import numpy

    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "numpy:" in out and numpy.__version__ in out
    assert f"numba threads:               {numba.get_num_threads()} of" in out
    real_version = metadata.version

    def without_pygame(name):
        if name == "pygame":
            raise metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr("spatialhash._cli.info.metadata.version", without_pygame)
    assert cli.main(["info", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pygame"] == "not installed"
    assert report["numba"] == numba.__version__
    assert report["spatialhash"].startswith(spatialhash.__version__)
    assert report["numba threading layer"] in {"omp", "tbb", "workqueue"}
    assert report["kernel cache"].endswith("cached kernels)")
    assert set(report) >= {"python", "platform", "cpus", "NUMBA_CACHE_DIR", "scipy",
                           "pyarrow", "tqdm", "pillow"}
    from spatialhash import _threads

    assert report["OpenMP wait policy"] == _threads.wait_policy()
    assert report["spatialhash threads"].startswith(
        f"at most {min(numba.get_num_threads(), _threads.process_cpus())}")


def test_bench_passes_arguments_and_status_through(tmp_path, capfd, monkeypatch):
    script = tmp_path / "benchmarks" / "bench_batch.py"
    script.parent.mkdir()
    script.write_text("import os, sys\nprint('args', sys.argv[1:], os.getcwd())\n"
                      "sys.exit(3)\n")
    monkeypatch.setattr(bench, "benchmark_script", lambda: script)
    assert cli.main(["bench", "--n", "1000", "--repeat", "3", "-x"]) == 3
    out = capfd.readouterr().out
    assert f"args ['--n', '1000', '--repeat', '3', '-x'] {tmp_path}" in out


def test_bench_without_the_source_repository(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench, "benchmark_script", lambda: tmp_path / "bench_batch.py")
    assert cli.main(["bench", "--n", "10"]) == 2
    assert capsys.readouterr().err == (
        "spatialhash bench: error: the benchmarks ship with the source repository, not "
        f"with the installed package: {tmp_path}/bench_batch.py does not exist. Clone the "
        "repository, install it with `pip install -e .` and run `spatialhash bench` (or "
        "./dev bench) there.\n")


def test_bench_script_is_found_in_this_checkout():
    assert bench.benchmark_script().is_file()
    assert bench.benchmark_script().parent.parent == Path(__file__).resolve().parents[1]


def _fake_demo(monkeypatch, name, calls):
    module = types.ModuleType(f"spatialhash.demos.{name}")

    def add_arguments(parser):
        parser.add_argument("--count", type=int, default=3)

    def run_demo(args):
        calls.append((args.demo, args.count))
        return 7

    module.add_arguments = add_arguments
    module.run = run_demo
    monkeypatch.setitem(sys.modules, module.__name__, module)


def test_demo_dispatch_to_the_module(monkeypatch, capsys):
    calls = []
    _fake_demo(monkeypatch, "particles", calls)
    _fake_demo(monkeypatch, "cloth", calls)
    assert cli.main(["demo", "particles", "--count", "5"]) == 7
    assert cli.main(["demo", "cloth"]) == 7
    assert calls == [("particles", 5), ("cloth", 3)]
    assert cli.main(["demo", "cloth", "--help"]) == 0
    assert "--count" in capsys.readouterr().out
    assert cli.main(["demo", "cloth", "--bogus"]) == 2


def test_demo_with_a_missing_dependency_or_module(monkeypatch, capsys):
    from spatialhash._cli import demo

    def missing(name):
        def fail(module_name):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return fail

    monkeypatch.setattr(demo.importlib, "import_module", missing("PIL"))
    assert cli.main(["demo", "particles"]) == 2
    assert capsys.readouterr().err == (
        "spatialhash demo particles: error: the particles demo needs Pillow: pip install "
        "'spatialhash[demo]'\n")
    monkeypatch.setattr(demo.importlib, "import_module", missing("spatialhash.demos.cloth"))
    assert cli.main(["demo", "cloth", "--help"]) == 2
    assert capsys.readouterr().err == (
        "spatialhash demo cloth: error: the cloth demo is not part of this installation "
        "(spatialhash.demos.cloth cannot be imported: No module named "
        "'spatialhash.demos.cloth').\n")


INSTALL = "pip install 'spatialhash[demo]'"
MISSING_EXTRAS = [
    # (demo and options, modules missing, the message after "error: ")
    (["particles", "--headless"], ["PIL", "tqdm"],
     "spatialhash demo particles needs Pillow (for --output particles.gif) and tqdm; "
     f"install them with: {INSTALL}"),
    (["particles", "--headless", "--output", "none"], ["tqdm"],
     f"spatialhash demo particles needs tqdm; install it with: {INSTALL}"),
    (["particles", "--interactive", "--headless", "--output", "none"], ["pygame", "PIL"],
     "spatialhash demo particles needs pygame (for --interactive); install it with: "
     "pip install 'spatialhash[window]'"),
    (["particles", "--output", "p.gif"], ["pygame", "PIL", "tqdm"],
     "spatialhash demo particles needs Pillow (for --output p.gif), pygame (for the window "
     "that opens where a display is; --headless skips it) and tqdm; install them with: "
     "pip install 'spatialhash[demo,window]'"),
    (["cloth"], ["PIL"],
     f"spatialhash demo cloth needs Pillow (for --output cloth.gif); install it with: {INSTALL}"),
    (["cloth", "--output", "none"], ["tqdm", "PIL", "pygame"],
     f"spatialhash demo cloth needs tqdm; install it with: {INSTALL}"),
]


@pytest.mark.parametrize(("argv", "missing", "message"), MISSING_EXTRAS)
def test_demo_without_the_extra_says_what_to_install_before_any_work(
        tmp_path, capsys, monkeypatch, argv, missing, message):
    """Regression: on a base install the particle demo ran its first step, then ended in a
    ModuleNotFoundError for tqdm (later Pillow, pygame)."""
    from spatialhash.demos import _particle_view, cloth, particles

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_particle_view, "has_display", lambda: True)  # a window would open
    for name in missing:
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    monkeypatch.setattr(particles, "ParticleSystem", None)  # never reached
    monkeypatch.setattr(cloth, "_warm_up", None)
    assert cli.main(["demo", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"error: {message}\n"
    assert captured.out == ""
    assert files_in(tmp_path) == set()


class _Started(Exception):
    """Raised where a demo starts its work."""


def _start(*args, **kwargs):
    raise _Started


@pytest.mark.parametrize(
    ("argv", "missing"),
    [
        (["particles", "--headless", "--output", "none"], ["PIL", "pygame"]),
        (["particles", "--headless"], ["pygame"]),
        (["cloth", "--output", "none"], ["PIL", "pygame"]),
    ],
)
def test_demo_needs_only_the_modules_its_options_use(tmp_path, monkeypatch, argv, missing):
    from spatialhash.demos import _particle_view, cloth, particles

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_particle_view, "has_display", lambda: True)  # --headless: no window
    for name in missing:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(particles, "ParticleSystem", _start)
    monkeypatch.setattr(cloth, "_warm_up", _start)
    with pytest.raises(_Started):
        cli.main(["demo", *argv])


@pytest.mark.parametrize(
    ("name", "options", "printed"),
    [
        ("particles", ["--count", "200", "--steps", "8", "--frame-every", "2",
                       "--timing-steps", "1", "--size", "64", "--headless"],
         ["| hash |", "| sorted |", "| brute |"]),
        ("cloth", ["--size", "8", "--frames", "4", "--substeps", "2", "--render-every", "2"],
         ["per frame: neighbour search", "real time"]),
    ],
)
def test_demos_end_to_end(tmp_path, capsys, monkeypatch, name, options, printed):
    from PIL import Image

    monkeypatch.setenv("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    gif = tmp_path / f"{name}.gif"
    assert cli.main(["demo", name, *options, "--output", str(gif)]) == 0
    out = capsys.readouterr().out
    assert all(text in out for text in printed), out
    assert f"wrote {gif}" in out
    with Image.open(gif) as image:
        assert image.format == "GIF" and image.n_frames >= 2
    assert files_in(tmp_path) == {gif.name}


@pytest.mark.parametrize("name", ["particles", "cloth"])
def test_demo_bad_option_value_exits_2(tmp_path, capsys, name):
    assert cli.main(["demo", name, "--size", "0", "--output", str(tmp_path / "x.gif")]) == 2
    assert "--size must be at least" in capsys.readouterr().err
    assert files_in(tmp_path) == set()


# ---------------------------------------------------------------------- real processes
def _environment() -> dict[str, str]:
    return {**os.environ, "PYGAME_HIDE_SUPPORT_PROMPT": "1"}


def test_python_m_spatialhash_help_and_no_demo_imports():
    result = subprocess.run([sys.executable, "-m", "spatialhash", "--help"],
                            capture_output=True, text=True, env=_environment(), check=False)
    assert result.returncode == 0
    assert result.stdout.startswith("usage: spatialhash")
    probe = ("import sys; from spatialhash.cli import main; status = main(['info']); "
             "print(status, 'pygame' in sys.modules, 'PIL' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            env=_environment(), check=False)
    assert result.stdout.splitlines()[-1] == "0 False False"


@pytest.mark.slow
def test_console_script_exit_codes(tmp_path):
    script = Path(sys.executable).parent / "spatialhash"
    assert script.is_file(), "the console script is installed with the package"
    source = write_points(tmp_path / "points.csv", named(lattice_points(14)))
    good = subprocess.run([script, "pairs", source, "-r", "0.25", "-o", tmp_path / "o.csv"],
                          capture_output=True, text=True, check=False)
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith("wrote ") and good.stderr == ""
    (tmp_path / "bad.csv").write_text("x\nnan\n")
    bad = subprocess.run([script, "pairs", tmp_path / "bad.csv", "-r", "0.25", "-o",
                          tmp_path / "o2.csv"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert bad.stderr == (f"spatialhash pairs: error: {tmp_path}/bad.csv: coordinates must "
                          "be finite; got nan in column 'x' at line 2.\n")
    assert not (tmp_path / "o2.csv").exists()


def test_bench_help_shows_the_script_options():
    result = subprocess.run([sys.executable, "-m", "spatialhash", "bench", "--help"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert ("Every argument after `bench` goes to benchmarks/bench_batch.py"
            in " ".join(result.stdout.split()))
    assert "--repeat" in result.stdout and "--workloads" in result.stdout


@pytest.mark.slow
def test_compile_runs_every_warm_up_call_and_reports_the_cache(capsys):
    from spatialhash import _warmup

    assert cli.main(["compile", "--json", "--quiet", "--jobs", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    report = json.loads(captured.out)
    assert report["jobs"] == 1
    names = [name for name, _ in _warmup.warm_up_calls()]
    assert list(report["calls_s"]) == names and len(set(names)) == len(names)
    assert all(seconds >= 0.0 for seconds in report["calls_s"].values())
    assert report["total_s"] >= sum(report["calls_s"].values())
    folder, n_cached = info.kernel_cache()
    assert report["kernel_cache"] == folder and report["cached_kernels"] == n_cached > 0
    # Run again in this process: every kernel is in memory now, nothing compiled or loaded.
    assert cli.main(["compile", "--quiet", "--jobs", "1"]) == 0
    assert capsys.readouterr().out.startswith(
        f"ran {len(names)} calls in ")
    assert cli.main(["compile", "--json", "--quiet", "--jobs", "1"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["compiled"] == 0 and again["loaded"] == 0


@pytest.mark.slow
def test_compile_in_worker_processes_leaves_every_kernel_in_the_cache(capsys):
    """Two workers run the groups of calls; then this process runs every call again and
    must compile nothing: each kernel it has not in memory loads from the cache."""
    from spatialhash import _compile_jobs, _warmup

    assert _compile_jobs.can_run_jobs()
    assert cli.main(["compile", "--json", "--quiet", "--jobs", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    report = json.loads(captured.out)
    assert report["jobs"] == 2 and report["check"]["compiled"] == 0
    assert list(report["calls_s"]) == [name for name, _ in _warmup.warm_up_calls()]
    assert 0.0 < report["workers_s"] <= report["total_s"]
    assert sorted(name for group in _warmup.CALL_GROUPS.values() for name, _ in group()) == \
        sorted(report["calls_s"])


def test_compile_reports_a_failed_worker_and_bad_jobs(capsys):
    from spatialhash import _compile_jobs

    with pytest.raises(RuntimeError, match="(?s)the worker compiling 'no such group' failed "
                                           r"\(exit status 1\):\n.*KeyError"):
        _compile_jobs.run_groups(["no such group"], 1, 0, lambda name, seconds: None)
    assert cli.main(["compile", "--jobs", "0"]) == 2
    assert capsys.readouterr().err.strip() == (
        "spatialhash compile: error: --jobs must be at least 1; got 0.")


def test_workers_lock_the_cache_folder_around_each_save(tmp_path, monkeypatch):
    from numba.core.caching import IndexDataCacheFile

    from spatialhash import _compile_jobs, _numba_internals

    monkeypatch.setattr(IndexDataCacheFile, "save", IndexDataCacheFile.save)  # restored
    _numba_internals.lock_cache_saves(_compile_jobs.LOCK_NAME)
    cache_file = IndexDataCacheFile(str(tmp_path), "kernel-1", ("stamp", 1))
    cache_file.save(("signature", 1), {"code": b"x"})
    cache_file.save(("signature", 2), {"code": b"y"})
    assert cache_file.load(("signature", 1)) == {"code": b"x"}
    assert cache_file.load(("signature", 2)) == {"code": b"y"}
    assert (tmp_path / _compile_jobs.LOCK_NAME).exists()


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_without_tqdm_is_a_plain_counter(monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setitem(sys.modules, "tqdm", None)  # a base install: no tqdm
    monkeypatch.setattr(common._TextProgress, "INTERVAL_S", 0.0)
    with common.progress(False, total=3, unit="call", desc="compiling kernels") as bar:
        for _ in range(3):
            bar.update()
    assert terminal.getvalue().split("\r")[1:] == [
        "compiling kernels: 1/3 calls", "compiling kernels: 2/3 calls",
        "compiling kernels: 3/3 calls\n"]
    quiet = common.progress(True, total=3)
    quiet.update()
    assert "\r" not in terminal.getvalue().split("\n", 1)[1]  # nothing more written


# ---------------------------------------------------------------------- faults
def _partial_files(folder: Path) -> list[str]:
    return sorted(name for name in files_in(folder) if ".partial." in name)


@pytest.fixture(scope="module")
def many_pairs_csv(tmp_path_factory) -> Path:
    """300,000 uniform points in the unit square: about 5 million pairs within 0.006,
    tens of megabytes of CSV to write, so a signal can arrive while it is written."""
    path = tmp_path_factory.mktemp("many_pairs") / "points.csv"
    points = np.random.default_rng(40).random((300_000, 2))
    np.savetxt(path, points, delimiter=",", header="x,y", comments="", fmt="%.17g")
    return path


def _default_signal_actions():
    """In the child: SIGTERM and SIGHUP as a fresh shell leaves them (a test runner under
    nohup would otherwise pass on an ignored SIGHUP)."""
    import signal

    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_signal_while_writing_removes_the_partial_file(tmp_path, many_pairs_csv, name):
    import signal
    import time

    number = getattr(signal, name)
    output = tmp_path / "out.csv"
    script = Path(sys.executable).parent / "spatialhash"
    process = subprocess.Popen([script, "pairs", many_pairs_csv, "-r", "0.006", "-o", output],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_default_signal_actions)
    try:
        deadline = time.monotonic() + 120
        while not _partial_files(tmp_path) and process.poll() is None:
            assert time.monotonic() < deadline, "no partial file appeared"
            time.sleep(0.005)
        assert process.poll() is None, "the run ended before the signal was sent"
        (partial,) = _partial_files(tmp_path)
        assert re.fullmatch(rf"\.out\.csv\.pid{process.pid}\.[a-z0-9_]+\.partial\.csv",
                            partial), partial
        process.send_signal(number)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 128 + number
    assert out == ""
    assert err == f"spatialhash pairs: ended by {name}; no output written\n"
    assert files_in(tmp_path) == set()


def _dead_pid() -> int:
    """The id of a process that has ended (and been waited for)."""
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()
    return child.pid


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX process ids")
@pytest.mark.parametrize("output_format", FORMATS)
def test_partial_files_of_ended_writers_are_removed(tmp_path, capsys, output_format):
    dead = _dead_pid()
    name = f"out.{output_format}"
    stale = [f".{name}.pid{dead}.a1b2c3d4.partial.{output_format}",
             f".{name}.pid{dead}.zz_99x0y.partial.{output_format}"]
    kept = [
        f".{name}.pid{os.getpid()}.a1b2c3d4.partial.{output_format}",  # its writer runs
        f".other.{output_format}.pid{dead}.a1b2c3d4.partial.{output_format}",  # not OUTPUT
        f".{name}.a1b2c3d4.partial.{output_format}",  # no process id: not a CLI file
    ]
    for file_name in stale + kept:
        (tmp_path / file_name).write_bytes(b"half a result")
    source = write_points(tmp_path / "points.npy", named(lattice_points(41)))
    assert run("pairs", source, "-r", 0.25, "-o", tmp_path / name, "-q") == 0
    assert capsys.readouterr().err == (
        f"spatialhash pairs: removed 2 partial files of {name} left by runs that were "
        f"killed while writing it: {', '.join(sorted(stale))}\n")
    assert files_in(tmp_path) == {"points.npy", name, *kept}
    assert run("pairs", source, "-r", 0.25, "-o", tmp_path / name, "-q") == 0
    assert capsys.readouterr().err == ""  # nothing more to remove, nothing said


def test_help_documents_partial_files_and_exit_statuses(capsys):
    assert cli.main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ".OUTPUT.pidPID.XXXXXXXX.partial.EXT" in out
    assert ("the next run writing the same OUTPUT removes those whose process no longer "
            "exists, and says so on stderr") in out
    assert ("exit status: 0 done, 1 failed while working, 2 bad arguments or input, or a "
            "result that does not fit in memory (one-line message on stderr), 130 "
            "interrupted (Ctrl-C), 129 and 143 ended by SIGHUP and SIGTERM, 141 standard "
            "output closed early (a pipe into head)") in out


def test_knn_with_k_above_the_point_count_gives_every_point(tmp_path, capsys):
    points = np.random.default_rng(42).random((1000, 2))
    source = tmp_path / "points.npy"
    np.save(source, points)
    output = tmp_path / "k.npy"
    assert run("knn", source, "-k", 100_000, "-o", output) == 0
    assert capsys.readouterr().out == f"wrote 1,000,000 neighbours to {output}\n"
    result = read_result(output)
    np.testing.assert_array_equal(result["query"], np.repeat(np.arange(1000), 1000))
    np.testing.assert_array_equal(result["rank"], np.tile(np.arange(1000), 1000))
    rows = result["point"].reshape(1000, 1000)
    np.testing.assert_array_equal(np.sort(rows, axis=1), np.tile(np.arange(1000), (1000, 1)))
    np.testing.assert_array_equal(rows[:, 0], np.arange(1000))  # each point finds itself


def test_knn_blocks_hold_a_bounded_number_of_slots(tmp_path, monkeypatch):
    from spatialhash._cli import queries as query_commands
    from spatialhash.grid import Grid

    monkeypatch.setattr(query_commands, "KNN_BLOCK_SLOTS", 64)
    sizes = []
    original = Grid.query_knn

    def query_knn(self, queries, k, **options):
        sizes.append(len(queries) * k)
        return original(self, queries, k, **options)

    monkeypatch.setattr(Grid, "query_knn", query_knn)
    points = lattice_points(43)
    source = write_points(tmp_path / "points.npy", named(points))
    output = tmp_path / "knn.npy"
    assert run("knn", source, "-k", 5, "-o", output, "-q") == 0
    assert max(sizes) <= 64 and len(sizes) > 2
    indices, distances, counts = oracles.knn(points, points, 5, None)
    result = read_result(output)
    np.testing.assert_array_equal(result["point"], indices.reshape(-1))
    np.testing.assert_array_equal(result["distance"], distances.reshape(-1))


def _array_memory_error(shape, dtype) -> MemoryError:
    """The error numpy raises when an array cannot be allocated."""
    try:
        from numpy._core._exceptions import _ArrayMemoryError
    except ImportError:  # numpy < 2
        from numpy.core._exceptions import _ArrayMemoryError
    return _ArrayMemoryError(shape, np.dtype(dtype))


@pytest.mark.parametrize(("reach", "said", "remedy"), [
    (["-r", "0.25"], "-r 0.25", "a smaller -r"),
    (["--radii-column", "2"], "--radii-column 2", "smaller radii"),
])
def test_pairs_out_of_memory_names_the_pairs_in_one_line(tmp_path, capsys, monkeypatch,
                                                         reach, said, remedy):
    from spatialhash.grid import Grid

    original = Grid.iter_pairs

    def iter_pairs(self, *args, **options):
        chunks = original(self, *args, **options)

        def failing():
            yield next(chunks)  # one chunk reaches the file first
            # 200,000 identical points: every pair in one cell, one chunk of 149 GiB
            raise _array_memory_error((19_999_900_000, 2), np.int32)

        return failing()

    monkeypatch.setattr(Grid, "iter_pairs", iter_pairs)
    source = write_points(tmp_path / "points.npy", named(lattice_points(44)))
    output = tmp_path / "out.csv"
    assert run("pairs", source, *reach, "-o", output) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"spatialhash pairs: error: {said} gives more pairs than memory holds: "
        "19,999,900,000 pairs lie in one cell of the grid and need 149 GiB at once (pairs "
        "are written in chunks, but one cell's pairs are one chunk). Use "
        f"{remedy}, or remove duplicate points.\n")
    assert files_in(tmp_path) == {"points.npy"}


@pytest.mark.parametrize("error", [MemoryError(), _array_memory_error((2**40,), np.int64)])
def test_out_of_memory_anywhere_is_one_line(tmp_path, capsys, monkeypatch, error):
    from spatialhash.grid import Grid

    def query_radius(self, *args, **options):
        raise error

    monkeypatch.setattr(Grid, "query_radius", query_radius)
    source = write_points(tmp_path / "points.npy", named(lattice_points(45)))
    assert run("neighbors", source, "-r", 0.25, "-o", tmp_path / "near.npy") == 2
    detail = ("" if type(error) is MemoryError
              else " (8 TiB for an array of shape (1099511627776,) and dtype int64)")
    assert capsys.readouterr().err == (
        "spatialhash neighbors: error: the run must fit in memory; got more than it "
        f"holds{detail}. Ask for a smaller result (a smaller -r or -k, fewer queries), or "
        "free memory.\n")
    assert files_in(tmp_path) == {"points.npy"}


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")
@pytest.mark.parametrize("unbuffered", ["", "1"], ids=["buffered", "unbuffered"])
def test_stdout_closed_early_exits_141_quietly(tmp_path, unbuffered):
    source = write_points(tmp_path / "points.csv", named(lattice_points(46)))
    output = tmp_path / "out.csv"
    reading, writing = os.pipe()
    os.close(reading)  # a reader that has gone: `| head -c0`
    try:
        result = subprocess.run(
            [sys.executable, "-m", "spatialhash", "pairs", source, "-r", "0.25", "-o", output],
            stdout=writing, stderr=subprocess.PIPE, text=True, check=False,
            env={**_environment(), "PYTHONUNBUFFERED": unbuffered})
    finally:
        os.close(writing)
    assert result.returncode == 141
    assert result.stderr == ""
    assert read_result(output)["i"].size > 0  # the result was complete before the summary


@pytest.mark.parametrize("tail", [b"", b"\x10\x00\x00\x00PAR1"],
                         ids=["random", "random-with-footer"])
def test_garbage_parquet_is_one_line(tmp_path, capsys, tail):
    source = tmp_path / "x.parquet"
    source.write_bytes(np.random.default_rng(0).bytes(4000) + tail)  # a control character
    assert run("pairs", source, "-r", 1, "-o", tmp_path / "out.npy") == 2
    err = capsys.readouterr().err
    assert err.endswith("\n") and err[:-1].isprintable(), repr(err)  # one line
    assert re.fullmatch(re.escape(f"spatialhash pairs: error: {source}: not a valid .parquet "
                                  "file (") + r".+[^.]\)\.\n", err), repr(err)
    assert files_in(tmp_path) == {"x.parquet"}


@pytest.mark.parametrize("interruption", ["Terminated", "KeyboardInterrupt"])
def test_a_signal_just_after_the_partial_file_is_made_leaves_nothing(tmp_path, monkeypatch,
                                                                      interruption):
    # The partial file exists from mkstemp's return on, before atomic_path's guard: a
    # signal there left it behind (seen under load in the subprocess test above).
    import signal
    import tempfile

    from spatialhash import _io

    real_mkstemp = tempfile.mkstemp
    error = (common.Terminated(signal.SIGTERM) if interruption == "Terminated"
             else KeyboardInterrupt())

    def mkstemp_then_signal(*args, **kwargs):
        real_mkstemp(*args, **kwargs)
        raise error

    monkeypatch.setattr(_io.tempfile, "mkstemp", mkstemp_then_signal)
    output = tmp_path / "out.csv"
    with pytest.raises(type(error)):
        writers.write_table(str(output), [("i", np.dtype(np.int64))],
                            [[np.arange(3, dtype=np.int64)]])
    assert files_in(tmp_path) == set()
