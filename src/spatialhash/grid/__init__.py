"""The batch grid: points sorted into cells once, then queried many times.

`Grid` (``_grid.py``) is the public class; ``_kernels/`` holds the kernels of its build
and queries. The design is described in ``_grid.py``'s module docstring.
"""

from ._grid import Grid

__all__ = ["Grid"]
