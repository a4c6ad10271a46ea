"""Point files into validated float64 arrays, or a one-line error naming the file and row.

Formats, chosen by the file's extension:

- ``.npy``: a 2-D array (n, d) of real numbers, whose columns are named ``0``, ``1``, ...;
  or a 1-D structured array, whose numeric fields are the columns.
- ``.csv``: comma-separated, with an optional header: a first line whose fields are all
  numbers is data, and the columns are then named ``0``, ``1``, ... by position. A column
  is text (never a coordinate by default) when none of its first `CSV_SAMPLE_ROWS` values
  is a number; one number among them makes it numeric, and any text in it then an error.
- ``.parquet`` (needs pyarrow): integer and floating-point columns.

Coordinates are the columns named by ``--columns``, by default every numeric column (the
radius column excluded); there must be 1, 2 or 3. Values must be finite; radii also >= 0.
A file with columns but no rows gives zero points, so the commands write an empty result,
as the library returns one; a file with no columns at all (an empty .csv) is an error.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .common import CommandError, optional_import, progress

EXTENSIONS = (".npy", ".csv", ".parquet")
#: Data rows of a CSV file read to tell text columns from numeric ones.
CSV_SAMPLE_ROWS = 100
#: Characters of a CSV file parsed per call of ``np.loadtxt`` (about 4 MB).
CSV_BLOCK_CHARS = 1 << 22
MAX_DIMS = 3


@dataclass
class Table:
    """A point file opened: its column names, which are numeric, and how to load them.

    Attributes
    ----------
    path : str
        The file as the user named it (used in messages).
    names : list of str
        Column names in file order.
    numeric : set of str
        Names of the columns that hold numbers.
    load : callable
        ``load(selected) -> ndarray (n, len(selected)) float64``; raises `CommandError`
        on values that are not numbers.
    where : callable
        ``where(row) -> str``: where data row ``row`` (0-based) lies in the file, for
        messages: ``"line 7"`` in a CSV file, ``"row 5"`` otherwise.
    shape : tuple of int, optional
        The array's shape, for a plain (unstructured) .npy file.
    """

    path: str
    names: list[str]
    numeric: set[str]
    load: Callable[[list[str]], np.ndarray]
    where: Callable[[int], str]
    shape: tuple[int, ...] | None = None

    def describe(self, names: Sequence[str]) -> str:
        """The columns ``names`` for a message."""
        if self.shape is not None and list(names) == self.names:
            return f"an array of shape {self.shape}"
        return "columns " + ", ".join(names) if names else "no columns"


def check_extension(path: str, option: str) -> str:
    """The lower-case extension of ``path``, which must be one of `EXTENSIONS`."""
    suffix = Path(path).suffix.lower()
    if suffix not in EXTENSIONS:
        raise CommandError(
            f"{option} must be a .npy, .csv or .parquet file; got {path!r} (extension "
            f"{suffix or 'none'!r})."
        )
    return suffix


def open_table(path: str, option: str, quiet: bool = True) -> Table:
    """Open the point file ``path`` (named ``option`` in messages) by its extension."""
    suffix = check_extension(path, option)
    if not os.path.exists(path):
        raise CommandError(f"{path}: no such file ({option}).")
    if os.path.isdir(path):
        raise CommandError(f"{path}: is a folder, not a file ({option}).")
    opener = {".npy": _open_npy, ".csv": _open_csv, ".parquet": _open_parquet}[suffix]
    return opener(path, quiet)


# ---------------------------------------------------------------------- the public readers
def read_points(path: str, option: str = "INPUT", *, columns: Sequence[str] | None = None,
                columns_option: str = "--columns", radii_column: str | None = None,
                quiet: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Coordinates (n, d) float64 and the radius column (n,) if asked for, both validated.

    Parameters
    ----------
    path : str
        A .npy, .csv or .parquet file.
    option : str
        How the command line names the file (``INPUT``, ``--queries``), for messages.
    columns : sequence of str, optional
        Names of the coordinate columns; default every numeric column but ``radii_column``.
    columns_option : str
        The option that gave ``columns``, for messages.
    radii_column : str, optional
        A column holding one radius per point.
    quiet : bool
        No progress bar.
    """
    table = open_table(path, option, quiet)
    if table.shape is not None and len(table.shape) != 2:
        raise CommandError(
            f"{path}: must be a 2-D array of shape (n, d); got shape {table.shape}."
        )
    for name, flag in [(name, columns_option) for name in columns or ()] + (
        [(radii_column, "--radii-column")] if radii_column is not None else []
    ):
        if name not in table.names:
            raise CommandError(
                f"{flag} must name columns of {path}; got {name!r} (the file has "
                f"{table.describe(table.names)})."
            )
    if columns:
        selected = list(columns)
    else:
        selected = [name for name in table.names
                    if name in table.numeric and name != radii_column]
    if not 1 <= len(selected) <= MAX_DIMS:
        hint = " Pick them with --columns." if len(selected) > MAX_DIMS else ""
        raise CommandError(
            f"{path}: points must have 1, 2 or 3 coordinate columns; got {len(selected)} "
            f"({table.describe(selected)}).{hint}"
        )
    loaded = table.load(selected + ([radii_column] if radii_column is not None else []))
    points = np.ascontiguousarray(loaded[:, : len(selected)])
    _check_values(table, points, selected, "coordinates must be finite", np.isfinite)
    radii = None
    if radii_column is not None:
        radii = np.ascontiguousarray(loaded[:, -1])
        _check_radii(table, radii, radii_column)
    return points, radii


