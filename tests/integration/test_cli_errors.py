"""How the ``akter`` command fails: every usage, configuration, input or database error is one
``akter: <message>`` line on stderr and exit 2, never a traceback, on every subcommand; an
``APP`` module is imported from the current directory; a crash of akter itself is exit 3.

Each case runs the real command in its own process (``python -m akter``, or the console script
where how ``sys.path`` starts matters), from a temporary directory holding the user's modules,
with ``PYTHONPATH`` and ``AKTER_DATABASE_URL`` unset unless the case sets them. The good App is
``akter.demo:app``, which needs nothing on the path.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from akter.ids import ActorRef, ExecutionId

APP = "akter.demo:app"
EID = str(ExecutionId(ActorRef("demo", "DemoShop", "shop-1"), "Fulfil", "order-1"))
NOWHERE = "postgresql://nobody:hunter2@127.0.0.1:1/none"
#: a URL whose database name holds the byte 0xff, as a shell passes it
NOT_UTF8 = b"postgresql://postgres@127.0.0.1:1/db\xff"

pytestmark = pytest.mark.slow


def akter(
    *args: str | bytes,
    cwd: Path,
    env: Mapping[str, str | bytes] | None = None,
    script: Sequence[str] = (sys.executable, "-m", "akter"),
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "AKTER_DATABASE_URL"}}
    return subprocess.run(
        [*script, *args],
        cwd=cwd,
        env={**clean, "AKTER_LOG_LEVEL": "warning", **(env or {})},
        capture_output=True,
        text=True,
        errors="backslashreplace",
        timeout=60,
        check=False,
    )


def console_script() -> list[str]:
    found = Path(sys.executable).with_name("akter")
    if not found.exists():
        which = shutil.which("akter")
        if which is None:
            pytest.skip("the akter console script is not installed beside this Python (pip install -e .)")
        found = Path(which)
    return [str(found)]


def akter_all(
    cases: Mapping[str, Sequence[str | bytes]], *, cwd: Path, env: Mapping[str, str | bytes] | None = None
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Each case's command, run side by side (each is a process waiting mostly on its imports)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        running = {name: pool.submit(akter, *args, cwd=cwd, env=env) for name, args in cases.items()}
        return {name: done.result() for name, done in running.items()}


def said(done: subprocess.CompletedProcess[str]) -> str:
    """The message of a usage error — exit 2, nothing on stdout, one ``akter:`` line on stderr —
    or what the process did instead, so that comparing many shows every difference at once."""
    one_line = done.stderr.startswith("akter: ") and done.stderr.count("\n") == 1
    if done.returncode == 2 and done.stdout == "" and one_line:
        return done.stderr.removeprefix("akter: ").removesuffix("\n")
    return f"<exit {done.returncode}, stdout {done.stdout!r}, stderr {done.stderr!r}>"


#: the commands that take an APP, with arguments that would be fine
APP_COMMANDS = {
    "workflows check": ("workflows", "check", "{app}"),
    "inspect actor": ("inspect", "actor", "{app}", "demo", "DemoShop", "shop-1"),
    "inspect execution": ("inspect", "execution", "{app}", EID),
    "relay": ("relay", "{app}"),
}


def with_app(command: str, app: str, *more: str) -> list[str]:
    return [arg.format(app=app) for arg in APP_COMMANDS[command]] + list(more)


# ---- APP ---------------------------------------------------------------------------------------

BAD_APPS = {
    ".relative:app": "APP must name its module absolutely, like myapp.main:app, "
    "from the current directory: got '.relative:app'",
    "myapp/main.py:app": "APP names a module, not a file: write myapp.main:app",
    "no_such_module_h4:app": "cannot import 'no_such_module_h4': no module 'no_such_module_h4' "
    "in the current directory or on sys.path",
    "akter.demo:nothing": "'akter.demo' has no attribute 'nothing'",
    "akter.demo:DemoShop": "akter.demo:DemoShop is not an akter.App (it is an akter.Actor)",
    "akter.demo:make_app": "akter.demo:make_app is not an akter.App (it is a function)",
    "akter.demo": "APP must be module:attribute naming an akter.App, like myapp.main:app: got 'akter.demo'",
    "a..b:app": "'a..b' is not a module name (APP is module:attribute, like myapp.main:app)",
}


def test_a_bad_app_is_a_usage_error(tmp_path: Path) -> None:
    cases = {app: with_app("workflows check", app, "--database-url", NOWHERE) for app in BAD_APPS}
    assert {app: said(done) for app, done in akter_all(cases, cwd=tmp_path).items()} == BAD_APPS


def test_every_app_argument_fails_the_same_way(tmp_path: Path) -> None:
    cases = {name: with_app(name, ".relative:app", "--database-url", NOWHERE) for name in APP_COMMANDS}
    seen = {command: said(done) for command, done in akter_all(cases, cwd=tmp_path).items()}
    assert seen == dict.fromkeys(APP_COMMANDS, BAD_APPS[".relative:app"])


def test_a_module_that_fails_to_import_shows_its_own_traceback_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "boom.py").write_text("import akter\n\n\nraise RuntimeError('no config file')\n")
    done = akter("workflows", "check", "boom:app", "--database-url", NOWHERE, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    *trace, last = done.stderr.splitlines()
    assert last == "akter: importing 'boom' failed: RuntimeError: no config file"
    # the user's own frame, and none of akter's machinery or importlib's
    assert f'File "{tmp_path / "boom.py"}", line 4, in <module>' in done.stderr
    assert not [line for line in trace if "akter/" in line or "importlib" in line or "click" in line]

    (tmp_path / "typo.py").write_text("app = (\n")
    typo = akter("inspect", "actor", "typo:app", "t", "T", "i", cwd=tmp_path)
    assert typo.returncode == 2, typo.stderr
    assert typo.stderr.splitlines()[-1].startswith("akter: importing 'typo' failed: SyntaxError: ")
    assert "typo.py" in typo.stderr

    # exit 0 would read as "compatible: deploy"
    (tmp_path / "quits.py").write_text("import sys\n\nsys.exit(0)\n")
    quits = akter("workflows", "check", "quits:app", "--database-url", NOWHERE, cwd=tmp_path)
    assert quits.returncode == 2, quits.stderr
    assert quits.stderr.splitlines()[-1] == "akter: importing 'quits' failed: it called sys.exit(0)"
    assert f'File "{tmp_path / "quits.py"}", line 3, in <module>' in quits.stderr

    (tmp_path / "needs.py").write_text("import no_such_dependency_h4\n")
    needs = akter("relay", "needs:app", "--database-url", NOWHERE, cwd=tmp_path)
    assert needs.returncode == 2, needs.stderr
    assert needs.stderr.splitlines()[-1] == (
        "akter: importing 'needs' failed: ModuleNotFoundError: No module named 'no_such_dependency_h4'"
    )


def test_a_module_with_a_bad_declaration_lists_the_problems(tmp_path: Path) -> None:
    (tmp_path / "twice.py").write_text(
        "import attrs, akter\n"
        "@attrs.frozen\nclass S:\n    n: int = 0\n"
        "app = akter.App([akter.Actor('A', state=S), akter.Actor('A', state=S)])\n"
    )
    cases = {name: with_app(name, "twice:app", "--database-url", NOWHERE) for name in APP_COMMANDS}
    seen = {name: (done.returncode, done.stderr) for name, done in akter_all(cases, cwd=tmp_path).items()}
    problems = "App is not a valid declaration:\n  - two actor types are named 'A'\n"
    assert seen == dict.fromkeys(APP_COMMANDS, (2, f"akter: importing 'twice' failed: {problems}"))


def test_app_is_imported_from_the_current_directory(tmp_path: Path, database_url: str) -> None:
    """As uvicorn and celery do: ``akter relay myapp:app`` from the project directory, with no
    PYTHONPATH, through the console script (whose sys.path does not start with the directory)."""
    (tmp_path / "cwd_app_h4.py").write_text("import akter\n\napp = akter.App([])\n")
    check = akter(
        "workflows", "check", "cwd_app_h4:app", "--database-url", database_url,
        cwd=tmp_path, script=console_script(),
    )  # fmt: skip
    assert (check.returncode, check.stderr) == (0, "")
    assert check.stdout.startswith("compatible: 0 open executions")

    clean = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "AKTER_DATABASE_URL"}}
    with subprocess.Popen(
        [*console_script(), "relay", "cwd_app_h4:app", "--database-url", database_url],
        cwd=tmp_path, env={**clean, "AKTER_LOG_LEVEL": "info"}, stderr=subprocess.PIPE, text=True,
    ) as relay:  # fmt: skip
        assert relay.stderr is not None
        seen = []
        for line in relay.stderr:
            seen.append(line)
            if "relay starting" in line:
                break
        else:
            pytest.fail(f"the relay did not start:\n{''.join(seen)}")
        relay.send_signal(signal.SIGTERM)
        assert relay.wait(timeout=30) == 0, "".join(seen) + relay.stderr.read()


# ---- database URLs -----------------------------------------------------------------------------

#: every command that takes --database-url, with arguments that would be fine
URL_COMMANDS = {
    **{name: with_app(name, APP) for name in APP_COMMANDS},
    "migrate": ["migrate"],
    "demo": ["demo"],
}


def test_a_database_url_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    flags = {command: [*args, "--database-url", NOT_UTF8] for command, args in URL_COMMANDS.items()}
    seen = {command: said(done) for command, done in akter_all(flags, cwd=tmp_path).items()}
    assert seen == dict.fromkeys(URL_COMMANDS, "--database-url is not valid UTF-8: byte 0xff at position 36")

    # inspect reads the variable as check does; migrate and demo read it as their flag's default
    readers = {command: URL_COMMANDS[command] for command in ("workflows check", "relay", "migrate", "demo")}
    env = akter_all(readers, cwd=tmp_path, env={"AKTER_DATABASE_URL": NOT_UTF8})
    assert {command: said(done) for command, done in env.items()} == dict.fromkeys(
        readers, "AKTER_DATABASE_URL is not valid UTF-8: byte 0xff at position 36"
    )


def test_a_database_url_that_does_not_parse_is_a_usage_error_without_its_password(tmp_path: Path) -> None:
    bad = "postgresql://u:hunter2@[::1"
    commands = ["workflows check", "inspect actor", "relay", "migrate"]
    flags = {command: [*URL_COMMANDS[command], "--database-url", bad] for command in commands}
    seen = {command: said(done) for command, done in akter_all(flags, cwd=tmp_path).items()}
    reason = 'end of string reached when looking for matching "]" in IPv6 host address in URI: '
    expected = f'--database-url is not a PostgreSQL URL: {reason}"postgresql://u:***@[::1"'
    assert seen == dict.fromkeys(commands, expected)
    env = akter("inspect", "actor", APP, "t", "T", "i", cwd=tmp_path, env={"AKTER_DATABASE_URL": "nota url"})
    assert said(env).startswith("AKTER_DATABASE_URL is not a PostgreSQL URL: ")


def test_an_unreachable_database_is_a_usage_error(tmp_path: Path) -> None:
    commands = ["workflows check", "inspect actor", "inspect execution", "migrate"]
    cases = {command: [*URL_COMMANDS[command], "--database-url", NOWHERE] for command in commands}
    shown = "postgresql://nobody:***@127.0.0.1:1/none"  # the password hidden
    reason = 'connection to server at "127.0.0.1", port 1 failed: Connection refused'
    for command, done in akter_all(cases, cwd=tmp_path).items():
        message = said(done)
        assert message.startswith(f"cannot connect to the database at {shown}: {reason}"), (command, message)


def test_a_database_without_the_schema_is_a_usage_error(tmp_path: Path, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP TABLE actor_workflow_step, actor_workflow_executions CASCADE")
    commands = ["workflows check", "inspect execution"]
    cases = {command: [*URL_COMMANDS[command], "--database-url", database_url] for command in commands}
    seen = {command: said(done) for command, done in akter_all(cases, cwd=tmp_path).items()}
    assert seen == dict.fromkeys(
        commands, "the database has no akter schema (run `akter migrate`, or check the URL)"
    )


# ---- ids ---------------------------------------------------------------------------------------


def raw_execution_id(parts: str) -> str:
    """An execution id around ``parts`` (JSON text, escapes kept): what a hand-made id holds."""
    return "x1." + base64.urlsafe_b64encode(parts.encode()).decode().rstrip("=")


#: hand-made ids whose workflow name, or key, is a lone surrogate (no UTF-8 form)
SURROGATE_WORKFLOW = raw_execution_id('["demo","DemoShop","s","\\ud800","k"]')
SURROGATE_KEY = raw_execution_id('["demo","DemoShop","s","Fulfil","\\ud800"]')

BAD_EXECUTION_IDS = {
    "garbage": "'garbage' is not an akter execution id (x1.<base64>)",
    "x1.abc": "'x1.abc' is not a well-formed execution id",
    "x1." + "A" * 2000: "an execution id is at most 1024 characters",
    SURROGATE_WORKFLOW: f"{SURROGATE_WORKFLOW!r} names an invalid execution: "
    "workflow name '\\ud800' is not valid UTF-8",
    SURROGATE_KEY: f"{SURROGATE_KEY!r} names an invalid execution: workflow key '\\ud800' is not valid UTF-8",
}


def test_a_malformed_execution_id_is_a_usage_error(tmp_path: Path) -> None:
    cases = {eid: ["inspect", "execution", APP, eid, "--database-url", NOWHERE] for eid in BAD_EXECUTION_IDS}
    assert {eid: said(done) for eid, done in akter_all(cases, cwd=tmp_path).items()} == BAD_EXECUTION_IDS


def test_a_non_utf8_byte_in_an_id_or_a_name_is_a_usage_error(tmp_path: Path) -> None:
    cases: dict[str, list[str | bytes]] = {
        "execution id": ["inspect", "execution", APP, b"x1.\xff", "--database-url", NOWHERE],
        "actor id": ["inspect", "actor", APP, "demo", "DemoShop", b"s\xff"],
        "empty tenant": ["inspect", "actor", APP, "", "DemoShop", "s"],
    }
    assert {case: said(done) for case, done in akter_all(cases, cwd=tmp_path).items()} == {
        "execution id": "'x1.\\udcff' is not a well-formed execution id",
        "actor id": "actor id 's\\udcff' is not valid UTF-8",
        "empty tenant": "tenant must not be empty",
    }


# ---- click's own errors, crashes, interrupts -------------------------------------------------


def test_a_bad_flag_is_clicks_usage_error_with_exit_2(tmp_path: Path) -> None:
    cases = {
        "no APP": ["workflows", "check"],
        "bad value": ["relay", APP, "--concurrency", "0"],
        "no such command": ["nosuch"],
        # past PostgreSQL's bigint: refused before any query runs
        "limit too large": [
            "inspect",
            "actor",
            APP,
            "t",
            "T",
            "i",
            "--limit",
            str(2**63),
            "--database-url",
            NOWHERE,
        ],
    }
    for case, done in akter_all(cases, cwd=tmp_path).items():
        assert done.returncode == 2, (case, done.stderr)
        assert done.stderr.startswith("Usage: akter "), (case, done.stderr)
        assert "\nError: " in done.stderr
        assert "Traceback" not in done.stderr


CRASHING = """
import sys
import akter.workflow.tools.check as check

