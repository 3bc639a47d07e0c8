"""The crash-point explorer (``akter.testing.explore``): kill a workflow at every step boundary
and show whether every effect still happens exactly once.

``explore`` runs one execution of a workflow to the end to learn its boundaries — how many times
it reaches each fault point of ``POINTS`` — and then, for every (point, n), a new execution of
the same input that is crashed at the n-th time it reaches that point: the runner that holds it
is dropped there (its relay stopped with the pass still blocked at the point, so nothing after
the point is written — the database is left exactly as a process killed there would leave it)
and another App's runner — a new relay, so a new activation and generation — takes the
execution over and finishes it.
Sleeps, deadlines and the recovery timer a dead runner leaves behind are skipped, not waited
for: when nothing is due, the database clock is set to the execution's next timer.

For each crash it compares the outcome with the uncrashed run's and counts the effects: the
commands the run's activities caused at other actors (receipts: commands sent with derived ids
— a rerun attempt repeats the same ids and the receivers deduplicate them) and, with ``probe``,
the user's own count of an external effect (rows in a table, calls to a fake service). A
boundary is reported when its run ended otherwise, caused more (or fewer) effects, or ended
with ``ActivityOutcomeUnknown``; ``report.assert_exactly_once()`` fails a test with that table.

Receipts are counted as a set — every receipt at another actor written since the run began,
read before each clock jump and at the end of each runner — because skipping a day expires
receipts and the relay's retention deletes them: a count taken only at the end would lose them.

Every run uses its own actor (``<actor_id>~<n>``), so runs do not see each other's executions;
runs go one at a time (they share the database clock, and a probe counts globally). Two Apps
are started once and swap roles run by run — the one that finished run n crashes run n + 1 —
so a run costs two relays, not two engines; the explorer's own reads and clock moves go through
one connection. (Each App's runner outlives its relays, but what it remembers is about earlier
runs' actors, whose executions have finished.)
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import types
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import attrs
import psycopg
from returns.result import Failure

from akter import faults
from akter.errors import ActivityOutcomeUnknown, ConfigurationError
from akter.faults import Pause
from akter.ids import CommandId
from akter.outbox.queries import LIVE_MEMBERS
from akter.testing._clock import Clock

if TYPE_CHECKING:
    from akter.actor.declare import Actor
    from akter.app import App
    from akter.workflow.api.declare import Workflow

#: where a run is crashed: after its start or resume turn committed and before the pass it
#: handed over began, before an attempt runs, after its effects and before its settle, before
#: a suspension
POINTS = (
    "workflow.before_pass",
    "workflow.before_activity",
    "workflow.before_settle",
    "workflow.before_suspend",
)
#: how many times the explorer moves the clock to finish one run before it calls it stuck
MAX_CLOCK_JUMPS = 50

Probe = Callable[[], Awaitable[int] | int]
Receipt = tuple[str, str, str, str]

_RECEIPTS_SINCE = """
SELECT tenant, actor_type, actor_id, command_id FROM actor_receipts
 WHERE created_at >= %s AND (tenant, actor_type, actor_id) <> (%s, %s, %s)"""
_NOW = """
SELECT akter_now(), (extract(epoch FROM akter_now()) * 1000)::bigint,
       (extract(epoch FROM retry_window) * 1000)::bigint FROM actor_deployment"""
_EXECUTION = "SELECT status FROM actor_workflow_executions WHERE execution_id = %s"
_NEXT_TIMER = "SELECT min(due_at), akter_now() FROM actor_outbox WHERE timer_key = 'wf:' || %s"
_PENDING = """
SELECT step, scope, occurrence, attempt FROM actor_workflow_step
 WHERE execution_id = %s AND kind = 'activity' AND exit IS NULL
 ORDER BY started_at LIMIT 1"""
_LAST_SETTLED = """
SELECT step, scope, occurrence FROM actor_workflow_step
 WHERE execution_id = %s AND exit IS NOT NULL ORDER BY settled_at DESC NULLS LAST LIMIT 1"""
# what a resume is for: the open clock or wait due first (else the step recorded last)
_RESUMED_FOR = """
SELECT step, scope, occurrence FROM actor_workflow_step
 WHERE execution_id = %s
 ORDER BY (exit IS NULL AND due_at IS NOT NULL) DESC, due_at, started_at DESC LIMIT 1"""


@attrs.define(eq=False)
class _Counter(Pause):
    """A fault that counts the times a point is reached and blocks, for good, at the
    ``crash_at``-th (0: never) — the runner there is then dropped."""

    crash_at: int = 0
    #: the attempt the crash stopped in, when it was one (``name#n attempt k``)
    attempt: str | None = None

    async def _block(self) -> None:
        self.hits += 1
        if self.hits == self.crash_at:
            self.attempt = _attempt_here()
            self._reached.set()
            await self._released.wait()  # never released: the pass dies here when dropped


def _attempt_here() -> str | None:
    """The activity attempt whose coroutine is reaching the fault point, read from the await
    chain: with branches running side by side, the database alone cannot say which of two
    pending attempts got there."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_attempt" and {"key", "attempt"} <= frame.f_locals.keys():
            return f"{frame.f_locals['key']} attempt {frame.f_locals['attempt']}"
        frame = frame.f_back
    return None


