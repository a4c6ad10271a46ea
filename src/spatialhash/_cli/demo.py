"""``spatialhash demo particles`` and ``spatialhash demo cloth``.

Each demo is a module of `spatialhash.demos` with ``add_arguments(parser)`` (its options)
and ``run(args) -> int``. A demo module is imported only when its command is asked for,
so the other commands never import Pillow or pygame.
"""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType

from .common import CommandError, add_command

#: Demo name -> (module, one-line description).
DEMOS = {
    "particles": ("spatialhash.demos.particles",
                  "colliding particles of mixed sizes in a box (2-D), with a timing table "
                  "of the collision searches"),
    "cloth": ("spatialhash.demos.cloth",
              "a cloth that folds onto itself, with self-collision (3-D, XPBD)"),
}


def add_parser(subparsers, wanted: str | None) -> None:
    """Add ``demo`` to ``subparsers``; only the ``wanted`` demo's module is imported."""
    parser = subparsers.add_parser(
        "demo", help="run a simulation: particles or cloth",
        description="Simulations that show the spatial hash at work. They need the demo "
                    "extra: pip install 'spatialhash[demo]' (the particle demo's window, "
                    "the window extra). `spatialhash demo NAME --help` lists a demo's "
                    "options.",
    )
    demos = parser.add_subparsers(dest="demo", metavar="NAME", required=True)
    for name, (_, description) in DEMOS.items():
        demo = add_command(demos, name, run, description,
                           description[0].upper() + description[1:] + ".")
        if name == wanted:
            load(name).add_arguments(demo)


def load(name: str) -> ModuleType:
    """The module of demo ``name``, or an error saying what is missing."""
    module_name = DEMOS[name][0]
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        missing = getattr(error, "name", None) or ""
        if not missing or missing.split(".")[0] == "spatialhash":
            raise CommandError(
                f"the {name} demo is not part of this installation ({module_name} cannot be "
                f"imported: {error})."
            ) from error
        from ..demos._options import distribution, install_command  # the extras' one table

        raise CommandError(
            f"the {name} demo needs {distribution(missing)}: {install_command([missing])}"
        ) from error


def run(args: argparse.Namespace) -> int:
    """``spatialhash demo NAME``: the demo's exit status."""
    status = load(args.demo).run(args)
    return 0 if status is None else int(status)
