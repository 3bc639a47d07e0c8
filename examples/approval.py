"""An approval that waits for a person, with a deadline: escalate once, then reject.

Run it with ``python examples/approval.py`` (the embedded PostgreSQL, or ``AKTER_DATABASE_URL``).

An ``ExpenseReport`` actor (one per report) owns its ``Review`` execution. The review mails the
approver (an activity), then waits for a ``Decided`` event *from that approver*. If none arrives
within the deadline it escalates to the approver's manager and waits again; if the manager is
silent too, the report is rejected by the deadline. The verdict is written back to the report's
state through an internal command, which only akter itself (an activity's client) may send.

People decide through the ``decide`` command. The event records the caller's subject, so the
wait's ``where`` can insist on the right person: a decision from anyone else is kept as an event
but does not settle the review. The wait is durable: the execution holds no memory, thread or
connection while a person takes two days, and a decision committed at any moment — before the
wait began, or while the reminder mail was still being sent — is not missed.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import attrs
from returns.maybe import Maybe, Some

import akter
from akter.workflow.api.declare import ActivityStep

RESPOND_WITHIN = timedelta(days=2)


# ---- the mail service (a stand-in) ------------------------------------------------------------


class Mailer:
    """Collects mail instead of sending it. A real one calls your mail provider."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, to: str, subject: str) -> None:
        self.sent.append(f"to {to}: {subject}")


mailer = Mailer()


# ---- the actor and its workflow ---------------------------------------------------------------


@attrs.frozen
class ReportState:
    status: str = "open"  # open, approved or rejected
    decided_by: str = ""


@attrs.frozen
class Decide:
    approve: bool
    note: str = ""


@attrs.frozen
class Decided:
    approve: bool
    by: str
    note: str


@attrs.frozen
class ReviewRequest:
    submitter: str
    approver: str
    manager: str
    amount_cents: int
    respond_within_s: int = int(RESPOND_WITHIN.total_seconds())


@attrs.frozen
class Verdict:
    approved: bool
    decided_by: str  # a person's subject, or "deadline"
    escalated: bool
    note: str = ""


@attrs.frozen(auto_exc=True)
class NotAPerson(Exception):
    """Only an authenticated user can decide."""

    caller: str


ExpenseReport = akter.Actor("ExpenseReport", state=ReportState, events=[Decided], access=akter.users_only)


@ExpenseReport.command(errors=[NotAPerson])
def decide(turn: akter.Turn[ReportState], decision: Decide) -> None:
    if not isinstance(turn.caller, akter.User):
        raise NotAPerson(caller=turn.caller.key)
    turn.emit(Decided(approve=decision.approve, by=turn.caller.subject, note=decision.note))


@ExpenseReport.command(internal=True)
def record_verdict(turn: akter.Turn[ReportState], verdict: Verdict) -> None:
    turn.state = ReportState(
        status="approved" if verdict.approved else "rejected", decided_by=verdict.decided_by
    )


Review = ExpenseReport.workflow("Review", input=ReviewRequest, output=Verdict, key=lambda _: "review")
ask_approver: ActivityStep[None] = Review.activity("ask-approver", retry=akter.Retry(times=5))
decision = Review.wait("decision", Decided)
escalate: ActivityStep[None] = Review.activity("escalate", retry=akter.Retry(times=5))
manager_decision = Review.wait("manager-decision", Decided)
close: ActivityStep[None] = Review.activity("close", retry=akter.Retry(times=5))


async def write_back(report_id: str, verdict: Verdict) -> None:
    """Record the verdict on the report. The command's id is derived from this attempt, so a
    rerun of the attempt is deduplicated by the report instead of applied twice."""
    report = akter.activity_context().client.actor(ExpenseReport, report_id)
    (await report.send(record_verdict, verdict)).unwrap()


@Review.body
async def review(wf: akter.WorkflowContext, request: ReviewRequest) -> Verdict:
    window = timedelta(seconds=request.respond_within_s)
    amount = f"{request.amount_cents / 100:.2f}"
    await ask_approver(mailer.send, request.approver, f"please review {wf.ref.actor_id} ({amount})")
    match await decision(where=lambda d: d.by == request.approver, timeout=window):
        case Some(decided):
            verdict = Verdict(decided.approve, decided.by, escalated=False, note=decided.note)
        case Maybe.empty:
            await escalate(
                mailer.send, request.manager, f"{request.approver} did not review {wf.ref.actor_id}"
            )
            match await manager_decision(where=lambda d: d.by == request.manager, timeout=window):
                case Some(decided):
                    verdict = Verdict(decided.approve, decided.by, escalated=True, note=decided.note)
                case Maybe.empty:
                    verdict = Verdict(False, "deadline", escalated=True, note="nobody decided in time")
    await close(write_back, wf.ref.actor_id, verdict)
    return verdict


def make_app(database_url: str | None = None) -> akter.App:
    """The App; without a URL it uses ``AKTER_DATABASE_URL``, else the embedded PostgreSQL."""
    return akter.App([ExpenseReport], database_url=database_url)


app = make_app()


# ---- running it -------------------------------------------------------------------------------


async def main(database_url: str | None = None) -> None:
    stamp = f"{datetime.now(UTC):%Y%m%d-%H%M%S-%f}"
    runner = make_app(database_url)
    async with runner, runner.relay(), runner.client(akter.User("sam")) as client:
        print("1. alice approves within the deadline:")
        report = client.actor(ExpenseReport, f"report-{stamp}-1", tenant="acme")
        run = await report.start(Review, ReviewRequest("sam", "alice", "carol", amount_cents=420_00))
        alice = client.actor(ExpenseReport, f"report-{stamp}-1", tenant="acme", caller=akter.User("alice"))
        await alice.send(decide, Decide(approve=True, note="fine"))
        print("  ", (await run.result(timeout=30)).unwrap())

        print("2. bob is not the approver; alice and carol stay silent for 1s each:")
        report = client.actor(ExpenseReport, f"report-{stamp}-2", tenant="acme")
        request = ReviewRequest("sam", "alice", "carol", amount_cents=9_000_00, respond_within_s=1)
        run = await report.start(Review, request)
        bob = client.actor(ExpenseReport, f"report-{stamp}-2", tenant="acme", caller=akter.User("bob"))
        await bob.send(decide, Decide(approve=True, note="looks fine to me"))
        print("  ", (await run.result(timeout=30)).unwrap())

    print("mail sent:")
    for mail in mailer.sent:
        print("  ", mail)


if __name__ == "__main__":
    asyncio.run(main())