@attrs.frozen
class Run:
    """One execution's run: its outcome, the effects it caused, where it was crashed."""

    point: str | None
    hit: int
    outcome: Any
    receipts: int
    probed: int | None
    step: str | None = None
    hits: dict[str, int] = attrs.field(factory=dict)
    #: wall seconds the run took (both runners)
    seconds: float = 0.0
    #: the run reached its crash point (a run that did not took another path than the baseline)
    crashed: bool = False

    @property
    def unknown(self) -> bool:
        return isinstance(self.outcome, Failure) and isinstance(
            self.outcome.failure(), ActivityOutcomeUnknown
        )


@attrs.frozen
class ExploreReport:
    """The uncrashed run and one run per boundary. ``problems``: the crashed runs that ended
    otherwise, caused other effects than the uncrashed one, or ended with an unknown outcome."""

    baseline: Run
    crashes: tuple[Run, ...]

    def problem(self, run: Run) -> str | None:
        found = []
        if run.point is not None and not run.crashed:
            found.append(f"never reached {run.point} #{run.hit}: the run took another path")
        if repr(run.outcome) != repr(self.baseline.outcome):
            found.append(f"ended {run.outcome!r}, not {self.baseline.outcome!r}")
        if run.receipts != self.baseline.receipts:
            found.append(f"{run.receipts} commands received, not {self.baseline.receipts}")
        if run.probed != self.baseline.probed:
            found.append(f"probe counted {run.probed} effects, not {self.baseline.probed}")
        if run.unknown:
            found.append("ActivityOutcomeUnknown")
        return "; ".join(found) or None

    @property
    def problems(self) -> tuple[tuple[Run, str], ...]:
        return tuple((run, p) for run in self.crashes if (p := self.problem(run)) is not None)

    @property
    def seconds(self) -> float:
        """Wall seconds of the whole exploration (every run)."""
        return self.baseline.seconds + sum(run.seconds for run in self.crashes)

    def text(self) -> str:
        b = self.baseline
        lines = [
            f"uncrashed: {b.outcome!r}, {b.receipts} commands received, probe {b.probed}; "
            f"boundaries {', '.join(f'{p} x{n}' for p, n in sorted(b.hits.items()))}",
            f"{'point':24} {'hit':>3}  {'step':34} {'received':>8} {'probe':>5}  verdict",
        ]
        for run in self.crashes:
            verdict = self.problem(run) or "exactly once"
            lines.append(
                f"{run.point or '':24} {run.hit:>3}  {run.step or '':34} {run.receipts:>8} "
                f"{'' if run.probed is None else run.probed:>5}  {verdict}"
            )
        return "\n".join(lines)

    def assert_exactly_once(self) -> None:
        """``AssertionError`` with the table when a crash duplicated, lost or changed anything."""
        if self.problems:
            raise AssertionError("crashes changed what the workflow did:\n" + self.text())


async def _probe(probe: Probe | None) -> int | None:
    if probe is None:
        return None
    value = probe()
    return int(await value) if inspect.isawaitable(value) else int(value)


def _fresh(actors: Iterable[Actor[Any]], url: str) -> App:
    """An App of the actor types on the database: a new runner, nothing shared."""
    from akter.app import App as AppClass

    return AppClass(list(actors), database_url=url)


class _Crashed(Exception):
    """The run reached its crash point (internal: the runner is dropped there)."""


