"""Workflows for the consecutive-failure cap of ``akter.workflow.engine.holds``: ``Mend``'s passes fail
every time where a test arms ``akter.testing.fail`` (a bug in akter's own code, as it would
look), so after ``failed_pass_limit`` failed passes in a row the execution needs attention
instead of crash-looping; ``Relapse`` raises a declared error whose field cannot be stored,
which is that activity's defect (recorded, retried, then failed), never a failing pass."""

from __future__ import annotations

import attrs

import akter


@attrs.frozen
class Ward:
    mended: int = 0


@attrs.frozen
class Patient:
    name: str


@attrs.frozen(auto_exc=True)
class Relapse(Exception):
    #: declared an int; the activity stores something JSON cannot hold, so recording it fails
    severity: int


#: how many times the mend activity really ran (process-local)
RUNS: dict[str, int] = {}

Clinic = akter.Actor("Clinic", state=Ward)
Mend = Clinic.workflow("Mend", input=Patient, output=str, errors=[Relapse], key=lambda p: p.name)
treat = Mend.activity("treat", success=str, errors=[Relapse])


def _treat(patient: Patient) -> str:
    RUNS[patient.name] = RUNS.get(patient.name, 0) + 1
    return f"mended {patient.name}"


@Mend.body
async def mend(wf: akter.WorkflowContext, patient: Patient) -> str:
    return await treat(_treat, patient)


Worse = Clinic.workflow("Worse", input=Patient, output=str, errors=[Relapse])
relapse = Worse.activity("relapse", success=str, errors=[Relapse])


def _relapse(patient: Patient) -> str:
    RUNS[patient.name] = RUNS.get(patient.name, 0) + 1
    raise Relapse(severity=object())  # type: ignore[arg-type] -- the bug under test


@Worse.body
async def worse(wf: akter.WorkflowContext, patient: Patient) -> str:
    return await relapse(_relapse, patient)


#: three failed passes in a row make an execution need attention (the default is five)
LIMIT = 3

app = akter.App([Clinic], failed_pass_limit=LIMIT)


def make_app(database_url: str) -> akter.App:
    return akter.App([Clinic], database_url=database_url, failed_pass_limit=LIMIT)
