"""``--dask``: the ``pairs``, ``neighbors`` and ``knn`` commands on a Dask cluster.

With ``--dask local`` the command starts a `LocalCluster` of worker processes on this
machine; with a scheduler's address (``tcp://host:8786``) it connects to that cluster.
INPUT (and ``--queries``) is then a Parquet file, directory or glob, read by the workers,
and OUTPUT a directory written as a Parquet dataset, all or nothing
(`spatialhash.dask`).
"""

from __future__ import annotations

import argparse
import logging
import os

from .common import CommandError

#: Seconds to wait for a remote scheduler before giving up.
CONNECT_TIMEOUT = "20s"


def byte_size(text: str) -> int:
    """A size in bytes, with an optional K, M, G or T suffix (powers of 1024)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    number, unit = (text[:-1], text[-1].upper()) if text[-1:].upper() in units else (text, "")
    try:
        value = float(number) * units.get(unit, 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a size such as 2G or 500M; got {text!r}"
                                         ) from None
    if not value >= 1:
        raise argparse.ArgumentTypeError(f"must be a positive size; got {text!r}")
    return int(value)


def add_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("on a Dask cluster (needs spatialhash[dask])")
    group.add_argument(
        "--dask", metavar="SCHEDULER",
        help="run on Dask: 'local' (a cluster of worker processes on this machine) or a "
             "scheduler address such as tcp://host:8786. INPUT and --queries are then "
             "Parquet (a file, a directory or a glob) and OUTPUT a directory written as a "
             "Parquet dataset, one file per tile, with the columns of spatialhash.dask "
             "(i, j[, d]; q, i[, d]; q, rank, i, d)")
    group.add_argument("--workers", type=int, metavar="N",
                       help="worker processes of --dask local (default: one per core)")
    group.add_argument("--memory-per-worker", type=byte_size, metavar="SIZE",
                       help="memory a tile may use, e.g. 2G (default: the workers' limit)")
    group.add_argument("--overwrite", action="store_true",
                       help="replace an existing OUTPUT directory once the new one is whole")


def _refuse(args: argparse.Namespace, *options: str) -> None:
    for option in options:
        if getattr(args, option.lstrip("-").replace("-", "_"), None) is not None:
            raise CommandError(f"{option} does not apply with --dask.")


def _connect(address: str, workers: int | None):
    """A distributed client of a new local cluster or of the scheduler at ``address``."""
    try:
        import distributed
    except ImportError as error:
        raise CommandError("--dask needs distributed: pip install 'spatialhash[dask]'"
                           ) from error
    if workers is not None and address != "local":
        raise CommandError("--workers applies to --dask local only.")
    if address == "local":
        n_workers = workers if workers is not None else os.cpu_count() or 1
        if n_workers < 1:
            raise CommandError(f"--workers must be >= 1; got {n_workers}.")
        cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                           processes=True, dashboard_address=":0",
                                           silence_logs=logging.ERROR)
        return distributed.Client(cluster)
    try:
        return distributed.Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as error:
        raise CommandError(f"cannot reach the Dask scheduler at {address!r}: {error}"
                           ) from error


def run(args: argparse.Namespace, query: str) -> int:
    """Run ``query`` (pairs, neighbors or knn) with ``args`` on the cluster of ``--dask``."""
    try:
        import spatialhash.dask as engine
    except ImportError as error:
        raise CommandError(str(error)) from error
    _refuse(args, "--radii", "--threads")
    common = {"output": args.output, "overwrite": args.overwrite,
              "memory_per_worker": args.memory_per_worker, "progress": not args.quiet,
              "box": args.box}
    client = _connect(args.dask, args.workers)
    try:
        if query == "pairs":
            written = engine.query_pairs(args.input, args.r, radii_column=args.radii_column,
                                         columns=args.columns,
                                         return_distances=args.distances, **common)
        else:
            queries = args.input if args.queries is None else args.queries
            query_columns = args.query_columns or args.columns
            if query == "neighbors":
                written = engine.query_radius(args.input, queries, args.r,
                                              columns=args.columns,
                                              query_columns=query_columns,
                                              return_distances=args.distances, **common)
            else:
                written = engine.query_knn(args.input, queries, args.k, r_max=args.r_max,
                                           columns=args.columns, query_columns=query_columns,
                                           **common)
    except (ValueError, TypeError, OSError) as error:
        raise CommandError(str(error)) from error
    finally:
        cluster = getattr(client, "cluster", None)
        client.close()
        if cluster is not None and args.dask == "local":
            cluster.close()
    if not args.quiet:
        timing = ", ".join(f"{stage} {seconds:.1f} s"
                           for stage, seconds in written.seconds.items())
        print(f"wrote {written.rows:,} rows in {len(written.files)} files to {args.output} "
              f"({written.n_tiles} tiles; {timing})")
    return 0