class _Explorer:
    def __init__(
        self, app: App, actor: Actor[Any], actor_id: str, workflow: Workflow[Any, Any], payload: Any,
        *, tenant: str, probe: Probe | None, timeout: float, database_url: str | None = None,
    ) -> None:  # fmt: skip
        url = database_url or app.database_url
        if url is None:
            raise ConfigurationError("explore needs an App with a database_url")
        self.actors = tuple(app.actors.values())
        self.url: str = url
        self.actor, self.actor_id, self.workflow, self.payload = actor, actor_id, workflow, payload
        self.tenant, self.probe, self.timeout = tenant, probe, timeout
        self.runs = 0
        self.conn: psycopg.AsyncConnection[Any] | None = None
        #: two Apps started once: each run is crashed in one and finished in the other
        self.apps: tuple[App, App] | None = None
        # the run going on: its actor, when it began on the database clock, the receipts seen
        self._run_actor = ""
        self._since: datetime | None = None
        self._seen: set[Receipt] = set()
        self._start_id = ""

    async def __aenter__(self) -> _Explorer:
        self.conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        try:
            await self._alone()
            self.apps = (_fresh(self.actors, self.url), _fresh(self.actors, self.url))
            for app in self.apps:
                await app.start()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        for app in self.apps or ():
            await app.close()
        if self.conn is not None:
            await self.conn.close()

    async def _alone(self) -> None:
        """``ConfigurationError`` when another relay is live on the database: it would own some
        of the buckets, and a crash could land in a relay the explorer cannot drop. A relay's
        member row is written before its ``start()`` returns, so one started just before this
        check is seen (a relay process: once it logged ``ownership``)."""
        live = [row[0] for row in await self._rows(LIVE_MEMBERS)]
        if live:
            raise ConfigurationError(
                f"explore needs the database's relays to itself, and {len(live)} relay(s) are "
                f"live on it ({', '.join(live)}): a crash could land in one it cannot drop. Stop "
                "them, or explore on a database of its own (the explorer fixture gives one)"
            )

    def _app(self, finishing: bool) -> App:
        """The App whose new relay runs the crashed runner of this run, or the finishing one.
        Roles alternate run by run, so the finisher is never the App that crashed the run; the
        runner state an App keeps between relays is of earlier runs' actors, all finished."""
        if self.apps is None:  # pragma: no cover -- only used inside ``async with``
            raise RuntimeError("the explorer is not started")
        return self.apps[(self.runs + finishing) % 2]

    async def _rows(self, sql: Any, *params: Any) -> list[tuple[Any, ...]]:
        if self.conn is None:  # pragma: no cover -- only used inside ``async with``
            raise RuntimeError("the explorer's connection is not open")
        return await (await self.conn.execute(sql, params)).fetchall()

    async def _one(self, sql: Any, *params: Any) -> tuple[Any, ...] | None:
        rows = await self._rows(sql, *params)
        return rows[0] if rows else None

    async def _snapshot(self) -> None:
        """Note the receipts written at other actors since the run began (before the clock
        moves: a jump past their expiry lets retention delete them)."""
        rows = await self._rows(_RECEIPTS_SINCE, self._since, self.tenant, self.actor.name, self._run_actor)
        self._seen.update((r[0], r[1], r[2], r[3]) for r in rows)

    async def run(self, point: str | None, hit: int) -> Run:
        self.runs += 1
        began = asyncio.get_running_loop().time()
        actor_id = self._run_actor = f"{self.actor_id}~{self.runs}"
        now = await self._one(_NOW)
        if now is None:
            raise ConfigurationError("actor_deployment is empty; the database was not migrated by akter")
        self._since, self._seen = now[0], set()
        # the start's id, on the database clock: an App's estimate of it lags behind a jump
        self._start_id = str(CommandId.mint(now[1], now[2]))
        counters = {
            p: _Counter(point=p, match=actor_id, once=False, crash_at=hit if p == point else 0)
            for p in POINTS
        }
        probed = await _probe(self.probe)
        for counter in counters.values():
            faults.arm(counter)
        step: str | None = None
        crashed = False
        try:
            try:
                eid, outcome = await self._first_runner(actor_id, counters[point] if point else None)
            except _Crashed as at:
                crashed, (eid, step) = True, at.args
                outcome = await self._finish(eid)
        finally:
            for counter in counters.values():
                faults.disarm(counter)
        await self._snapshot()
        return Run(
            point,
            hit,
            outcome,
            len(self._seen),
            None if probed is None else (await _probe(self.probe) or 0) - probed,
            step,
            {p: c.hits for p, c in counters.items()},
            asyncio.get_running_loop().time() - began,
            crashed,
        )

    async def _first_runner(self, actor_id: str, crash: _Counter | None) -> tuple[str, Any]:
        """Start the execution and run it to the end: its outcome. ``_Crashed`` (the execution
        id and where) when it reached the crash: the runner is dropped there."""
        app = self._app(finishing=False)
        async with app.relay() as relay, app.client() as client:
            await relay.idle()  # it owns its buckets: the start's first pass is handed to it
            start = client.actor(self.actor, actor_id, tenant=self.tenant).start
            run = await start(self.workflow, self.payload, command_id=self._start_id)
            eid = run.execution_id
            stuck = await self._drive(relay, eid, crash)
            if stuck is True and crash is not None:
                await self._snapshot()
                # a crash, not a drain: leaving the block stops the relay at once, abandoning
                # the pass blocked at the point, so nothing after it is written
                relay.force()
                raise _Crashed(eid, await self._where(eid, crash))
            if stuck:
                return eid, stuck
            return eid, await run.result(timeout=self.timeout)

    async def _where(self, eid: str, crash: _Counter) -> str | None:
        if crash.point == "workflow.before_pass":
            row = await self._one(_RESUMED_FOR, eid)
            return "after its start" if row is None else f"resume for {_key(row)}"
        if crash.point == "workflow.before_suspend":
            row = await self._one(_LAST_SETTLED, eid)
            return None if row is None else f"after {_key(row)}"
        if crash.attempt is not None:
            return crash.attempt
        row = await self._one(_PENDING, eid)
        return None if row is None else f"{_key(row)} attempt {row[3]}"

    async def _finish(self, eid: str) -> Any:
        """A fresh runner finishes the execution; its outcome, or why it could not."""
        app = self._app(finishing=True)
        async with app.relay() as relay, app.client() as client:
            stuck = await self._drive(relay, eid, None)
            if stuck:
                return stuck
            run = client.run(self.workflow, eid, tenant=self.tenant)
            return await run.result(timeout=self.timeout)

    async def _drive(self, relay: Any, eid: str, crash: _Counter | None) -> bool | str:
        """Run until the crash point is reached (True) or the execution finished (False), the
        clock skipping to its next timer whenever nothing is due; a string says why neither
        happened."""
        clock = Clock(self.url, conn=self.conn)
        for _ in range(MAX_CLOCK_JUMPS):
            waits = [asyncio.ensure_future(relay.idle())]
            if crash is not None:
                waits.append(asyncio.ensure_future(crash.reached(self.timeout)))
            done, _ = await asyncio.wait(waits, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED)
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
            if crash is not None and crash.hits >= crash.crash_at:
                return True
            if not done:
                return f"stuck: {eid} was still running after {self.timeout}s"
            status = await self._one(_EXECUTION, eid)
            if status is not None and status[0] == "finished":
                return False
            timer = await self._one(_NEXT_TIMER, eid)
            if timer is None or timer[0] is None:
                return f"stuck: {eid} is open with no timer (waiting for an event nobody sends?)"
            due: datetime = timer[0]
            if due > timer[1]:
                await self._snapshot()
                await clock.set(due)
        return f"stuck: {eid} did not finish after {MAX_CLOCK_JUMPS} clock jumps"


