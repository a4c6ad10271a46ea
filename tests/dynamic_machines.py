"""Changes the state machines over `DynamicHash` share (`test_dynamic_stateful.py`,
`test_dynamic_stateful_ids.py`, `test_dynamic_contacts.py`).

Each helper applies one change to a machine's ``hash`` and to its ``model`` (a dict of
`dynamic_oracles` shapes by id) alike; ``n_dims`` is the machine's dimension. The rules,
with their strategies and preconditions, stay in each machine: only what they do is here.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import dynamic_oracles as oracle


def draw_boxes(data, ids, coord, size, n_dims: int) -> tuple[np.ndarray, np.ndarray]:
    """``(lower, upper)`` of boxes for ``ids``, corners drawn from ``coord``, every side
    one length drawn from ``size``."""
    lower = np.array([[data.draw(coord) for _ in range(n_dims)] for _ in ids])
    return lower, lower + data.draw(size)


def insert_boxes(machine, ids, lower, upper) -> None:
    """``insert_many`` of new boxes (all categories, all masks)."""
    machine.hash.insert_many(np.array(ids), lower, upper)
    for row, id in enumerate(ids):
        machine.model[id] = oracle.make_shape(lower[row], upper[row], None, machine.n_dims)


def shift_as_boxes(machine, ids, offset: float, keep_labels: bool = True) -> None:
    """``move_many`` of ``ids`` by ``offset`` on every axis, each as the box of its
    bounds (a sphere becomes its bounding box); ``keep_labels`` keeps each one's category
    and mask in the model (the hash keeps them on moves)."""
    n_dims = machine.n_dims
    lower = np.array([machine.model[id].lower[:n_dims] for id in ids]) + offset
    upper = np.array([machine.model[id].upper[:n_dims] for id in ids]) + offset
    machine.hash.move_many(ids, lower, upper)
    for row, id in enumerate(ids):
        labels = (machine.model[id].category, machine.model[id].mask) if keep_labels else ()
        machine.model[id] = oracle.make_shape(lower[row], upper[row], None, n_dims, *labels)


def remove_one(machine, data, order=sorted) -> None:
    """``remove`` of an id drawn from the model (``order``: how its ids are listed for the
    draw; ``list`` where they do not sort)."""
    id = data.draw(st.sampled_from(order(machine.model)))
    machine.hash.remove(id)
    del machine.model[id]


def remove_some(machine, data) -> None:
    """``remove_many`` of ids drawn from the model."""
    ids = data.draw(st.lists(st.sampled_from(sorted(machine.model)), min_size=1, unique=True))
    machine.hash.remove_many(np.array(ids))
    for id in ids:
        del machine.model[id]


def where_it_was(shape, n_dims: int) -> tuple:
    """The ``(lower, upper, radius)`` arguments that put ``shape`` back as it was: a
    sphere by its centre and radius, a box or a point by its corners."""
    if shape.radius is not None:
        return shape.center[:n_dims], None, shape.radius
    return shape.lower[:n_dims], shape.upper[:n_dims], None
