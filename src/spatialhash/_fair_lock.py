"""`FairLock`: a reentrant lock in which a waiting thread is passed for a short handoff at most.

`threading.Lock` and `threading.RLock` are not fair. A thread that releases one and asks
for it again at once, as a loop of calls on a shared `DynamicHash` does, usually gets it
back before a waiting thread has even woken (the waiter must be scheduled, then take the
GIL), so a writer could wait behind a reader's loop for as long as the loop ran.

Strict arrival order cures that but hands the lock over, with a thread switch, on every
contended call: a writer and a reader sharing a hash then ran a third fewer writer rounds
and half the reader calls per second than with the `RLock` (docs/benchmarks.md). So the
lock is *eventually* fair, as CPython's own mutex and Go's ``sync.Mutex`` are: a thread
may take the free lock ahead of the threads waiting (barging, which keeps the owner
running) until the first in line has waited `HANDOFF_SECONDS`; from then on the lock is
handed to that thread, and every thread that asks queues behind it, until the line has
no thread left that has waited that long. Throughput is the `RLock`'s, and a call waits
behind later ones for at most about a handoff (plus the calls already holding the lock).

Design:

- The class is the C ``_thread.RLock`` (what `threading.RLock` returns) with a queue in
  front. Unless the lock is being handed off, `acquire` first makes one non-blocking try
  of the C lock (uncontended, that is all it does); `release` is the C lock's own, with
  nothing in Python around it.
- A thread that finds the lock taken, or being handed off, joins the queue (a ``deque`` of
  one plain lock and one deadline, arrival plus `HANDOFF_SECONDS`, per waiter, under a
  small mutex). Only the first in line blocks on the C lock itself, until its deadline;
  each of the others sleeps on its own plain lock until the thread ahead of it has taken
  the C lock and left the queue, which releases the next one's plain lock: its turn to be
  first. Waiters therefore take the lock in arrival order among themselves.
- The first in line still waiting at its deadline sets the handoff flag, which closes the
  non-blocking try to every other thread, and blocks on the C lock without a limit: the
  next release can only go to it. Taking the lock, it clears the flag unless the next in
  line is past its own deadline too.
- The owner entering again (a call made while it holds the lock, such as a finalizer that
  calls the hash) never queues: it would wait for the threads that wait for it.

A thread that reads the flag as clear just as the first waiter sets it may still take the
lock first, once; after that it sees the flag. With `HANDOFF_SECONDS` at 0 the lock is
strictly first come, first served.
"""

from __future__ import annotations

from _thread import TIMEOUT_MAX, allocate_lock
from _thread import RLock as _RLock
from collections import deque
from time import monotonic

__all__ = ["FairLock", "HANDOFF_SECONDS"]

#: How long the first waiting thread lets others take the free lock ahead of it before the
#: lock is handed to it. A millisecond: long enough for the owner to run a burst of short
#: calls without a thread switch, and far below what a caller notices.
HANDOFF_SECONDS = 0.001

#: The C lock's own acquire, called on a `FairLock` without the override.
_lock_acquire = _RLock.acquire


class FairLock(_RLock):
    """A reentrant lock in which no waiting thread is passed for long: eventually fair.

    Used as `threading.RLock` is: ``with lock:``, or `acquire` and `release`. The owner may
    acquire it again (each `acquire` matched by a `release`).

    Notes
    -----
    A thread may take the free lock ahead of waiting ones until the first in line has
    waited `HANDOFF_SECONDS`; then the lock is handed to it. Waiting threads take it in
    arrival order among themselves: only the first in line blocks on the underlying C lock,
    the others wait on their own plain locks, each released by the thread ahead of it once
    that one holds the lock (see the module docstring). Uncontended, `acquire` is one
    non-blocking try of the C lock and `release` is the C lock's.
    """

    __slots__ = ("_handoff", "_mutex", "_queue")

    def __init__(self) -> None:
        self._mutex = allocate_lock()  # guards `_queue`'s changes, who is first, `_handoff`
        self._queue: deque = deque()  # (plain lock, deadline) per waiting thread, first first
        self._handoff = False  # the lock is reserved for the first in line

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock: at once if it is free and not being handed to a waiting thread.

        Parameters
        ----------
        blocking : bool, default True
            Wait for the lock. False: take it only if it is free and not being handed to a
            waiting thread (or if this thread holds it already), without waiting.

        Returns
        -------
        bool
            Whether the lock was taken: always True when ``blocking``.
        """
        # The fast path: the C lock free (or held by this thread), and not handed off.
        if not self._handoff and _lock_acquire(self, False):
            return True
        if self._is_owned():
            # The owner entering again while the lock is handed off: at once (a count).
            return _lock_acquire(self, False)
        if not blocking:
            return False
        self._wait()
        return True

    __enter__ = acquire

    def _wait(self) -> None:
        """Queue up for the lock and return holding it."""
        turn = allocate_lock()
        turn.acquire()
        entry = (turn, monotonic() + HANDOFF_SECONDS)
        mutex, queue = self._mutex, self._queue
        with mutex:
            queue.append(entry)
            first = queue[0] is entry
        try:
            if not first:
                turn.acquire()  # released when the thread ahead has taken the lock
            # First in line: the only thread blocked on the C lock. Others may take it
            # ahead of this one until the deadline; then it is handed to this one.
            patience = min(entry[1] - monotonic(), TIMEOUT_MAX)
            if not (_lock_acquire(self, False) if patience <= 0
                    else _lock_acquire(self, True, patience)):
                self._handoff = True
                _lock_acquire(self)
        except BaseException:  # interrupted (KeyboardInterrupt): leave the line
            with mutex:
                first = queue[0] is entry
                queue.remove(entry)
                if first:
                    self._next_is_first()
            if self._is_owned():
                # Interrupted just after taking the lock: give it to the next in line.
                self.release()
            raise
        with mutex:
            queue.popleft()  # this thread's turn: it was first
            self._next_is_first()

    def _next_is_first(self) -> None:
        """Wake the new first in line, if any; keep the lock reserved only for one that is
        past its deadline already. Called under `_mutex`, the previous first gone."""
        queue = self._queue
        if queue:
            turn, deadline = queue[0]
            self._handoff = monotonic() >= deadline
            turn.release()  # its turn to block on the C lock
        else:
            self._handoff = False
