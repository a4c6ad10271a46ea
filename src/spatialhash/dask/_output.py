"""Parquet datasets written all or nothing.

Every tile writes its file into a hidden directory beside the output
(``.<name>.incomplete-<token>``), first under a temporary name that it renames when the
file is whole, so a task run again after a worker died replaces a file rather than
leaving half of one. When every tile has finished, the partial files of tasks whose
workers died are removed, ``_manifest.json`` (files, rows, parameters) is written, and
the directory is renamed to the output in one step. A run that
fails removes the hidden directory: the output path then holds nothing, never a dataset
that looks complete but is not. (A run whose client is killed leaves the hidden directory
behind, under a name no reader takes for the output; delete it.)
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

#: Rows of a Parquet row group, at most.
ROW_GROUP_ROWS = 1 << 20
MANIFEST = "_manifest.json"


@dataclass
class Written:
    """A dataset written by the Dask engine.

    Attributes
    ----------
    path : str
        The output directory.
    files : list of str
        Its Parquet files, one per tile, in tile order (names relative to ``path``).
    rows : int
        Rows written in all.
    n_tiles : int
        Tiles of the plan.
    seconds : dict of str to float
        Wall time of each stage: ``survey+plan`` (the pass that samples the data, and
        the plan), ``search`` (tagging, shuffle, the tiles' searches and writes; the
        rounds of a k-nearest query), ``commit``; and the seconds the tiles spent in
        their searches (``tiles computing``) and writing Parquet (``tiles writing``),
        summed over the tiles (on several workers at once).
    tile_rows : list of int
        Rows each tile held (points, ghosts and queries), in tile order; their sum less
        the points and queries is the ghosts' share of the shuffle.
    """

    path: str
    files: list[str]
    rows: int
    n_tiles: int
    seconds: dict[str, float] = field(default_factory=dict)
    tile_rows: list[int] = field(default_factory=list)


def arrow_schema(names: Sequence[str], dtypes: Sequence[np.dtype]):
    import pyarrow as pa

    return pa.schema([(name, pa.from_numpy_dtype(np.dtype(dtype)))
                      for name, dtype in zip(names, dtypes, strict=True)])


def write_tile_file(directory: str, tile: int, names: Sequence[str],
                    dtypes: Sequence[np.dtype], chunks: Iterable[list[np.ndarray]],
                    row_group_rows: int = ROW_GROUP_ROWS) -> tuple[str, int, float, float]:
    """Stream ``chunks`` (column lists) into ``part-<tile>.parquet`` of ``directory``;
    returns the file's name, its rows, and the seconds spent computing the chunks and
    writing them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = f"part-{tile:05d}.parquet"
    final = os.path.join(directory, name)
    # Hidden (readers of datasets skip names starting with "."), and unique: a task run
    # again after its worker died writes beside what the dead one left.
    partial = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.partial")
    schema = arrow_schema(names, dtypes)
    rows, computing, writing = 0, 0.0, 0.0
    try:
        with pq.ParquetWriter(partial, schema) as writer:
            chunks = iter(chunks)
            while True:
                started = time.perf_counter()
                columns = next(chunks, None)
                wrote = time.perf_counter()
                computing += wrote - started
                if columns is None:
                    break
                table = pa.Table.from_arrays([pa.array(c) for c in columns], schema=schema)
                writer.write_table(table, row_group_size=row_group_rows)
                rows += table.num_rows
                writing += time.perf_counter() - wrote
        os.replace(partial, final)
    except BaseException:
        if os.path.exists(partial):
            os.remove(partial)
        raise
    return name, rows, computing, writing


class DatasetCommit:
    """The hidden directory a run writes into, renamed to ``output`` (an `Output`) by
    `commit`.

    Use as a context manager: leaving it by an exception removes the directory.
    """

    def __init__(self, output) -> None:
        output.check()  # an `Output`: refused here if it exists or has no parent
        self.output = os.path.abspath(output.path)
        parent, base = os.path.split(self.output)
        self.directory = os.path.join(parent, f".{base}.incomplete-{uuid.uuid4().hex[:12]}")
        self.overwrite = output.overwrite

    def __enter__(self) -> DatasetCommit:
        os.mkdir(self.directory)
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is not None and os.path.isdir(self.directory):
            shutil.rmtree(self.directory, ignore_errors=True)

    def commit(self, files: list[str], rows: list[int], parameters: dict) -> None:
        """Write the manifest, remove what tasks of dead workers left (partial files),
        and put the dataset in place of ``output``."""
        for entry in set(os.listdir(self.directory)) - set(files):
            os.remove(os.path.join(self.directory, entry))
        manifest = {"files": [{"path": f, "rows": r} for f, r in zip(files, rows, strict=True)],
                    "rows": int(sum(rows)), "parameters": parameters}
        with open(os.path.join(self.directory, MANIFEST), "w") as stream:
            json.dump(manifest, stream, indent=1)
        if os.path.exists(self.output):  # overwrite=True, checked at the start
            if os.path.isdir(self.output):
                shutil.rmtree(self.output)
            else:
                os.remove(self.output)
        os.rename(self.directory, self.output)
