"""DynamicHash.query_contacts: the pairs that began and ended between two calls, against a
model that diffs sets of pairs, on random histories (integer ids and ids of any type) and
named cases.

The model keeps the set of pairs at the previous call (brute force, `dynamic_oracles`, and
`query_pairs` as a set, which must agree); the expected events are the set differences.
Coordinates are dyadic, as in `test_dynamic_stateful.py`, so touching boxes and points on
cell faces happen often and are decided exactly.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import dynamic_oracles as oracle
from dynamic_machines import (
    draw_boxes,
    insert_boxes,
    remove_one,
    remove_some,
    shift_as_boxes,
    where_it_was,
)
from spatialhash import Contacts, DynamicHash

IDS = st.integers(0, 30)
#: Ids of every kind, some equal across types (``1 == 1.0``: one key, as in a dict).
OBJECT_IDS = st.sampled_from(
    [0, 1, 2, 7, -3, 1.0, 2.5, "a", "b", "player", ("wall", 1), ("wall", 2), (3, "x"), 2**40]
)
#: Integer ids of the bulk calls in the machine of mixed ids.
BULK_IDS = st.integers(100, 112)
COORD = st.integers(-16, 16).map(lambda i: i / 4.0)
#: Closer together for the machine of mixed ids, which holds fewer objects.
NEAR_COORD = st.integers(-6, 6).map(lambda i: i / 4.0)
SIZE = st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.75, 3.0, 12.0])
BITS = st.sampled_from([oracle.ALL_BITS, 1, 2, 3])


def is_int(id) -> bool:
    return isinstance(id, (int, np.integer)) and not isinstance(id, bool)


def int_rows_ok(rows: np.ndarray) -> list[tuple]:
    """The rows of an integer answer, checked: int64 (k, 2), smaller id first, sorted, each
    pair once."""
    assert rows.dtype == np.int64 and rows.ndim == 2 and rows.shape[1] == 2
    found = [tuple(row) for row in rows.tolist()]
    assert all(a < b for a, b in found)
    assert found == sorted(found)
    assert len(set(found)) == len(found)
    return found


def pair_sets(model: dict) -> set:
    """The model's overlapping pairs as frozensets of ids (brute force; any id type)."""
    ids = list(model)
    by_position = {i: model[id] for i, id in enumerate(ids)}
    return {frozenset((ids[a], ids[b])) for a, b in oracle.query_pairs(by_position)}


def event_sets(contacts: Contacts) -> tuple[set, set]:
    """``began`` and ``ended`` as sets of frozensets, each row checked to be a pair once."""
    result = []
    for rows in (contacts.began, contacts.ended):
        assert rows.ndim == 2 and rows.shape[1] == 2
        found = [frozenset(row) for row in rows.tolist()]
        assert all(len(pair) == 2 for pair in found)
        assert len(set(found)) == len(found)
        result.append(set(found))
    return result[0], result[1]


def draw_shape(data, n_dims, coord=COORD):
    lower = [data.draw(coord) for _ in range(n_dims)]
    kind = data.draw(st.sampled_from(["point", "box", "sphere"]))
    if kind == "point":
        return lower, None, None
    if kind == "box":
        return lower, [x + data.draw(SIZE) for x in lower], None
    return lower, None, data.draw(SIZE) / 2


