"""Manifests and the compatibility judgement, without a database.

The pinned hash below is a promise: every execution in every database carries the hash of the
manifest it started under, so a change to how manifests are derived would make every running
execution look like it was started by other code. If this test fails, the derivation changed:
bump ``MANIFEST_VERSION`` deliberately (and plan the migration of stored hashes), never the
expected value alone.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, NewType, Optional, TypeVar

import attrs
import pytest

import akter
from akter.fingerprint import fingerprint
from akter.workflow.core import compat, manifest
from akter.workflow.tools.check import _Verdict
from tests.apps import depot, depot_cosmetic

# ---- a fixed declaration, pinned ----------------------------------------------------------------


@attrs.frozen
class PinnedState:
    n: int = 0


@attrs.frozen
class Arrived:
    parcel: str
    at: datetime


@attrs.frozen
class Parcel:
    id: str
    weight_g: int
    tags: tuple[str, ...] = ()


@attrs.frozen
class Slot:
    shelf: str
    row: int | None


@attrs.frozen
class Delivered:
    parcel: str
    slots: list[Slot]


@attrs.frozen(auto_exc=True)
class NoRoom(Exception):
    shelf: str


Pinned = akter.Actor("Pinned", state=PinnedState, events=[Arrived])
Deliver = Pinned.workflow(
    "Deliver",
    input=Parcel,
    output=Delivered,
    errors=[NoRoom],
    versions={"route": akter.Versions(current=2, min=1)},
)
store = Deliver.activity("store", success=Slot, errors=[NoRoom], retry=akter.Retry(times=3))
rest = Deliver.sleep("rest")
arrived = Deliver.wait("arrived", Arrived)
first = Deliver.race("first")


@Deliver.body
async def deliver(wf: akter.WorkflowContext, parcel: Parcel) -> Delivered:
    slot = await store(lambda: Slot(shelf="a", row=1))
    await first.run(arrived(timeout=timedelta(hours=1)), rest(timedelta(hours=1)))
    return Delivered(parcel=parcel.id, slots=[slot])


PINNED_HASH = "3f9d00c3d7bf84f0a16398c6886ba36949dda065d81ea7ce1c2fb99dc58bbad0"


def test_the_manifest_of_a_fixed_declaration_is_pinned() -> None:
    slot = {"fields": {"shelf": "str", "row": {"union": ["int", "none"]}}}
    no_room = {"fields": {"shelf": "str"}}
    assert manifest.derive(Deliver) == {
        "akter_manifest": 1,
        "actor_type": "Pinned",
        "workflow": "Deliver",
        "payload": {
            "fields": {"id": "str", "weight_g": "int", "tags": {"generic": "tuple", "args": ["str", "..."]}}
        },
        "output": {"fields": {"parcel": "str", "slots": {"generic": "list", "args": [slot]}}},
        "errors": {"NoRoom": no_room},
        "steps": {
            "store": {"kind": "activity", "result": {"ok": slot, "errors": {"NoRoom": no_room}}},
            "rest": {"kind": "clock", "result": "none"},
            "arrived": {
                "kind": "wait",
                "result": {"event": "Arrived", "fields": {"parcel": "str", "at": "datetime.datetime"}},
            },
            "first": {"kind": "race", "result": "none"},
        },
        "versions": {"route": {"min": 1, "current": 2}},
    }
    assert manifest.of(Deliver)[1] == PINNED_HASH


# ---- fingerprints -------------------------------------------------------------------------------

T = TypeVar("T")
UserId = NewType("UserId", str)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


@attrs.frozen
class Node:
    value: int
    children: tuple[Node, ...] = ()


@attrs.frozen
class Hidden:
    shown: int
    derived: int = attrs.field(init=False, default=0)


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        (None, "none"),
        (type(None), "none"),
        (Any, "any"),
        (object, "any"),
        (T, "any"),
        (int, "int"),
        (bytes, "bytes"),
        (datetime, "datetime.datetime"),
        (UserId, "str"),
        (Annotated[int, "meta"], "int"),
        (Optional[int], {"union": ["int", "none"]}),  # noqa: UP045 -- the spelling under test
        (None | int, {"union": ["int", "none"]}),
        (Literal["b", "a"], {"literal": ["a", "b"]}),
        (Color, {"enum": ["blue", "red"]}),
        (list[int], {"generic": "list", "args": ["int"]}),
        (dict[str, list[int]], {"generic": "dict", "args": ["str", {"generic": "list", "args": ["int"]}]}),
        (Point, {"fields": {"x": "int", "y": "int"}}),
        (Hidden, {"fields": {"shown": "int"}}),
        (
            Node,
            {"fields": {"value": "int", "children": {"generic": "tuple", "args": [{"recursive": 1}, "..."]}}},
        ),
    ],
)
def test_fingerprints_describe_how_a_type_is_stored(tp: Any, expected: Any) -> None:
    assert fingerprint(tp) == expected


def test_cosmetic_rewrites_keep_the_hash_and_every_real_change_moves_it() -> None:
    before = manifest.of(depot.VARIANTS["before"][0].workflows["Ship"])[1]
    for app in (depot_cosmetic.renamed, depot_cosmetic.reordered):
        [workflow] = manifest.all_workflows(app.actors.values())
        assert manifest.of(workflow)[1] == before
    changed = {
        name: manifest.of(actors[0].workflows["Ship"])[1]
        for name, actors in depot.VARIANTS.items()
        if "Ship" in actors[0].workflows
    }
    # the same Ship: unchanged, declared alone (marker_dropped) or beside a new workflow
    assert {name for name, digest in changed.items() if digest == before} == {
        "before",
        "marker_dropped",
        "new_workflow",
    }
    assert len(set(changed.values())) == len(changed) - 2  # all others differ from each other too


# ---- the judgement --------------------------------------------------------------------------------


def judge(
    current: str | None, start: str | None, recorded: dict[str, str], versions: dict[str, int]
) -> list[str]:
    def of(variant: str | None) -> Any:
        return None if variant is None else manifest.derive(depot.VARIANTS[variant][0].workflows["Ship"])

    problems = compat.judge(
        actor_type="Depot",
        workflow="Ship",
        declared_types={"Depot"},
        current=of(current),
        start=of(start),
        start_hash="0123456789abcdef",
        recorded=recorded,
        versions=versions,
    )
    return [f"{p.code}: {p.message}" for p in problems]


PARKED = {"reserve": "activity", "nap": "clock"}


@pytest.mark.parametrize(
    ("current", "start", "recorded", "versions", "expected"),
    [
        ("before", "before", PARKED, {}, []),
        ("after", "before", PARKED, {}, []),  # a new step after the last recorded one, a new marker
        ("unreached_changed", "before", PARKED, {}, []),  # ship's result changed, not reached
        ("result_changed", "before", {"nap": "clock"}, {}, []),  # reserve changed, not reached
        ("before", "after", PARKED, {"notify": 1}, [
            "step_missing: step 'notify' (an activity) is no longer declared",
            "marker_not_declared: version marker 'notify' (recorded 1) is no longer declared",
        ]),
        ("before", None, PARKED, {}, ["start_manifest_missing: start manifest 0123456789ab is not stored"]),
        ("step_removed", None, {**PARKED, "ship": "activity"}, {}, [
            "start_manifest_missing: start manifest 0123456789ab is not stored",
            "step_missing: step 'ship' (an activity) is no longer declared",
        ]),
        ("kind_changed", "before", PARKED, {}, [
            "step_kind_changed: step 'nap' was a clock and is now declared as an activity",
        ]),
        ("kind_changed", "before", {"reserve": "activity"}, {}, [
            "step_kind_changed: step 'nap' was a clock and is now declared as an activity",
        ]),
        ("result_changed", "before", PARKED, {}, [
            "result_schema_changed: the result schema of recorded step 'reserve' changed",
        ]),
        ("payload_changed", "before", {}, {}, ["payload_schema_changed: the payload (input) schema changed"]),
        ("marker_outside", "before_marked", PARKED, {"carrier": 1}, [
            "marker_outside_range: version marker 'carrier' recorded 1, outside 2..3",
        ]),
        ("marker_predates", "before", PARKED, {}, [
            "marker_predates: version marker 'carrier' has min 1 but was not recorded at start "
            "(it would replay as 0)",
        ]),
        ("reworked", "before", PARKED, {}, [
            "result_schema_changed: the result schema of recorded step 'reserve' changed",
            "marker_predates: version marker 'carrier' has min 2 but was not recorded at start "
            "(it would replay as 0)",
        ]),
    ],
)  # fmt: skip
def test_judge(
    current: str | None,
    start: str | None,
    recorded: dict[str, str],
    versions: dict[str, int],
    expected: list[str],
) -> None:
    assert judge(current, start, recorded, versions) == expected


def test_judge_a_missing_actor_type_or_workflow_says_only_that() -> None:
    missing_type = compat.judge(
        actor_type="Gone", workflow="Ship", declared_types={"Depot"}, current=None, start=None,
        start_hash="", recorded=PARKED, versions={"x": 1},
    )  # fmt: skip
    assert [p.message for p in missing_type] == ["actor type Gone is not declared"]
    missing_workflow = compat.judge(
        actor_type="Depot", workflow="Gone", declared_types={"Depot"}, current=None, start=None,
        start_hash="", recorded=PARKED, versions={},
    )  # fmt: skip
    assert [p.message for p in missing_workflow] == ["workflow Depot.Gone is not declared"]


def test_the_deploy_check_adds_up_groups_and_recorded_steps() -> None:
    before, start_hash = manifest.of(depot.VARIANTS["before"][0].workflows["Ship"])
    changed = json.loads(json.dumps(before))
    for step in ("reserve", "ship"):
        changed["steps"][step]["result"] = {"ok": "str", "errors": {}}
    early, late = datetime(2031, 1, 1, tzinfo=UTC), datetime(2031, 1, 2, tzinfo=UTC)
    app = depot.make_app("before")

    def verdict(groups: list[tuple[Any, ...]], steps: list[tuple[Any, ...]]) -> _Verdict:
        v = _Verdict(app.actors, {("Depot", "Ship"): (changed, "f" * 64)})
        v.groups(groups, {start_hash: before})
        wanted = v.steps_worth_counting({start_hash: before})
        # only the steps whose result schema changed are worth reading
        assert wanted == {"every_step_of": [], "step_hashes": [start_hash] * 2, "steps": ["reserve", "ship"]}
        v.steps(steps, {start_hash: before})
        return v

    one = verdict(
        [("Depot", "Ship", start_hash, {}, 5, early)], [(start_hash, "reserve", "activity", 3, late)]
    )
    assert one.refused_by_steps() == 3  # one refused step per manifest: its count is the answer
    report = one.report(open_executions=5)
    assert (report.checked, report.refused_executions) == (5, 0)  # the SQL count is added by check()
    assert [(r.code, r.step, r.executions, r.oldest_started_at) for r in report.refusals] == [
        ("result_schema_changed", "reserve", 3, late)
    ]
    # two refused steps of one manifest: an execution may have recorded both, so it takes SQL
    two = verdict(
        [("Depot", "Ship", start_hash, {}, 5, early)],
        [(start_hash, "reserve", "activity", 3, late), (start_hash, "ship", "activity", 2, early)],
    )
    assert two.refused_by_steps() is None
    assert two.refused_by_steps_params()["bad_steps"] == ["reserve", "ship"]
    # a group refused as a whole (a marker it recorded is gone) is counted once, as a whole
    whole = verdict(
        [("Depot", "Ship", start_hash, {"gone": 1}, 4, early), ("Depot", "Ship", start_hash, {}, 1, late)],
        [(start_hash, "reserve", "activity", 5, early)],
    )
    assert whole.refused == 4
    assert whole.refused_by_steps() is None
    assert whole.refused_by_steps_params()["refused_versions"][0].obj == {"gone": 1}
