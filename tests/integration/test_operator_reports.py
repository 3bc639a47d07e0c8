"""What the operator's commands report (issue 22): each answer says what happened, in a form a
script can rely on. A resume of a finished execution says it is finished; a filter the database
could not compare is refused by name, on the command line, the API and the page; a workflow is
found under the spelling ``counts`` prints; an action by filter goes on past an execution it
cannot act on and sums up; JSON is absolute and its errors are JSON; an export is the same file
twice.

Each runs the ``akter`` command line through click's runner in this process
(``tests.integration.cli_support``; the page: ``akter ui`` as a real process on a free port)
against a real database, beside the desk (``tests.apps.desk``) started in this process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs
import pytest
from click.testing import CliRunner

from akter import testing
from akter.cli import main
from akter.errors import InvalidInput
from akter.ids import ActorRef, ExecutionId
from akter.operate.query import ExecutionFilter
from tests.apps import desk, flows
from tests.integration.cli_support import akter_in_process
from tests.integration.conftest import Peek
from tests.integration.ui_support import serving_ui
from tests.integration.workflow_support import quiet

APP = "tests.apps.desk:app"


@attrs.frozen
class Stored:
    url: str
    client: Any
    #: execution ids by key: a sleeper, a waiter and one that finished
    ids: dict[str, str]


@pytest.fixture
async def stored(database_url: str) -> AsyncIterator[Stored]:
    desk.FIXED.clear()
    desk.RUNS.clear()
    app = desk.make_app(database_url)
    async with app.relay() as relay, app.client() as client:
        front = client.actor(desk.Desk, "front", tenant="acme")
        ids = {}
        for key, mode in (("sleeper", "sleep"), ("waiter", "wait"), ("done", "ok")):
            ids[key] = (await front.start(desk.Job, desk.Task(key, mode))).execution_id
        await quiet(app, relay)
        yield Stored(database_url, client, ids)


async def run(s: Stored, *args: str, app: str = APP) -> subprocess.CompletedProcess[str]:
    command, *rest = args
    return await akter_in_process("executions", command, app, *rest, "--database-url", s.url)


# ---- resume of a finished execution -------------------------------------------------------------


async def test_resuming_a_finished_execution_says_it_is_finished_and_leaves_no_pause(
    stored: Stored, peek: Peek
) -> None:
    sleeper = stored.ids["sleeper"]
    paused = await run(stored, "pause", sleeper, "--as", "ops")
    assert paused.returncode == 0, paused.stderr
    # an interrupt goes first: the paused execution runs to its end, with the pause still asked
    interrupted = await run(stored, "interrupt", sleeper, "--as", "ops")
    assert interrupted.returncode == 0, interrupted.stderr
    await stored.client.run(desk.Job, sleeper, tenant="acme").result(timeout=30)

    resumed = await run(stored, "resume", sleeper, "--as", "ops")
    assert resumed.returncode == 1, resumed.stdout
    assert resumed.stdout == ""
    assert resumed.stderr == (
        "akter: not resumed acme/Desk/front Job 'sleeper': already finished (interrupted)\n"
    )
    assert await peek.rows(
        "SELECT status, paused_at, paused_by, pause_reason FROM actor_workflow_executions"
        " WHERE execution_id = %s",
        sleeper,
    ) == [("finished", None, None, None)]
    again = await run(stored, "pause", sleeper, "--as", "ops")
    assert again.returncode == 1
    assert "already finished (interrupted)" in again.stderr
    assert (
        await peek.value("SELECT paused_by FROM actor_workflow_executions WHERE execution_id = %s", sleeper)
        is None
    )


async def test_a_finished_execution_a_pause_was_asked_for_reads_as_not_paused(
    stored: Stored, peek: Peek
) -> None:
    """A row finished with the pause asked while it ran (left so by an older akter, or never
    resumed): every reading shows it finished, not paused."""
    done = stored.ids["done"]
    await peek.rows(
        "UPDATE actor_workflow_executions SET paused_at = akter_now(), paused_by = 'user:ops',"
        " pause_reason = 'drain' WHERE execution_id = %s RETURNING 1",
        done,
    )
    listed = json.loads((await run(stored, "list", "--key-prefix", "done", "--json")).stdout)
    [row] = listed["executions"]
    assert (row["status"], row["paused_at"], row["paused_by"], row["pause_reason"]) == (
        "finished",
        None,
        None,
        None,
    )
    shown = await run(stored, "show", done)
    assert "  paused " not in shown.stdout
    as_json = json.loads((await run(stored, "show", done, "--json")).stdout)
    assert (as_json["paused_by"], as_json["pause_reason"]) == (None, None)


# ---- filters the database cannot compare --------------------------------------------------------


def _in_process(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("--tenant", "ac\x00me", "tenant holds a NUL character (at 2), which no stored text can"),
        ("--workflow", "Desk.\x00", "workflow holds a NUL character (at 5), which no stored text can"),
        ("--key-prefix", "\udcff", "key_prefix is not valid UTF-8 at position 0"),
    ],
)
async def test_a_filter_postgresql_would_refuse_is_a_usage_error_naming_the_field(
    stored: Stored, option: str, value: str, reason: str
) -> None:
    for command in ("list", "counts", "interrupt"):
        done = await asyncio.to_thread(
            _in_process, "executions", command, APP, option, value, "--database-url", stored.url
        )
        assert done.exit_code == 2, (command, done.output)
        assert done.stdout == ""
        assert done.stderr.endswith(f"Error: {reason}\n"), (command, done.stderr)
    as_json = await asyncio.to_thread(
        _in_process, "executions", "list", APP, option, value, "--json", "--database-url", stored.url
    )
    assert as_json.exit_code == 2
    assert json.loads(as_json.stdout) == {"error": {"type": "UsageError", "message": reason, "exit_code": 2}}
    with pytest.raises(InvalidInput, match="NUL"):
        await stored.client.execution_page(tenant="ac\x00me")
    with pytest.raises(InvalidInput, match="NUL"):
        [r async for r in stored.client.executions(ExecutionFilter(key_prefix="\x00"))]


@pytest.fixture
def page(stored: Stored) -> Iterator[str]:
    """``akter ui`` as a user starts it, on a free port: its URL is the line it prints."""
    with serving_ui(APP, stored.url) as url:
        yield url


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_the_page_answers_400_with_the_reason_for_a_filter_the_database_would_refuse(
    page: str,
) -> None:
    cursor = "WyIyMDI2LTEyLTA0VDAwOjAwOjAwKzAwOjAwIiwgMSwgImFcdTAwMDBiIl0"  # an id holding a NUL
    for query, reason in [
        ("tenant=" + quote("ac\x00me"), "tenant holds a NUL character (at 2)"),
        ("workflow=" + quote("Desk.\x00"), "workflow holds a NUL character (at 5)"),
        ("key_prefix=" + quote("x" * 1025), "key_prefix is 1025 characters long"),
        ("after=" + cursor, "is not a cursor returned by a page of executions"),
    ]:
        status, body = await asyncio.to_thread(_get, page + "?" + query)
        assert status == 400, (query, body)
        assert reason in body, (query, body)
    status, body = await asyncio.to_thread(_get, page + "?tenant=acme")
    assert status == 200, body


# ---- the workflow's spelling --------------------------------------------------------------------


async def test_a_workflow_is_found_as_counts_spells_it_and_by_its_own_name(stored: Stored) -> None:
    counts = await run(stored, "counts")
    assert "Desk.Job  suspended  2" in counts.stdout.splitlines()
    for spelling in ("Desk.Job", "Job"):
        matched = await run(stored, "counts", "--workflow", spelling, "--status", "suspended")
        assert matched.returncode == 0, (spelling, matched.stderr)
        assert matched.stdout.splitlines() == ["Desk.Job  suspended  2", "total 2"]
    assert (await run(stored, "counts", "--workflow", "Other.Job")).returncode == 1
    assert (await run(stored, "counts", "--workflow", "Desk.Job", "--actor-type", "Other")).returncode == 1
    listed = await run(stored, "list", "--workflow", "Desk.Job", "--status", "suspended")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("2 executions, newest first\n")
    # a drain before a deploy finds what there is to drain
    paused = await run(stored, "pause", "--workflow", "Desk.Job", "--as", "ops")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.splitlines()[-1] == "paused 2 of 2 matching executions"
    assert [c.count for c in await stored.client.execution_counts(workflow="Desk.Job", status="paused")] == [
        2
    ]


# ---- an action by filter goes on -----------------------------------------------------------------


@pytest.fixture
async def mixed(stored: Stored) -> tuple[Stored, str]:
    """The desk's executions, and a newer one in the same tenant of another App (flows) that
    shares the database: started, and left to a relay of its own App that is not running."""
    async with flows.make_app(stored.url).client() as client:
        far = await client.actor(flows.Flows, "far", tenant="acme").start(
            flows.Racing, flows.Job("far", seconds=600)
        )
    return stored, far.execution_id


async def test_an_action_by_filter_goes_on_past_what_it_cannot_act_on_and_sums_up(
    mixed: tuple[Stored, str], peek: Peek
) -> None:
    stored, foreign = mixed
    done = await run(stored, "pause", "--tenant", "acme", "--as", "ops")
    assert done.returncode == 1, done.stderr
    out = done.stdout.splitlines()
    assert sorted(out[:-1]) == [
        "paused acme/Desk/front Job 'sleeper': paused now",
        "paused acme/Desk/front Job 'waiter': paused now",
    ]
    assert out[-1] == "paused 2 of 3 matching executions; 1 not (see above)"
    [refusal] = done.stderr.splitlines()
    assert refusal.startswith("akter: not paused acme/Flows/far Racing ")
    assert refusal.endswith(
        f": refused: this App declares no workflow Flows.Racing, so it cannot act on {foreign}"
    )
    assert await peek.rows(
        "SELECT actor_id, paused_by FROM actor_workflow_executions"
        " WHERE tenant = 'acme' AND status <> 'finished' ORDER BY actor_id, key"
    ) == [("far", None), ("front", "user:ops"), ("front", "user:ops")]

    resumed = await run(stored, "resume", "--tenant", "acme", "--as", "ops", "--json")
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["summary"] == {"done": 2, "refused": 0}
    assert sorted(a["message"] for a in report["acted"]) == ["goes on now", "goes on now"]
    interrupted = await run(stored, "interrupt", "--tenant", "acme", "--as", "ops", "--json")
    assert interrupted.returncode == 1
    report = json.loads(interrupted.stdout)
    assert report["summary"] == {"done": 2, "refused": 1}
    [refused] = [a for a in report["acted"] if not a["done"]]
    assert refused["execution_id"] == foreign
    assert refused["error"]["type"] == "InvalidExecutionId"


# ---- JSON ---------------------------------------------------------------------------------------


async def test_json_carries_absolute_times_so_two_reads_of_an_unchanged_execution_agree(
    stored: Stored,
) -> None:
    sleeper = stored.ids["sleeper"]
    for args in (("list", "--key-prefix", "sleeper", "--json"), ("show", sleeper, "--json")):
        first, second = [await run(stored, *args) for _ in range(2)]
        assert first.returncode == 0, first.stderr
        assert first.stdout == second.stdout, args
        assert "(in " not in first.stdout
        assert " ago)" not in first.stdout
    listed = await run(stored, "list", "--key-prefix", "sleeper", "--json")
    [row] = json.loads(listed.stdout)["executions"]
    assert row["waiting"].startswith("sleeping until 20")
    assert row["waiting"].endswith("Z (nap#1)")
    # text is for people: there, how far away it is
    assert "(in 23h" in (await run(stored, "list", "--key-prefix", "sleeper")).stdout
    inspected = [
        await akter_in_process("inspect", "execution", APP, sleeper, "--json", "--database-url", stored.url)
        for _ in range(2)
    ]
    assert inspected[0].returncode == 0, inspected[0].stderr
    assert inspected[0].stdout == inspected[1].stdout


async def test_errors_under_json_are_json(stored: Stored) -> None:
    gone = str(ExecutionId(ActorRef("acme", "Desk", "front"), "Job", "nobody"))
    missing = await run(stored, "show", gone, "--json")
    assert missing.returncode == 1
    error = json.loads(missing.stdout)["error"]
    assert (error["type"], error["exit_code"]) == ("NotFound", 1)
    assert error["message"].startswith(f"no execution {gone} is stored")
    usage = await run(stored, "list", "--status", "stuck", "--json")
    assert usage.returncode == 2
    error = json.loads(usage.stdout)["error"]
    assert (error["type"], error["exit_code"]) == ("UsageError", 2)
    assert "'stuck' is not one of" in error["message"]
    bad_app = await run(stored, "list", "--json", app="tests.apps.nowhere:app")
    assert bad_app.returncode == 2
    assert json.loads(bad_app.stdout)["error"]["type"] == "ConfigurationError"
    inspected = await akter_in_process(
        "inspect", "execution", APP, gone, "--json", "--database-url", stored.url
    )
    assert inspected.returncode == 1
    assert json.loads(inspected.stdout)["error"]["type"] == "NotFound"


# ---- exports ------------------------------------------------------------------------------------


async def test_two_exports_of_the_same_history_are_the_same_file(stored: Stored, tmp_path: Path) -> None:
    ids = list(stored.ids.values())
    first, second = tmp_path / "a.history.json", tmp_path / "b.history.json"
    await testing.export_history(stored.url, first, ids)
    await testing.export_history(stored.url, second, ids)
    text = first.read_text(encoding="utf-8")
    assert text == second.read_text(encoding="utf-8")
    assert "exported_at" not in text
    testing.replay_history(desk.app, first).assert_replays()
    # a file written before still loads, with its export time as the clock
    older = json.loads(text) | {"exported_at_ms": 1796130080987}
    (tmp_path / "old.history.json").write_text(json.dumps(older), encoding="utf-8")
    loaded = testing.load_history(tmp_path / "old.history.json")
    assert loaded.clock_ms == 1796130080987
    testing.replay_history(desk.app, loaded).assert_replays()