# ---------------------------------------------------------------------- random histories
class ContactMachine(RuleBasedStateMachine):
    """Random inserts, moves, removals, re-inserts, clears and pickles between calls of
    `query_contacts`; each call is compared with the set differences of the model's pairs.
    Integer ids, through the single and the bulk calls."""

    @initialize(n_dims=st.sampled_from([1, 2, 3]), cell_size=st.sampled_from([0.5, 1.0]))
    def start(self, n_dims, cell_size):
        self.n_dims = n_dims
        self.hash = DynamicHash(cell_size, n_dims=n_dims)
        self.model: dict = {}
        self.before: set = set()  # the pairs at the previous call (none before the first)

    def put(self, id, args, category=oracle.ALL_BITS, mask=oracle.ALL_BITS):
        self.hash.insert(id, args[0], args[1], radius=args[2], category=category, mask=mask)
        self.model[id] = oracle.make_shape(*args, self.n_dims, category, mask)

    # ------------------------------------------------------------------ changes
    @rule(id=IDS, data=st.data(), category=BITS, mask=BITS)
    def insert(self, id, data, category, mask):
        if id not in self.model:
            self.put(id, draw_shape(data, self.n_dims), category, mask)

    @rule(ids=st.lists(IDS, min_size=1, max_size=10, unique=True), data=st.data())
    def insert_many(self, ids, data):
        ids = [id for id in ids if id not in self.model]
        if ids:
            insert_boxes(self, ids, *draw_boxes(data, ids, COORD, SIZE, self.n_dims))

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def move(self, data):
        id = data.draw(st.sampled_from(sorted(self.model)))
        args = draw_shape(data, self.n_dims)
        self.hash.move(id, args[0], args[1], radius=args[2])
        old = self.model[id]
        self.model[id] = oracle.make_shape(*args, self.n_dims, old.category, old.mask)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), step=st.sampled_from([-1.0, -0.25, 0.25, 1.0]))
    def move_many(self, data, step):
        """A step of a simulation: some objects shift a little, so a few contacts change."""
        ids = data.draw(st.lists(st.sampled_from(sorted(self.model)), min_size=1, unique=True))
        shift_as_boxes(self, ids, step)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove(self, data):
        remove_one(self, data)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove_many(self, data):
        remove_some(self, data)

    @precondition(lambda self: len(self.model) >= 2)
    @rule(data=st.data(), same_shape=st.booleans())
    def reinsert(self, data, same_shape):
        """Ids removed and inserted again, the last removed first: each may take a slot
        another id held at the previous call (the free slots are reused last in, first
        out), and may overlap what it overlapped before."""
        ids = data.draw(st.lists(st.sampled_from(sorted(self.model)), min_size=1,
                                 max_size=3, unique=True))
        shapes = {id: self.model[id] for id in ids}
        for id in ids:
            self.hash.remove(id)
            del self.model[id]
        for id in reversed(ids) if data.draw(st.booleans()) else ids:
            old = shapes[id]
            args = where_it_was(old, self.n_dims) if same_shape else draw_shape(data,
                                                                                self.n_dims)
            self.put(id, args, old.category, old.mask)

    @rule()
    def clear(self):
        self.hash.clear()
        self.model.clear()

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def clear_and_insert_again(self, data):
        """`clear` ends every contact; the objects inserted again before the next call,
        where they were, keep theirs."""
        kept = data.draw(st.lists(st.sampled_from(sorted(self.model)), unique=True))
        shapes = {id: self.model[id] for id in kept}
        self.clear()
        for id, old in shapes.items():
            self.put(id, where_it_was(old, self.n_dims), old.category, old.mask)

    @rule()
    def pickle_round_trip(self):
        """A pickled hash keeps the contact state."""
        self.hash = pickle.loads(pickle.dumps(self.hash))

    @rule()
    def query_pairs(self):
        """Other queries leave the contact state as it is."""
        found = {tuple(row) for row in self.hash.query_pairs().tolist()}
        assert found == oracle.query_pairs(self.model)

    # ------------------------------------------------------------------ the events
    @rule()
    def contacts(self):
        now = oracle.query_pairs(self.model)
        contacts = self.hash.query_contacts()
        began = int_rows_ok(contacts.began)
        ended = int_rows_ok(contacts.ended)
        assert set(began) == now - self.before
        assert set(ended) == self.before - now
        self.before = now

    @invariant()
    def nothing_changed_means_no_events_after_a_call(self):
        """Two calls in a row: the second reports nothing. Only when the model holds a
        multiple of 5 objects: each check is a call, which moves the reference point of
        the next `contacts` rule (changes must pile up between calls too)."""
        if not hasattr(self, "model") or len(self.model) % 5:
            return
        self.contacts()
        again = self.hash.query_contacts()
        assert again.began.shape == again.ended.shape == (0, 2)
        assert again.began.dtype == again.ended.dtype == np.int64


