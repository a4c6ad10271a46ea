"""``--dask``: the ``pairs``, ``neighbors`` and ``knn`` commands on a Dask cluster.

With ``--dask local`` the command starts a `LocalCluster` of worker processes on this
machine; with a scheduler's address (``tcp://host:8786``) it connects to that cluster.
INPUT (and ``--queries``) is then a Parquet file, directory or glob, read by the workers,
and OUTPUT a directory written as a Parquet dataset, all or nothing
(`spatialhash.dask`), with the columns the command writes without ``--dask``.

Before a cluster starts, the inputs and OUTPUT are checked: a .csv or .npy file is
refused with the way to convert it (the engine reads Parquet only, see `check_parquet`),
an OUTPUT that exists (without ``--overwrite``), lies in a missing directory or bears a
file format's name (`check_output`) is refused, and a dataset of fewer than
`SMALL_INPUT_POINTS` points gets one line on stderr saying the command without ``--dask``
is likely faster.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from .common import CommandError

#: Seconds to wait for a remote scheduler before giving up.
CONNECT_TIMEOUT = "20s"
#: Points (INPUT and --queries together) below which ``--dask`` says that the command
#: without it is likely faster: starting a cluster and spreading the work over it cost
#: more than such a search on one machine (docs/dask.md has the measurement).
SMALL_INPUT_POINTS = 1_000_000
#: Point-file formats of the command without ``--dask`` that the Dask engine does not read.
NOT_PARQUET = {".csv": "a CSV file", ".npy": "a .npy file"}


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
             "Parquet dataset, one file per tile, with the columns the command writes "
             "without --dask. A .csv or .npy INPUT is refused: convert it to Parquet. "
             f"Below {SMALL_INPUT_POINTS:,} points a line on stderr (not with -q) says "
             "the command without --dask is likely faster")
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


def check_parquet(path: str | None, option: str) -> None:
    """Refuse a .csv or .npy file (or a glob of them) as ``option`` before a cluster starts.

    The Dask engine reads Parquet only: reading CSV there as the command without
    ``--dask`` reads it (an optional header found by looking at the first line, text
    columns told from numeric ones by a sample, every float parsed exactly) would need a
    second CSV reader on the workers, whose blocks start at byte offsets that need not be
    line starts in a quoted file, and whose float parsing need not match: the same file
    could give other points. A Parquet file converted once gives the same points to both.
    """
    if path is None or os.path.isdir(path):
        return
    suffix = Path(path).suffix.lower()
    if suffix not in NOT_PARQUET:
        return
    if suffix == ".csv":
        target = str(Path(path).with_suffix(".parquet"))
        remedy = ('Convert it once: python -c "import pyarrow.csv as c, pyarrow.parquet as '
                  f"p; p.write_table(c.read_csv({path!r}), {target!r})\"")
    else:
        remedy = "Write its columns to a .parquet file once (pyarrow.parquet.write_table)"
    raise CommandError(
        f"{option} must be Parquet with --dask (a .parquet file, a directory of them or a "
        f"glob); got {path}, {NOT_PARQUET[suffix]}. {remedy}, or run without --dask, "
        "which reads it as it is."
    )


def check_output(args: argparse.Namespace):
    """The `Output` of the run, checked before a cluster starts: OUTPUT is a directory
    written as a Parquet dataset, so a name of another format (.csv, .npy) is refused,
    as are an existing OUTPUT without ``--overwrite`` and a missing parent directory."""
    from ..dask import Output

    suffix = Path(args.output).suffix.lower()
    if suffix in NOT_PARQUET:
        raise CommandError(
            f"OUTPUT must be a directory with --dask, written as a Parquet dataset; got "
            f"{args.output}, the name of {NOT_PARQUET[suffix]}. Name a directory (pairs/, "
            f"pairs.parquet), or run without --dask to write {NOT_PARQUET[suffix]}."
        )
    output = Output(args.output, overwrite=args.overwrite)
    try:
        output.check()
    except OSError as error:
        raise CommandError(f"OUTPUT: {error}") from error
    return output


def count_points(inputs: dict[str, str], limit: int) -> int:
    """Rows of the Parquet datasets ``inputs`` (option -> path), from their footers,
    counted until ``limit`` is reached (the count then stops, so a large dataset costs a
    few footers only).

    A missing dataset or a file that is not Parquet ends the command here, before a
    cluster starts.
    """
    import pyarrow.parquet as pq

    from ..dask._sources import parquet_files

    total = 0
    for option, path in inputs.items():
        try:
            files = parquet_files(path)
        except OSError as error:
            raise CommandError(f"{option}: {error}") from error
        for file in files:
            try:
                total += pq.ParquetFile(file).metadata.num_rows
            except (OSError, ValueError) as error:  # pyarrow's, for a file not Parquet
                raise CommandError(
                    f"{option} must be Parquet with --dask; got {file}, which pyarrow "
                    f"cannot read as Parquet ({error})."
                ) from error
            if total >= limit:
                return total
    return total


def _advise(args: argparse.Namespace, inputs: dict[str, str]) -> None:
    """One line on stderr when ``inputs`` (option -> path) hold fewer than
    `SMALL_INPUT_POINTS` points: the command without ``--dask`` is likely faster."""
    n_points = count_points(inputs, SMALL_INPUT_POINTS)
    if n_points >= SMALL_INPUT_POINTS or args.quiet:
        return
    holds = "hold" if len(inputs) > 1 else "holds"
    print(f"{args.prog}: {' and '.join(inputs)} {holds} {n_points:,} points, fewer than "
          f"{SMALL_INPUT_POINTS:,}: without --dask the command is likely faster for a "
          "dataset this size (a cluster costs seconds to start and to hand the work to).",
          file=sys.stderr)


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
    inputs = {"INPUT": args.input}
    if getattr(args, "queries", None) is not None:
        inputs["--queries"] = args.queries
    for option, path in inputs.items():
        check_parquet(path, option)
    output = check_output(args)
    _advise(args, inputs)
    plan = engine.Plan(memory_per_worker=args.memory_per_worker, progress=not args.quiet)
    common = {"output": output, "plan": plan, "box": args.box}
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
