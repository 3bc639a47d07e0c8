"""Who holds which generation of each actor in this process, and the hand-over between them.

**The invariant: one live pass per execution per process, under the newest generation it was
handed or claimed.** Every write of a pass proves its generation still holds (the fence,
``queries.py``); this module decides which generation that is and which pass loop runs.

* A generation arrives two ways: a turn of this process takes one inside its own transaction
  and hands it over once it committed (``handed``: the hook's ``_Handoff``), or the runner takes
  one itself before a pass that was handed none (``activate``). The newest one holds; an older
  one handed late changes nothing.
* An actor's generation lives while a pass loop of it does: the last loop to end forgets it,
  so a suspended execution costs this process nothing (its next pass activates again).
* One loop per execution (``enter``): a pass asked for while the execution's loop is alive —
  running, or between two passes — joins that loop, which runs one more pass, instead of
  starting a second one beside it (that ran activity bodies twice: 053ca33).
* A pass fenced out by a generation this process took runs on under it: a turn of another
  execution of the same actor may take a new generation (the runner held none when it began)
  and commit before its hand-over ran. While such a claim is in flight (``claiming``, or an
  ``activate`` statement), the fenced loop waits for it (``newer``): the hand-over wakes it, and
  so does a turn dropped without committing, which took nothing. With no claim in flight the
  generation went to another process, and the loop ends at once: its execution is that
  process's now, or its recovery timer's. No wall-clock wait decides this; ``safety`` only
  bounds a wait whose claim neither hands over nor is dropped, and logs if it ever ends one.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from datetime import timedelta

from akter.ids import ActorRef

log = logging.getLogger("akter.workflow")


class Activations:
    def __init__(self, safety: timedelta) -> None:
        self.safety = safety
        self._generations: dict[ActorRef, int] = {}
        #: one activation statement per actor at a time: two passes of one actor starting
        #: together share it, or the second would fence the first out
        self._activating: dict[ActorRef, asyncio.Lock] = {}
        #: live pass loops per actor; the last one to end forgets the actor's generation
        self._running: dict[ActorRef, int] = {}
        #: executions whose pass loop is alive, between passes included
        self._looping: set[str] = set()
        #: executions whose loop was asked for another pass while it was alive
        self._rerun: set[str] = set()
        #: turns (and activation statements) in flight that take a new generation per actor
        self._claims: dict[ActorRef, int] = {}
        #: set (and replaced) whenever a generation, a claim or a rerun changed
        self._changed = asyncio.Event()

    def held(self, ref: ActorRef) -> int | None:
        """The generation this process holds of ``ref``, if any."""
        return self._generations.get(ref)

    def actors(self) -> frozenset[ActorRef]:
        """The actors with a live pass loop."""
        return frozenset(self._running)

    def handed(self, ref: ActorRef, generation: int) -> None:
        """A committed turn took (or found held) ``generation`` for this process."""
        if generation > self._generations.get(ref, 0):
            self._generations[ref] = generation
            self.wake()  # a pass fenced out by this generation runs on under it

    def claiming(self, ref: ActorRef, turn: object) -> Callable[[], None]:
        """A turn about to take a new generation of ``ref`` for this process; call the returned
        release once it handed it over. Should ``turn`` be dropped first (it did not commit,
        so it took nothing), the release runs by itself."""
        self._claims[ref] = self._claims.get(ref, 0) + 1
        finalizer = weakref.finalize(turn, self._released, ref)

        def release() -> None:
            finalizer()  # once: a finalizer runs at most once, called or collected

        return release

    def _released(self, ref: ActorRef) -> None:
        left = self._claims[ref] - 1
        if left:
            self._claims[ref] = left
        else:
            del self._claims[ref]
        self.wake()

    def forget(self, ref: ActorRef, generation: int) -> None:
        """``generation`` fenced out: another activation holds the actor now."""
        if self._generations.get(ref) == generation:
            del self._generations[ref]

    def wake(self) -> None:
        """Every loop waiting in ``newer`` re-checks what it waits for."""
        self._changed.set()
        self._changed = asyncio.Event()

    def enter(self, ref: ActorRef, key: str) -> bool:
        """A pass of execution ``key`` is asked for: True when a new loop must start (counted
        from now, so the actor's generation outlives it); False when the live loop runs it."""
        if key in self._looping:
            self._rerun.add(key)
            self.wake()  # a loop between passes runs it now
            return False
        self._looping.add(key)
        self._running[ref] = self._running.get(ref, 0) + 1
        return True

    def again(self, key: str) -> bool:
        """Whether the loop of ``key`` was asked for another pass since its last one began;
        taking the answer clears it."""
        asked = key in self._rerun
        self._rerun.discard(key)
        return asked

    def leave(self, ref: ActorRef, key: str) -> None:
        """The loop of ``key`` ended; the actor's last one forgets its generation."""
        self._looping.discard(key)
        self._rerun.discard(key)
        self._running[ref] -= 1
        if not self._running[ref]:
            del self._running[ref]
            self._generations.pop(ref, None)
            self._activating.pop(ref, None)

    async def activate(self, ref: ActorRef, take: Callable[[], Awaitable[int]]) -> int:
        """The generation a pass of ``ref`` runs under: the one held, or a new one ``take``
        claims on the actor row (the newest wins should a turn hand one over meanwhile)."""
        lock = self._activating.setdefault(ref, asyncio.Lock())
        async with lock:
            generation = self._generations.get(ref)
            if generation is not None:
                return generation
            self._claims[ref] = self._claims.get(ref, 0) + 1
            try:
                self.handed(ref, await take())
            finally:
                self._released(ref)
            generation = self._generations[ref]
            log.debug("activated %s at generation %d", ref, generation)
            return generation

    async def newer(self, ref: ActorRef, generation: int, key: str) -> bool:
        """Whether the loop of ``key``, whose pass ``generation`` fenced out, runs another pass:
        this process holds a newer generation of ``ref``, or a pass of ``key`` was asked for.
        Waits while a claim of ``ref`` in this process may still hand one over."""
        while self._generations.get(ref, 0) <= generation and key not in self._rerun:
            if not self._claims.get(ref):
                return False  # taken by another process: nothing of this one hands it over
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), self.safety.total_seconds())
            except TimeoutError:
                log.warning(
                    "a claim of %s neither handed its generation over nor was dropped within %s;"
                    " the fenced pass of %s ends (its recovery timer resumes it)",
                    ref,
                    self.safety,
                    key,
                )
                return False
        return True