TestContactEvents = ContactMachine.TestCase


class MixedIdContactMachine(RuleBasedStateMachine):
    """Ids of every kind (the hash's second path: ids kept in a dict, object arrays), with
    integer bulk calls mixed in; rows compared as sets of frozensets."""

    @initialize(n_dims=st.sampled_from([2, 3]), cell_size=st.sampled_from([0.5, 1.0]))
    def start(self, n_dims, cell_size):
        self.n_dims = n_dims
        self.hash = DynamicHash(cell_size, n_dims=n_dims)
        self.model: dict = {}
        self.before: set = set()
        self.all_int_before = True

    @rule(id=OBJECT_IDS, data=st.data())
    def insert(self, id, data):
        if id in self.model:
            return
        args = draw_shape(data, self.n_dims, NEAR_COORD)
        self.hash.insert(id, args[0], args[1], radius=args[2])
        self.model[id] = oracle.make_shape(*args, self.n_dims)

    @rule(ids=st.lists(BULK_IDS, min_size=1, max_size=6, unique=True), data=st.data())
    def insert_many(self, ids, data):
        if not any(id in self.model for id in ids):
            insert_boxes(self, ids, *draw_boxes(data, ids, NEAR_COORD, SIZE, self.n_dims))

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def move(self, data):
        id = data.draw(st.sampled_from(list(self.model)))
        args = draw_shape(data, self.n_dims, NEAR_COORD)
        self.hash.move(id, args[0], args[1], radius=args[2])
        self.model[id] = oracle.make_shape(*args, self.n_dims)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove(self, data):
        remove_one(self, data, list)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def reinsert(self, data):
        """An id removed and inserted again where it was (another id may take its slot
        in between)."""
        id = data.draw(st.sampled_from(list(self.model)))
        old = self.model.pop(id)
        self.hash.remove(id)
        other = data.draw(OBJECT_IDS)
        if other not in self.model and other != id:
            self.hash.insert(other, [0.0] * self.n_dims)
            self.model[other] = oracle.make_shape([0.0] * self.n_dims, None, None,
                                                  self.n_dims)
        args = where_it_was(old, self.n_dims)
        self.hash.insert(id, args[0], args[1], radius=args[2])
        self.model[id] = oracle.make_shape(*args, self.n_dims)

    @rule()
    def clear_sometimes(self):
        if len(self.model) > 8:
            self.hash.clear()
            self.model.clear()

    @rule()
    def pickle_round_trip(self):
        self.hash = pickle.loads(pickle.dumps(self.hash))

    @rule()
    def contacts(self):
        now = pair_sets(self.model)
        assert {frozenset(row) for row in self.hash.query_pairs().tolist()} == now
        contacts = self.hash.query_contacts()
        all_int = all(is_int(id) for id in self.model)
        integer = all_int and self.all_int_before
        for rows in (contacts.began, contacts.ended):
            assert rows.dtype == (np.int64 if integer else object)
        if integer:
            int_rows_ok(contacts.began)
            int_rows_ok(contacts.ended)
        began, ended = event_sets(contacts)
        assert began == now - self.before
        assert ended == self.before - now
        self.before = now
        self.all_int_before = all_int


TestMixedIdContactEvents = MixedIdContactMachine.TestCase


# ---------------------------------------------------------------------- named cases
def row_list(rows: np.ndarray) -> list:
    return rows.tolist()


