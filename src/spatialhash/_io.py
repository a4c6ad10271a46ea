"""Writing result files so that a failed run leaves nothing half-written."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: The random part of a partial file's name, as `tempfile.mkstemp` makes it.
_RANDOM = "[a-z0-9_]+"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield the partial file of ``path``; rename it onto ``path`` only on success.

    The partial file ``.NAME.pidPID.XXXXXXXX.partial.EXT`` (``NAME`` the output's name,
    ``PID`` the writing process, ``XXXXXXXX`` random, ``EXT`` the output's extension) lies
    in the destination's folder, so that the final ``os.replace`` is a rename within one
    file system (atomic on POSIX). If the body raises (`KeyboardInterrupt` included), it is
    removed and ``path`` is left as it was; a process killed outright leaves it, and
    `remove_stale_partials` recognizes it by the process id in its name.

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
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.pid{os.getpid()}.",
                                         suffix=f".partial{target.suffix}",
                                         dir=target.parent or ".")
    temporary = Path(temporary)
    try:
        os.close(handle)
        yield temporary
        # mkstemp creates the file readable by its owner only; give it the permissions a
        # plain open() would (0o666 less the umask) before it takes the final name.
        os.chmod(temporary, 0o666 & ~_current_umask())
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def remove_stale_partials(path: str | os.PathLike) -> list[str]:
    """Remove the partial files of ``path`` (see `atomic_path`) whose writing process no
    longer exists.

    Only names of the form ``.NAME.pidPID.XXXXXXXX.partial.EXT`` for this output count;
    a file whose process is alive (or cannot be asked) is left alone, as is every other
    file. Process ids are those of this machine, so on POSIX systems only.

    Parameters
    ----------
    path : str or os.PathLike
        The output file.

    Returns
    -------
    list of str
        The names of the files removed, sorted.
    """
    if os.name != "posix":  # os.kill(pid, 0) would signal the process elsewhere
        return []
    return _remove_partials(path, lambda pid: not _process_exists(pid))


def remove_own_partials(path: str | os.PathLike) -> list[str]:
    """Remove the partial files of ``path`` that this process made.

    `atomic_path` removes its own on the way out; this is for an exception raised by a
    signal handler before `atomic_path` could take charge of the file it had just made
    (between ``mkstemp`` and its ``try``).
    """
    own = os.getpid()
    return _remove_partials(path, lambda pid: pid == own)


def _remove_partials(path: str | os.PathLike, doomed) -> list[str]:
    """Remove the partial files of ``path`` whose writer's process id ``doomed(pid)``
    accepts; return their names, sorted."""
    target = Path(path)
    pattern = re.compile(rf"\.{re.escape(target.name)}\.pid([1-9][0-9]*)\.{_RANDOM}"
                         rf"\.partial{re.escape(target.suffix)}")
    try:
        names = os.listdir(target.parent)
    except OSError:
        return []
    removed = []
    for name in sorted(names):
        match = pattern.fullmatch(name)
        if match is None or not doomed(int(match.group(1))):
            continue
        try:
            (target.parent / name).unlink()
        except OSError:  # removed by another run first, or not ours to remove
            continue
        removed.append(name)
    return removed


def _process_exists(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (signal 0 asks without sending)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, run by another user
        return True
    except (OverflowError, ValueError):  # no process can have this id
        return False
    return True


def _current_umask() -> int:
    """The process umask (reading it means setting it, so it is set straight back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
