"""Scheduled work used by the schedule tests: a command that records the database clock it ran
at, and a workflow that finishes at once."""

from __future__ import annotations

from datetime import datetime

import attrs

import akter


@attrs.frozen
class JobsState:
    runs: int = 0


@attrs.frozen
class RunReport:
    label: str


@attrs.frozen
class Ran:
    label: str
    at: datetime


@attrs.frozen
class Done:
    label: str


Jobs = akter.Actor("Jobs", state=JobsState, events=[Ran])


@Jobs.command
def run_report(turn: akter.Turn[JobsState], cmd: RunReport) -> None:
    turn.state = attrs.evolve(turn.state, runs=turn.state.runs + 1)
    turn.emit(Ran(label=cmd.label, at=turn.now))


Nightly = Jobs.workflow("Nightly", input=RunReport, output=Done)


@Nightly.body
async def nightly(wf: akter.WorkflowContext, job: RunReport) -> Done:
    return Done(job.label)


akter.enable_schedules(Jobs)


def make_app(database_url: str) -> akter.App:
    return akter.App([Jobs], database_url=database_url)


#: for the `akter schedules` command's tests (its database comes from AKTER_DATABASE_URL)
app = akter.App([Jobs])