def boxes_in_a_row(n_dims: int = 2) -> DynamicHash:
    """Ids 0..4, unit boxes at x = 0, 0.75, 1.5, 2.25 (a chain: each meets the next) and
    one far away."""
    hash_ = DynamicHash(1.0, n_dims=n_dims)
    for id, x in enumerate([0.0, 0.75, 1.5, 2.25, 10.0]):
        lower = [x] + [0.0] * (n_dims - 1)
        hash_.insert(id, lower, [x + 1.0] + [1.0] * (n_dims - 1))
    return hash_


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_first_call_reports_every_pair_as_begun_then_nothing(n_dims):
    hash_ = boxes_in_a_row(n_dims)
    first = hash_.query_contacts()
    assert isinstance(first, Contacts)
    assert row_list(first.began) == [[0, 1], [1, 2], [2, 3]]
    assert first.ended.shape == (0, 2) and first.ended.dtype == np.int64
    again = hash_.query_contacts()
    assert again.began.shape == again.ended.shape == (0, 2)
    assert again.began.dtype == again.ended.dtype == np.int64


def test_an_empty_hash_has_no_events():
    contacts = DynamicHash(1.0, n_dims=3).query_contacts()
    assert contacts.began.shape == contacts.ended.shape == (0, 2)
    assert repr(contacts) == ("Contacts(n_began=0, n_ended=0, began=int64[0, 2], "
                              "ended=int64[0, 2])")


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_moves_begin_and_end_contacts(n_dims):
    hash_ = boxes_in_a_row(n_dims)
    hash_.query_contacts()
    rest = [0.0] * (n_dims - 1)
    hash_.move(4, [2.5] + rest, [3.0] + rest)  # meets 2 (touching at 2.5) and 3
    hash_.move(0, [-2.0] + rest, [-1.0] + rest)  # leaves 1
    contacts = hash_.query_contacts()
    assert row_list(contacts.began) == [[2, 4], [3, 4]]
    assert row_list(contacts.ended) == [[0, 1]]
    assert repr(contacts) == ("Contacts(n_began=2, n_ended=1, began=int64[2, 2], "
                              "ended=int64[1, 2])")


def test_a_pair_that_parts_and_meets_again_between_calls_has_no_event():
    hash_ = boxes_in_a_row()
    hash_.query_contacts()
    hash_.move(0, [-5.0, 0.0], [-4.0, 1.0])
    assert row_list(hash_.query_pairs()) == [[1, 2], [2, 3]]  # parted here...
    hash_.move(0, [0.0, 0.0], [1.0, 1.0])  # ...and met again before the next call
    contacts = hash_.query_contacts()
    assert contacts.began.shape == contacts.ended.shape == (0, 2)


def test_a_removed_object_ends_its_contacts_at_the_next_call():
    hash_ = boxes_in_a_row()
    hash_.query_contacts()
    hash_.remove(1)
    contacts = hash_.query_contacts()
    assert row_list(contacts.ended) == [[0, 1], [1, 2]]
    assert contacts.began.shape == (0, 2)
    assert hash_.query_contacts().ended.shape == (0, 2)  # reported once


def test_remove_many_ends_the_contacts_of_each():
    hash_ = boxes_in_a_row()
    hash_.query_contacts()
    hash_.remove_many([3, 1])
    assert row_list(hash_.query_contacts().ended) == [[0, 1], [1, 2], [2, 3]]


def test_an_id_removed_and_inserted_again_while_overlapping_keeps_its_contacts():
    hash_ = boxes_in_a_row()
    hash_.query_contacts()
    # 1 is removed last, so 1 inserted again takes 3's old slot and 3 takes 1's.
    hash_.remove(3)
    hash_.remove(1)
    hash_.insert(3, [2.25, 0.0], [3.25, 1.0])
    hash_.insert(1, [0.75, 0.0], [1.75, 1.0])
    slot_of = hash_._ids.slot_of
    assert slot_of[1] != 1 and slot_of[3] != 3  # the slots did change
    contacts = hash_.query_contacts()
    assert contacts.began.shape == contacts.ended.shape == (0, 2)


