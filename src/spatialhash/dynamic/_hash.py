"""`DynamicHash`: the public class of the dynamic hash.

It validates the input, keeps the ids (`_ids.IdRegistry`: every id is checked there before
anything changes), calls its engine (`_engine.DynamicEngine`, chosen from `_engine.ENGINES`
by the ``engine`` argument) with slots, and turns the slots it gets back into ids. The
design is described in the package docstring (`spatialhash.dynamic`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator

import numpy as np

from .._fair_lock import FairLock
from .._results import Contacts, Hits
from .._user_functions import DYNAMIC_RAY_CALL, ray_function
from .._validation import as_count, as_positive_scalar
from . import _validation as check
from ._contacts import ContactState
from ._engine import new_engine
from ._ids import IdRegistry
from ._kernels.query import KIND_BALL, KIND_BOX, KIND_CELL
from ._locked import locked
from ._storage import MIN_CAPACITY
from ._validation import ALL_BITS, UnknownIdError

__all__ = ["DynamicHash", "UnknownIdError"]

_NDARRAY = np.ndarray
_FLOAT64 = np.dtype(np.float64)


class DynamicHash:
    """A spatial hash of objects that are inserted, moved and removed by id.

    Parameters
    ----------
    cell_size : float
        Edge of the cells of the finest level. Choose about the size of the typical object
        (or the typical query radius): objects up to this size sit on the finest level,
        larger ones on coarser levels (see the `spatialhash.dynamic` docstring).
    n_dims : int, default 3
        Dimension of the positions: 1, 2 or 3.
    capacity : int, default 64
        Slots allocated up front; the storage doubles when full.
    engine : {"cpu"}, default "cpu"
        Where the objects are kept and the queries run: a key of
        `spatialhash.dynamic._engine.ENGINES` (``"cpu"``: NumPy arrays and numba kernels).

    Notes
    -----
    Boxes are closed; a sphere overlaps what its surface or interior touches. A failed call
    (unknown id, bad coordinates) raises before changing anything.

    Examples
    --------
    >>> import numpy as np
    >>> from spatialhash import DynamicHash
    >>> world = DynamicHash(cell_size=1.0, n_dims=2)
    >>> world.insert("player", [0.5, 0.5])                       # a point
    >>> world.insert("wall", [2.0, 0.0], [2.5, 10.0])            # a box
    >>> world.insert("ball", [1.0, 1.0], radius=0.5)             # a sphere
    >>> world.move("player", [1.2, 1.1])
    >>> sorted(world.query_radius([1.0, 1.0], 0.3))
    ['ball', 'player']
    """

    def __init__(self, cell_size: float, n_dims: int = 3, *, capacity: int = MIN_CAPACITY,
                 engine: str = "cpu"):
        self._cell_size = as_positive_scalar(cell_size, "cell_size")
        if math.isinf(1.0 / self._cell_size):
            # Subnormal: no cell arithmetic holds (the batch grid's rule and message).
            raise ValueError(f"`cell_size` is too small: {self._cell_size} has no finite "
                             "inverse in float64.")
        if isinstance(n_dims, (bool, np.bool_)) or not isinstance(n_dims, numbers.Integral):
            raise TypeError(f"`n_dims` must be an integer (1, 2 or 3); got {n_dims!r}.")
        if not 1 <= n_dims <= 3:
            raise ValueError(f"`n_dims` must be 1, 2 or 3; got {n_dims!r}.")
        self._n_dims = int(n_dims)
        capacity = max(as_count(capacity, "capacity"), MIN_CAPACITY)
        # Every call holds the lock (`locked`), and a waiting call is passed by later ones
        # for at most a short handoff (`FairLock`, eventually fair), so a thread that calls
        # in a loop cannot keep another waiting. Reentrant, as `threading.RLock` is: code
        # run under the lock (an id's ``__eq__``, a finalizer) may call the hash again on
        # the same thread.
        self._lock = FairLock()
        self._rows = np.empty((0, 6))  # reused by the bulk calls (`check.shape_rows`)
        self._use(new_engine(engine, self._cell_size, self._n_dims, capacity),
                  IdRegistry(capacity))

    def _use(self, engine, ids: IdRegistry) -> None:
        self._engine = engine
        self._ids = ids
        # Bound once: `move`'s common case calls them.
        self._move_box = engine.move_box
        self._slot_of = ids.slot_of

    def __getstate__(self) -> dict:
        with self._lock:
            state = self.__dict__.copy()
            engine = self._engine
            state["_engine"] = (type(engine), engine.__getstate__())
        del state["_lock"], state["_move_box"], state["_slot_of"]
        return state

    def __setstate__(self, state: dict) -> None:
        engine_type, engine_state = state.pop("_engine")
        ids = state.pop("_ids", None)
        if ids is None:
            # A hash pickled with its ids inside the CPU engine's state.
            ids = IdRegistry.from_engine_state(engine_state)
        engine = engine_type.__new__(engine_type)
        engine.__setstate__(engine_state)
        self.__dict__.update(state)
        self._use(engine, ids)
        self._lock = FairLock()

    # ------------------------------------------------------------------ properties
    @property
    def cell_size(self) -> float:
        """Edge of the finest cells."""
        return self._cell_size

    @property
    def n_dims(self) -> int:
        """Dimension of the positions."""
        return self._n_dims

    @property
    @locked
    def level_counts(self) -> np.ndarray:
        """Objects per level (level ``L`` has cells of ``cell_size * 4**L``), shape (64,)."""
        return self._engine.level_counts()

    @locked
    def __len__(self) -> int:
        return len(self._ids)

    @locked
    def __contains__(self, id) -> bool:
        return id in self._ids

    @locked
    def __iter__(self) -> Iterator:
        return iter(self._ids.ids())

    @locked
    def __repr__(self) -> str:
        levels = np.flatnonzero(self._engine.level_counts()).tolist()
        return (f"DynamicHash(n_objects={len(self._ids)}, n_dims={self._n_dims}, "
                f"cell_size={self._cell_size}, levels={levels})")

    @locked
    def clear(self) -> None:
        """Remove every object (capacity is kept)."""
        self._engine.clear()
        self._ids.clear()
        self._rows = np.empty((0, 6))

    @locked
    def bounds(self, id) -> tuple[np.ndarray, np.ndarray]:
        """Bounding box ``(lower, upper)`` of object ``id``, each of shape (n_dims,)."""
        row = self._engine.bounds(self._ids.slot(id))
        return row[: self._n_dims].copy(), row[3 : 3 + self._n_dims].copy()

    def _present(self, id) -> bool:
        """Whether ``id`` is in the hash, with the error for an unhashable one."""
        try:
            return id in self._ids
        except TypeError as error:
            raise check.unhashable(id) from error

    # ------------------------------------------------------------------ changes
    @locked
    def insert(self, id, lower, upper=None, *, radius=None, category: int = ALL_BITS,
               mask: int = ALL_BITS) -> None:
        """Add an object: a point (``lower`` only), a box, or a sphere (``radius``).

        Parameters
        ----------
        id : hashable
            The object's id; must not be in the hash yet.
        lower : array_like of float, shape (n_dims,)
            The point, the box's lower corner, or the sphere's centre; coordinates within
            +-1e150, like every position whose distances are computed.
        upper : array_like of float, shape (n_dims,), optional
            The box's upper corner, ``>= lower`` on every axis.
        radius : float, optional
            The sphere's radius, ``>= 0``.
        category, mask : int, default all bits
            Collision filter bits in ``[0, 2**32)``: a query with ``mask`` reports the
            object when ``category & mask != 0``; `query_pairs` reports a pair when each
            one's category meets the other's mask.
        """
        if self._present(id):
            raise check.present_ids("id", [id])
        shape = check.shape(lower, upper, radius, self._n_dims)
        category = check.bits_value(category, "category")
        mask = check.bits_value(mask, "mask")
        self._ids.register(id, self._engine.insert(shape, category, mask))

    def move(self, id, lower, upper=None, *, radius=None) -> None:
        """Give object ``id`` a new shape: a point, a box (``upper``) or a sphere (``radius``).

        The arguments are those of `insert`. Points and boxes given as lists, tuples or
        float64 arrays are buffered and applied, in order, before anything next reads or
        changes the hash (see the `spatialhash.dynamic` docstring): the call only checks them.
        """
        # The lock taken here rather than by `locked`: no wrapper's call on the cheapest call.
        self._lock.acquire()
        try:
            # The common case kept short (a simulation may move each of its bodies alone,
            # every step): a point or box given as lists, tuples or 1-D float64 arrays of
            # Python floats, checked here, its id looked up in the registry's dict, and
            # handed to the engine's buffer. Anything else (integers too) takes the full
            # checks of `check.shape`, after the id's.
            if radius is None:
                kind = type(lower)
                if kind is _NDARRAY and lower.dtype == _FLOAT64:
                    lower = lower.tolist()
                    kind = type(lower)  # a list, or a float for a 0-d array
                if upper is None:
                    high, high_kind = lower, kind
                else:
                    high, high_kind = upper, type(upper)
                    if high_kind is _NDARRAY and upper.dtype == _FLOAT64:
                        high = upper.tolist()
                        high_kind = type(high)
                n_dims = self._n_dims
                if ((kind is list or kind is tuple) and (high_kind is list or high_kind is tuple)
                        and len(lower) == n_dims and len(high) == n_dims):
                    if n_dims == 3:
                        x0, y0, z0 = lower
                        x1, y1, z1 = high
                    elif n_dims == 2:
                        (x0, y0), (x1, y1), z0, z1 = lower, high, 0.0, 0.0
                    else:
                        x0, x1, y0, y1, z0, z1 = lower[0], high[0], 0.0, 0.0, 0.0, 0.0
                    if (type(x0) is float and type(y0) is float and type(z0) is float
                            and type(x1) is float and type(y1) is float and type(z1) is float
                            # Finite and within +-1e150 (`_validation.COORDINATE_LIMIT`): NaN,
                            # infinities and squares that overflow fail; values near the limit
                            # take the full checks below.
                            and x0 * x0 + y0 * y0 + z0 * z0 + x1 * x1 + y1 * y1 + z1 * z1 <= 1e300
                            # Each 0 or at least `_validation.COORDINATE_FLOOR` (2**-458,
                            # squared 2**-916): smaller ones take the full checks below.
                            and (x0 * x0 >= 2.0**-916 or x0 == 0.0)
                            and (y0 * y0 >= 2.0**-916 or y0 == 0.0)
                            and (z0 * z0 >= 2.0**-916 or z0 == 0.0)
                            and (x1 * x1 >= 2.0**-916 or x1 == 0.0)
                            and (y1 * y1 >= 2.0**-916 or y1 == 0.0)
                            and (z1 * z1 >= 2.0**-916 or z1 == 0.0)
                            and x0 <= x1 and y0 <= y1 and z0 <= z1):
                        try:
                            slot = self._slot_of[id]
                        except KeyError:
                            raise check.unknown_ids("id", [id]) from None
                        except TypeError as error:
                            raise check.unhashable(id) from error
                        self._move_box(slot, x0, y0, z0, x1, y1, z1)
                        return
            slot = self._ids.slot(id)
            self._engine.move(slot, check.shape(lower, upper, radius, self._n_dims))
        finally:
            self._lock.release()

    @locked
    def remove(self, id) -> None:
        """Remove object ``id``."""
        slot = self._ids.slot(id)
        self._engine.remove(slot)
        self._ids.unregister(np.array([slot], np.int64))

    @locked
    def insert_many(self, ids, lower, upper=None, *, radius=None, category=None,
                    mask=None) -> None:
        """Add many objects with integer ids: points, boxes (``upper``) or spheres (``radius``).

        Parameters
        ----------
        ids : array_like of int, shape (m,)
            New, distinct ids.
        lower : array_like of float, shape (m, n_dims)
            Points, lower corners or centres.
        upper : array_like of float, shape (m, n_dims), optional
            Upper corners of boxes.
        radius : float or array_like of float, shape (m,), optional
            Radii of spheres.
        category, mask : int or array_like of int, shape (m,), optional
            Filter bits as in `insert`; default all bits.
        """
        ids = check.id_array(ids)
        m = ids.shape[0]
        rows, spheres, self._rows = check.shape_rows(m, self._n_dims, lower, upper, radius,
                                                     self._rows)
        categories = check.bits_rows(category, "category", m)
        masks = check.bits_rows(mask, "mask", m)
        self._ids.check_new(ids)
        self._ids.register_ints(ids, self._engine.insert_many(rows, spheres, categories,
                                                              masks))

    @locked
    def move_many(self, ids, lower, upper=None, *, radius=None) -> None:
        """Give many objects new shapes; arguments as in `insert_many`.

        Objects that stay in their cells only have their coordinates written. The bucket
        lists are dropped, to be rebuilt by the next query that reads them (`query_pairs`
        does not), when more than a quarter of the objects move (faster than updating them
        object by object), and when no query read them since the previous `move_many`: a
        simulation that only asks for pairs does not pay for lists it never reads.
        """
        ids = check.id_array(ids)
        rows, spheres, self._rows = check.shape_rows(ids.shape[0], self._n_dims, lower,
                                                     upper, radius, self._rows)
        self._engine.move_many(self._ids.slots_of(ids), rows, spheres)

    @locked
    def remove_many(self, ids) -> None:
        """Remove many objects by integer id."""
        slots = self._ids.slots_of(check.id_array(ids))
        self._engine.remove_many(slots)
        self._ids.unregister(slots)

    def _query(self, kind: int, query: np.ndarray, mask) -> np.ndarray:
        """Ids of the objects that pass a local query and ``mask``: integer ids sorted."""
        slots = self._engine.query(kind, query, check.bits_value(mask, "mask"))
        ids = self._ids.ids_of(slots)
        if self._ids.all_int:
            ids.sort()
        return ids

    # ------------------------------------------------------------------ queries
    @locked
    def query_cell(self, position, *, mask: int = ALL_BITS) -> np.ndarray:
        """Ids of the objects stored in the cells holding ``position``, on every level.

        The classic spatial-hash lookup: what shares a bucket with ``position`` (no
        geometric test), at the cell size of each object's level.
        """
        point = check.coordinates(position, "position", self._n_dims, bounded=False)
        query = np.array([*point, *point, 0.0])
        return self._query(KIND_CELL, query, mask)

    @locked
    def query_box(self, lower, upper, *, mask: int = ALL_BITS) -> np.ndarray:
        """Ids of the objects overlapping the closed box ``lower..upper``."""
        low = check.coordinates(lower, "lower", self._n_dims, bounded=False)
        high = check.coordinates(upper, "upper", self._n_dims, bounded=False)
        check.check_order(low, high)
        query = np.array([*low, *high, 0.0])
        return self._query(KIND_BOX, query, mask)

    @locked
    def query_radius(self, center, r: float, *, mask: int = ALL_BITS) -> np.ndarray:
        """Ids of the objects within distance ``r`` of ``center`` (closed ball)."""
        point = check.coordinates(center, "center", self._n_dims)
        r = as_positive_scalar(r, "r", allow_zero=True)
        query = np.array([*point, *point, r])
        return self._query(KIND_BALL, query, mask)

    @locked
    def query_knn(self, point, k: int, *, mask: int = ALL_BITS) -> Hits:
        """The ``k`` objects nearest to ``point``, nearest first, exact.

        The distance to a box is to its nearest point (0 inside), to a sphere to its
        surface (0 inside). Ties are broken by the smaller id when every id is an integer,
        else by storage slot (deterministic, not the ids' order). Fewer than ``k`` come
        back when the hash holds fewer matching objects.
        """
        position = np.array(check.coordinates(point, "point", self._n_dims))
        # No more than every object can come back: room for those only (a huge k, valid,
        # would otherwise allocate terabytes).
        k = min(as_count(k, "k"), max(len(self._ids), 1))
        keys, distances = self._engine.query_knn(position, k,
                                                 check.bits_value(mask, "mask"),
                                                 self._ids.tie_keys())
        return Hits(self._ids.ids_of_keys(keys), distances)

    @locked
    def query_ray(self, origin, direction, *, max_distance: float = math.inf,
                  all_hits: bool = False, mask: int = ALL_BITS, fn=None,
                  args: tuple = ()) -> Hits:
        """Objects hit by a ray (or a segment, with ``max_distance``), nearest first.

        Parameters
        ----------
        origin : array_like of float, shape (n_dims,)
            Where the ray starts.
        direction : array_like of float, shape (n_dims,)
            Its direction, any non-zero length; normalized once, so distances are lengths.
        max_distance : float, default inf
            Length of the segment.
        all_hits : bool, default False
            Every object hit, ordered by distance (ties as in `query_knn`), rather
            than only the first.
        mask : int, default all bits
            Category filter.
        fn : function compiled with numba's ``njit``, optional
            Decides which hits count: ``fn(ray, id, distance, *args) -> bool`` is called
            with ``ray`` (int64, always 0: the one ray, so that a function written for
            `Grid.query_ray` serves here too), ``id`` (int64) and ``distance`` (float64)
            for the objects the ray hits (that pass ``mask``), nearest first, ties by the
            smaller id, until it returns True: that hit is the answer and the cast stops.
            False passes over the hit. Needs integer ids (`TypeError` when the hash holds
            any other: numba code cannot take a Python object). Not with ``all_hits``.
        args : tuple, default ()
            Passed to ``fn`` after the hit's values.

        Returns
        -------
        Hits
            ``ids`` and ``distances`` along the ray to where it enters each object (0 when
            it starts inside): one hit or none unless ``all_hits``; with ``fn``, the first
            it accepts, or none.

        Notes
        -----
        With ``fn``, the levels are walked side by side and a hit is offered once every
        level's walk has passed its distance, so ``fn`` sees the hits in exact order,
        each once (the order of the ``all_hits`` answer), and a ray that it accepts early
        stops early. An exception raised in ``fn`` is raised here; a function that does
        not return a bool for these arguments raises `TypeError` before the cast. Numba
        compiles the cast anew for each ``fn`` (and types of ``args``), ``fn`` inlined:
        the first call with a new ``fn`` waits for that compilation. Not cached on disk:
        numba's cache keys that code by the ``fn`` object, new in every process, and never
        hits. Define ``fn`` once, at module level.
        """
        start = np.array(check.coordinates(origin, "origin", self._n_dims))
        heading = check.unit_direction(direction, self._n_dims)
        max_distance = as_positive_scalar(max_distance, "max_distance", allow_zero=True,
                                          allow_inf=True)
        mask = check.bits_value(mask, "mask")
        fn = ray_function(fn, args, all_hits, DYNAMIC_RAY_CALL)
        if fn is not None and not self._ids.all_int:
            raise check.function_needs_int_ids(self._ids.first_other_id())
        slots, distances = self._engine.query_ray(start, heading, max_distance, mask,
                                                  all_hits, self._ids.tie_keys(), fn, args)
        return Hits(self._ids.ids_of(slots), distances)

    @locked
    def query_pairs(self) -> np.ndarray:
        """Every pair of overlapping objects, once: ids of shape (n_pairs, 2).

        Pairs pass the category filters both ways. With integer ids, each row holds the
        smaller id first; the order of the rows is unspecified (but the same for any
        thread count).
        """
        return self._ids.pair_ids(*self._engine.query_pairs())

    @locked
    def query_contacts(self) -> Contacts:
        """The overlapping pairs that began and those that ended since the previous call
        (contact events, as Box2D's begin and end contacts).

        ``began`` holds the pairs that `query_pairs` reports now and did not at the
        previous call of this method, ``ended`` those it reported then and does not now:
        the set difference of the two calls' pairs, category filters applied as there, so
        that the pairs of the previous call, less ``ended``, plus ``began``, are the pairs
        now. The first call reports every pair as begun. Only this method moves the
        reference point: `query_pairs` and the other calls leave it where it is.

        Contacts are keyed by the pair of ids, whatever happened in between:

        - an object removed ends its contacts, reported at the next call with its id;
          `clear` ends them all;
        - an id removed and inserted again between two calls that overlaps the same
          object at both keeps that contact: no event (physics engines, which destroy and
          create bodies, would report an end and a begin; the rule here is the set
          difference). So does a pair that parts and meets again between two calls;
        - an object inserted and removed between two calls is never reported.

        A pickled hash keeps the state: the first call on the copy reports the changes
        since the last call before pickling.

        Returns
        -------
        Contacts
            ``began`` and ``ended``, ids of shape (k, 2) each. When every id in the hash,
            now and at the previous call, is an integer: int64, each row the smaller id
            first, rows sorted ascending; else object arrays, rows in an unspecified order
            that depends only on the calls made (storage slots, not the ids' order).

        Notes
        -----
        Cheaper than comparing two `query_pairs` results: the pairs found are kept as one
        sorted int64 key each (of their storage slots), the events are one merge of the
        keys of two calls, and only the pairs reported are turned into ids (see
        ``dynamic/_contacts.py``). A call costs about what `query_pairs` costs.
        """
        pairs, counts = self._engine.query_pairs()
        ids = self._ids
        if ids.contacts is None:
            ids.contacts = ContactState()
        began, ended = ids.contacts.update(pairs, counts, ids)
        return Contacts(began, ended)
