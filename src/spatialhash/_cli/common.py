"""What every command shares: the errors that end a command, optional imports, progress."""

from __future__ import annotations

import argparse
import importlib
import math
import signal
import sys
import time
from types import ModuleType

import numpy as np

#: Exit status of a run that went wrong while working (writing failed, a demo failed).
EXIT_FAILURE = 1
#: Exit status of a command that cannot run as given: usage, input files, a missing extra.
EXIT_USAGE = 2
#: Progress bars appear only for work that has taken longer than this (seconds).
PROGRESS_DELAY_S = 2.0


class CommandError(Exception):
    """Ends a command with a one-line message on stderr and an exit status (no traceback).

    Parameters
    ----------
    message : str
        The line to print; it names the file or option and what was wrong with it.
    status : int, default 2
        The exit status.
    """

    def __init__(self, message: str, status: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.status = status


class Terminated(BaseException):
    """A signal that ends the process (SIGTERM, SIGHUP) received while a result is written.

    Raised by the handlers `spatialhash._cli.writers` installs for the duration of a write,
    so that the temporary file is removed on the way out, as for Ctrl-C; like
    `KeyboardInterrupt`, it is no `Exception`, so no ``except Exception`` stops it.

    Parameters
    ----------
    signal_number : int
        The signal received.
    """

    def __init__(self, signal_number: int) -> None:
        self.signal_number = signal_number
        #: The exit status a shell reports for a process the signal ended: 128 + its number.
        self.status = 128 + signal_number
        super().__init__(signal.Signals(signal_number).name)


def add_command(subparsers, name: str, handler, help: str, description: str,
                **options) -> argparse.ArgumentParser:
    """Add the command ``name`` to ``subparsers``, run by ``handler``, and return its parser.

    Parameters
    ----------
    subparsers
        What ``ArgumentParser.add_subparsers`` returned.
    name, help, description : str
        The command's name, its line in the list of commands, and its ``--help`` text.
    handler : callable
        Runs the command: ``handler(args)`` returns the exit status. ``args.prog`` names
        the command in its messages.
    **options
        Passed to ``add_parser`` (``add_help``, ``allow_abbrev``).
    """
    parser = subparsers.add_parser(name, help=help, description=description, **options)
    parser.set_defaults(handler=handler, prog=parser.prog)
    return parser


def size_text(n_bytes: int) -> str:
    """``n_bytes`` in binary units for messages: ``"149 GiB"``, ``"8 TiB"``, ``"512 B"``."""
    value = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{value:.3g} {unit}" if value < 1000 else f"{value:,.0f} {unit}"


def allocation(error: MemoryError) -> tuple[tuple[int, ...], np.dtype, int] | None:
    """(shape, dtype, bytes) of the array numpy could not allocate, when ``error`` says.

    numpy raises a `MemoryError` subclass that carries the shape and dtype it was asked
    for; a plain `MemoryError` carries nothing, and gives None.
    """
    shape, dtype = getattr(error, "shape", None), getattr(error, "dtype", None)
    if not isinstance(shape, tuple) or not isinstance(dtype, np.dtype):
        return None
    return shape, dtype, math.prod(shape) * dtype.itemsize


def out_of_memory(error: MemoryError, remedy: str) -> CommandError:
    """The one-line error for a run that ran out of memory.

    Parameters
    ----------
    error : MemoryError
        What was raised; numpy's says what it could not allocate.
    remedy : str
        The sentence that ends the message.
    """
    found = allocation(error)
    detail = ""
    if found is not None:
        shape, dtype, n_bytes = found
        detail = f" ({size_text(n_bytes)} for an array of shape {shape} and dtype {dtype})"
    return CommandError(f"the run must fit in memory; got more than it holds{detail}. "
                        f"{remedy}")


def optional_import(name: str, purpose: str) -> ModuleType:
    """Import the optional dependency ``name``, or fail with how to install it.

    Parameters
    ----------
    name : str
        The module to import, e.g. ``"pyarrow.parquet"``.
    purpose : str
        What needs it, for the message: ``"reading .parquet"``.
    """
    try:
        return importlib.import_module(name)
    except ImportError as error:
        from ..demos._options import distribution, install_command  # the extras' one table

        raise CommandError(
            f"{purpose} needs {distribution(name)}: {install_command([name])}"
        ) from error


class _NoProgress:
    """Stands in for a tqdm bar when bars are off or tqdm is not installed."""

    def update(self, n: int = 1) -> None:
        pass

    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(self, *exc_info) -> None:
        pass


class _TextProgress:
    """A plain counter on stderr (``desc: 3/36 calls``) where tqdm is not installed."""

    #: Seconds between two writes of the counter.
    INTERVAL_S = 0.5

    def __init__(self, total: float | None, desc: str = "", unit: str = "it", **_options):
        self._total = total
        self._desc = f"{desc}: " if desc else ""
        unit = unit.strip()
        self._unit = unit if unit.endswith("s") else f"{unit}s"
        self._done = 0
        self._written = time.monotonic()
        self._shown = False

    def update(self, n: int = 1) -> None:
        self._done += n
        now = time.monotonic()
        if now - self._written < self.INTERVAL_S and self._done != self._total:
            return
        self._written = now
        self._shown = True
        total = f"/{self._total:g}" if self._total is not None else ""
        sys.stderr.write(f"\r{self._desc}{self._done:,}{total} {self._unit}")
        sys.stderr.flush()

    def __enter__(self) -> _TextProgress:
        return self

    def __exit__(self, *exc_info) -> None:
        if self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def progress(quiet: bool, total: float | None = None, **options):
    """A tqdm progress bar on stderr, shown only once the work has taken `PROGRESS_DELAY_S`.

    Off with ``quiet`` and when stderr is not a terminal (logs and pipes stay clean). Where
    tqdm is not installed (a base install), a plain text counter instead: a progress bar is
    never a reason for a command to fail.

    Parameters
    ----------
    quiet : bool
        The command's ``--quiet``.
    total : float, optional
        Units of work in all, when known.
    **options
        Passed to ``tqdm.tqdm`` (``unit``, ``desc``, ...).
    """
    if quiet or not sys.stderr.isatty():
        return _NoProgress()
    try:
        from tqdm import tqdm
    except ImportError:
        return _TextProgress(total, **options)
    return tqdm(total=total, file=sys.stderr, delay=PROGRESS_DELAY_S, leave=False, **options)