def test_an_id_inserted_again_elsewhere_ends_and_begins_its_contacts():
    hash_ = boxes_in_a_row()
    hash_.query_contacts()
    hash_.remove(1)
    hash_.insert(1, [9.5, 0.0], [10.5, 1.0])  # now meets 4, not 0 or 2
    contacts = hash_.query_contacts()
    assert row_list(contacts.began) == [[1, 4]]
    assert row_list(contacts.ended) == [[0, 1], [1, 2]]


def test_another_id_in_a_freed_slot_is_another_object():
    hash_ = boxes_in_a_row()
    hash_.query_contacts()
    hash_.remove(1)
    hash_.insert(9, [0.75, 0.0], [1.75, 1.0])  # 1's place and 1's slot
    assert hash_._ids.slot_of[9] == 1
    contacts = hash_.query_contacts()
    assert row_list(contacts.began) == [[0, 9], [2, 9]]
    assert row_list(contacts.ended) == [[0, 1], [1, 2]]


def test_an_object_inserted_and_removed_between_calls_is_never_reported():
    hash_ = boxes_in_a_row()
    hash_.query_contacts()
    hash_.insert(7, [0.5, 0.5])
    hash_.remove(7)
    hash_.insert("ghost", [0.5, 0.5])
    hash_.remove("ghost")
    contacts = hash_.query_contacts()
    assert contacts.began.shape == contacts.ended.shape == (0, 2)
    assert contacts.began.dtype == np.int64  # every id now and then is an integer


def test_clear_ends_every_contact():
    hash_ = boxes_in_a_row()
    hash_.query_contacts()
    hash_.clear()
    contacts = hash_.query_contacts()
    assert row_list(contacts.ended) == [[0, 1], [1, 2], [2, 3]]
    assert contacts.began.shape == (0, 2)
    assert hash_.query_contacts().ended.shape == (0, 2)


def test_clear_then_the_same_objects_again_keeps_their_contacts():
    hash_ = boxes_in_a_row()
    hash_.query_contacts()
    hash_.remove(2)  # freed before the clear: its id is that of the previous call
    hash_.insert(8, [1.5, 0.0], [2.5, 1.0])
    hash_.clear()
    for id, x in [(3, 2.25), (1, 0.75), (0, 0.0)]:
        hash_.insert(id, [x, 0.0], [x + 1.0, 1.0])
    hash_.clear()  # twice: still the ids of the previous call
    for id, x in [(3, 2.25), (1, 0.75), (0, 0.0)]:
        hash_.insert(id, [x, 0.0], [x + 1.0, 1.0])
    contacts = hash_.query_contacts()
    assert row_list(contacts.ended) == [[1, 2], [2, 3]]
    assert contacts.began.shape == (0, 2)


def test_masks_filter_contacts_as_they_filter_pairs():
    hash_ = DynamicHash(1.0, n_dims=2)
    hash_.insert("wall", [0.0, 0.0], [1.0, 1.0], category=1, mask=2)
    hash_.insert("ghost", [0.5, 0.5], category=4, mask=4)  # overlaps; filtered out
    hash_.insert("player", [0.25, 0.25], category=2, mask=1)
    contacts = hash_.query_contacts()
    assert {frozenset(row) for row in contacts.began.tolist()} == {frozenset(("wall",
                                                                             "player"))}
    hash_.move("ghost", [0.3, 0.3])
    hash_.move("player", [5.0, 5.0])
    contacts = hash_.query_contacts()
    assert contacts.began.shape == (0, 2)
    assert {frozenset(row) for row in contacts.ended.tolist()} == {frozenset(("wall",
                                                                             "player"))}