def read_radii(path: str, n_points: int, quiet: bool = True) -> np.ndarray:
    """One radius per point (``--radii FILE``): a file with one numeric column, or a 1-D .npy.

    Parameters
    ----------
    path : str
        The radii file.
    n_points : int
        Number of points in INPUT; the file must hold as many radii.
    quiet : bool
        No progress bar.
    """
    table = open_table(path, "--radii", quiet)
    selected = [name for name in table.names if name in table.numeric]
    if len(selected) != 1:
        raise CommandError(
            f"{path}: --radii must hold one numeric column; got {len(selected)} "
            f"({table.describe(selected)})."
        )
    radii = np.ascontiguousarray(table.load(selected)[:, 0])
    if radii.shape[0] != n_points:
        raise CommandError(
            f"{path}: --radii must hold one radius per point of INPUT ({n_points}); got "
            f"{radii.shape[0]}."
        )
    _check_radii(table, radii, selected[0])
    return radii


def _check_radii(table: Table, radii: np.ndarray, name: str) -> None:
    def valid(values):
        return np.isfinite(values) & (values >= 0)

    _check_values(table, radii[:, np.newaxis], [name], "radii must be finite and >= 0", valid)


def _check_values(table: Table, array: np.ndarray, names: Sequence[str], requirement: str,
                  valid: Callable[[np.ndarray], np.ndarray]) -> None:
    """Raise naming the first value of ``array`` (n, k) that is not ``valid``."""
    bad = np.argwhere(~valid(array))
    if bad.size:
        row, column = (int(i) for i in bad[0])
        raise CommandError(
            f"{table.path}: {requirement}; got {array[row, column]} in column "
            f"{names[column]!r} at {table.where(row)}."
        )


# ---------------------------------------------------------------------- .npy
def _open_npy(path: str, quiet: bool) -> Table:
    with open(path, "rb") as file:
        magic = file.read(6)
    if magic.startswith(b"PK\x03\x04"):
        raise CommandError(f"{path}: is an .npz archive, not a .npy array.")
    if magic != b"\x93NUMPY":
        raise CommandError(f"{path}: not a valid .npy file (it does not start with the .npy "
                           "magic string).")
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as error:
        if "allow_pickle" in str(error):
            raise CommandError(f"{path}: not a numeric .npy file (it holds Python objects)."
                               ) from error
        raise CommandError(f"{path}: not a valid .npy file ({error}).") from error
    except (OSError, EOFError) as error:
        raise CommandError(f"{path}: not a valid .npy file ({error}).") from error

    def where(row: int) -> str:
        return f"row {row}"

    if array.dtype.names is not None:
        return _structured_table(path, array, where)
    if not _is_real(array.dtype):
        raise CommandError(f"{path}: must hold real numbers; got dtype {array.dtype}.")
    if array.ndim > 2 or array.ndim == 0:
        raise CommandError(
            f"{path}: must be a 2-D array of shape (n, d); got shape {array.shape}."
        )
    # A 1-D array is one column: fine for radii; read_points asks for 2-D.
    names = [str(i) for i in range(array.shape[1])] if array.ndim == 2 else ["0"]
    matrix = array[:, np.newaxis] if array.ndim == 1 else array

    def load(selected: list[str]) -> np.ndarray:
        if selected == names:  # the usual case: no copy of a float64 array
            return np.asarray(matrix, dtype=np.float64)
        return matrix[:, [int(name) for name in selected]].astype(np.float64)

    return Table(path, names, set(names), load, where, array.shape)


