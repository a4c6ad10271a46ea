"""Checks of the demos' command-line options, shared by both demos.

Every option is checked before any work starts, so a bad value costs the user a one-line
message at once rather than a traceback after the simulation. So are the optional modules
the chosen options need: a base install (numpy and numba only) gets one line naming the
extras to install, not an ``ImportError`` part-way through the run. `EXTRAS` and
`install_command` are the one table and the one sentence for every optional module of the
demos and the command line (``spatialhash._cli.common.optional_import`` reads them too).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path

import numba

#: Animation files the demos write (Pillow's GIF writer).
ANIMATION_SUFFIXES = (".gif",)
#: Optional module (import name) -> the distribution that provides it, as ``pip`` knows
#: it, and the extra of pyproject.toml that installs it. A headless demo needs only the
#: ``demo`` extra; the window and Parquet files have extras of their own, being larger.
EXTRAS = {
    "PIL": ("Pillow", "demo"),  # the demos' animations
    "tqdm": ("tqdm", "demo"),  # progress bars, the demos' and the command line's
    "pygame": ("pygame", "window"),  # the particle demo's interactive window
    "pyarrow": ("pyarrow", "parquet"),  # .parquet files on the command line
    "warp": ("warp-lang", "gpu"),  # the particle demo on a Warp device (--device)
}


def distribution(name: str) -> str:
    """The distribution that provides the module ``name`` (``"PIL"``: ``"Pillow"``)."""
    return _extra_entry(name)[0]


def install_command(names) -> str:
    """The ``pip`` command that installs the optional modules ``names`` (import names).

    The extras are named in the order of `EXTRAS`, each once: ``pip install
    'spatialhash[demo,window]'`` for Pillow and pygame.
    """
    wanted = {_extra_entry(name)[1] for name in names}
    order = dict.fromkeys(extra for _, extra in EXTRAS.values())
    return f"pip install 'spatialhash[{','.join(e for e in order if e in wanted)}]'"


def _extra_entry(name: str) -> tuple[str, str]:
    """``EXTRAS``'s entry for module ``name`` or its package; a module not in the table is
    its own distribution, in the ``demo`` extra."""
    package = name.split(".")[0]
    return EXTRAS.get(package, (package, "demo"))


def add_threads_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--threads N`` to a demo's ``parser``; ``what`` says what runs on the threads."""
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help=f"threads of {what} (default: the library's, every usable core, "
                             "fewer while other programs keep them busy; -1: all, whatever "
                             "the load)")


def option_problem(args: argparse.Namespace, minimums: dict[str, int]) -> str | None:
    """What is wrong with the options, as one line, or None.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options, with an ``output`` path (``none``: no file), a ``seed`` and,
        where the demo has them, an ``fps`` and ``threads``.
    minimums : dict of str to int
        Least value of each numeric option (an option set to None is not checked).
    """
    for name, lowest in {**minimums, "seed": 0}.items():
        value = getattr(args, name, None)
        if value is not None and value < lowest:
            return f"--{name.replace('_', '-')} must be at least {lowest}; got {value}."
    problem = threads_problem(getattr(args, "threads", None))
    if problem:
        return problem
    fps = getattr(args, "fps", None)
    if fps is not None and not (math.isfinite(fps) and fps > 0):
        return f"--fps must be a positive number; got {fps:g}."
    output = str(args.output)
    if output.lower() == "none":
        return None
    path = Path(output)
    if path.suffix.lower() not in ANIMATION_SUFFIXES:
        return f"--output must name a .gif file (or be 'none'); got {args.output}."
    if path.is_dir():
        return f"--output must name a file, not a folder; got {args.output}."
    if not path.resolve().parent.is_dir():
        return f"--output must be in an existing folder; got {args.output}."
    return None


def threads_problem(threads) -> str | None:
    """What is wrong with ``--threads`` (None: the library's default), as one line, or None."""
    if threads is None:
        return None
    limit = numba.config.NUMBA_NUM_THREADS
    valid = (isinstance(threads, int) and not isinstance(threads, bool)
             and (threads == -1 or 1 <= threads <= limit))
    if valid:
        return None
    return (f"--threads must be -1 (all) or an integer from 1 to {limit} (NUMBA_NUM_THREADS); "
            f"got {threads!r}.")


def missing_modules_problem(command: str, needs: dict[str, str]) -> str | None:
    """The line that names the optional modules ``command`` needs and cannot import, or None.

    Modules are looked up (`importlib.util.find_spec`), not imported, so the check costs
    next to nothing and a module the run never reaches is never loaded.

    Parameters
    ----------
    command : str
        The command, for the message: ``"spatialhash demo particles"``.
    needs : dict of str to str
        Import name (``"PIL"``) -> what needs it, for the message (``"for --output
        particles.gif"``; empty: said without a reason).
    """
    missing = [(name, why) for name, why in needs.items() if not _importable(name)]
    if not missing:
        return None
    names = [distribution(name) + (f" ({why})" if why else "") for name, why in missing]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return (f"{command} needs {listed}; install {'it' if len(names) == 1 else 'them'} "
            f"with: {install_command(name for name, _ in missing)}")


def _importable(name: str) -> bool:
    """Whether top-level module ``name`` can be imported (without importing it)."""
    if name in sys.modules:  # imported already, or None: blocked
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