def test_object_ids_give_object_arrays_until_a_call_with_integers_only():
    hash_ = boxes_in_a_row()
    hash_.insert("a", [0.8, 0.5])
    first = hash_.query_contacts()
    assert first.began.dtype == object
    assert {frozenset(row) for row in first.began.tolist()} == {
        frozenset(pair) for pair in [(0, 1), (1, 2), (2, 3), ("a", 0), ("a", 1)]}
    hash_.remove("a")
    second = hash_.query_contacts()  # "a" was in the hash at the previous call
    assert second.began.dtype == second.ended.dtype == object
    assert {frozenset(row) for row in second.ended.tolist()} == {
        frozenset(("a", 0)), frozenset(("a", 1))}
    hash_.move(4, [3.0, 0.0], [4.0, 1.0])
    third = hash_.query_contacts()
    assert third.began.dtype == third.ended.dtype == np.int64
    assert row_list(third.began) == [[3, 4]]


def test_an_id_equal_across_types_is_one_id():
    hash_ = DynamicHash(1.0, n_dims=2)
    hash_.insert(1, [0.0, 0.0], [1.0, 1.0])
    hash_.insert("b", [0.5, 0.5])
    hash_.query_contacts()
    hash_.remove(1.0)
    hash_.insert(1.0, [0.0, 0.0], [1.0, 1.0])  # the same key of a dict: the same id
    contacts = hash_.query_contacts()
    assert contacts.began.shape == contacts.ended.shape == (0, 2)


def test_pickled_hash_keeps_the_contact_state_and_goes_its_own_way():
    hash_ = boxes_in_a_row()
    hash_.query_contacts()
    hash_.remove(0)
    clone = pickle.loads(pickle.dumps(hash_))
    hash_.insert(0, [0.0, 0.0], [1.0, 1.0])  # back where it was: no event in the original
    assert hash_.query_contacts().ended.shape == (0, 2)
    assert row_list(clone.query_contacts().ended) == [[0, 1]]
    clone.move(4, [3.0, 0.0], [4.0, 1.0])
    assert row_list(clone.query_contacts().began) == [[3, 4]]
    assert hash_.query_contacts().began.shape == (0, 2)


def test_query_pairs_between_calls_leaves_the_state_alone():
    hash_ = boxes_in_a_row()
    hash_.query_contacts()
    hash_.move(4, [3.0, 0.0], [4.0, 1.0])
    assert row_list(hash_.query_pairs()) != []
    hash_.query_box([0.0, 0.0], [5.0, 5.0])
    assert row_list(hash_.query_contacts().began) == [[3, 4]]


