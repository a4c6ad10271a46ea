"""The dynamic hash: objects inserted, moved and removed by id, queried between changes.

`DynamicHash` (``_hash.py``) is the public class; ``_kernels/`` holds the kernels of its
storage, moves, sort and queries. The design is described in ``_hash.py``'s module docstring.
"""

from ._hash import DynamicHash
from ._validation import ALL_BITS, UnknownIdError

__all__ = ["ALL_BITS", "DynamicHash", "UnknownIdError"]
