"""The ``akter`` command: one click group, one subcommand per operational task.

``akter migrate`` applies the schema (``akter.store.migrate``); ``akter relay APP`` runs the relay
process (``akter.outbox.relay``) for an ``akter.App`` named ``module:attribute``, imported from
the current directory first (``akter.cli.support.load_app``). Each subcommand reads its settings
from flags first, then ``AKTER_*`` environment variables. Exit codes mean the same for every
subcommand::

    0    done (the relay drained after SIGTERM or SIGINT; the check found the deploy compatible)
    1    the command's answer is no: ``workflows check`` refused, ``inspect`` found nothing,
         ``relay`` refused to start or stopped on a failure in one of its loops (the log says where)
    2    usage, configuration, input or database errors (bad flags, APP not found, a malformed
         id, no usable database, schema too new), as one ``akter: <message>`` line on stderr or
         click's usage message — nothing was done
    3    akter itself failed (a bug): its traceback, then an ``akter: internal error`` line
    130  interrupted (Ctrl-C) before it finished

``akter workflows check APP`` is the deploy check (``akter.workflow.tools.check``): 0 compatible, 1
refused, 2 usage or database errors. ``akter relay`` runs the same check before it starts and
exits 1 with the same report when it refuses (an App whose actor types would misread stored
data is refused as its runtime opens, with that report too).

``akter outbox retry|delete ID`` (``akter.outbox.admin``) acts on intents the relay parked as
undeliverable; ``akter inspect parked`` lists them.

Logs go to stderr as ``time level logger message key=value ...`` lines, or as one JSON object a
line with ``akter relay --log-format json`` or ``AKTER_LOG_FORMAT=json`` (``akter.logs``).

The package holds commands only, one module per subcommand (``migrate``, ``relay``,
``workflows``, ``inspect``, ``outbox``, ``demo``), each imported only when its subcommand runs
(``akter.cli.lazy``): ``akter migrate`` imports neither the relay nor the demo app. What they
share about their input and failures is ``akter.cli.support``. No other akter module imports
this package (an import contract in ``pyproject.toml``).
"""

from __future__ import annotations

import traceback
from typing import Any

import click

from akter import logs
from akter.cli.lazy import Lazy, LazyGroup
from akter.cli.support import (
    EXIT_FAILURE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    fail,
    fail_with,
    load_app,
)
from akter.errors import ConfigurationError

__all__ = ["EXIT_FAILURE", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "load_app", "main"]

#: the subcommands, imported when invoked; the help is each command's first docstring line
COMMANDS = {
    "demo": Lazy(
        "akter.cli.demo:demo_command", "Run a small order workflow end to end and narrate what akter stores."
    ),
    "executions": Lazy(
        "akter.cli.executions:executions_group",
        "Find workflow executions across actors, show one as a timeline, act on them.",
    ),
    "inspect": Lazy(
        "akter.cli.inspect:inspect_group",
        "Read-only views of stored actors and executions, decoded with APP's declarations.",
    ),
    "migrate": Lazy(
        "akter.cli.migrate:migrate",
        "Apply akter's schema migrations to the database (also done when an App starts).",
    ),
    "outbox": Lazy(
        "akter.cli.outbox:outbox_group",
        "Operate on parked outbox intents (list them with `akter inspect parked`).",
    ),
    "relay": Lazy(
        "akter.cli.relay:relay",
        "Run the relay for APP (module:attribute naming an akter.App) until SIGTERM or SIGINT.",
    ),
    "schedules": Lazy(
        "akter.cli.schedules:schedules_group",
        "An App's schedules: when they fire next, when they fired last; change them at run time.",
    ),
    "ui": Lazy("akter.cli.ui:ui_command", "Serve a read-only inspector page of APP's executions and actors."),
    "workflows": Lazy("akter.cli.workflows:workflows", "Workflow tools: the deploy check, the replay check."),
}


def _setup_logging(level: str) -> None:
    try:
        logs.configure(level)  # the format from AKTER_LOG_FORMAT, text by default
    except ConfigurationError as exc:
        fail_with(exc)
    # akter's loops log every retry themselves, with fields; stamina's own "retry_scheduled"
    # record would say it twice. The process is the CLI's own, so the process-wide setting is ours.
    import stamina.instrumentation

    stamina.instrumentation.set_on_retry_hooks([])


class _Akter(LazyGroup):
    """The ``akter`` group. A crash of akter itself exits 3 with its traceback and Ctrl-C exits
    130, so that neither reads as a command's answer: 1 is ``workflows check`` refusing a
    deploy, and a deploy script must not take a bug for a refusal."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # click's own: usage errors exit 2 with click's message
        except KeyboardInterrupt:
            fail("interrupted", EXIT_INTERRUPTED)
        except BrokenPipeError:
            raise  # stdout's reader left (``| head``): click exits quietly
        except Exception as exc:
            traceback.print_exc()
            summary = traceback.format_exception_only(type(exc), exc)[-1].strip()
            fail(f"internal error: {summary} (a bug in akter; the traceback above says where)", EXIT_INTERNAL)


@click.group(
    cls=_Akter,
    lazy=COMMANDS,
    epilog="Exit codes: 0 done, 1 the answer is no (check refused, inspect found nothing, relay "
    "failed), 2 usage/configuration/input/database error, 3 akter crashed (a bug), 130 interrupted.",
)
@click.option(
    "--log-level",
    envvar="AKTER_LOG_LEVEL",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    help="Log level (AKTER_LOG_LEVEL).",
)
def main(log_level: str) -> None:
    """akter: durable workflows as members of actors, stored in PostgreSQL."""
    _setup_logging(log_level)
