"""`FairLock`: eventually fair. Waiting threads take the lock in arrival order among
themselves; a thread may take the free lock ahead of them until the first in line has
waited `HANDOFF_SECONDS`, and not after; the owner re-enters freely.

Most tests run with `HANDOFF_SECONDS` at 0, where the lock is strictly first come, first
served, and each puts threads in the queue one at a time (the next starts once the
previous is seen waiting, the first once it has reserved the lock), so the order they
arrived in is known. The polling waits are hang guards only, with no limit on how fast
anything must run.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from spatialhash import _fair_lock
from spatialhash._fair_lock import FairLock

#: How long a wait for another thread's state may poll before the test fails (a hang guard).
HANG_GUARD = 120.0


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    """`HANDOFF_SECONDS` at 0: the lock is handed to the first waiter at once."""
    monkeypatch.setattr(_fair_lock, "HANDOFF_SECONDS", 0.0)


def wait_until(condition, what: str) -> None:
    """Poll ``condition`` until it holds; fail (rather than hang) after `HANG_GUARD`."""
    give_up = time.monotonic() + HANG_GUARD
    while not condition():
        if time.monotonic() > give_up:
            pytest.fail(f"never happened: {what}")
        time.sleep(0.001)


def join(threads: list[threading.Thread]) -> None:
    """Join ``threads``; fail (rather than hang) if one is still waiting after `HANG_GUARD`."""
    for thread in threads:
        thread.join(HANG_GUARD)
        assert not thread.is_alive(), "a thread never got the lock"


def start(target) -> threading.Thread:
    """A started daemon thread (one stuck in a failed test does not hold up the exit)."""
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def start_taker(lock: FairLock, number: int, order: list) -> threading.Thread:
    """A started thread that takes ``lock`` and appends ``number`` to ``order``."""
    def take():
        with lock:
            order.append(number)

    return start(take)


def queue_up(lock: FairLock, n_threads: int, order: list) -> list[threading.Thread]:
    """Start ``n_threads`` takers (`start_taker`, numbered from 0), each once the one before
    it waits in the lock's queue (empty at first), and, if the lock is to be handed off at
    once (`HANDOFF_SECONDS` at 0), once the first has reserved it."""
    threads = []
    for number in range(n_threads):
        threads.append(start_taker(lock, number, order))
        wait_until(lambda n_waiting=number + 1: len(lock._queue) == n_waiting,
                   f"thread {number} waiting")
        if _fair_lock.HANDOFF_SECONDS == 0:
            wait_until(lambda: lock._handoff, "the lock handed off to the first waiter")
    return threads


def test_waiting_threads_take_the_lock_in_the_order_they_arrived():
    lock, order = FairLock(), []
    lock.acquire()
    threads = queue_up(lock, 6, order)
    lock.release()
    join(threads)
    assert order == list(range(6))
    assert not lock._queue
    assert lock.acquire(blocking=False)  # free again
    lock.release()


def test_the_thread_that_releases_cannot_take_the_lock_back_before_a_waiting_one():
    # The unfairness of `threading.Lock` and `RLock`: a thread that releases and asks again
    # at once gets the lock back before a waiting thread has woken. Here the waiter has
    # waited its handoff (none), so the lock is reserved for it.
    lock, order = FairLock(), []
    lock.acquire()
    threads = queue_up(lock, 1, order)
    lock.release()
    lock.acquire()
    order.append("again")
    lock.release()
    join(threads)
    assert order == [0, "again"]


def test_the_owner_enters_again_while_others_wait():
    lock, order = FairLock(), []
    lock.acquire()
    threads = queue_up(lock, 2, order)
    assert lock.acquire()  # would deadlock if the owner queued behind its waiters
    with lock:
        assert lock.acquire(blocking=False)
        lock.release()
    lock.release()
    assert order == []  # still held once
    lock.release()
    join(threads)
    assert order == [0, 1]


def test_a_non_blocking_acquire_does_not_pass_waiting_threads():
    lock, order = FairLock(), []
    lock.acquire()
    threads = queue_up(lock, 1, order)
    other = []
    join([start(lambda: other.append(lock.acquire(blocking=False)))])
    assert other == [False]  # held, and a thread waits
    lock.release()
    join(threads)
    assert order == [0]
    assert lock.acquire(blocking=False)  # free and no one waiting
    lock.release()


def test_once_the_first_waiter_has_waited_the_handoff_the_lock_is_handed_to_it(monkeypatch):
    monkeypatch.setattr(_fair_lock, "HANDOFF_SECONDS", 0.01)
    lock, order = FairLock(), []
    lock.acquire()
    threads = queue_up(lock, 1, order)
    wait_until(lambda: lock._handoff, "the lock handed off to the waiting thread")
    lock.release()
    lock.acquire()  # behind the waiting thread now
    order.append("again")
    lock.release()
    join(threads)
    assert order == [0, "again"]
    assert not lock._handoff and not lock._queue


def test_within_the_handoff_a_thread_may_take_the_free_lock_ahead_of_a_waiting_one(monkeypatch):
    # Barging: until the first in line has waited `HANDOFF_SECONDS`, the lock is not
    # reserved for it, and the thread that finds it free takes it at once.
    monkeypatch.setattr(_fair_lock, "HANDOFF_SECONDS", 1e6)
    lock, order = FairLock(), []
    lock.acquire()
    threads = queue_up(lock, 1, order)
    assert not lock._handoff  # it has not waited its handoff
    lock.release()
    join(threads)
    assert order == [0]
    # A waiter that is first in line but not yet blocked on the lock (a thread just woken
    # by the one ahead of it): the free lock is taken ahead of it, blocking or not.
    lock._queue.append((_fair_lock.allocate_lock(), time.monotonic() + 1e6))
    assert lock.acquire(blocking=False)
    lock.release()
    join([start_taker(lock, 1, order)])
    assert order == [0, 1]
    # Past its deadline it reserves the lock (as its thread does): no one else takes it.
    lock._handoff = True
    assert not lock.acquire(blocking=False)
    lock._queue.clear()
    lock._handoff = False


def test_release_by_a_thread_that_does_not_own_it_raises():
    lock = FairLock()
    with pytest.raises(RuntimeError):
        lock.release()


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="signal.pthread_kill: POSIX")
@pytest.mark.parametrize("n_ahead", [0, 1])
def test_a_waiter_interrupted_leaves_the_line_and_the_others_keep_their_order(n_ahead):
    # The main thread waits for the lock, first in line or behind another thread, with a
    # thread behind it; a signal handler's exception interrupts its wait (as Ctrl+C does).
    # It leaves the queue, and the others take the lock in order.
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers run on the main thread only")

    class Interrupted(Exception):
        pass

    def interrupt(signum, frame):
        raise Interrupted

    lock, order = FairLock(), []
    held, let_go = threading.Event(), threading.Event()

    def hold():
        with lock:
            held.set()
            let_go.wait()

    holder = start(hold)
    held.wait()
    ahead = queue_up(lock, n_ahead, order)
    behind = []
    main = threading.main_thread().ident

    def interrupt_main():
        try:
            wait_until(lambda: len(lock._queue) == n_ahead + 1, "the main thread waiting")
            behind.append(start_taker(lock, n_ahead, order))
            wait_until(lambda: len(lock._queue) == n_ahead + 2, "a thread behind it waiting")
        finally:
            signal.pthread_kill(main, signal.SIGUSR1)  # even when failing: no hang

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        interrupter = start(interrupt_main)
        with pytest.raises(Interrupted):
            lock.acquire()
    finally:
        signal.signal(signal.SIGUSR1, previous)
    join([interrupter])
    assert len(lock._queue) == n_ahead + 1  # the main thread left; the others wait
    let_go.set()
    join([holder, *ahead, *behind])
    assert order == list(range(n_ahead + 1))
    assert not lock._queue