def _is_real(dtype: np.dtype) -> bool:
    return dtype != np.bool_ and (np.issubdtype(dtype, np.integer)
                                  or np.issubdtype(dtype, np.floating))


def _check_numeric(path: str, selected: list[str], numeric: set[str],
                   kind: Callable[[str], str]) -> None:
    """Refuse a column of ``selected`` that is not in ``numeric``, naming its kind
    (``kind(name)``: ``"dtype <U3"``, ``"type string"``)."""
    for name in selected:
        if name not in numeric:
            raise CommandError(f"{path}: column {name!r} must hold numbers; got {kind(name)}.")


def _structured_table(path: str, array: np.ndarray, where) -> Table:
    if array.ndim != 1:
        raise CommandError(
            f"{path}: a structured array must be 1-D (one record per point); got shape "
            f"{array.shape}."
        )
    names = list(array.dtype.names)
    numeric = {name for name in names
               if array.dtype[name].shape == () and _is_real(array.dtype[name])}

    def load(selected: list[str]) -> np.ndarray:
        _check_numeric(path, selected, numeric, lambda name: f"dtype {array.dtype[name]}")
        columns = [array[name].astype(np.float64) for name in selected]
        return np.column_stack(columns) if columns else np.empty((array.shape[0], 0))

    return Table(path, names, numeric, load, where)


# ---------------------------------------------------------------------- .csv
def _split(line: str) -> list[str]:
    """The fields of one CSV line (quotes understood), stripped of surrounding blanks."""
    return [field.strip() for field in next(csv.reader([line]))]


def _is_number(text: str) -> bool:
    """Whether ``np.loadtxt`` reads ``text`` as a float (Python's float() also takes 1_0)."""
    if "_" in text:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


@contextlib.contextmanager
def _garbled_csv(path: str) -> Iterator[None]:
    """Binary data or broken quoting: a one-line message instead of a traceback."""
    try:
        yield
    except (csv.Error, UnicodeDecodeError) as error:
        raise CommandError(f"{path}: not a readable .csv file ({error}).") from error


def _open_csv(path: str, quiet: bool) -> Table:
    with _garbled_csv(path), open(path, encoding="utf-8-sig") as file:
        lines = (line for line in file if line.strip())
        first = next(lines, None)
        if first is None:
            raise CommandError(f"{path}: the file is empty (no header and no rows).")
        fields = _split(first)
        following = [_split(line) for line in itertools.islice(lines, CSV_SAMPLE_ROWS)]
    has_header = not all(_is_number(field) for field in fields)
    if has_header:
        names = fields
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise CommandError(
                f"{path}: column names must be unique; got {repeated[0]!r} more than once "
                "in the header."
            )
        sample = following
    else:
        names = [str(i) for i in range(len(fields))]
        sample = [fields, *following[:CSV_SAMPLE_ROWS - 1]]
    # Text columns hold text in every sampled row that has a value there; a number in
    # one of them makes the column numeric, so that "N/A" in the first row is reported
    # (at its line) rather than the column quietly left out of the coordinates. Empty
    # values say nothing; with no data, every column is numeric.
    numeric = {
        name for k, name in enumerate(names)
        if not any(k < len(row) and row[k] and not _is_number(row[k]) for row in sample)
        or any(k < len(row) and _is_number(row[k]) for row in sample)
    }
    reader = _CsvReader(path, names, has_header, quiet)
    return Table(path, names, numeric, reader.load, reader.where)


