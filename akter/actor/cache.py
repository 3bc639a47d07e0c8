"""What a process remembers of the actors it ran turns on, so that its next turn on one of them
can be optimistic: one round trip instead of two (``drive.py``, ``sql/functions/akter_turn_check.sql``).

An entry is what the last turn this process committed (or loaded) on an actor left: the actor's
version, its event sequence and its stored state, exactly as stored. It is a guess, never the
truth: any turn elsewhere bumps the version, and the optimistic turn's first statement checks
the version under the actor's row lock, so a stale entry costs one round trip and is replaced.
Nothing is ever decided from an entry without that check. The clock such a turn runs on is not
kept here: it is the session's one estimate (``akter.store.session``).

For an actor the process never saw, the turn may guess that the actor does not exist yet (a
new order, a new account: the common case for the actor a workflow start creates). The guess is
made per actor type while it keeps being right: after a wrong guess the type's next
``ABSENT_BACKOFF`` unknown actors take the two-round-trip way, so a process that serves mostly
existing actors it has not seen pays the wasted round trip rarely.

The memory is bounded: ``max_entries`` actors and ``max_total_bytes`` of states in all (least
recently used leave first), and states of at most ``max_state_bytes`` each (a larger state is
not remembered; its turns take two round trips).
"""

from __future__ import annotations

from collections import OrderedDict

import attrs

from akter.ids import ActorRef

DEFAULT_MAX_ENTRIES = 10_000
DEFAULT_MAX_STATE_BYTES = 16 * 1024
#: what the remembered states may hold in all, so that the worst case stays small
DEFAULT_MAX_TOTAL_BYTES = 16 * 1024 * 1024
#: unknown actors of a type that take the two-round-trip way after a wrong "does not exist" guess
ABSENT_BACKOFF = 64


@attrs.frozen
class Known:
    """An actor as the last turn this process saw left it. ``version`` None: it did not exist."""

    version: int | None
    event_seq: int
    state: bytes | None
    state_shape: str | None


ABSENT = Known(version=None, event_seq=0, state=None, state_shape=None)


class ActorCache:
    """Per-process memory of actors, for optimistic turns. Single event loop, no locking."""

    def __init__(self) -> None:
        #: the bounds of the memory (a test lowers them on the engine's cache to watch eviction)
        self.max_entries = DEFAULT_MAX_ENTRIES
        self.max_state_bytes = DEFAULT_MAX_STATE_BYTES
        self.max_total_bytes = DEFAULT_MAX_TOTAL_BYTES
        self._known: OrderedDict[ActorRef, Known] = OrderedDict()
        #: the bytes of the states remembered now
        self.total_bytes = 0
        #: per actor type, unknown actors still to take the two-round-trip way
        self._absent_backoff: dict[str, int] = {}
        #: counts, for tests and benchmarks: optimistic turns committed, and fallen back
        self.hits = 0
        self.misses = 0

    def guess(self, ref: ActorRef, *, new: bool = True) -> Known | None:
        """What to assume of ``ref`` for an optimistic turn, or None to take two round trips.
        ``new``: whether an actor this process does not remember may be guessed new."""
        known = self._known.get(ref)
        if known is not None:
            self._known.move_to_end(ref)
            return known
        if not new:
            return None
        left = self._absent_backoff.get(ref.actor_type, 0)
        if left > 0:
            self._absent_backoff[ref.actor_type] = left - 1
            return None
        return ABSENT

    def remember(self, ref: ActorRef, known: Known) -> None:
        self.forget(ref)
        if known.state is not None and len(known.state) > self.max_state_bytes:
            return
        self._known[ref] = known
        self.total_bytes += _size(known)
        while len(self._known) > self.max_entries or self.total_bytes > self.max_total_bytes:
            _, oldest = self._known.popitem(last=False)
            self.total_bytes -= _size(oldest)

    def stale(self, ref: ActorRef, guessed: Known) -> None:
        """The optimistic turn's check refused what was guessed: forget it."""
        self.misses += 1
        self.forget(ref)
        if guessed.version is None:
            self._absent_backoff[ref.actor_type] = ABSENT_BACKOFF

    def forget(self, ref: ActorRef) -> None:
        gone = self._known.pop(ref, None)
        if gone is not None:
            self.total_bytes -= _size(gone)

    def __len__(self) -> int:
        return len(self._known)


def _size(known: Known) -> int:
    return 0 if known.state is None else len(known.state)
