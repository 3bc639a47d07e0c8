"""Derived command ids at their expiry: the database clock decides, and an expired id is an
unknown outcome, never a retry (invariant 8).

An activity's commands carry ids derived from (execution, step, attempt, ordinal), issued at the
attempt's recorded start. A rerun of the attempt repeats them, so the receiver deduplicates —
until they expire. The activity client refuses early on its own estimate of the database clock,
but that estimate can be stale: the receiver's turn, which reads ``akter_now()``, has the last
word, and its refusal must end the activity as ``ActivityOutcomeUnknown`` too."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from returns.result import Failure

import akter
from akter import testing
from tests.apps import flows
from tests.apps.flows import Book, Flows, Job
from tests.integration.conftest import Peek
from tests.integration.workflow_support import quiet, running


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    flows.CALLS.clear()
    flows.GATES.clear()
    yield
    testing.disarm_all()


@pytest.mark.parametrize("swallowed", [False, True], ids=["raised", "caught-by-the-activity"])
async def test_an_id_expiring_after_the_local_check_is_outcome_unknown_and_never_retried(
    database_url: str, peek: Peek, clock: testing.Clock, monkeypatch: pytest.MonkeyPatch, swallowed: bool
) -> None:
    monkeypatch.setattr(flows, "SWALLOW_UNKNOWN", swallowed)
    app = flows.make_app(database_url)
    flows.gate("edge-hold").set()  # Book's next step must not hold a run that carries on
    first_settle = testing.pause("workflow.before_settle")
    async with running(app) as (relay, client):
        run = await client.actor(Flows, "p8", tenant="acme").start(Book, Job("edge", seconds=0))
        await first_settle.reached()
        # The attempt's two commands landed. Another activation takes the actor (as a new owner
        # would), so this runner's settle fences out: the attempt stays open, as if it had died.
        await peek.rows(
            "UPDATE actor_generations SET generation = generation + 1 WHERE actor_id = 'p8' RETURNING 1"
        )
        first_settle.release()
        await quiet(app, relay)
        assert await _ledger_attempts(peek) == [(1, True)]

        started, window = (
            await peek.rows(
                "SELECT s.started_at, d.retry_window FROM actor_workflow_step s, actor_deployment d"
                " WHERE s.step = 'ledger'"
            )
        )[0]
        expiry = started + window
        rerun = testing.pause("workflow.before_activity")
        # The recovery timer is due: the rerun's pass reads the database clock, 15 s before the
        # derived ids expire, and arms the next recovery timer 30 s ahead of that.
        await clock.set(expiry - timedelta(seconds=15))
        await rerun.reached()
        # Now the ids expire, and nothing tells this process: its estimate still says 15 s before.
        await clock.set(expiry + timedelta(seconds=5))
        rerun.release()
        result = await run.result(timeout=60)
        await quiet(app, relay)

    assert isinstance(result, Failure), result
    assert isinstance(result.failure(), akter.ActivityOutcomeUnknown), result
    # the effect happened once: the receiver holds the first run's two effects and no others
    state = bytes(await peek.value("SELECT state FROM actor_state WHERE actor_id = 'ledger-edge'"))
    assert b'"effects":["edge-a","edge-b"]' in state
    # the rerun ran the activity again (its first send was refused) but no second attempt began
    assert flows.CALLS["edge"] == 2
    assert await _ledger_attempts(peek) == [(1, False)]
    exit_ = await peek.value("SELECT exit FROM actor_workflow_step WHERE step = 'ledger'")
    assert b"ActivityOutcomeUnknown" in akter.codec.unframe(bytes(exit_))


async def _ledger_attempts(peek: Peek) -> list[tuple[object, ...]]:
    return await peek.rows(
        "SELECT attempt, exit IS NULL FROM actor_workflow_step WHERE step = 'ledger' ORDER BY attempt"
    )
