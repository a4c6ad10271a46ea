"""Checks of the demos' command-line options, shared by both demos."""

from __future__ import annotations

import argparse
from pathlib import Path


def option_problem(args: argparse.Namespace, minimums: dict[str, int]) -> str | None:
    """What is wrong with the options, as one line, or None.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options, with an ``output`` path (``none``: no file).
    minimums : dict of str to int
        Least value of each numeric option (an option set to None is not checked).
    """
    for name, lowest in minimums.items():
        value = getattr(args, name)
        if value is not None and value < lowest:
            return f"--{name.replace('_', '-')} must be at least {lowest}; got {value}."
    output = str(args.output)
    if output.lower() != "none" and not Path(output).resolve().parent.is_dir():
        return f"--output must be in an existing folder; got {args.output}."
    return None
