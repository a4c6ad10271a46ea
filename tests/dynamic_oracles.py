"""Brute-force references for the dynamic hash: a plain dict of shapes and plain geometry.

The arithmetic is the kernels' (`dynamic/_kernels/pairs.py`, `query.py`,
`ray.py`): coordinates padded to three axes with zeros, a sphere's bounding box
``c - r .. c + r`` on the real axes, squared distances summed ``x, y, z`` in that order and
compared with ``r * r``; so on exact (dyadic) inputs every boundary case agrees bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ALL_BITS = 0xFFFFFFFF


@dataclass(frozen=True)
class Shape:
    """An object of the model: bounding box, and the sphere's centre and radius (or None)."""

    lower: tuple
    upper: tuple
    center: tuple | None = None
    radius: float | None = None
    category: int = ALL_BITS
    mask: int = ALL_BITS


def pad(values, n_dims: int) -> tuple:
    padded = [0.0, 0.0, 0.0]
    for axis in range(n_dims):
        padded[axis] = float(values[axis])
    return tuple(padded)


def make_shape(lower, upper=None, radius=None, n_dims=3, category=ALL_BITS, mask=ALL_BITS):
    """The model's shape for the arguments of `DynamicHash.insert`."""
    low = pad(lower, n_dims)
    if radius is not None:
        r = float(radius)
        box_low = tuple(low[a] - r if a < n_dims else low[a] for a in range(3))
        box_high = tuple(low[a] + r if a < n_dims else low[a] for a in range(3))
        return Shape(box_low, box_high, low, r, category, mask)
    high = low if upper is None else pad(upper, n_dims)
    return Shape(low, high, None, None, category, mask)


def box_distance2(point, lower, upper) -> float:
    total = 0.0
    for p, lo, hi in zip(point, lower, upper, strict=True):
        d = lo - p if p < lo else (p - hi if p > hi else 0.0)
        total += d * d
    return total


def distance2(a, b) -> float:
    dx, dy, dz = a[0] - b[0], a[1] - b[1], a[2] - b[2]
    return dx * dx + dy * dy + dz * dz


def boxes_meet(lower_a, upper_a, lower_b, upper_b) -> bool:
    return all(lower_a[i] <= upper_b[i] and lower_b[i] <= upper_a[i] for i in range(3))


def overlap(a: Shape, b: Shape) -> bool:
    """Closed bounding boxes meet, then the exact sphere test."""
    if not boxes_meet(a.lower, a.upper, b.lower, b.upper):
        return False
    if a.radius is None and b.radius is None:
        return True
    if a.radius is not None and b.radius is not None:
        reach = a.radius + b.radius
        return distance2(a.center, b.center) <= reach * reach
    sphere, box = (a, b) if a.radius is not None else (b, a)
    return box_distance2(sphere.center, box.lower, box.upper) <= sphere.radius * sphere.radius


def query_box(model: dict, lower, upper, mask=ALL_BITS) -> set:
    query = Shape(lower, upper)
    return {id for id, shape in model.items() if shape.category & mask and overlap(shape, query)}


def query_radius(model: dict, center, r, mask=ALL_BITS) -> set:
    found = set()
    for id, shape in model.items():
        if not shape.category & mask:
            continue
        if box_distance2(center, shape.lower, shape.upper) > r * r:
            continue
        if shape.radius is not None:
            reach = r + shape.radius
            if distance2(center, shape.center) > reach * reach:
                continue
        found.add(id)
    return found


def distance(point, shape: Shape) -> float:
    """Distance from a point to a box (0 inside) or to a sphere's surface (0 inside)."""
    if shape.radius is None:
        return math.sqrt(box_distance2(point, shape.lower, shape.upper))
    return max(math.sqrt(distance2(point, shape.center)) - shape.radius, 0.0)


def query_knn(model: dict, point, k: int, mask=ALL_BITS) -> list:
    """``(distance, id)`` of the ``k`` nearest, ties by the smaller id."""
    ranked = sorted((distance(point, shape), id) for id, shape in model.items()
                    if shape.category & mask)
    return ranked[:k]


def query_pairs(model: dict) -> set:
    """Unordered overlapping pairs ``(min id, max id)`` passing the filters both ways."""
    ids = sorted(model)
    found = set()
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            sa, sb = model[a], model[b]
            if sa.category & sb.mask and sb.category & sa.mask and overlap(sa, sb):
                found.add((a, b))
    return found


def query_cell(model: dict, position, cell_size_of_level) -> set:
    """Objects whose cell range on their own level holds ``position``'s cell there.

    ``cell_size_of_level(shape)`` gives ``(inverse cell size)`` of the shape's level.
    """
    found = set()
    for id, shape in model.items():
        inv = cell_size_of_level(shape)
        inside = True
        for axis in range(3):
            c = math.floor(position[axis] * inv)
            if not math.floor(shape.lower[axis] * inv) <= c <= math.floor(shape.upper[axis] * inv):
                inside = False
        if inside:
            found.add(id)
    return found


# ---------------------------------------------------------------------- rays
def ray_box(origin, direction, lower, upper, max_distance):
    """Entry parameter of the ray in the closed box (0 when it starts inside), or None."""
    t_lo, t_hi = 0.0, max_distance
    for axis in range(3):
        o, d = origin[axis], direction[axis]
        if d == 0.0:
            if o < lower[axis] or o > upper[axis]:
                return None
            continue
        t_a = (lower[axis] - o) / d
        t_b = (upper[axis] - o) / d
        if t_a > t_b:
            t_a, t_b = t_b, t_a
        t_lo = max(t_lo, t_a)
        t_hi = min(t_hi, t_b)
    return t_lo if t_lo <= t_hi else None


def ray_sphere(origin, direction, center, radius, max_distance):
    """Entry parameter of the ray in the closed ball (0 when it starts inside), or None."""
    # ``direction`` is a unit vector; the arithmetic of `tests/ray_oracles.py` (Haines et
    # al.: the discriminant from the centre's distance to the line).
    m = (origin[0] - center[0], origin[1] - center[1], origin[2] - center[2])
    c = (m[0] * m[0] + m[1] * m[1] + m[2] * m[2]) - radius * radius
    if c <= 0.0:
        return 0.0
    b = m[0] * direction[0] + m[1] * direction[1] + m[2] * direction[2]
    if not b < 0.0:
        return None
    q = (m[0] - b * direction[0], m[1] - b * direction[1], m[2] - b * direction[2])
    disc = radius * radius - (q[0] * q[0] + q[1] * q[1] + q[2] * q[2])
    if not disc >= 0.0:
        return None
    t = c / (math.sqrt(disc) - b)
    return t if t <= max_distance else None


def unit(direction) -> tuple:
    """``direction`` divided by its length, as `DynamicHash.query_ray` normalizes it."""
    x, y, z = direction
    length = math.sqrt(x * x + y * y + z * z)
    return (x / length, y / length, z / length)


def query_ray(model: dict, origin, direction, max_distance=math.inf, mask=ALL_BITS) -> list:
    """``(t, id)`` of every object the ray enters within ``max_distance``, sorted.

    ``direction`` is already normalized the way the hash does it.
    """
    hits = []
    for id, shape in model.items():
        if not shape.category & mask:
            continue
        t = ray_box(origin, direction, shape.lower, shape.upper, max_distance)
        if t is None:
            continue
        if shape.radius is not None and shape.radius > 0.0:  # radius 0: the point
            t = ray_sphere(origin, direction, shape.center, shape.radius, max_distance)
            if t is None:
                continue
        hits.append((t, id))
    return sorted(hits)