def test_growth_and_freed_slots_between_calls():
    """The storage grows (its slots copied to larger arrays) while freed slots are
    reused: the events still follow the ids."""
    rng = np.random.default_rng(3)
    hash_ = DynamicHash(1.0, n_dims=2)
    lower = rng.random((40, 2)) * 6
    hash_.insert_many(np.arange(40), lower, lower + 1.0)
    before = {tuple(row) for row in hash_.query_pairs().tolist()}
    assert {tuple(row) for row in hash_.query_contacts().began.tolist()} == before
    hash_.remove_many(np.arange(0, 40, 3))
    more = rng.random((200, 2)) * 6
    hash_.insert_many(np.arange(100, 300), more, more + 0.5)
    hash_.insert_many(np.arange(0, 40, 3), lower[::3], lower[::3] + 1.0)  # back, new slots
    assert hash_._engine._meta.shape[0] > 64
    now = {tuple(row) for row in hash_.query_pairs().tolist()}
    contacts = hash_.query_contacts()
    assert set(int_rows_ok(contacts.began)) == now - before
    assert set(int_rows_ok(contacts.ended)) == before - now == set()
    assert all(a >= 100 or b >= 100 for a, b in now - before)  # only the new ones began


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_a_moving_scene_matches_the_set_difference_of_query_pairs(seed, n_dims):
    """Bulk moves of a few percent of 3,000 boxes, removals and inserts, step by step;
    the events equal the set differences of `query_pairs` on a twin hash."""
    rng = np.random.default_rng(seed)
    n = 3_000
    side = (n * 0.5) ** (1 / n_dims)
    lower = rng.random((n, n_dims)) * side
    sizes = rng.uniform(0.2, 1.0, (n, n_dims))
    sizes[:30] *= 8  # some on coarser levels
    hashes = [DynamicHash(1.0, n_dims=n_dims) for _ in range(2)]
    for hash_ in hashes:
        hash_.insert_many(np.arange(n), lower, lower + sizes)
    contacts, twin = hashes
    before: set = set()
    present = np.ones(n, bool)
    for step in range(6):
        moved = np.flatnonzero(present & (rng.random(n) < 0.05))
        lower[moved] += rng.uniform(-0.3, 0.3, (len(moved), n_dims))
        gone = np.flatnonzero(present & (rng.random(n) < 0.01))
        back = np.flatnonzero(~present & (rng.random(n) < 0.5))
        for hash_ in hashes:
            hash_.move_many(moved, lower[moved], lower[moved] + sizes[moved])
            hash_.remove_many(gone)
            hash_.insert_many(back, lower[back], lower[back] + sizes[back])
        present[gone] = False
        present[back] = True
        now = {tuple(row) for row in twin.query_pairs().tolist()}
        events = contacts.query_contacts()
        began, ended = set(int_rows_ok(events.began)), set(int_rows_ok(events.ended))
        assert began == now - before
        assert ended == before - now
        if step:
            assert 0 < len(began) + len(ended) < len(now)  # a few change, not all
        before = now


# ---------------------------------------------------------------------- kernels
@pytest.mark.parametrize("seed", range(3))
def test_pair_keys_are_sorted_and_the_merge_is_the_set_difference(seed):
    """`sorted_pair_keys` against NumPy's sort of the same keys, with runs of every
    length (a slot in 200 pairs: the run sorted by numba's sort rather than by insertion),
    pairs in either orientation and chunks of different fill; `sorted_difference` against
    NumPy's set differences."""
    from spatialhash.dynamic._kernels import contacts as kernels

    rng = np.random.default_rng(seed)
    n_slots, per_chunk = 500, 400
    first = rng.integers(0, n_slots, 5_000)
    second = rng.integers(0, n_slots, 5_000)
    first[:200] = 7  # one long run
    second[:200] = rng.choice(np.arange(8, n_slots), 200, replace=False)
    expected = np.unique((np.minimum(first, second) << 32) | np.maximum(first, second))
    expected = expected[expected >> 32 != expected & 0xFFFFFFFF]  # distinct pairs
    shuffled = rng.permutation(expected)
    low, high = shuffled >> 32, shuffled & 0xFFFFFFFF
    flip = rng.random(len(shuffled)) < 0.5
    rows = np.column_stack([np.where(flip, high, low), np.where(flip, low, high)])
    counts = rng.multinomial(len(rows), np.full(16, 1 / 16))
    assert counts.max() <= per_chunk
    pairs = np.full((16 * per_chunk, 2), -1, np.int64)
    ends = np.cumsum(counts)
    for chunk in range(16):
        pairs[chunk * per_chunk : chunk * per_chunk + counts[chunk]] = \
            rows[ends[chunk] - counts[chunk] : ends[chunk]]
    found = kernels.sorted_pair_keys(pairs, counts, n_slots)
    assert np.array_equal(found, expected)
    assert np.count_nonzero(found >> 32 == 7) >= 200
    old = np.sort(rng.choice(found, len(found) // 2, replace=False))
    old = np.union1d(old, [n_slots << 32 | (n_slots + 1)])  # a key not in the new ones
    began, ended = kernels.sorted_difference(found, old)
    assert np.array_equal(began, np.setdiff1d(found, old))
    assert np.array_equal(ended, np.setdiff1d(old, found))
    none_began, none_ended = kernels.sorted_difference(found, found)
    assert none_began.size == none_ended.size == 0
