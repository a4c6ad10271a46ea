"""Pictures of the particle demo: animation frames (Pillow) and the interactive window (pygame).

World coordinates have ``y`` up; pictures have ``y`` down, so rows are flipped. Discs are
coloured by radius on a fixed palette, drawn straight into palette ("P") images: no
quantization per frame, and flat colours keep the GIF small.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np

import spatialhash

#: Background, then the radius gradient from small (blue) to large (orange).
BACKGROUND = (18, 18, 28)
GRADIENT = ((49, 104, 208), (64, 178, 172), (146, 208, 80), (246, 190, 60), (236, 98, 52))
N_COLORS = 16
HIGHLIGHT = (255, 255, 255)
#: Default radius of the highlight around the mouse pointer, in smallest radii.
HIGHLIGHT_RADIUS = 24.0


def radius_colors(n_colors: int = N_COLORS) -> list[tuple[int, int, int]]:
    """``n_colors`` RGB colours interpolated along `GRADIENT`."""
    colors = []
    for k in range(n_colors):
        t = k / (n_colors - 1) * (len(GRADIENT) - 1)
        low = min(int(t), len(GRADIENT) - 2)
        a, b, f = GRADIENT[low], GRADIENT[low + 1], t - low
        colors.append(tuple(round(a[c] + (b[c] - a[c]) * f) for c in range(3)))
    return colors


def color_indices(radii: np.ndarray, n_colors: int = N_COLORS) -> np.ndarray:
    """Colour index 0 .. n_colors - 1 of each radius, on a log scale between the extremes."""
    low, high = float(radii.min()), float(radii.max())
    if high <= low:
        return np.zeros(radii.shape[0], dtype=np.int64)
    t = np.log(radii / low) / math.log(high / low)
    return np.minimum((t * n_colors).astype(np.int64), n_colors - 1)


def render_frame(system, size: int):
    """The discs of ``system`` as a ``size`` x ``size`` palette image (PIL.Image.Image)."""
    from PIL import Image, ImageDraw

    image = Image.new("P", (size, size), 0)
    palette = [BACKGROUND, *radius_colors()]
    image.putpalette([channel for color in palette for channel in color])
    draw = ImageDraw.Draw(image)
    scale = size / max(system.width, system.height)
    xs = (system.positions[:, 0] * scale).tolist()
    ys = (size - system.positions[:, 1] * scale).tolist()
    rs = (system.radii * scale).tolist()
    colors = (color_indices(system.radii) + 1).tolist()
    for x, y, r, color in zip(xs, ys, rs, colors, strict=True):
        draw.ellipse((x - r, y - r, x + r, y + r), fill=color)
    return image


def has_display() -> bool:
    """Whether a real display seems available (X11 or Wayland on Linux and the like)."""
    if os.environ.get("SDL_VIDEODRIVER") in ("dummy", "offscreen"):
        return False
    if os.name == "posix" and sys.platform != "darwin":
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def display_problem(headless: bool) -> str | None:
    """Why ``--interactive`` cannot open a window (None when it can).

    Headless runs, and runs with ``SDL_VIDEODRIVER`` set to ``dummy`` or ``offscreen``,
    need no display.
    """
    if headless or os.environ.get("SDL_VIDEODRIVER") in ("dummy", "offscreen"):
        return None
    if not has_display():
        return ("--interactive needs a display (DISPLAY or WAYLAND_DISPLAY is unset); run "
                "without it, or add --headless to run the window on SDL's dummy driver.")
    return None


def _import_pygame():
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    import pygame

    return pygame


class InteractiveView:
    """A pygame window that runs the simulation and highlights the discs near the pointer.

    Each frame advances the system one step, then asks the library which discs have their
    centre within ``highlight_radius`` of the pointer
    (``Grid(positions, cell_size=highlight_radius).query_radius(pointer, highlight_radius)``,
    on the system's ``n_threads``) and draws those in white.

    Parameters
    ----------
    system : ParticleSystem
        Advanced in place.
    size : int, default 768
        Window edge in pixels.
    highlight_radius : float, default `HIGHLIGHT_RADIUS`
        In world units (smallest radii).
    headless : bool, default False
        Use SDL's dummy video driver: no window appears, events can still be posted.
    """

    def __init__(self, system, size: int = 768, highlight_radius: float = HIGHLIGHT_RADIUS,
                 headless: bool = False) -> None:
        self.pygame = _import_pygame()
        self.system = system
        self.size = size
        self.highlight_radius = float(highlight_radius)
        self.headless = headless
        self.scale = size / max(system.width, system.height)
        #: Pointer position in window pixels, from the last MOUSEMOTION (None before one).
        self.pointer: tuple[int, int] | None = None
        #: Indices of the discs highlighted in the last frame, sorted.
        self.highlighted = np.empty(0, dtype=np.int64)
        self._colors = radius_colors()
        self._color_index = color_indices(system.radii).tolist()
        self._screen = None
        self._clock = None
        self._saved_driver = None

    def to_world(self, pixel) -> np.ndarray:
        """World coordinates (shape (2,)) of a window pixel."""
        return np.array([pixel[0] / self.scale, (self.size - pixel[1]) / self.scale])

    def open(self) -> None:
        """Open the window (on SDL's dummy driver when headless)."""
        pygame = self.pygame
        if self.headless:
            # Only for this window: SDL reads the variable when the display starts.
            self._saved_driver = os.environ.get("SDL_VIDEODRIVER")
            os.environ["SDL_VIDEODRIVER"] = "dummy"
        pygame.display.init()
        self._screen = pygame.display.set_mode((self.size, self.size))
        pygame.display.set_caption("spatialhash: colliding particles (Escape quits)")
        self._clock = pygame.time.Clock()

    def frame(self) -> bool:
        """Handle events, step, highlight, draw; False once the window should close."""
        if not self._handle_events():
            return False
        self.system.step()
        self._update_highlight()
        self._draw(self._screen)
        self.pygame.display.flip()
        self._clock.tick(60)
        return True

    def close(self) -> None:
        """Close the window."""
        self.pygame.display.quit()
        if self.headless:
            if self._saved_driver is None:
                os.environ.pop("SDL_VIDEODRIVER", None)
            else:
                os.environ["SDL_VIDEODRIVER"] = self._saved_driver

    def run(self, max_frames: int | None = None) -> int:
        """Show frames until the window closes, Escape, or ``max_frames``; returns the count."""
        self.open()
        try:
            n_frames = 0
            while (max_frames is None or n_frames < max_frames) and self.frame():
                n_frames += 1
            return n_frames
        finally:
            self.close()

    def _handle_events(self) -> bool:
        pygame = self.pygame
        for event in pygame.event.get():
            if event.type == pygame.QUIT:
                return False
            if event.type == pygame.KEYDOWN and event.key == pygame.K_ESCAPE:
                return False
            if event.type == pygame.MOUSEMOTION:
                self.pointer = tuple(event.pos)
        return True

    def _update_highlight(self) -> None:
        if self.pointer is None:
            return
        grid = spatialhash.Grid(self.system.positions, cell_size=self.highlight_radius,
                                n_threads=self.system.n_threads)
        found = grid.query_radius(self.to_world(self.pointer)[np.newaxis],
                                  self.highlight_radius)
        self.highlighted = found.indices.astype(np.int64)

    def _draw(self, screen) -> None:
        pygame = self.pygame
        screen.fill(BACKGROUND)
        scale, size = self.scale, self.size
        xs = (self.system.positions[:, 0] * scale).tolist()
        ys = (size - self.system.positions[:, 1] * scale).tolist()
        rs = np.maximum(self.system.radii * scale, 1.0).tolist()
        colors = self._colors
        for x, y, r, color in zip(xs, ys, rs, self._color_index, strict=True):
            pygame.draw.circle(screen, colors[color], (x, y), r)
        for i in self.highlighted.tolist():
            pygame.draw.circle(screen, HIGHLIGHT, (xs[i], ys[i]), rs[i])
        if self.pointer is not None:
            pygame.draw.circle(screen, HIGHLIGHT, self.pointer,
                               self.highlight_radius * scale, width=1)