async def broken(*args, **kwargs):
    raise {error}

check.check = broken
from akter.cli import main
main(prog_name="akter")
"""


def test_a_crash_is_exit_3_not_a_refusal(tmp_path: Path, database_url: str) -> None:
    """``workflows check`` exits 1 only when it refuses: a bug in akter is 3, with its traceback."""
    script = (sys.executable, "-c", CRASHING.format(error="RuntimeError('an akter bug')"))
    done = akter("workflows", "check", APP, "--database-url", database_url, cwd=tmp_path, script=script)
    assert done.returncode == 3, done.stderr
    assert "Traceback (most recent call last):" in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "akter: internal error: RuntimeError: an akter bug (a bug in akter; the traceback above says where)"
    )


def test_an_interrupt_is_exit_130_not_a_refusal(tmp_path: Path, database_url: str) -> None:
    script = (sys.executable, "-c", CRASHING.format(error="KeyboardInterrupt"))
    done = akter("workflows", "check", APP, "--database-url", database_url, cwd=tmp_path, script=script)
    assert (done.returncode, done.stderr) == (130, "akter: interrupted\n")


def test_a_closed_pipe_is_not_a_crash(tmp_path: Path, database_url: str) -> None:
    """``akter inspect ... | head -1``: the reader left, so nothing is printed (click's handling)."""
    script = (sys.executable, "-c", CRASHING.format(error="BrokenPipeError(32, 'Broken pipe')"))
    done = akter("workflows", "check", APP, "--database-url", database_url, cwd=tmp_path, script=script)
    assert (done.returncode, done.stderr) == (1, "")
