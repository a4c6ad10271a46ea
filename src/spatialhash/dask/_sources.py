"""Point sets for the Dask engine: a Parquet dataset, a ``dask.dataframe`` or a
``dask.array``, opened as a list of lazy blocks; a NumPy array or a pandas DataFrame
held by the client is cut into blocks of `IN_MEMORY_ROWS` rows first.

A block is one partition's points as canonical arrays (`Block`): coordinates in float64,
the optional radius and id columns. Every block is checked where it is read, so a NaN is
reported with the file and row group it came from (Parquet), or the partition and row.
A Parquet dataset is opened from its metadata only: the columns and dtypes of every file
are checked before any data is read, and each row group becomes one block.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._validation import check_magnitude

MAX_DIMS = 3
#: Rows of a block cut from a NumPy array or a pandas DataFrame.
IN_MEMORY_ROWS = 1 << 20


class Block(NamedTuple):
    """One partition's points: ``coords`` (m, d) float64, ``radii`` (m,) float64 or None,
    ``ids`` (m,) int64 or None (the user's id column)."""

    coords: np.ndarray
    radii: np.ndarray | None
    ids: np.ndarray | None


@dataclass
class Source:
    """A point set opened lazily.

    Attributes
    ----------
    name : str
        What the user passed, for messages (``"points"`` or ``"queries"``).
    n_dims : int
        Coordinates per point.
    parts : list
        One ``dask.delayed`` object per partition, computing a `Block`. Their lengths,
        hence the global row numbers, come from the survey (`_plan.survey`).
    """

    name: str
    n_dims: int
    parts: list[Any]


def _check_block(coords: np.ndarray, radii: np.ndarray | None, where: str, name: str) -> None:
    """Refuse NaN or infinite coordinates and negative or non-finite radii, naming where."""
    bad = ~np.isfinite(coords)
    if bad.any():
        row, column = np.argwhere(bad)[0]
        raise ValueError(
            f"`{name}` must be finite; got {coords[row, column]} in {where}, row {row}, "
            f"coordinate {column}."
        )
    check_magnitude(coords, f"{name} ({where})")
    if radii is not None:
        bad = ~(np.isfinite(radii) & (radii >= 0))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"radii of `{name}` must be finite and >= 0; got {radii[row]} in {where}, "
                f"row {row}."
            )


def _as_int64_ids(values: np.ndarray, where: str, column: str) -> np.ndarray:
    if values.dtype.kind not in "iu":
        raise TypeError(f"the id column {column!r} must hold integers; got dtype "
                        f"{values.dtype} in {where}.")
    return values.astype(np.int64, copy=False)


# ------------------------------------------------------------------------------ Parquet
def parquet_files(path) -> list[str]:
    """The files of a Parquet dataset: a file, a directory (its ``*.parquet`` files,
    recursively, in sorted order), a glob pattern, or a list of any of these."""
    items = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    if not items:
        raise ValueError("`points` names no Parquet file (an empty list).")
    files: list[str] = []
    for item in items:
        text = os.fspath(item)
        if os.path.isdir(text):
            found = sorted(glob.glob(os.path.join(text, "**", "*.parquet"), recursive=True))
            if not found:
                raise FileNotFoundError(f"no *.parquet file in the directory {text!r}.")
        elif glob.has_magic(text):
            found = sorted(glob.glob(text, recursive=True))
            if not found:
                raise FileNotFoundError(f"no file matches {text!r}.")
        elif os.path.exists(text):
            found = [text]
        else:
            raise FileNotFoundError(f"no such Parquet file or directory: {text!r}.")
        files.extend(found)
    return files


def _numeric_columns(schema) -> list[str]:
    import pyarrow.types as pat

    return [field.name for field in schema
            if pat.is_integer(field.type) or pat.is_floating(field.type)]


def open_parquet(path, name: str, columns: Sequence[str] | None, radii_column: str | None,
                 id_column: str | None) -> Source:
    """Open a Parquet dataset from its footers; each row group becomes one block.

    Every file must hold the coordinate columns (by default the numeric columns of the
    first file other than the radius and id columns) with numeric types; a file that
    lacks one, or holds it as another kind (text, say), is named in the error.
    """
    import pyarrow.parquet as pq
    from dask import delayed

    files = parquet_files(path)
    pieces: list[tuple[str, int]] = []
    selected: list[str] | None = None if columns is None else list(columns)
    extra = [c for c in (radii_column, id_column) if c is not None]
    for file in files:
        try:
            metadata = pq.ParquetFile(file).metadata
            schema = metadata.schema.to_arrow_schema()
        except Exception as error:
            raise ValueError(f"cannot read {file!r} as Parquet: {error}") from None
        numeric = _numeric_columns(schema)
        if selected is None:
            selected = [c for c in numeric if c not in extra]
            if not 1 <= len(selected) <= MAX_DIMS:
                raise ValueError(
                    f"{file!r} has {len(selected)} numeric columns ({', '.join(selected)}); "
                    "coordinates need 1, 2 or 3: name them with `columns`."
                )
        for column in [*selected, *extra]:
            if column not in schema.names:
                raise ValueError(f"{file!r} has no column {column!r} (its columns: "
                                 f"{', '.join(schema.names)}).")
            if column not in numeric:
                raise TypeError(f"column {column!r} of {file!r} must be numeric; got "
                                f"{schema.field(column).type}.")
        pieces += [(file, group) for group in range(metadata.num_row_groups)]
    if not 1 <= len(selected) <= MAX_DIMS:
        raise ValueError(f"`columns` must name 1, 2 or 3 columns; got {selected!r}.")
    read = delayed(_read_row_group, pure=True)
    parts = [read(file, group, selected, radii_column, id_column, name)
             for file, group in pieces]
    return Source(name, len(selected), parts)


