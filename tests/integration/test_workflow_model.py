"""A hypothesis state machine against a real PostgreSQL: starts, events, interrupts, clock moves,
relay restarts and runners lost mid-pass, checked against what must always hold.

The model workflow (``tests.apps.edges.Model``) records a real effect in a ledger actor through
an activity, waits for an event with a timeout, sleeps, and records a second effect. Whatever
the rules did, once the relay has gone quiet:

* every execution is finished, or suspended with a due timer or a visible reason;
* no execution is left running (a pass or a due timer would have moved it);
* no effect was counted twice: the ledger holds each effect text at most once, and a finished
  execution that succeeded holds both of its effects.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from returns.result import Success

from akter import codec, testing
from tests.apps import edges
from tests.apps.edges import Edges, Job, Model, Send, note


class Machine(RuleBasedStateMachine):
    database_url = ""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.Runner()
        self.tag = uuid.uuid4().hex[:8]  # every example works on actors of its own
        self.app = edges.make_app(self.database_url)
        self.clock = testing.Clock(self.database_url)
        self.relay: Any = None
        self.relay_cm: Any = None
        self.client_cm = self.app.client()
        self.client = self.loop.run(self.client_cm.__aenter__())
        self.runs: dict[str, Any] = {}
        self.interrupted: set[str] = set()
        self.loop.run(self._open_relay())

    # ---- plumbing ----------------------------------------------------------------------------

    async def _open_relay(self) -> None:
        self.relay_cm = self.app.relay()
        self.relay = await self.relay_cm.__aenter__()

    async def _close_relay(self) -> None:
        if self.relay_cm is not None:
            await self.relay_cm.__aexit__(None, None, None)
        self.relay = self.relay_cm = None

    def teardown(self) -> None:
        try:
            self.loop.run(self._close_relay())
            self.loop.run(self.client_cm.__aexit__(None, None, None))
        finally:
            self.loop.close()

    async def _rows(self, query: Any, *params: Any) -> list[tuple[Any, ...]]:
        async with await psycopg.AsyncConnection.connect(self.database_url, autocommit=True) as conn:
            cur = await conn.execute(query, params)
            return await cur.fetchall()

    def actor(self, name: str) -> Any:
        return self.client.actor(Edges, f"{self.tag}-{name}", tenant="model")

    # ---- rules -------------------------------------------------------------------------------

    @rule(name=st.sampled_from(["a", "b", "c", "d"]), timeout=st.sampled_from([5, 60]))
    def start(self, name: str, timeout: int) -> None:
        if name in self.runs:
            return
        job = Job(f"{self.tag}-{name}", seconds=10, timeout=timeout)
        self.runs[name] = self.loop.run(self.actor(name).start(Model, job))

    @rule(name=st.sampled_from(["a", "b", "c", "d"]), matching=st.booleans())
    def emit(self, name: str, matching: bool) -> None:
        if name not in self.runs:
            return
        target = f"{self.tag}-{name}" if matching else "nobody"
        self.loop.run(self.actor(name).send(note, Send(target, 1)))

    @rule(name=st.sampled_from(["a", "b", "c", "d"]))
    def interrupt(self, name: str) -> None:
        if name in self.runs:
            self.loop.run(self.runs[name].interrupt())
            self.interrupted.add(name)

    @rule(seconds=st.sampled_from([1, 6, 11, 31, 61]))
    def move_clock(self, seconds: int) -> None:
        self.loop.run(self.clock.advance(timedelta(seconds=seconds)))

    @precondition(lambda self: self.relay is not None)
    @rule()
    def lose_the_runner(self) -> None:
        """The relay and its passes stop at once, wherever they are; a new one takes over."""
        self.loop.run(self._close_relay())
        self.loop.run(self._open_relay())

    @precondition(lambda self: self.relay is not None)
    @rule()
    def settle(self) -> None:
        self.loop.run(self._quiet())

    async def _quiet(self) -> None:
        async with asyncio.timeout(60):
            await self.relay.idle()

    # ---- what must hold ----------------------------------------------------------------------

    @invariant()
    def no_effect_is_counted_twice(self) -> None:
        rows = self.loop.run(self._rows("SELECT state FROM actor_state WHERE actor_id = 'ledger'"))
        texts = codec.decode(bytes(rows[0][0]), edges.Effects).texts if rows else ()
        mine = [t for t in texts if t.startswith(self.tag)]
        assert len(mine) == len(set(mine)), f"an effect happened twice: {sorted(mine)}"

    @invariant()
    def every_execution_is_finished_or_parked_visibly(self) -> None:
        if self.relay is None:
            return
        self.loop.run(self._quiet())
        rows = self.loop.run(
            self._rows(
                "SELECT e.actor_id, e.status, e.blocked_reason, o.due_at IS NOT NULL"
                "  FROM actor_workflow_executions e"
                "  LEFT JOIN actor_outbox o ON o.routing_key = e.routing_key"
                "   AND o.timer_key = 'wf:' || e.execution_id"
                " WHERE e.tenant = 'model' AND e.actor_id LIKE %s",
                f"{self.tag}-%",
            )
        )
        for actor_id, status, reason, timer in rows:
            assert status != "running", f"{actor_id} is running with no pass"
            if status == "suspended":
                assert timer or reason, f"{actor_id} is suspended with no timer and no reason"

    @invariant()
    def a_success_holds_both_effects(self) -> None:
        for name, run in self.runs.items():
            status = self.loop.run(run.poll())
            if status.finished and isinstance(status.result, Success):
                rows = self.loop.run(self._rows("SELECT state FROM actor_state WHERE actor_id = 'ledger'"))
                texts = codec.decode(bytes(rows[0][0]), edges.Effects).texts
                assert {f"{self.tag}-{name}-1", f"{self.tag}-{name}-2"} <= set(texts)
            if status.finished and name not in self.interrupted:
                assert isinstance(status.result, Success), status


@pytest.mark.slow
def test_workflow_promises_hold_under_random_starts_events_interrupts_and_lost_runners(
    database_url: str,
) -> None:
    Machine.database_url = database_url
    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=8,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
