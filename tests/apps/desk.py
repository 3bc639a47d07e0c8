"""A help desk whose jobs an operator finds and acts on (``akter executions``): a job sleeps,
waits for a poke, fails with a declared error, or dies of a defect, as its input asks. Used in
process by the operate tests and by the ``akter executions`` processes they start."""

from __future__ import annotations

import os
from datetime import timedelta

import attrs

import akter


@attrs.frozen
class DeskState:
    pokes: int = 0


@attrs.frozen
class Poked:
    job: str


@attrs.frozen
class Poke:
    job: str


@attrs.frozen
class Task:
    name: str
    #: "ok", "sleep", "wait", "fail" (a declared error) or "defect" (an undeclared exception)
    mode: str = "ok"


@attrs.frozen
class Done:
    name: str
    attempt: int


@attrs.frozen(auto_exc=True)
class Refused(Exception):
    name: str


#: job names whose failure the test has fixed: their work succeeds from now on (process-local)
FIXED: set[str] = set()
#: how many times each job's work really ran (process-local)
RUNS: dict[str, int] = {}


def _policy(caller: akter.Caller, command: akter.Command) -> bool:  # type: ignore[type-arg]
    """Users listed in AKTER_TEST_REVOKED may send nothing (read when the command arrives)."""
    revoked = os.environ.get("AKTER_TEST_REVOKED", "").split(",")
    return not (isinstance(caller, akter.User) and caller.subject in revoked)


Desk = akter.Actor("Desk", state=DeskState, events=[Poked], access=_policy)


@Desk.command
def poke(turn: akter.Turn[DeskState], cmd: Poke) -> None:
    turn.state = DeskState(pokes=turn.state.pokes + 1)
    turn.emit(Poked(job=cmd.job))


Job = Desk.workflow("Job", input=Task, output=Done, errors=[Refused], key=lambda task: task.name)
work = Job.activity("work", success=Done, errors=[Refused])
nap = Job.sleep("nap")
poked = Job.wait("poked", Poked)


def _work(task: Task) -> Done:
    RUNS[task.name] = RUNS.get(task.name, 0) + 1
    if task.name not in FIXED:
        if task.mode == "fail":
            raise Refused(task.name)
        if task.mode == "defect":
            raise RuntimeError(f"the work of {task.name} broke")
    return Done(task.name, akter.activity_context().attempt)


@Job.body
async def job(wf: akter.WorkflowContext, task: Task) -> Done:
    if task.mode == "sleep":
        await nap(timedelta(days=1))
    elif task.mode == "wait":
        await poked(where=lambda e: e.job == task.name, timeout=timedelta(days=1))
    return await work(_work, task)


app = akter.App([Desk])


def make_app(database_url: str) -> akter.App:
    return akter.App([Desk], database_url=database_url)
