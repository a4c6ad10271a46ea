"""A rule-based state machine over ids of every kind: integers, strings, tuples and floats
in one hash, through the single-object calls, with integer bulk calls mixed in.

`test_dynamic_stateful.py` drives every call with integer ids, the fast path. Any other id
sends the hash down its second path: ids kept in a dict, results built as object arrays,
ties in order by slot rather than by id. This machine compares that path with a plain
dict model and brute-force geometry (`dynamic_oracles`, which wants sortable ids: the
model is queried through positions and the answers mapped back to ids).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import dynamic_oracles as oracle
from dynamic_machines import draw_boxes, insert_boxes, remove_one, shift_as_boxes
from spatialhash import DynamicHash, UnknownIdError

#: Ids of every kind, some equal across types (``1 == 1.0``: one key, as in a dict).
OBJECT_IDS = st.sampled_from(
    [0, 1, 2, 7, -3, 1.0, 2.5, "a", "b", "player", ("wall", 1), ("wall", 2), (3, "x"), 2**40]
)
#: Integer ids for the bulk calls, away from the single-object ones.
BULK_IDS = st.integers(100, 115)
COORD = st.integers(-16, 16).map(lambda i: i / 4.0)
SIZE = st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0, 12.0])


def by_position(model: dict) -> tuple[list, dict]:
    """The model's ids in a list, and the model keyed by position in that list (sortable
    keys for the oracles)."""
    ids = list(model)
    return ids, {i: model[id] for i, id in enumerate(ids)}


def same_ranking(found_ids, found_distances, expected: list, ids: list, k: int) -> None:
    """Hits equal the oracle's ``(distance, position)`` list, ties in any order (object
    ids are ranked by slot); within the last distance kept, any of its ids may be cut."""
    assert found_distances == [d for d, _ in expected[:k]]
    by_distance: dict = {}
    for d, position in expected:
        by_distance.setdefault(d, set()).add(ids[position])
    for d in set(found_distances):
        kept = [id for id, fd in zip(found_ids, found_distances, strict=True) if fd == d]
        assert len(set(map(repr, kept))) == len(kept)
        assert set(kept) <= by_distance[d]
        if found_distances.count(d) == len(by_distance[d]) or d != found_distances[-1]:
            assert set(kept) == by_distance[d]


class MixedIdMachine(RuleBasedStateMachine):
    @initialize(n_dims=st.sampled_from([2, 3]), cell_size=st.sampled_from([0.5, 1.0]))
    def start(self, n_dims, cell_size):
        self.n_dims = n_dims
        self.hash = DynamicHash(cell_size, n_dims=n_dims)
        self.model: dict = {}

    def draw_shape(self, data):
        lower = [data.draw(COORD) for _ in range(self.n_dims)]
        kind = data.draw(st.sampled_from(["point", "box", "sphere"]))
        if kind == "point":
            return lower, None, None
        if kind == "box":
            return lower, [x + data.draw(SIZE) for x in lower], None
        return lower, None, data.draw(SIZE) / 2

    # ------------------------------------------------------------------ changes
    @rule(id=OBJECT_IDS, data=st.data())
    def insert(self, id, data):
        lower, upper, radius = self.draw_shape(data)
        if id in self.model:
            with pytest.raises(ValueError, match="`id` must not be in the hash already"):
                self.hash.insert(id, lower, upper, radius=radius)
            return
        self.hash.insert(id, lower, upper, radius=radius)
        self.model[id] = oracle.make_shape(lower, upper, radius, self.n_dims)

    @rule(ids=st.lists(BULK_IDS, min_size=1, max_size=6, unique=True), data=st.data())
    def insert_many(self, ids, data):
        if not any(id in self.model for id in ids):
            insert_boxes(self, ids, *draw_boxes(data, ids, COORD, SIZE, self.n_dims))

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def move(self, data):
        id = data.draw(st.sampled_from(list(self.model)))
        lower, upper, radius = self.draw_shape(data)
        self.hash.move(id, lower, upper, radius=radius)
        self.model[id] = oracle.make_shape(lower, upper, radius, self.n_dims)

    @precondition(lambda self: any(isinstance(id, int) for id in self.model))
    @rule(data=st.data(), step=COORD)
    def move_many(self, data, step):
        """Bulk moves reach the objects whose ids are integers, whatever call made them."""
        ints = sorted(id for id in self.model if isinstance(id, int))
        ids = data.draw(st.lists(st.sampled_from(ints), min_size=1, unique=True))
        shift_as_boxes(self, np.array(ids), step)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove(self, data):
        remove_one(self, data, list)

    @rule(id=OBJECT_IDS)
    def unknown_ids_change_nothing(self, id):
        if id in self.model:
            return
        with pytest.raises(UnknownIdError) as error:
            self.hash.move(id, [0.0] * self.n_dims)
        assert error.value.ids == [id]
        with pytest.raises(UnknownIdError):
            self.hash.remove(id)

    # ------------------------------------------------------------------ queries
    @rule(data=st.data())
    def query_box(self, data):
        lower = [data.draw(COORD) for _ in range(self.n_dims)]
        upper = [x + data.draw(SIZE) for x in lower]
        found = self.hash.query_box(lower, upper).tolist()
        ids, model = by_position(self.model)
        expected = oracle.query_box(model, oracle.pad(lower, self.n_dims),
                                    oracle.pad(upper, self.n_dims))
        assert len(found) == len(expected)
        assert set(found) == {ids[i] for i in expected}

    @rule(data=st.data(), r=SIZE)
    def query_radius(self, data, r):
        center = [data.draw(COORD) for _ in range(self.n_dims)]
        found = self.hash.query_radius(center, r).tolist()
        ids, model = by_position(self.model)
        expected = oracle.query_radius(model, oracle.pad(center, self.n_dims), r)
        assert len(found) == len(expected)
        assert set(found) == {ids[i] for i in expected}

    @rule(data=st.data(), k=st.integers(1, 5))
    def query_knn(self, data, k):
        point = [data.draw(COORD) * 2 for _ in range(self.n_dims)]
        hits = self.hash.query_knn(point, k)
        ids, model = by_position(self.model)
        expected = oracle.query_knn(model, oracle.pad(point, self.n_dims), len(model))
        same_ranking(hits.ids.tolist(), hits.distances.tolist(), expected, ids, k)

    @rule(data=st.data(), all_hits=st.booleans())
    def query_ray(self, data, all_hits):
        origin = [data.draw(COORD) for _ in range(self.n_dims)]
        direction = [data.draw(st.sampled_from([-1.0, 0.0, 0.5, 1.0]))
                     for _ in range(self.n_dims)]
        if not any(direction):
            direction[0] = 1.0
        hits = self.hash.query_ray(origin, direction, all_hits=all_hits)
        ids, model = by_position(self.model)
        expected = oracle.query_ray(model, oracle.pad(origin, self.n_dims),
                                    oracle.unit(oracle.pad(direction, self.n_dims)), math.inf)
        same_ranking(hits.ids.tolist(), hits.distances.tolist(), expected, ids,
                     len(expected) if all_hits else 1)

    # ------------------------------------------------------------------ invariants
    @invariant()
    def same_objects_and_pairs(self):
        if not hasattr(self, "model"):
            return
        assert len(self.hash) == len(self.model)
        assert set(self.hash) == set(self.model)
        ids, model = by_position(self.model)
        expected = {frozenset((ids[a], ids[b])) for a, b in oracle.query_pairs(model)}
        found = [frozenset(row) for row in self.hash.query_pairs().tolist()]
        assert len(found) == len(set(found)) == len(expected)
        assert set(found) == expected


TestMixedIds = MixedIdMachine.TestCase
