"""A start's in-memory prefix: a body that ends before its first effect finishes in its start turn.

When the runner of this process owns the actor, the start turn (``hook.py``) builds the body's
driver over the empty history of the new execution and advances it, before the turn's one round
trip. A body that reaches its final without asking for any effect (no activity, sleep, wait,
race, child, ``wf.now()``) has its outcome then: the turn writes the execution already finished
(``START_FINISHED``, ``sql/functions/akter_wf_start_finished.sql``) instead of running with a recovery
timer, and once the turn committed the result goes to this process's waiters — the ``Run`` the start
returns has it, and ``Listener.hand_over`` gives it to any other waiter here. One commit per short workflow
instead of two (the start's and the first pass's finish), and no pass.

A body that asks for an effect is closed (its ``finally`` blocks run, as at every suspension) and
the start goes on as before: the first pass replays the body from the start, which is
deterministic. So does a body that ends in ``continue_as_new`` (the next run is a pass's work),
one interrupted (its result names who asked, read from the row), and one whose driver cannot be
built (the pass reports it, as before).

What an execution finished here records is what a pass's finish records: the outcome and result
encoded by the same function (``finish.py``), the same finish triggers (a deadline's intent is
never armed; a child resumes its parent), the ``akter_finished`` notification, a pass span with
``akter.pass.result = finished`` counted in ``akter.workflow.passes`` (``telemetry.pass_in_turn``),
and the body's ``wf.log`` records, held while the body runs and emitted only once the turn
committed. A turn that does not commit (a refused optimistic check, a later hook's or the
write's failure) drops all of it with its record; an optimistic turn that is rerun runs the
prefix again, and only the committed run's result is handed over.

A turn inside the application's transaction has no runner here (``record.joined``): its start
goes through the relay as before.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, LiteralString

import attrs

from akter import codec, logs, telemetry
from akter.errors import Interrupted
from akter.outbox.intents import decode_caller
from akter.workflow.api.declare import ContinueAsNew, WorkflowContext
from akter.workflow.core import finish
from akter.workflow.core.driver import Driver
from akter.workflow.core.exits import Raise

if TYPE_CHECKING:
    from akter.actor.kernel import Committed
    from akter.ids import ExecutionId
    from akter.store.listener import Listener
    from akter.workflow.api.commands import ChildLinkMark
    from akter.workflow.api.declare import StartMark, Workflow

log = logging.getLogger("akter.workflow")

# The execution inserted and finished in the start turn (akter_wf_start_finished); false when it existed
# already.
START_FINISHED: Final[LiteralString] = """
SELECT akter_wf_start_finished(%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(eid)s,
       %(workflow)s, %(key)s, %(manifest_hash)s, %(payload)s, %(principal)s, %(versions)s::jsonb,
       %(trace)s, %(timeout_ms)s, %(parent)s, %(parent_type)s, %(parent_actor_id)s, %(outcome)s,
       %(result)s)"""

#: the results of the starts a ``WorkflowActorHandle.start`` is sending, by execution id
_HANDED: ContextVar[dict[str, tuple[ExecutionId, bytes]] | None] = ContextVar(
    "akter_prefix_handed", default=None
)


@contextlib.contextmanager
def expecting() -> Iterator[dict[str, tuple[ExecutionId, bytes]]]:
    """For the block (one start's send): the executions its turn finished and their results,
    by id."""
    handed: dict[str, tuple[ExecutionId, bytes]] = {}
    token = _HANDED.set(handed)
    try:
        yield handed
    finally:
        _HANDED.reset(token)


@attrs.frozen
class Finished:
    """A body's end, reached in the start turn: what the turn stores, and what it reports."""

    outcome: str
    result: bytes
    final: Any
    #: the body's ``wf.log`` records, emitted once the turn committed
    records: tuple[logging.LogRecord, ...]
    #: when the body began (``time.time_ns``) and how long it ran (seconds): the pass's span
    began_ns: int
    seconds: float


def run(workflow: Workflow[Any, Any], eid: ExecutionId, params: dict[str, Any]) -> Finished | None:
    """Run the body of the execution ``params`` (``hook._start_params``) would start, over an
    empty history, as its first pass would; its end if it reached one without asking for any
    effect, else None (the first pass runs it)."""
    began_ns, began = time.time_ns(), time.perf_counter()
    driver: Driver | None = None
    held: list[logging.LogRecord] = []
    try:
        # the body gets its input and principal as the pass would: decoded from what is stored
        payload: Any = codec.decode(params["payload"], workflow.input)
        principal = decode_caller(params["principal"]).on_behalf_of
        ctx = WorkflowContext(
            execution_id=str(eid),
            key=eid.key,
            ref=eid.owner,
            principal=principal,
            versions={k: v.current for k, v in workflow.versions.items()},
        )
        driver = Driver(workflow, ctx, payload, {})
        driver.held_logs = held
        needs = driver.advance(0)  # no history: no clock is read
        final = driver.final
    except BaseException as exc:  # the first pass meets it again and does what it did before
        if isinstance(exc, KeyboardInterrupt):
            raise
        log.debug("start prefix of %s not run", eid, exc_info=True)
        return None
    finally:
        if driver is not None:
            driver.close()
    if needs or final is None:
        return None
    if isinstance(final, Raise) and isinstance(final.error, ContinueAsNew | Interrupted):
        return None
    outcome, exit_, final = finish.outcome_of(workflow, final)
    return Finished(outcome, codec.encode(exit_), final, tuple(held), began_ns, time.perf_counter() - began)


@attrs.define
class Start:
    """A start of this turn finished by its prefix, written after the turn's other statements
    (its child link, if any, is written by the same statement)."""

    item: StartMark
    params: dict[str, Any]
    finished: Finished
    link: ChildLinkMark | None = None

    def statement_params(self) -> dict[str, Any]:
        link = self.link
        parent = None if link is None else link.parent
        return {
            **self.params,
            "timeout_ms": self.item.timeout_ms,
            "parent": None if parent is None else str(parent),
            "parent_type": None if parent is None else parent.owner.actor_type,
            "parent_actor_id": None if parent is None else parent.owner.actor_id,
            "outcome": self.finished.outcome,
            "result": self.finished.result,
        }

    def answered(self, record: Committed, listener: Listener, row: tuple[Any, ...] | None) -> None:
        """The statement's answer, once the turn committed: report the finish and hand the
        result over — unless the execution existed already (nothing was written)."""
        if row is None or not row[0]:
            return
        handed = _HANDED.get()
        record.on_commit(lambda: self._committed(listener, handed))

    def _committed(self, listener: Listener, handed: dict[str, tuple[ExecutionId, bytes]] | None) -> None:
        eid, done = self.item.execution_id, self.finished
        for entry in done.records:
            logging.getLogger(entry.name).handle(entry)
        finish.report(eid, done.outcome, done.final)
        if log.isEnabledFor(logging.INFO):
            log.info("execution %s", done.outcome, extra=logs.fields(execution=eid))
        telemetry.pass_in_turn(eid, done.outcome, done.began_ns, done.seconds)
        text = str(eid)
        if handed is not None and not self.item.keyed:
            # the run keeps it: no other run can follow under this id (a keyed execution's
            # can, and its handle follows the latest: that one reads the row)
            handed[text] = (eid, done.result)
        listener.hand_over(text, done.result)
