"""A rule-based state machine: random inserts, moves, removes and queries on a DynamicHash,
every answer compared with a plain dict of shapes and brute-force geometry.

Coordinates lie on a dyadic lattice (quarters), so boundary cases (objects on cell faces,
touching boxes, points at exactly ``r``) happen often and are decided exactly. Sizes run
from points to boxes twenty cells wide, so several levels are in use at once.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import dynamic_oracles as oracle
from dynamic_machines import remove_one, remove_some, shift_as_boxes
from spatialhash import DynamicHash, UnknownIdError

IDS = st.integers(0, 40)
COORD = st.integers(-24, 24).map(lambda i: i / 4.0)
SIZE = st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.75, 3.0, 6.0, 20.0])
BITS = st.sampled_from([oracle.ALL_BITS, 1, 2, 3])


@st.composite
def shapes(draw, n_dims):
    """Arguments ``(lower, upper, radius)`` of a point, a box or a sphere."""
    lower = [draw(COORD) for _ in range(n_dims)]
    kind = draw(st.sampled_from(["point", "box", "sphere"]))
    if kind == "point":
        return lower, None, None
    if kind == "box":
        return lower, [x + draw(SIZE) for x in lower], None
    return lower, None, draw(SIZE) / 2


class DynamicHashMachine(RuleBasedStateMachine):
    @initialize(n_dims=st.sampled_from([2, 3]), cell_size=st.sampled_from([0.5, 1.0, 1.5]))
    def start(self, n_dims, cell_size):
        self.n_dims = n_dims
        self.hash = DynamicHash(cell_size, n_dims=n_dims)
        self.model: dict = {}

    def shape(self, data):
        return data.draw(shapes(self.n_dims))

    # ------------------------------------------------------------------ changes
    @rule(id=IDS, data=st.data(), category=BITS, mask=BITS)
    def insert(self, id, data, category, mask):
        lower, upper, radius = self.shape(data)
        if id in self.model:
            with pytest.raises(ValueError, match="`id` must not be in the hash already"):
                self.hash.insert(id, lower, upper, radius=radius)
            return
        self.hash.insert(id, lower, upper, radius=radius, category=category, mask=mask)
        self.model[id] = oracle.make_shape(lower, upper, radius, self.n_dims, category, mask)

    @rule(ids=st.lists(IDS, min_size=1, max_size=12, unique=True), data=st.data())
    def insert_many(self, ids, data):
        n = len(ids)
        kind = data.draw(st.sampled_from(["point", "box", "sphere"]))
        lower = np.array([[data.draw(COORD) for _ in range(self.n_dims)] for _ in range(n)])
        upper = lower + data.draw(SIZE) if kind == "box" else None
        radius = data.draw(SIZE) / 2 if kind == "sphere" else None
        if any(id in self.model for id in ids):
            with pytest.raises(ValueError, match="`ids` must be new and distinct"):
                self.hash.insert_many(ids, lower, upper, radius=radius)
            return
        self.hash.insert_many(ids, lower, upper, radius=radius)
        for i, id in enumerate(ids):
            self.model[id] = oracle.make_shape(lower[i], None if upper is None else upper[i],
                                               radius, self.n_dims)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def move(self, data):
        id = data.draw(st.sampled_from(sorted(self.model)))
        lower, upper, radius = self.shape(data)
        self.hash.move(id, lower, upper, radius=radius)
        old = self.model[id]
        self.model[id] = oracle.make_shape(lower, upper, radius, self.n_dims, old.category,
                                           old.mask)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), step=COORD)
    def move_many(self, data, step):
        ids = data.draw(st.lists(st.sampled_from(sorted(self.model)), min_size=1, unique=True))
        shift_as_boxes(self, ids, step / 8)  # a small step: most objects keep their cells

    @precondition(lambda self: self.model)
    @rule(data=st.data(), bulk=st.booleans())
    def reshape_in_place(self, data, bulk):
        """A sphere becomes the box of its bounding box, or a cube (a point too) the sphere
        inside it: same cells, only the sphere bit of its sorted entries changes (the
        sort kept by `query_pairs` must see it)."""
        id = data.draw(st.sampled_from(sorted(self.model)))
        old = self.model[id]
        lower, upper = old.lower[: self.n_dims], old.upper[: self.n_dims]
        sides = {high - low for low, high in zip(lower, upper, strict=True)}
        if old.radius is not None:
            args = (list(lower), list(upper), None)
        elif len(sides) == 1:
            args = ([(low + high) / 2 for low, high in zip(lower, upper, strict=True)], None,
                    sides.pop() / 2)
        else:
            return
        if bulk:
            self.hash.move_many([id], np.array([args[0]]),
                                None if args[1] is None else np.array([args[1]]),
                                radius=args[2])
        else:
            self.hash.move(id, *args[:2], radius=args[2])
        self.model[id] = oracle.make_shape(*args, self.n_dims, old.category, old.mask)
        assert self.hash.bounds(id)[0].tolist() == list(lower)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def nudge_all(self, data):
        """Every object moves by 1/64 (most stay in their cells): what a simulation step
        does; bulk moves of most objects take the path that drops the bucket lists."""
        shift_as_boxes(self, sorted(self.model), data.draw(st.sampled_from([-1, 1])) / 64)

    @rule()
    def pairs_twice(self):
        """`query_pairs` again with nothing changed (the kept sort as it is)."""
        first = self.hash.query_pairs()
        assert np.array_equal(self.hash.query_pairs(), first)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), then=st.sampled_from(["remove", "insert", "move_many", "sphere",
                                                 "pickle", "bounds", "clear", "nothing"]))
    def buffered_moves_then(self, data, then):
        """Several single moves of points and boxes (an id may move twice), which `move`
        buffers, then another call before any query: each must see every move, in order."""
        for _ in range(data.draw(st.integers(1, 6))):
            id = data.draw(st.sampled_from(sorted(self.model)))
            lower = [data.draw(COORD) for _ in range(self.n_dims)]
            upper = [x + data.draw(SIZE) for x in lower] if data.draw(st.booleans()) else None
            self.hash.move(id, lower, upper)
            old = self.model[id]
            self.model[id] = oracle.make_shape(lower, upper, None, self.n_dims, old.category,
                                               old.mask)
        id = data.draw(st.sampled_from(sorted(self.model)))
        if then == "remove":
            self.hash.remove(id)
            del self.model[id]
        elif then == "insert":
            new_id = max(self.model) + 1
            self.hash.insert(new_id, [0.0] * self.n_dims, [1.0] * self.n_dims)
            self.model[new_id] = oracle.make_shape([0.0] * self.n_dims, [1.0] * self.n_dims,
                                                   None, self.n_dims)
        elif then == "move_many":
            shift_as_boxes(self, [id], 0.5)
        elif then == "sphere":
            shape = self.model[id]
            self.hash.move(id, [0.5] * self.n_dims, radius=0.25)
            self.model[id] = oracle.make_shape([0.5] * self.n_dims, None, 0.25, self.n_dims,
                                               shape.category, shape.mask)
        elif then == "pickle":
            self.hash = pickle.loads(pickle.dumps(self.hash))
        elif then == "bounds":
            lower, upper = self.hash.bounds(id)
            assert lower.tolist() == list(self.model[id].lower[: self.n_dims])
            assert upper.tolist() == list(self.model[id].upper[: self.n_dims])
        elif then == "clear":
            self.hash.clear()
            self.model.clear()

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove(self, data):
        remove_one(self, data)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove_many(self, data):
        remove_some(self, data)

    @rule(ids=st.lists(IDS, min_size=1, max_size=5, unique=True))
    def failed_calls_change_nothing(self, ids):
        """Unknown ids and inverted boxes raise; the invariants then check nothing moved."""
        unknown = [id + 1000 for id in ids]
        with pytest.raises(UnknownIdError) as error:
            self.hash.move_many(ids + unknown, np.zeros((2 * len(ids), self.n_dims)))
        assert set(error.value.ids) == set(unknown) | {id for id in ids if id not in self.model}
        with pytest.raises(UnknownIdError):
            self.hash.remove_many(ids + unknown)
        with pytest.raises(UnknownIdError):
            self.hash.move(unknown[0], [0.0] * self.n_dims)
        present = [id for id in ids if id in self.model]
        if present:
            lower = np.zeros((len(present), self.n_dims))
            with pytest.raises(ValueError, match="`upper` must be >= `lower`"):
                self.hash.move_many(present, lower, lower - 1.0)

    @rule()
    def clear_sometimes(self):
        if len(self.model) > 30:
            self.hash.clear()
            self.model.clear()

    # ------------------------------------------------------------------ queries
    @rule(data=st.data(), mask=BITS)
    def query_box(self, data, mask):
        lower = [data.draw(COORD) for _ in range(self.n_dims)]
        upper = [x + data.draw(SIZE) for x in lower]
        found = self.hash.query_box(lower, upper, mask=mask)
        assert len(set(found.tolist())) == len(found)
        expected = oracle.query_box(self.model, oracle.pad(lower, self.n_dims),
                                    oracle.pad(upper, self.n_dims), mask)
        assert set(found.tolist()) == expected

    @rule(data=st.data(), r=SIZE, mask=BITS)
    def query_radius(self, data, r, mask):
        center = [data.draw(COORD) for _ in range(self.n_dims)]
        found = self.hash.query_radius(center, r, mask=mask)
        assert len(set(found.tolist())) == len(found)
        expected = oracle.query_radius(self.model, oracle.pad(center, self.n_dims), r, mask)
        assert set(found.tolist()) == expected

    @rule(data=st.data(), k=st.integers(1, 6), mask=BITS)
    def query_knn(self, data, k, mask):
        point = [data.draw(COORD) * 3 for _ in range(self.n_dims)]
        hits = self.hash.query_knn(point, k, mask=mask)
        expected = oracle.query_knn(self.model, oracle.pad(point, self.n_dims), k, mask)
        assert hits.distances.tolist() == [d for d, _ in expected]
        assert hits.ids.tolist() == [id for _, id in expected]

    @rule(data=st.data())
    def query_cell(self, data):
        position = [data.draw(COORD) for _ in range(self.n_dims)]
        found = self.hash.query_cell(position)
        engine = self.hash._engine
        inv_sizes = engine._inv_size
        slot_of = self.hash._ids.slot_of
        levels = {id: int(engine._meta[slot_of[id], 0]) for id in self.model}
        ids_by_shape = {id: shape for id, shape in self.model.items()}
        expected = set()
        for id, shape in ids_by_shape.items():
            one = oracle.query_cell({id: shape}, oracle.pad(position, self.n_dims),
                                    lambda _shape, id=id: inv_sizes[levels[id]])
            expected |= one
        assert sorted(found.tolist()) == sorted(expected)

    @rule(data=st.data(), all_hits=st.booleans(), mask=BITS,
          max_distance=st.sampled_from([math.inf, 0.0, 2.5, 10.0]))
    def query_ray(self, data, all_hits, mask, max_distance):
        origin = [data.draw(COORD) for _ in range(self.n_dims)]
        # Axis-aligned, diagonal and skew directions; dyadic so faces and corners are hit.
        direction = [data.draw(st.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0]))
                     for _ in range(self.n_dims)]
        if not any(direction):
            direction[0] = 1.0
        hits = self.hash.query_ray(origin, direction, max_distance=max_distance,
                                   all_hits=all_hits, mask=mask)
        expected = oracle.query_ray(self.model, oracle.pad(origin, self.n_dims),
                                    oracle.unit(oracle.pad(direction, self.n_dims)),
                                    max_distance, mask)
        if not all_hits:
            expected = expected[:1]
        assert hits.distances.tolist() == [t for t, _ in expected]
        assert hits.ids.tolist() == [id for _, id in expected]

    # ------------------------------------------------------------------ invariants
    @invariant()
    def same_objects(self):
        if not hasattr(self, "model"):
            return
        assert len(self.hash) == len(self.model)
        assert set(self.hash) == set(self.model)
        for id in list(self.model)[:3]:
            assert id in self.hash
            lower, upper = self.hash.bounds(id)
            assert tuple(lower) == self.model[id].lower[: self.n_dims]
            assert tuple(upper) == self.model[id].upper[: self.n_dims]

    @invariant()
    def same_pairs(self):
        """Checked after every rule: `query_pairs` follows every kind of change (moves in
        and out of cells, reshapes, inserts, removals, clear) from the sort it kept."""
        if not hasattr(self, "model"):
            return
        pairs = self.hash.query_pairs()
        found = [tuple(row) for row in pairs.tolist()]
        assert len(found) == len(set(found))
        assert all(a < b for a, b in found)
        assert set(found) == oracle.query_pairs(self.model)


TestDynamicHash = DynamicHashMachine.TestCase
