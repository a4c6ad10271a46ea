"""What a query of the Dask engine is told besides its data: where its rows go (`Output`)
and how its work is cut and run (`Plan`).

Both are small frozen objects checked when they are made, so a bad value is reported
before any data is read, and one object can be reused by many queries.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .._validation import as_count
from ._output import ROW_GROUP_ROWS


def _as_flag(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"`{name}` must be True or False; got {value!r}.")
    return bool(value)


def _as_optional_count(value, name: str) -> int | None:
    return None if value is None else as_count(value, name)


@dataclass(frozen=True)
class Output:
    """Where a query writes its rows: a Parquet dataset, one file per tile, written all or
    nothing.

    Parameters
    ----------
    path : str or os.PathLike
        The dataset's directory. It must not exist unless ``overwrite``, and its parent
        must; on a cluster of several machines, every worker must reach it (a shared file
        system).
    overwrite : bool, default False
        Replace an existing ``path`` (once the new dataset is complete).
    row_group_rows : int, default 1,048,576
        Most rows in a Parquet row group of the files.

    Notes
    -----
    A query given ``output=Output(...)`` (or a path, which stands for ``Output(path)``)
    returns a `Written` summary instead of the rows.
    """

    path: str
    overwrite: bool = False
    row_group_rows: int = ROW_GROUP_ROWS

    def __post_init__(self) -> None:
        if not isinstance(self.path, (str, os.PathLike)):
            raise TypeError(f"`path` must be a str or os.PathLike naming a directory; got "
                            f"{type(self.path).__name__} {self.path!r}.")
        if not os.fspath(self.path):
            raise ValueError("`path` must name a directory; got ''.")
        object.__setattr__(self, "path", os.fspath(self.path))
        object.__setattr__(self, "overwrite", _as_flag(self.overwrite, "overwrite"))
        object.__setattr__(self, "row_group_rows", as_count(self.row_group_rows,
                                                            "row_group_rows"))

    @classmethod
    def of(cls, output) -> Output | None:
        """``output`` as a query takes it: None, an `Output`, or a path for ``Output(path)``."""
        if output is None or isinstance(output, Output):
            return output
        if isinstance(output, (str, os.PathLike)):
            return cls(output)
        raise TypeError(f"`output` must be None, an Output or a path; got "
                        f"{type(output).__name__} {output!r}.")

    def check(self) -> None:
        """Refuse a ``path`` that exists (unless ``overwrite``) or whose parent does not:
        what the query would find only when it starts writing."""
        absolute = os.path.abspath(self.path)
        if os.path.exists(absolute) and not self.overwrite:
            raise FileExistsError(f"the output {self.path!r} exists; remove it or pass "
                                  "`overwrite=True` to `Output` (--overwrite).")
        parent = os.path.dirname(absolute)
        if not os.path.isdir(parent):
            raise FileNotFoundError(f"the directory of the output does not exist: {parent!r}.")


@dataclass(frozen=True)
class Plan:
    """How a query's work is cut into tiles and run.

    Parameters
    ----------
    memory_per_worker : int, optional
        Bytes a tile may use; default the cluster's smallest memory limit per worker
        thread (2 GiB without a distributed cluster). Tiles are planned to fit, and a tile
        whose rows returned in memory outgrow a quarter of it stops with
        `ResultTooLargeError` rather than the worker running out of memory.
    rows_per_tile : int, optional
        Plan tiles of at most this many rows (ghosts included) instead.
    max_result_bytes : int, optional
        Bytes the rows of a query returned in memory (no ``output``) may take on the
        client; default half the memory available on the client's machine when the query
        starts. Past it the query stops with `ResultTooLargeError`, which names
        ``output``.
    progress : bool, default False
        Show Dask's progress bar while the tiles run.
    """

    memory_per_worker: int | None = None
    rows_per_tile: int | None = None
    max_result_bytes: int | None = None
    progress: bool = False

    def __post_init__(self) -> None:
        for name in ("memory_per_worker", "rows_per_tile", "max_result_bytes"):
            object.__setattr__(self, name, _as_optional_count(getattr(self, name), name))
        object.__setattr__(self, "progress", _as_flag(self.progress, "progress"))

    @classmethod
    def of(cls, plan) -> Plan:
        """``plan`` as a query takes it: None for the defaults, or a `Plan`."""
        if plan is None:
            return cls()
        if not isinstance(plan, Plan):
            raise TypeError(f"`plan` must be None or a Plan; got {type(plan).__name__} "
                            f"{plan!r}.")
        return plan
