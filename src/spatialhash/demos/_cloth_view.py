"""Drawing the cloth demo with Pillow: perspective, painter's algorithm, flat shading."""

from __future__ import annotations

import math

import numpy as np

from .._validation import as_count

#: Palette: background, ground, ground lines, then a shading ramp per side of the cloth.
_BACKGROUND, _GROUND, _GROUND_LINE, _TEXT = 0, 1, 2, 3
_N_SHADES = 48
_FRONT, _BACK = 8, 8 + _N_SHADES
_FRONT_RGB = np.array([235.0, 120.0, 40.0])
_BACK_RGB = np.array([60.0, 130.0, 220.0])
_AMBIENT = 0.3
#: Light from above, a little to the front and left (unit vector).
_LIGHT = np.array([-0.4, -0.5, 1.0]) / math.sqrt(0.16 + 0.25 + 1.0)


def _palette() -> list[int]:
    colours = np.zeros((256, 3))
    colours[_BACKGROUND] = (245, 245, 240)
    colours[_GROUND] = (200, 200, 195)
    colours[_GROUND_LINE] = (170, 170, 165)
    colours[_TEXT] = (30, 30, 30)
    ramp = _AMBIENT + (1.0 - _AMBIENT) * np.linspace(0.0, 1.0, _N_SHADES)[:, None]
    colours[_FRONT:_FRONT + _N_SHADES] = ramp * _FRONT_RGB
    colours[_BACK:_BACK + _N_SHADES] = ramp * _BACK_RGB
    return np.round(colours).astype(np.uint8).ravel().tolist()


class Renderer:
    """Draws the cloth with Pillow: perspective, painter's algorithm, flat shading.

    Quads of the particle grid are sorted far to near and filled one by one, each with the
    colour of its side (orange in front, blue behind) shaded by the angle to the light.
    Larger cloths are drawn on a coarser grid of at most ``max_quads`` per side.

    Parameters
    ----------
    cloth : Cloth
        The cloth to draw; its extent places the camera.
    width, height : int
        Image size in pixels.
    max_quads : int, default 100
        Most quads drawn along a side.
    """

    def __init__(self, cloth, width: int = 480, height: int = 360,
                 max_quads: int = 100) -> None:
        from PIL import Image, ImageDraw  # the demo extra; imported when drawing

        self._image_module, self._draw_module = Image, ImageDraw
        self.cloth = cloth
        self.width, self.height = as_count(width, "width"), as_count(height, "height")
        n = cloth.size
        stride = max(1, math.ceil((n - 1) / as_count(max_quads, "max_quads")))
        self._ids = np.unique(np.r_[np.arange(0, n, stride), n - 1])
        extent = (n - 1) * cloth.spacing
        self.target = np.array([0.0, 0.25 * extent, 0.15 * extent])
        self.eye = self.target + extent * np.array([1.1, -1.5, 0.9])
        forward = self.target - self.eye
        self._forward = forward / np.linalg.norm(forward)
        right = np.cross(self._forward, [0.0, 0.0, 1.0])
        self._right = right / np.linalg.norm(right)
        self._up = np.cross(self._right, self._forward)
        self._focal = 0.5 * self.width / math.tan(math.radians(25.0))
        self._palette = _palette()
        self._ground = self._ground_lines(extent)

    def _project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Screen coordinates (m, 2) and depth along the view direction (m,)."""
        relative = points - self.eye
        depth = relative @ self._forward
        scale = self._focal / np.maximum(depth, 1e-9)
        x = 0.5 * self.width + scale * (relative @ self._right)
        y = 0.5 * self.height - scale * (relative @ self._up)
        return np.stack([x, y], axis=-1), depth

    def _ground_lines(self, extent: float) -> list:
        half = 1.2 * extent
        ticks = np.linspace(-half, half, 13)
        lines = []
        for tick in ticks:
            ends = np.array([[tick, -half + self.target[1], 0.0],
                             [tick, half + self.target[1], 0.0],
                             [-half, tick + self.target[1], 0.0],
                             [half, tick + self.target[1], 0.0]])
            xy, _ = self._project(ends)
            lines.append([tuple(p) for p in xy[:2]])
            lines.append([tuple(p) for p in xy[2:]])
        corners = np.array([[-half, -half, 0.0], [half, -half, 0.0],
                            [half, half, 0.0], [-half, half, 0.0]])
        corners[:, 1] += self.target[1]
        xy, _ = self._project(corners)
        return [[tuple(p) for p in xy]] + lines

    def render(self):
        """The cloth as it is now, a Pillow image in palette mode."""
        cloth = self.cloth
        image = self._image_module.new("P", (self.width, self.height), _BACKGROUND)
        image.putpalette(self._palette)
        draw = self._draw_module.Draw(image)
        draw.polygon(self._ground[0], fill=_GROUND)
        for line in self._ground[1:]:
            draw.line(line, fill=_GROUND_LINE)

        grid = cloth.positions.reshape(cloth.size, cloth.size, 3)[np.ix_(self._ids, self._ids)]
        a, b, c, d = grid[:-1, :-1], grid[1:, :-1], grid[1:, 1:], grid[:-1, 1:]
        normals = np.cross(c - a, d - b).reshape(-1, 3)
        lengths = np.linalg.norm(normals, axis=1)
        normals /= np.where(lengths > 0, lengths, 1.0)[:, None]
        centres = (0.25 * (a + b + c + d)).reshape(-1, 3)
        front = np.einsum("ij,ij->i", normals, self.eye - centres) > 0
        # Light the side that faces the camera.
        facing = np.where(front[:, None], normals, -normals)
        light = np.clip(facing @ _LIGHT, 0.0, 1.0)
        colours = np.where(front, _FRONT, _BACK) + np.round(light * (_N_SHADES - 1)).astype(int)

        xy, _ = self._project(grid.reshape(-1, 3))
        m = len(self._ids)
        xy = xy.reshape(m, m, 2)
        corners = np.stack([xy[:-1, :-1], xy[1:, :-1], xy[1:, 1:], xy[:-1, 1:]], axis=2)
        corners = corners.reshape(-1, 8)
        order = np.argsort(-(centres - self.eye) @ self._forward, kind="stable")
        for quad, colour in zip(corners[order].tolist(), colours[order].tolist(), strict=True):
            draw.polygon(quad, fill=colour)
        state = "on" if cloth.self_collision else "off"
        label = f"t = {cloth.time:.2f} s   self-collision {state}"
        draw.text((8, 8), label, fill=_TEXT)
        return image
