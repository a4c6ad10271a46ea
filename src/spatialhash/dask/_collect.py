"""Rows returned in memory: every tile's rows gathered to the client and concatenated
there, never on a worker.

Computing a ``dask.dataframe`` concatenates its partitions on one worker before they
reach the client, so a result larger than one worker's memory kills that worker, and
then every worker the task is retried on. Here each tile's rows are the result of one
task; on a distributed cluster the client gathers each result as its task finishes and
releases it on the cluster, and concatenates the rows itself (the local schedulers hold
every result in this process anyway).

Two limits turn running out of memory into an error that says what to do
(`ResultTooLargeError`): a tile stops once its rows outgrow `TILE_RESULT_SHARE` of its
memory budget (on a distributed cluster, or with ``Plan.memory_per_worker``), and the
client stops once the rows gathered outgrow ``Plan.max_result_bytes`` (by default half
the memory available on its machine when the query starts), cancelling what is left.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import _cluster

#: The share of a tile's memory budget its rows returned in memory may take: the rest
#: holds its points and grid, and the copies made to concatenate the rows and send them.
TILE_RESULT_SHARE = 0.25
#: The share of the client machine's available memory the rows of a query may take by
#: default (``Plan.max_result_bytes``).
CLIENT_RESULT_SHARE = 0.5
#: The remedy of a query whose rows are returned in memory.
USE_OUTPUT = ("Pass `output=` (a directory) to have the tiles write their rows to a "
              "Parquet dataset as they run")


class ResultTooLargeError(MemoryError):
    """The rows of a query outgrow the memory set aside for them.

    Raised by a tile whose rows outgrow its share of a worker's memory, or by the client
    when the rows gathered outgrow ``Plan.max_result_bytes``; the message names the limit,
    what was seen and the remedy (``output=``, which writes the rows as the tiles run).
    """


@dataclass(frozen=True)
class Limits:
    """Bytes the rows of one tile (``tile``, set by ``tile_by``) and of the whole query on
    the client (``total``) may take; None for no limit. ``purpose`` says why a tile holds
    its rows, ``remedy`` ends the messages."""

    tile: int | None
    total: int | None
    remedy: str = USE_OUTPUT
    tile_by: str = f"{TILE_RESULT_SHARE:g} of `memory_per_worker`"
    purpose: str = "to be returned in memory"


def available_bytes() -> int | None:
    """Memory available on this machine now (psutil, a dependency of distributed), or
    None where it cannot be told."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with distributed
        return None
    return int(psutil.virtual_memory().available)


def limits_of(plan, client, in_memory: bool, remedy: str = USE_OUTPUT,
              purpose: str = "to be returned in memory") -> Limits:
    """The limits of a query run with ``plan`` on ``client`` (None: the local schedulers);
    ``in_memory`` when the whole result comes back to the client."""
    budget = plan.memory_per_worker
    if budget is None and client is not None:
        budget = _cluster.memory_per_worker(client)
    total = None
    if in_memory:
        total = plan.max_result_bytes
        if total is None:
            available = available_bytes()
            total = None if available is None else int(available * CLIENT_RESULT_SHARE)
    if budget is None:  # the local schedulers: every tile's rows are in this process
        return Limits(total, total, remedy, "`max_result_bytes`", purpose)
    return Limits(int(budget * TILE_RESULT_SHARE), total, remedy, purpose=purpose)


def frame_bytes(frame: pd.DataFrame) -> int:
    return int(frame.memory_usage(index=False, deep=False).sum())


def check_tile(n_bytes: int, tile: int, limits: Limits) -> None:
    """Stop a tile whose rows hold ``n_bytes``, past ``limits.tile``."""
    if limits.tile is not None and n_bytes > limits.tile:
        more = ("give the workers more memory" if "memory_per_worker" in limits.tile_by
                else "raise `Plan.max_result_bytes`")
        raise ResultTooLargeError(
            f"the rows of one tile must fit in {limits.tile:,} bytes ({limits.tile_by}) "
            f"{limits.purpose}; got {n_bytes:,} bytes in tile {tile} before it finished. "
            f"{limits.remedy}, or {more}."
        )


def tile_frame(chunks: Iterable[list[np.ndarray]], names: Sequence[str],
               dtypes: Sequence[np.dtype], tile: int, limits: Limits) -> pd.DataFrame:
    """The column chunks of one tile as one frame, stopped past ``limits.tile``."""
    parts: list[list[np.ndarray]] = []
    held = 0
    for chunk in chunks:
        parts.append(chunk)
        held += sum(column.nbytes for column in chunk)
        check_tile(held, tile, limits)
    columns = {}
    for k, (name, dtype) in enumerate(zip(names, dtypes, strict=True)):
        columns[name] = (np.concatenate([part[k] for part in parts]) if parts
                         else np.zeros(0, dtype))
        for part in parts:  # each column's chunks freed once copied
            part[k] = None
    return pd.DataFrame(columns, copy=False)


def _check_total(held: int, done: int, n_tasks: int, limits: Limits) -> None:
    if limits.total is not None and held > limits.total:
        raise ResultTooLargeError(
            f"the rows returned in memory must fit in `max_result_bytes` = "
            f"{limits.total:,} bytes; got {held:,} bytes from {done} of {n_tasks} tiles. "
            f"{limits.remedy}, or raise `Plan.max_result_bytes`."
        )


def _counter(progress: bool, n_tasks: int) -> Callable[[int], None]:
    def show(done: int) -> None:
        if progress:
            end = "\n" if done == n_tasks else ""
            print(f"\rtiles: {done}/{n_tasks}", end=end, file=sys.stderr, flush=True)

    return show


def gather(tasks: list, limits: Limits, progress: bool,
           size: Callable[[object], int] = frame_bytes, held: int = 0) -> tuple[list, int]:
    """Compute ``tasks`` and bring their results to the client, in task order, with the
    bytes held (``held`` before plus ``size`` of each result).

    On a distributed cluster each result is gathered as its task finishes and released
    there; past ``limits.total`` the tasks left are cancelled and `ResultTooLargeError`
    raised.
    """
    client = _cluster.current_client()
    if client is None:
        results = compute(tasks, progress)
        held += sum(size(result) for result in results)
        _check_total(held, len(results), len(results), limits)
        return results, held
    from distributed import as_completed

    futures = client.compute(tasks)
    position = {future.key: number for number, future in enumerate(futures)}
    results: list = [None] * len(futures)
    show = _counter(progress, len(futures))
    try:
        for done, (future, result) in enumerate(as_completed(futures, with_results=True),
                                                1):
            results[position[future.key]] = result
            held += size(result)
            future.release()
            show(done)
            _check_total(held, done, len(futures), limits)
    except BaseException:
        client.cancel(futures)
        raise
    return results, held


def compute(tasks: list, progress: bool) -> list:
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


def concatenated(frames: list[pd.DataFrame], meta: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frames`` in order, on the client, with a fresh index."""
    frames = [frame for frame in frames if len(frame)]
    if not frames:
        return meta.copy()
    return pd.concat(frames, ignore_index=True)