def _read_row_group(file: str, group: int, columns: list[str], radii_column: str | None,
                    id_column: str | None, name: str) -> Block:
    import pyarrow.parquet as pq

    wanted = [*columns, *(c for c in (radii_column, id_column) if c is not None)]
    table = pq.ParquetFile(file).read_row_group(group, columns=wanted)
    where = f"{file}, row group {group}"
    coords = np.empty((table.num_rows, len(columns)), dtype=np.float64)
    for axis, column in enumerate(columns):
        values = table.column(column).to_numpy()  # nulls become NaN, refused below
        coords[:, axis] = values
    radii = (None if radii_column is None
             else np.asarray(table.column(radii_column).to_numpy(), dtype=np.float64))
    ids = (None if id_column is None
           else _as_int64_ids(table.column(id_column).to_numpy(), where, id_column))
    _check_block(coords, radii, where, name)
    return Block(coords, radii, ids)


# ------------------------------------------------------------------- dask collections
def open_dataframe(frame, name: str, columns: Sequence[str] | None, radii_column: str | None,
                   id_column: str | None) -> Source:
    """Open a ``dask.dataframe.DataFrame``: one block per partition."""
    from dask import delayed

    extra = [c for c in (radii_column, id_column) if c is not None]
    for column in [*(columns or ()), *extra]:
        if column not in frame.columns:
            raise ValueError(f"`{name}` has no column {column!r} (its columns: "
                             f"{', '.join(map(str, frame.columns))}).")
    if columns is None:
        columns = [c for c in frame.columns
                   if frame[c].dtype.kind in "iuf" and c not in extra]
    columns = list(columns)
    if not 1 <= len(columns) <= MAX_DIMS:
        raise ValueError(f"`{name}` needs 1, 2 or 3 coordinate columns; got {columns!r} "
                         "(name them with `columns`).")
    for column in columns:
        if frame[column].dtype.kind not in "iuf":
            raise TypeError(f"column {column!r} of `{name}` must be numeric; got dtype "
                            f"{frame[column].dtype}.")
    convert = delayed(_frame_block, pure=True)
    parts = [convert(part, number, columns, radii_column, id_column, name)
             for number, part in enumerate(frame[[*columns, *extra]].to_delayed())]
    return Source(name, len(columns), parts)


def _frame_block(part, number: int, columns: list[str], radii_column: str | None,
                 id_column: str | None, name: str) -> Block:
    where = f"partition {number}"
    coords = np.asarray(part[columns].to_numpy(dtype=np.float64, na_value=np.nan),
                        dtype=np.float64).reshape(len(part), len(columns))
    radii = (None if radii_column is None
             else part[radii_column].to_numpy(dtype=np.float64, na_value=np.nan))
    ids = (None if id_column is None
           else _as_int64_ids(part[id_column].to_numpy(), where, id_column))
    _check_block(coords, radii, where, name)
    return Block(coords, radii, ids)


def open_array(array, name: str) -> Source:
    """Open a ``dask.array`` of shape (n, d): one block per chunk of rows."""
    from dask import delayed

    if array.ndim != 2 or not 1 <= array.shape[1] <= MAX_DIMS:
        raise ValueError(f"`{name}` must be an array of shape (n, d) with d = 1, 2 or 3; "
                         f"got shape {array.shape}.")
    if array.dtype.kind not in "iuf":
        raise TypeError(f"`{name}` must hold real numbers; got dtype {array.dtype}.")
    if any(np.isnan(size) for size in array.chunks[0]):
        raise ValueError(f"`{name}` has chunks of unknown size; call "
                         "`.compute_chunk_sizes()` first.")
    rows = array.rechunk({1: -1})
    convert = delayed(_array_block, pure=True)
    parts = [convert(block, number, name)
             for number, block in enumerate(rows.to_delayed()[:, 0])]
    return Source(name, array.shape[1], parts)


def _array_block(block: np.ndarray, number: int, name: str) -> Block:
    coords = np.array(block, dtype=np.float64)
    _check_block(coords, None, f"block {number}", name)
    return Block(coords, None, None)


def open_source(points, name: str = "points", *, columns: Sequence[str] | None = None,
                radii_column: str | None = None, id_column: str | None = None) -> Source:
    """Open ``points``: a Parquet path, glob or list of them, a pandas or dask DataFrame,
    or a NumPy or dask array (which takes no column options)."""
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",")]
    if isinstance(points, pd.DataFrame):
        n_parts = max(1, -(-len(points) // IN_MEMORY_ROWS))
        points = dd.from_pandas(points, npartitions=n_parts, sort=False)
    elif isinstance(points, np.ndarray):
        chunks = (IN_MEMORY_ROWS, *points.shape[1:]) if points.ndim else ()
        points = da.from_array(points, chunks=chunks)
    if isinstance(points, dd.DataFrame):
        return open_dataframe(points, name, columns, radii_column, id_column)
    if isinstance(points, da.Array):
        if columns is not None or radii_column is not None or id_column is not None:
            raise TypeError(f"`{name}` is an array: `columns`, `radii_column` and "
                            "`id_column` apply to tables only.")
        return open_array(points, name)
    if isinstance(points, (str, os.PathLike, list, tuple)):
        return open_parquet(points, name, columns, radii_column, id_column)
    raise TypeError(
        f"`{name}` must be a Parquet path (a file, a directory, a glob or a list of them), "
        f"a pandas or dask DataFrame, or a NumPy or dask array of shape (n, d); got "
        f"{type(points).__name__}."
    )
