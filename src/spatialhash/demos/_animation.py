"""Animation files: frames (Pillow images) written to a GIF anyone can open."""

from __future__ import annotations

import os
from collections.abc import Sequence

from .._io import atomic_path


def write_gif(frames: Sequence, path: str | os.PathLike, fps: float) -> None:
    """Write ``frames`` as a looping GIF at ``fps`` frames per second, atomically.

    Parameters
    ----------
    frames : sequence of PIL.Image.Image
        At least one frame, all the same size.
    path : str or os.PathLike
        The GIF to write; nothing is left there if writing fails.
    fps : float
        Playback rate. GIF delays are whole hundredths of a second, so the rate is rounded
        to the nearest one viewers can play.
    """
    if len(frames) == 0:
        raise ValueError("`frames` must hold at least one frame; got none.")
    if not fps > 0:
        raise ValueError(f"`fps` must be positive; got {fps!r}.")
    delay_ms = max(20, round(100.0 / fps) * 10)
    with atomic_path(path) as temporary:
        first, *rest = frames
        first.save(
            temporary, format="GIF", save_all=True, append_images=rest,
            duration=delay_ms, loop=0, optimize=False,
        )
