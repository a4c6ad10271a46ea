"""Writing result files so that a failed run leaves nothing half-written."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    The temporary file lives in the destination's folder so that the final
    ``os.replace`` is a rename within one file system (atomic on POSIX). If the body
    raises, the temporary file is removed and ``path`` is left as it was.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write. Its folder must exist.

    Yields
    ------
    pathlib.Path
        Where to write. It keeps the suffix of ``path``, for writers that pick a format
        from the file name.
    """
    target = Path(path)
    handle, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=f".partial{target.suffix}", dir=target.parent or "."
    )
    os.close(handle)
    temporary = Path(temporary)
    try:
        yield temporary
        # mkstemp creates the file readable by its owner only; give it the permissions a
        # plain open() would (0o666 less the umask) before it takes the final name.
        os.chmod(temporary, 0o666 & ~_current_umask())
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def _current_umask() -> int:
    """The process umask (reading it means setting it, so it is set straight back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
