"""``akter`` imports only what the invoked subcommand needs.

Each case runs the real command in a fresh interpreter: a ``python -c`` wrapper calls the cli's
``main`` as the console script does, then prints which akter modules the process imported.
``akter migrate`` and ``akter --help`` must load neither the demo app, nor the workflow runner,
nor the relay; ``akter demo`` and ``akter relay`` (``test_demo.py``, ``test_relay_processes.py``)
still load what they run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click
import pytest

from akter.cli import COMMANDS, main

#: runs ``akter ARGS...`` in this process, then prints the akter modules it imported
WRAPPER = """
import json, sys
from akter.cli import main
try:
    main(sys.argv[1:], prog_name="akter")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted(m for m in sys.modules if m.startswith("akter"))}))
"""

#: what only a relay, a workflow engine or the demo needs
HEAVY = {
    "akter.demo",
    "akter.workflow.engine.passes",
    "akter.workflow.engine.runner",
    "akter.outbox.relay",
    "akter.app",
}


def imported_by(*args: str, env: dict[str, str] | None = None) -> tuple[int, set[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args],
        env={**os.environ, "AKTER_LOG_LEVEL": "warning", **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    last = json.loads(done.stdout.splitlines()[-1])
    return last["code"], set(last["modules"]), done.stdout


def test_migrate_imports_no_relay_no_workflow_engine_and_no_demo(database_url: str) -> None:
    code, modules, stdout = imported_by("migrate", "--database-url", database_url)
    assert code == 0, stdout
    assert stdout.startswith("migrated "), stdout
    assert "akter.store.migrate" in modules  # it did run
    assert modules & HEAVY == set()


def test_help_imports_no_subcommand() -> None:
    code, modules, stdout = imported_by("--help")
    assert code == 0
    for name in COMMANDS:
        assert f"\n  {name} " in stdout, name
    assert modules & HEAVY == set()
    assert {m for m in modules if m.startswith("akter.cli.")} == {"akter.cli.lazy", "akter.cli.support"}


def test_a_subcommand_imports_its_module_when_invoked() -> None:
    code, modules, _ = imported_by("demo", "--help")
    assert code == 0
    assert {"akter.cli.demo", "akter.demo"} <= modules
    assert "akter.cli.relay" not in modules


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_help_line_kept_for_a_subcommand_is_its_own(name: str) -> None:
    """``akter --help`` lists the help kept in ``COMMANDS``: it must say what the command says."""
    ctx = click.Context(main)
    command = main.get_command(ctx, name)
    assert command is not None
    assert COMMANDS[name].short_help == command.get_short_help_str(limit=10**6)
