"""Checks of the demos' command-line options, shared by both demos.

Every option is checked before any work starts, so a bad value costs the user a one-line
message at once rather than a traceback after the simulation.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

#: Animation files the demos write (Pillow's GIF writer).
ANIMATION_SUFFIXES = (".gif",)


def option_problem(args: argparse.Namespace, minimums: dict[str, int]) -> str | None:
    """What is wrong with the options, as one line, or None.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed options, with an ``output`` path (``none``: no file), a ``seed`` and,
        where the demo has one, an ``fps``.
    minimums : dict of str to int
        Least value of each numeric option (an option set to None is not checked).
    """
    for name, lowest in {**minimums, "seed": 0}.items():
        value = getattr(args, name, None)
        if value is not None and value < lowest:
            return f"--{name.replace('_', '-')} must be at least {lowest}; got {value}."
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
