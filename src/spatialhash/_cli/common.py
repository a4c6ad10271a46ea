"""What every command shares: the error that ends a command, optional imports, progress."""

from __future__ import annotations

import importlib
import sys
import time
from types import ModuleType

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
        package = name.split(".")[0]
        raise CommandError(
            f"{purpose} needs {package}: pip install 'spatialhash[demo]'"
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
    """A tqdm progress bar on stderr, shown only if the work takes longer than 2 s.

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
