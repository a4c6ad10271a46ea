"""``python -m spatialhash``: the command line (see `spatialhash.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