class _CsvReader:
    """Loads columns of a CSV file in blocks with ``np.loadtxt``; explains what it rejects.

    Blank lines are skipped; messages give 1-based line numbers of the file.
    """

    def __init__(self, path: str, names: list[str], has_header: bool, quiet: bool) -> None:
        self.path = path
        self.names = names
        self.has_header = has_header
        self.quiet = quiet

    def _open(self):
        """The file, and the number of lines before the data (the header and blanks)."""
        file = open(self.path, encoding="utf-8-sig")  # closed by the callers' with
        consumed = 0
        if self.has_header:
            for line in file:
                consumed += 1
                if not line.isspace():
                    break
        return file, consumed

    def where(self, row: int) -> str:
        file, consumed = self._open()
        with _garbled_csv(self.path), file:
            data = (number for number, line in enumerate(file, consumed + 1)
                    if not line.isspace())
            return f"line {next(itertools.islice(data, row, None))}"

    def load(self, selected: list[str]) -> np.ndarray:
        columns = [self.names.index(name) for name in selected]
        blocks = [np.empty((0, len(columns)))]
        file, consumed = self._open()
        with _garbled_csv(self.path), file, progress(
                self.quiet, os.path.getsize(self.path), unit="B", unit_scale=True,
                desc=f"reading {Path(self.path).name}") as bar:
            while lines := file.readlines(CSV_BLOCK_CHARS):
                blocks.append(self._parse(lines, consumed + 1, columns))
                consumed += len(lines)
                bar.update(sum(map(len, lines)))
        return np.concatenate(blocks)

    def _parse(self, lines: list[str], first: int, columns: list[int]) -> np.ndarray:
        """The ``columns`` of ``lines`` (the first is line number ``first``), as floats."""
        texts = [text for text in lines if not text.isspace()]
        # loadtxt with usecols ignores extra fields: a row that does not fit the table is
        # garbled, and reading it anyway would be silent truncation.
        separators = len(self.names) - 1
        if any('"' in text for text in texts):
            fits = all(len(next(csv.reader([text]))) == separators + 1 for text in texts)
        else:
            fits = all(text.count(",") == separators for text in texts)
        try:
            if not fits:
                raise ValueError("rows of different lengths")
            return np.loadtxt(io.StringIO("".join(texts)), delimiter=",", quotechar='"',
                              comments=None, usecols=columns, ndmin=2, dtype=np.float64)
        except ValueError as error:
            raise self._explain(lines, first, columns, error) from error

    def _explain(self, lines: list[str], first: int, columns: list[int],
                 error: ValueError) -> CommandError:
        """The first problem in ``lines`` as a message naming its line."""
        for number, text in enumerate(lines, first):
            if text.isspace():
                continue
            fields = _split(text)
            if len(fields) != len(self.names):
                has = "the header has" if self.has_header else "the first line has"
                return CommandError(
                    f"{self.path}: line {number} has {len(fields)} fields; {has} "
                    f"{len(self.names)}."
                )
            for column in columns:
                if not _is_number(fields[column]):
                    return CommandError(
                        f"{self.path}: column {self.names[column]!r} must hold numbers; got "
                        f"{fields[column]!r} at line {number}."
                    )
        return CommandError(f"{self.path}: not a readable .csv file ({error}).")


# ---------------------------------------------------------------------- .parquet
def _not_parquet(path: str, error: Exception) -> CommandError:
    """``path`` is not a Parquet file; pyarrow's reason, made one line, in parentheses.

    pyarrow's messages may end in a newline or hold bytes of the file (control
    characters): those become spaces, and runs of blanks one space.
    """
    text = "".join(char if char.isprintable() else " " for char in str(error))
    reason = " ".join(text.split()).rstrip(".") or type(error).__name__
    return CommandError(f"{path}: not a valid .parquet file ({reason}).")


def _open_parquet(path: str, quiet: bool) -> Table:
    parquet = optional_import("pyarrow.parquet", "reading .parquet")
    pyarrow = optional_import("pyarrow", "reading .parquet")
    try:
        schema = parquet.read_schema(path)
    except (pyarrow.ArrowException, OSError) as error:
        raise _not_parquet(path, error) from error
    names = list(schema.names)
    numeric = {field.name for field in schema
               if pyarrow.types.is_integer(field.type) or pyarrow.types.is_floating(field.type)}

    def load(selected: list[str]) -> np.ndarray:
        _check_numeric(path, selected, numeric, lambda name: f"type {schema.field(name).type}")
        try:
            table = parquet.read_table(path, columns=list(dict.fromkeys(selected)))
        except (pyarrow.ArrowException, OSError) as error:
            raise _not_parquet(path, error) from error
        columns = []
        for name in selected:
            column = table.column(name)
            if column.null_count:
                compute = optional_import("pyarrow.compute", "reading .parquet")
                row = compute.index(compute.is_null(column), True).as_py()
                raise CommandError(
                    f"{path}: column {name!r} must have a value in every row; got null at "
                    f"row {row}."
                )
            columns.append(column.to_numpy().astype(np.float64))
        return np.column_stack(columns) if columns else np.empty((table.num_rows, 0))

    return Table(path, names, numeric, load, lambda row: f"row {row}")
