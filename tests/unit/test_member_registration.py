"""A workflow member adds its commands to its actor however it was declared, and whatever module
the user imported first: ``akter.Actor`` registers them when the ``Workflow`` is built
(``akter.workflow.api.actor``), so the declarations never import the commands."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import attrs

import akter
from akter.workflow.api.commands import START_CHILD

MEMBER_COMMANDS = (
    "Ship",
    "akter.wf.interrupt:Ship",
    "akter.wf.retry:Ship",
    "akter.wf.deadline:Ship",
    "akter.wf.start:Ship",
    "akter.wf.pause:Ship",
    "akter.wf.unpause:Ship",
    "akter.wf.resolve:Ship",
    "akter.wf.resume",
    START_CHILD,
)


@attrs.frozen
class Order:
    n: int = 0


def test_a_workflow_built_directly_registers_its_commands() -> None:
    shop = akter.Actor("Shop", state=Order)
    built = akter.Workflow(shop, "Ship", input=Order)
    declared = shop.workflow("Ship2", input=Order)
    assert set(MEMBER_COMMANDS) <= set(shop.commands)
    assert shop.workflows == {"Ship": built, "Ship2": declared}
    assert built.start_command is shop.commands["Ship"]
    assert built.interrupt_command is shop.commands["akter.wf.interrupt:Ship"]
    assert declared.resolve_command is shop.commands["akter.wf.resolve:Ship2"]


def test_the_commands_are_registered_whatever_module_is_imported_first() -> None:
    # a fresh interpreter that imports the declarations module before anything else names
    script = textwrap.dedent(
        """
        from akter.workflow.api.declare import Workflow
        import attrs
        from akter.workflow.api.actor import Actor

        @attrs.frozen
        class Order:
            n: int = 0

        shop = Actor("Shop", state=Order)
        Workflow(shop, "Ship", input=Order)
        print(" ".join(sorted(shop.commands)))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert set(MEMBER_COMMANDS) <= set(out.stdout.split())
