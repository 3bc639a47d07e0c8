"""The workflow engine's timing and batching constants, in one record so they are reviewed together.

None of them changes what an execution does, only when and how often the engine writes and
waits. An ``App`` builds its workflow hook and runner with ``app.tuning`` (``EngineTuning()``);
each keeps the record it was given, and a runner's passes read their runner's. A test that needs
a shorter period replaces the record of the part it exercises with ``attrs.evolve`` (e.g.
``app.workflow_runner.tuning``) rather than patching a module constant.
(The optimistic turn's bounds — the clock estimate's, ``akter.store.session.BEHIND_MS``, and the
actor cache's ``akter.actor.cache.ABSENT_BACKOFF`` — belong to the turn and stay there.)
"""

from __future__ import annotations

from datetime import timedelta

import attrs


@attrs.frozen
class EngineTuning:
    #: How far ahead a running execution's recovery timer is armed (30 s): how long a pass may
    #: be silent before another resume runs it, should its process die. Long enough that a
    #: healthy pass never meets it between two step boundaries, which re-arm it.
    recovery: timedelta = timedelta(seconds=30)
    #: How soon an execution this runner cannot replay (an incompatible manifest, a body that
    #: does not decode) is offered again (60 s): a rolling deploy's new runner takes it by then,
    #: and an incompatible runner re-checks it rarely enough to cost nothing.
    recheck: timedelta = timedelta(seconds=60)
    #: How often the runner deletes finished executions past their retention (1 min), and how
    #: many at most per round (1000): each round is one short statement, never a long lock.
    prune_every: timedelta = timedelta(minutes=1)
    prune_batch: int = 1000
    #: A pass whose next due time is at most this many ms away (1000: a short sleep, a retry's
    #: backoff) waits for it in the process instead of suspending and being resumed through
    #: the relay, which costs a turn, a claim and a load.
    hold_ms: int = 1000
    #: A held clock is settled this many ms before it falls due on the process's estimate of the
    #: database clock (5), which trails the server by the last reading's statement time; the
    #: server waits out the rest (``settle_hold_ms``), so a sleep ends on time, never early.
    settle_ahead_ms: int = 5
    #: The longest the server waits for a clock to fall due before settling it (25 ms): more than
    #: ``settle_ahead_ms`` plus a statement's time, short enough to hold no lock for long.
    settle_hold_ms: float = 25.0
    #: The longest a pass waits before retrying a suspension refused with nothing new to act on
    #: (2 s; it doubles up to this from 10 ms): no spinning (invariant 13), and a slow retry only
    #: where the refusal repeats.
    max_backoff: float = 2.0
    #: A suspension whose timer is due within this many ms notifies the relay at once (10 000):
    #: the relay's refresh would find it later than it falls due.
    notify_within_ms: int = 10_000
    #: Combined step-boundary writes in flight at once, per pool (1: measured best,
    #: ``akter.workflow.engine.combine``): boundaries ready meanwhile go together in the next one.
    combine_most: int = 1
    #: The safety net of a fenced pass's wait for a handed-over generation (5 s,
    #: ``akter.workflow.engine.activation``). The wait ends on events; this bound only fires if a turn
    #: that took a generation for this process neither hands it over nor is dropped, and logs.
    handoff_safety: timedelta = timedelta(seconds=5)
