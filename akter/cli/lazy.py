"""A click group whose subcommands are imported only when one of them is invoked.

``akter migrate`` must not import the relay, the workflow runner or the demo app: each
subcommand is named here by ``module:attribute`` with its one-line help, and its module is
imported by ``get_command`` (click's "lazily loading subcommands" pattern). ``akter --help``
lists the commands from the help kept here, so it imports none of them either;
``tests/integration/test_cli_lazy.py`` pins that each line matches its command's own help.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import attrs
import click


@attrs.frozen
class Lazy:
    """A subcommand not imported yet: where it lives and what ``--help`` says of it."""

    target: str  # module:attribute
    short_help: str

    def load(self) -> click.Command:
        module_name, _, attribute = self.target.partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):  # pragma: no cover - a wrong table is a bug
            raise TypeError(f"{self.target} is not a click command")
        return command


class LazyGroup(click.Group):
    """A group of ``Lazy`` subcommands (``lazy``) beside any added eagerly."""

    def __init__(self, *args: Any, lazy: Mapping[str, Lazy], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            self.add_command(self.lazy[cmd_name].load(), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, from the help kept in ``lazy``: nothing is imported."""
        rows: list[tuple[str, str]] = []
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        for name in self.list_commands(ctx):
            if name in self.commands:
                command = self.commands[name]
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                # shortened as click shortens a command's own help
                stand_in = click.Command(name, help=self.lazy[name].short_help)
                rows.append((name, stand_in.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
