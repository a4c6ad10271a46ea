"""The ``spatialhash`` command line: queries over point files, demos, benchmarks, info,
kernel compilation.

``main(argv)`` parses the arguments, runs one command and returns its exit status; the
console script ``spatialhash`` and ``python -m spatialhash`` call it. The commands live in
`spatialhash._cli`, one module per family. A command that cannot run as given (bad
arguments, a bad input file, a missing optional dependency) prints one line
``spatialhash <command>: error: <what is wrong>`` and exits with status 2, never with a
traceback; a failure while working (the output could not be written) exits with 1.
Running out of memory is one line with status 2 as well. Ctrl-C exits with 130, and
SIGTERM or SIGHUP while a result is written with 128 + the signal's number, as a shell
reports a process the signal ended, after removing the partial file. Standard output
closed early (a pipe into ``head -c0``: the summary line finds no reader) ends the run
quietly with 141, as SIGPIPE would; the result file is complete by then.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import __version__
from ._cli import bench, compile_kernels, demo, info, queries
from ._cli.common import EXIT_USAGE, CommandError, Terminated, out_of_memory

PROG = "spatialhash"
#: Exit status after Ctrl-C, as shells report a SIGINT.
EXIT_INTERRUPTED = 130
#: Exit status when standard output was closed early, as shells report a SIGPIPE.
EXIT_BROKEN_PIPE = 141

EPILOG = """\
point files:
  .npy      a 2-D array (n, d) of real numbers, columns named 0, 1, ...; or a 1-D
            structured array whose numeric fields are the columns
  .csv      comma-separated, header optional (a first line of numbers is data and the
            columns are named 0, 1, ...); a column is text when none of its first 100
            values is a number, else numeric, and any text in it is an error
  .parquet  integer and floating-point columns (needs pyarrow)
  Coordinates are the columns named by --columns (default: every numeric column),
  1 to 3 of them, all finite. A file with a header (or shape) but no rows is zero
  points and gives an empty result.

result files (-o): .npy (a structured array: np.load(path)["i"]), .csv with a header,
  or .parquet; indices are 0-based int64 row numbers, distances float64. A result is
  written to a partial file .OUTPUT.pidPID.XXXXXXXX.partial.EXT beside OUTPUT (PID: the
  writing process) and renamed onto OUTPUT when complete: a failed or interrupted run
  (Ctrl-C, SIGTERM, SIGHUP) leaves no partial output. A run killed outright (SIGKILL, a
  crash) leaves its partial file; the next run writing the same OUTPUT removes those
  whose process no longer exists, and says so on stderr.

exit status: 0 done, 1 failed while working, 2 bad arguments or input, or a result that
  does not fit in memory (one-line message on stderr), 130 interrupted (Ctrl-C), 129 and
  143 ended by SIGHUP and SIGTERM, 141 standard output closed early (a pipe into head).
"""


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The argument parser; the options of a demo are added only when ``argv`` runs it.

    Parameters
    ----------
    argv : sequence of str
        The arguments about to be parsed; they decide which demo module, if any, is
        imported to add its options.
    """
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Spatial hashing for points in 1-, 2- and 3-D: close pairs, radius and "
                    "k-nearest queries over point files, simulations, benchmarks.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    queries.add_parsers(commands)
    demo.add_parser(commands, _requested_demo(argv))
    bench.add_parser(commands)
    info.add_parser(commands)
    compile_kernels.add_parser(commands)
    return parser


def _requested_demo(argv: Sequence[str]) -> str | None:
    """``NAME`` in ``demo NAME ...`` (the first two words that are not options)."""
    words = [word for word in argv if not word.startswith("-")]
    if len(words) >= 2 and words[0] == "demo" and words[1] in demo.DEMOS:
        return words[1]
    return None


def _command_prog(argv: Sequence[str]) -> str:
    """``spatialhash <command>`` for messages raised before the arguments are parsed."""
    words = [word for word in argv if not word.startswith("-")][:2]
    return " ".join([PROG] + (words if words[:1] == ["demo"] else words[:1]))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments, without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status: 0 done, 1 failed while working, 2 bad arguments or input (or
        not enough memory), 130 interrupted, 129 and 143 ended by SIGHUP and SIGTERM
        while writing, 141 standard output closed early.
    """
    try:
        status = _run(list(sys.argv[1:] if argv is None else argv))
        # Flushed here, not at exit: a reader that has gone is then seen below.
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    return status


def _discard_stdout() -> None:
    """Point standard output at the null device, so that the flush at exit, with the
    lines still buffered, does not fail again ("Exception ignored ... BrokenPipeError")."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an object without a file
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, descriptor)
    finally:
        os.close(null)


def _run(argv: list[str]) -> int:
    """`main` without the handling of a closed standard output."""
    prog = _command_prog(argv)
    try:
        parser = build_parser(argv)
        args, extras = parser.parse_known_args(argv)
        prog = args.prog
        if extras and not getattr(args, "passthrough", False):
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
        args.extras = extras
        return args.handler(args)
    except SystemExit as exit:  # argparse: --help, --version, usage errors
        return _exit_status(exit.code)
    except CommandError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return error.status
    except MemoryError as error:  # commands without a message of their own
        error = out_of_memory(error, "Free memory, or ask for less.")
        print(f"{prog}: error: {error}", file=sys.stderr)
        return error.status
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated as ended:
        print(f"{prog}: ended by {ended}; no output written", file=sys.stderr)
        return ended.status


def _exit_status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return EXIT_USAGE