def _key(row: tuple[Any, ...]) -> str:
    from akter.workflow.api.history import StepKey

    return str(StepKey(row[0], row[1], row[2]))


async def explore(
    app: App,
    actor: Actor[Any],
    actor_id: str,
    workflow: Workflow[Any, Any],
    payload: Any,
    *,
    tenant: str = "acme",
    probe: Probe | None = None,
    timeout: float = 60,  # noqa: ASYNC109 -- a bound on each wait, named like run.result's
    database_url: str | None = None,
) -> ExploreReport:
    """Run ``workflow`` on actors ``<actor_id>~<n>`` with ``payload``: once uncrashed, then
    once crashed at every boundary it reached (see the module docstring). ``probe`` returns the
    count of an external effect so far (sync or async). ``app`` names the actor types and the
    database (``database_url``, when given, instead of the App's); the explorer builds its own
    runners from them."""
    async with _Explorer(
        app, actor, actor_id, workflow, payload,
        tenant=tenant, probe=probe, timeout=timeout, database_url=database_url,
    ) as explorer:  # fmt: skip
        baseline = await explorer.run(None, 0)
        crashes = [
            await explorer.run(point, hit)
            for point in POINTS
            for hit in range(1, baseline.hits.get(point, 0) + 1)
        ]
    return ExploreReport(baseline, tuple(crashes))


@attrs.define
class Explorer:
    """What the ``explorer`` pytest fixture (``akter.pytest_plugin``) gives a test: ``explore``
    bound to the test's fresh database. ``await explorer(app, Actor, "id", Workflow, input)``
    explores on that database whatever database the App names (its actor types are what
    counts), and keeps every report in ``reports``."""

    database_url: str
    reports: list[ExploreReport] = attrs.field(factory=list)

    async def __call__(
        self, app: App, actor: Actor[Any], actor_id: str, workflow: Workflow[Any, Any], payload: Any,
        **options: Any,
    ) -> ExploreReport:  # fmt: skip
        """``explore`` on the fixture's database; ``options`` are its keywords (``probe``,
        ``tenant``, ``timeout``)."""
        url = self.database_url
        report = await explore(app, actor, actor_id, workflow, payload, database_url=url, **options)
        self.reports.append(report)
        return report
