"""The particle demo's run on the command line, the same on the host (`particles.run`) and
on a Warp device (`_particle_device_run.run`): the first step timed apart (it compiles the
kernels or loads them), the steps with their frames and their summary line, and the
animation written.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from ._particle_simulation import DEEP_OVERLAP


def simulate(system, args: argparse.Namespace, view, caches: str, on_host=None) -> list:
    """Time ``system``'s first step, run ``args.steps`` more, and print what they showed.

    Parameters
    ----------
    system : ParticleSystem or DeviceParticleSystem
        Advanced ``args.steps + 1`` steps.
    args : argparse.Namespace
        The demo's options (``steps``, ``frame_every``, ``size``).
    view : module or None
        ``_particle_view``, whose ``render_frame`` draws the frames; None draws none.
    caches : str
        Where the first step's kernels may come from, for its line ("numba's cache").
    on_host : callable, optional
        ``system`` as a host `ParticleSystem` for drawing (a device system's copy);
        default: ``system`` itself.

    Returns
    -------
    list
        The frames drawn, every ``args.frame_every`` steps.
    """
    from tqdm import tqdm

    print(f"first step: compiling the kernels, or loading them from {caches} ...",
          flush=True)
    start = time.perf_counter()
    system.step()
    print(f"first step (kernels compiled or loaded from {caches}): "
          f"{time.perf_counter() - start:.2f} s")
    energy_start = system.energy()
    frames = []
    worst = 0.0
    times = []
    for index in tqdm(range(args.steps), desc="simulating", unit="step", disable=None):
        times.append(system.step().step)
        worst = max(worst, system.max_overlap())
        if view is not None and index % args.frame_every == 0:
            frames.append(view.render_frame(system if on_host is None else on_host(system),
                                            args.size))
    print(f"max overlap after any step: {100 * worst:.1f}% of the smaller radius "
          f"(deep: {100 * DEEP_OVERLAP:.0f}%); energy {energy_start:.4g} -> "
          f"{system.energy():.4g}; median step {1e3 * statistics.median(times):.2f} ms")
    return frames


def write_frames(frames: list, args: argparse.Namespace) -> int:
    """Write ``frames`` as the animation ``args.output`` at ``args.fps``: 0, or 1 with the
    error on stderr when the file cannot be written."""
    from ._animation import write_gif

    try:
        write_gif(frames, args.output, args.fps)
    except OSError as error:
        print(f"error: could not write {args.output}: {error}", file=sys.stderr)
        return 1
    print(f"\nwrote {args.output} ({len(frames)} frames)")
    return 0
