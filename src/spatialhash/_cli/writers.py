"""Result tables streamed to .npy, .csv or .parquet, chunk by chunk, all or nothing.

Every result is a table of named columns (``i, j[, distance]`` for pairs) written in the
format the output's extension names:

- ``.npy``: a 1-D structured array with one field per column (int64 indices, float64
  distances): ``np.load(path)["i"]``. Fields keep each column's type, which an (n, 3)
  float array could not, and the names match the CSV header and the Parquet columns.
- ``.csv``: a header line, then one row per line; distances are written with Python's
  shortest round-trip repr, so reading them back gives the same float64 bit for bit.
- ``.parquet``: one column per field (needs pyarrow).

The file is written under a temporary name beside the output, the *partial file*
``.NAME.pidPID.XXXXXXXX.partial.EXT`` of `spatialhash._io.atomic_path`, and renamed onto
the output only when the last chunk is in: a run that fails or is interrupted leaves
neither a partial output nor a partial file. Ctrl-C arrives as `KeyboardInterrupt`;
SIGTERM and SIGHUP, where left at their default action (which ends the process on the
spot), are turned into `Terminated` for the duration of the write, so the partial file is
removed on the way out too. A process killed outright (SIGKILL, a crash, a power cut)
leaves its partial file behind: the next write of the same output removes every such file
whose process no longer exists (`spatialhash._io.remove_stale_partials`), and says so.
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from .._io import atomic_path, remove_own_partials, remove_stale_partials
from .common import EXIT_FAILURE, CommandError, Terminated, optional_import
from .readers import check_extension

#: A table's columns: (name, dtype) in order.
Fields = Sequence[tuple[str, np.dtype]]


def check_output(path: str) -> str:
    """Fail before any work if ``path`` cannot be written: its extension, folder, pyarrow.

    Returns the lower-case extension.
    """
    suffix = check_extension(path, "OUTPUT")
    folder = Path(path).parent
    if not folder.is_dir():
        raise CommandError(f"{path}: the folder {str(folder)!r} does not exist (OUTPUT).")
    if Path(path).is_dir():
        raise CommandError(f"{path}: is a folder, not a file (OUTPUT).")
    if suffix == ".parquet":
        optional_import("pyarrow.parquet", "writing .parquet")
    return suffix


def check_not_an_input(path: str, inputs: dict[str, str | None]) -> None:
    """Fail before any work if the output ``path`` is one of the input files.

    The output replaces its file when the result is complete, so an output that is an
    input would overwrite the points it was computed from.

    Parameters
    ----------
    path : str
        The output file (``-o``).
    inputs : dict of str to str or None
        Option that names an input (``"INPUT"``, ``"--queries"``) -> its path; None where
        the option was not given.
    """
    for option, source in inputs.items():
        if source is not None and _same_file(path, source):
            also = "" if os.fspath(source) == os.fspath(path) else f" ({source})"
            raise CommandError(
                f"-o/--output must not be an input file; got {path}, the same file as "
                f"{option}{also}. Write the result to another file."
            )


def _same_file(first: str, second: str) -> bool:
    """Whether two paths name one file: `os.path.samefile` where both exist (links and
    other spellings included), else the same resolved path."""
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (or cannot be looked at)
        return Path(first).resolve() == Path(second).resolve()


def write_table(path: str, fields: Fields, chunks: Iterable[Sequence[np.ndarray]],
                prog: str = "spatialhash") -> int:
    """Write ``chunks`` (one array per field each) to ``path`` atomically; return the rows.

    The rows go to a partial file beside ``path`` (see the module's notes), renamed onto
    ``path`` when complete. Partial files of ``path`` left by processes that no longer run
    are removed first, with one line on stderr.

    Parameters
    ----------
    path : str
        The output file; its extension picks the format.
    fields : sequence of (str, dtype)
        Column names and types.
    chunks : iterable of sequence of ndarray
        Consecutive parts of the table, one 1-D array per field, of equal lengths.
    prog : str, default "spatialhash"
        The command, for the line about removed partial files.

    Raises
    ------
    Terminated
        SIGTERM or SIGHUP arrived while writing; the partial file has been removed.
    """
    suffix = check_output(path)
    writer_class = {".npy": NpyWriter, ".csv": CsvWriter, ".parquet": ParquetWriter}[suffix]
    try:
        with _signals_end_the_write() as end_if_signalled:
            _report_removed(prog, Path(path).name, remove_stale_partials(path))
            with atomic_path(path) as temporary:
                writer = writer_class(temporary, fields)
                try:
                    for chunk in chunks:
                        end_if_signalled()
                        writer.write(chunk)
                    end_if_signalled()
                finally:
                    writer.close()
    except (Terminated, KeyboardInterrupt):
        # A signal right after the partial file was made, before `atomic_path` guarded
        # it, leaves it behind: its name carries this process's id.
        remove_own_partials(path)
        raise
    except OSError as error:
        raise CommandError(f"{path}: could not write the output ({error}).",
                           EXIT_FAILURE) from error
    return writer.n_rows


def _report_removed(prog: str, output_name: str, removed: list[str]) -> None:
    if not removed:
        return
    if len(removed) == 1:
        what = f"a partial file of {output_name} left by a run that was"
    else:
        what = f"{len(removed)} partial files of {output_name} left by runs that were"
    print(f"{prog}: removed {what} killed while writing it: {', '.join(removed)}",
          file=sys.stderr)


# ---------------------------------------------------------------------- signals
#: Signals whose default action ends the process, turned into `Terminated` while writing.
CLEANUP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                        if hasattr(signal, name))


@contextlib.contextmanager
def _signals_end_the_write() -> Iterator[Callable[[], None]]:
    """Turn SIGTERM and SIGHUP into `Terminated` in the body, then restore the handlers.

    The body gets a function that raises `Terminated` once such a signal has arrived; it
    calls it between chunks. The handler itself only records the signal: an exception
    raised from it lands wherever the main thread is, and raised inside numba's loading
    of a cached kernel (between two chunks' searches) it left that half done, and the
    process ended in a segmentation fault (1 run in 40, both cores busy). The signal
    therefore ends the write at the next chunk.

    Only signals left at their default action are taken over: one that is ignored (SIGHUP
    under ``nohup``) stays ignored, and a handler a program calling `spatialhash.cli.main`
    installed stays in charge. Python runs signal handlers in the main thread only, so
    from any other thread nothing is installed. The first signal makes the others ignored
    until the body has ended, so that a second one cannot cut the clean-up short.
    """
    received: list[int] = []

    def end_if_signalled() -> None:
        if received:
            raise Terminated(received[0])

    if threading.current_thread() is not threading.main_thread():
        yield end_if_signalled
        return
    taken = [number for number in CLEANUP_SIGNALS
             if signal.getsignal(number) is signal.SIG_DFL]

    def record(number, frame):
        for other in taken:
            signal.signal(other, signal.SIG_IGN)
        received.append(number)

    for number in taken:
        signal.signal(number, record)
    try:
        yield end_if_signalled
    finally:
        for number in taken:
            signal.signal(number, signal.SIG_DFL)


class NpyWriter:
    """A structured .npy file written in chunks; the header gets the row count at the end.

    The header is first written for the largest possible row count and padded with
    spaces, the padding numpy's format allows, so the final header fits the same bytes.
    """

    def __init__(self, path: os.PathLike, fields: Fields) -> None:
        self.dtype = np.dtype([(name, np.dtype(dtype).newbyteorder("<")) for name, dtype
                               in fields])
        self.n_rows = 0
        self.file = open(path, "wb")
        self.header_size = len(self._header(np.iinfo(np.int64).max))
        self.file.write(self._header(0))

    def _header(self, n_rows: int) -> bytes:
        text = repr({"descr": np.lib.format.dtype_to_descr(self.dtype),
                     "fortran_order": False, "shape": (n_rows,)})
        preamble = 6 + 2 + 2  # magic, version 1.0, header length
        size = getattr(self, "header_size", None)
        if size is None:  # the first, longest header: align the data to 64 bytes
            size = -(-(preamble + len(text) + 1) // 64) * 64
        text = text + " " * (size - preamble - len(text) - 1) + "\n"
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1")

    def write(self, columns: Sequence[np.ndarray]) -> None:
        records = np.empty(len(columns[0]), dtype=self.dtype)
        for name, column in zip(self.dtype.names, columns, strict=True):
            records[name] = column
        self.file.write(records.tobytes())
        self.n_rows += records.shape[0]

    def close(self) -> None:
        try:
            if not self.file.closed:
                self.file.seek(0)
                self.file.write(self._header(self.n_rows))
        finally:
            self.file.close()


class CsvWriter:
    """A .csv file with a header line; floats in shortest round-trip form."""

    def __init__(self, path: os.PathLike, fields: Fields) -> None:
        self.n_rows = 0
        self.row_format = ",".join(
            "%d" if np.issubdtype(dtype, np.integer) else "%r" for _, dtype in fields
        ) + "\n"
        self.file = open(path, "w", encoding="utf-8", newline="")
        self.file.write(",".join(name for name, _ in fields) + "\n")

    def write(self, columns: Sequence[np.ndarray]) -> None:
        # tolist() gives Python ints and floats: "%r" of a float is its shortest repr.
        rows = zip(*(column.tolist() for column in columns), strict=True)
        row_format = self.row_format
        self.file.write("".join([row_format % row for row in rows]))
        self.n_rows += len(columns[0])

    def close(self) -> None:
        self.file.close()


class ParquetWriter:
    """A .parquet file, one row group per chunk."""

    def __init__(self, path: os.PathLike, fields: Fields) -> None:
        self.pyarrow = optional_import("pyarrow", "writing .parquet")
        parquet = optional_import("pyarrow.parquet", "writing .parquet")
        self.schema = self.pyarrow.schema(
            [(name, self.pyarrow.from_numpy_dtype(np.dtype(dtype))) for name, dtype in fields]
        )
        self.n_rows = 0
        self.writer = parquet.ParquetWriter(str(path), self.schema)

    def write(self, columns: Sequence[np.ndarray]) -> None:
        table = self.pyarrow.Table.from_arrays(
            [self.pyarrow.array(column, type=field.type)
             for column, field in zip(columns, self.schema, strict=True)],
            schema=self.schema,
        )
        self.writer.write_table(table)
        self.n_rows += table.num_rows

    def close(self) -> None:
        self.writer.close()
