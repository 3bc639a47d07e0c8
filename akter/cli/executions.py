"""``akter executions``: find executions, show one as a timeline, act on them.

The commands print what ``akter.operate`` returns. ``list``, ``counts`` and ``show`` only read,
through a read-only connection (``akter.inspect``), one snapshot each. ``interrupt``,
``retry``, ``pause``, ``resume`` and ``resolve`` start APP's engine and send the workflow
member's commands as the operator — a ``User`` named by ``--as`` (``AKTER_OPERATOR``, else the
login name) — so the actors' access policies decide, and the executions record who asked.

Acting on what filters match goes on past an execution it cannot act on (another App's
workflow in the same database, a refusal, a busy actor, a database error on its turn): each
execution's outcome is printed as it comes, then a summary; the exit code is 1 when any was
refused or had nothing to do.

``--json`` prints one document whose times are absolute (ISO 8601 UTC, never "in 5m"), so two
reads of an unchanged execution print the same; a failure under ``--json`` is the document
``{"error": {"type", "message", "exit_code"}}`` on stdout (``support.fail``).

Exit codes: 0 done (or shown), 1 nothing matched, no such execution, or an action refused,
2 usage, configuration or database errors.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn, TypeVar

import click
import psycopg
import psycopg_pool

from akter.callers import Caller, User
from akter.cli import support as cli_support
from akter.cli.inspect import database_option, json_option, load_app_url, parse_execution_id, read_view
from akter.cli.support import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from akter.errors import AkterError, ConfigurationError, InvalidInput
from akter.inspect.decode import one_line
from akter.inspect.render import jsonable, when
from akter.operate.actions import Acted
from akter.operate.parked import parked_of_execution
from akter.operate.query import (
    DEFAULT_PAGE,
    MAX_PAGE,
    OUTCOMES,
    STATUSES,
    Count,
    ExecutionFilter,
    Page,
    read_counts,
    read_page,
)
from akter.operate.timeline import read_timeline, render_timeline, timeline_json

T = TypeVar("T")


def _fail(message: str, code: int = EXIT_USAGE, *, kind: str | None = None) -> NoReturn:
    cli_support.fail(message, code, kind=kind)


class _Moment(click.ParamType[datetime]):
    """An ISO-8601 time; without a zone, UTC."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            self.fail(f"{value!r} is not an ISO-8601 time (like 2026-12-01T09:30:00Z)", param, ctx)
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


_FILTERS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option("--tenant", help="Only this tenant's executions."),
    click.option("--actor-type", help="Only executions owned by actors of this type."),
    click.option("--actor-id", help="Only executions of this actor (with --tenant and --actor-type)."),
    click.option(
        "--workflow",
        help="Only executions of this workflow member: Workflow, or ActorType.Workflow as counts prints it.",
    ),
    click.option(
        "--status",
        "statuses",
        multiple=True,
        type=click.Choice(STATUSES),
        help="Only executions with this status (repeat for any of several).",
    ),
    click.option(
        "--outcome",
        "outcomes",
        multiple=True,
        type=click.Choice(OUTCOMES),
        help="Only finished executions with this outcome (repeat for any of several).",
    ),
    click.option(
        "--started-after", type=_Moment(), help="Started after this time (ISO-8601; UTC without a zone)."
    ),
    click.option("--started-before", type=_Moment(), help="Started before this time."),
    click.option("--finished-after", type=_Moment(), help="Finished after this time."),
    click.option("--finished-before", type=_Moment(), help="Finished before this time."),
    click.option("--key-prefix", help="Only executions whose workflow key starts with this."),
]


def _filter_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_FILTERS):
        command = option(command)
    return command


_FILTER_NAMES = (
    "tenant",
    "actor_type",
    "actor_id",
    "workflow",
    "statuses",
    "outcomes",
    "started_after",
    "started_before",
    "finished_after",
    "finished_before",
    "key_prefix",
)


def _filter(options: dict[str, Any]) -> ExecutionFilter | None:
    """The filter the options give, or ``None`` when they give none; their names are taken out of
    ``options``."""
    given = {name: options.pop(name) for name in _FILTER_NAMES}
    given["status"], given["outcome"] = given.pop("statuses"), given.pop("outcomes")
    if not any(given.values()):
        return None
    try:
        return ExecutionFilter(**given)
    except InvalidInput as exc:
        raise click.UsageError(one_line(exc)) from exc


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(jsonable(data), indent=2, sort_keys=True))


@click.group(
    "executions",
    cls=cli_support.JsonGroup,
    epilog="Exit codes: 0 done, 1 nothing matched / no such execution / refused, "
    "2 usage/configuration/database error.",
)
def executions_group() -> None:
    """Find workflow executions across actors, show one as a timeline, act on them.

    Acting on them: interrupt, retry, pause, resume, resolve (an execution that needs attention).

    APP is module:attribute naming an akter.App; its declarations decode what is shown, and its
    engine sends what interrupt and retry ask for."""


# ---- list and counts --------------------------------------------------------------------------


def _row_lines(row: Any, now: datetime) -> list[str]:
    status = row.status + (f" ({row.outcome})" if row.outcome else "")
    lines = [
        f"{row.actor} {row.workflow} {row.key!r}  {status}  started {when(row.started_at, now)}",
        f"    {row.waiting}",
    ]
    if row.retry_of:
        lines.append(f"    retry of {row.retry_of}")
    lines.append(f"    {row.execution_id}")
    return lines


@executions_group.command("list")
@click.argument("app_path", metavar="APP")
@_filter_options
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_PAGE),
    default=DEFAULT_PAGE,
    show_default=True,
    help="Rows on this page.",
)
@click.option(
    "--after", "cursor", metavar="CURSOR", help="The page after this cursor (printed by the last page)."
)
@database_option
@json_option
def list_command(
    *, app_path: str, limit: int, cursor: str | None, database_url: str | None, as_json: bool, **options: Any
) -> None:
    """Executions matching the filters, newest first, with why each is where it is."""
    where = _filter(options) or ExecutionFilter()
    _, url = load_app_url(app_path, database_url)

    async def read(conn: psycopg.AsyncConnection[Any]) -> tuple[Page, datetime]:
        page = await read_page(conn, where, limit=limit, after=cursor, relative=not as_json)
        clock = await (await conn.execute("SELECT akter_now()")).fetchone()
        return page, clock[0] if clock is not None else datetime.now(UTC)

    try:
        page, now = read_view(url, read)
    except InvalidInput as exc:
        _fail(one_line(exc), kind=type(exc).__name__)
    if as_json:
        _echo_json({"executions": page.rows, "next_cursor": page.next_cursor})
    else:
        more = " (more: see the cursor below)" if page.next_cursor else ""
        click.echo(f"{len(page.rows)} executions, newest first{more}")
        for row in page.rows:
            click.echo("\n".join(_row_lines(row, now)))
        if page.next_cursor:
            click.echo(f"next page: --after {page.next_cursor}")
    sys.exit(EXIT_OK if page.rows else EXIT_FAILURE)


def _render_counts(counts: Sequence[Count]) -> str:
    lines = []
    for c in counts:
        status = c.status + (f" ({c.outcome})" if c.outcome else "")
        lines.append(f"{c.actor_type}.{c.workflow}  {status}  {c.count}")
    lines.append(f"total {sum(c.count for c in counts)}")
    return "\n".join(lines)


@executions_group.command("counts")
@click.argument("app_path", metavar="APP")
@_filter_options
@database_option
@json_option
def counts_command(*, app_path: str, database_url: str | None, as_json: bool, **options: Any) -> None:
    """How many executions match, by workflow, status and outcome."""
    where = _filter(options) or ExecutionFilter()
    _, url = load_app_url(app_path, database_url)
    counts: list[Count] = read_view(url, lambda conn: read_counts(conn, where))
    if as_json:
        _echo_json({"counts": counts, "total": sum(c.count for c in counts)})
    else:
        click.echo(_render_counts(counts))
    sys.exit(EXIT_OK if counts else EXIT_FAILURE)


# ---- show -------------------------------------------------------------------------------------


@executions_group.command("show")
@click.argument("app_path", metavar="APP")
@click.argument("execution_id")
@database_option
@json_option
def show_command(*, app_path: str, execution_id: str, database_url: str | None, as_json: bool) -> None:
    """One execution as a timeline: every step attempt, its timer, and why it waits."""
    eid = parse_execution_id(execution_id)
    app, url = load_app_url(app_path, database_url)
    timeline = read_view(url, lambda conn: read_timeline(conn, app, eid, relative=not as_json))
    if timeline is None:
        _fail(
            f"no execution {execution_id} is stored (never started, or pruned after retention)", EXIT_FAILURE
        )
    parked = read_view(url, lambda conn: parked_of_execution(conn, eid))  # what it waits on
    if as_json:
        shown = timeline_json(timeline) | {"parked": [p.as_json() for p in parked]}
        click.echo(json.dumps(shown, indent=2, sort_keys=True))
    else:
        click.echo(render_timeline(timeline))
        for p in parked:
            click.echo(p.line())


# ---- interrupt and retry ----------------------------------------------------------------------


def _operator(subject: str | None) -> User:
    try:
        return User(subject or getpass.getuser())
    except (AkterError, OSError) as exc:
        raise click.UsageError(f"--as: {one_line(exc)}") from exc


def _with_client(
    app_path: str, database_url: str | None, operator: User, act: Callable[[Any], Awaitable[T]]
) -> T:
    """``act`` on a client of APP's engine, started for the command, sending as ``operator``."""
    app, url = load_app_url(app_path, database_url)
    app.database_url = url

    async def run() -> T:
        # one connection first: an unreachable database is an answer now, not after the pool's
        # start-up timeout
        probe = await psycopg.AsyncConnection.connect(url, connect_timeout=10, application_name="akter-cli")
        await probe.close()
        async with app, app.client(operator) as client:
            return await act(client)

    try:
        return asyncio.run(run())
    except ConfigurationError as exc:
        cli_support.fail_with(exc)
    except psycopg.OperationalError as exc:
        cli_support.fail_with(cli_support.cannot_connect(exc, url))
    except psycopg.Error as exc:
        cli_support.fail_with(cli_support.database_problem(exc, url))
    except (AkterError, psycopg_pool.PoolTimeout) as exc:
        _fail(one_line(exc), kind=type(exc).__name__)


class _Report:
    """Prints each action's outcome as it comes (a filter may match many: nothing is kept but
    the counts), as lines or as one JSON document ``{"acted": [...]}`` written as it goes; with
    ``summary``, the counts at the end (a line, or the document's ``"summary"``)."""

    def __init__(self, verb: str, as_json: bool, *, summary: bool = False) -> None:
        self.verb = verb
        self.as_json = as_json
        self.summary = summary
        self.count = 0
        self.refused = 0

    def __call__(self, a: Acted) -> None:
        from akter.operate.query import readable

        if self.as_json:
            error = None
            if a.error is not None:
                error = {"type": type(a.error).__name__, "message": one_line(a.error)}
            item = {**jsonable(a), "error": error}
            text = json.dumps(jsonable(item), indent=2, sort_keys=True).replace("\n", "\n    ")
            click.echo(('{\n  "acted": [\n    ' if not self.count else ",\n    ") + text, nl=False)
        elif a.done:
            click.echo(f"{self.verb} {readable(a.execution_id)}: {a.message}")
        else:
            click.echo(f"akter: not {self.verb} {readable(a.execution_id)}: {a.message}", err=True)
        self.count += 1
        self.refused += not a.done

    def finish(self) -> NoReturn:
        done = self.count - self.refused
        if self.as_json:
            click.echo(("\n  ]" if self.count else '{\n  "acted": []'), nl=False)
            if self.summary:
                counts = json.dumps({"done": done, "refused": self.refused}, sort_keys=True)
                click.echo(f',\n  "summary": {counts}', nl=False)
            click.echo("\n}")
        elif self.summary and self.count:
            refused = f"; {self.refused} not (see above)" if self.refused else ""
            click.echo(f"{self.verb} {done} of {self.count} matching executions{refused}")
        if not self.count:
            click.echo("akter: no execution matched", err=True)
        sys.exit(EXIT_OK if self.count and not self.refused else EXIT_FAILURE)


def _act(
    app_path: str,
    database_url: str | None,
    operator: str | None,
    execution_ids: Sequence[str],
    where: ExecutionFilter | None,
    *,
    verb: str,
    shown: str,
    reason: str | None = None,
    as_json: bool,
) -> NoReturn:
    """``verb`` the executions named, then every one ``where`` matches, reporting each."""
    from akter.operate import actions

    report = _Report(shown, as_json, summary=where is not None)

    def one(engine: Any, execution_id: str, who: Caller) -> Awaitable[Acted]:
        if verb == "interrupt":
            return actions.interrupt(engine, execution_id, caller=who, reason=reason)
        if verb == "retry":
            return actions.retry(engine, execution_id, caller=who)
        if verb == "pause":
            return actions.pause(engine, execution_id, caller=who, reason=reason)
        return actions.unpause(engine, execution_id, caller=who)

    async def act(client: Any) -> None:
        for execution_id in execution_ids:
            report(await actions.guarded(lambda i: one(client.sender, i, client.caller), execution_id))
        if where is not None:
            async for acted in client.each_matching(verb, where, reason=reason):
                report(acted)

    _with_client(app_path, database_url, _operator(operator), act)
    report.finish()


_operator_option = click.option(
    "--as",
    "operator",
    envvar="AKTER_OPERATOR",
    metavar="SUBJECT",
    help="Who is asking, recorded as user:SUBJECT (AKTER_OPERATOR; default: the login name).",
)


def _targets(execution_ids: Sequence[str], where: ExecutionFilter | None) -> None:
    if not execution_ids and where is None:
        raise click.UsageError("name executions by id, or give filters that match them")
    for execution_id in execution_ids:
        parse_execution_id(execution_id)


def _action_command(verb: str, shown: str, doc: str, reason_help: str | None = None) -> None:
    """Register ``akter executions VERB APP [ID]... [filters]``: ``verb`` the executions named,
    and every one the filters match, sent as the operator."""

    def command(
        *,
        app_path: str,
        execution_ids: tuple[str, ...],
        operator: str | None,
        database_url: str | None,
        as_json: bool,
        reason: str | None = None,
        **options: Any,
    ) -> None:
        where = _filter(options)
        _targets(execution_ids, where)
        _act(
            app_path,
            database_url,
            operator,
            execution_ids,
            where,
            verb=verb,
            shown=shown,
            reason=reason,
            as_json=as_json,
        )

    command.__doc__ = doc
    decorated: Any = command
    for option in (json_option, database_option, _operator_option):
        decorated = option(decorated)
    if reason_help is not None:
        decorated = click.option("--reason", help=reason_help)(decorated)
    decorated = _filter_options(decorated)
    decorated = click.argument("execution_ids", metavar="[ID]...", nargs=-1)(decorated)
    decorated = click.argument("app_path", metavar="APP")(decorated)
    executions_group.command(verb)(decorated)


_action_command(
    "interrupt",
    "interrupted",
    """Interrupt the executions named, and every open one the filters match: each replays to its
    first unsettled step, runs its compensations and finishes as interrupted. One that needs
    attention is resolved as interrupted, unless a decision on it came first.""",
    "Why: recorded with the execution; its result and timeline show it.",
)
_action_command(
    "retry",
    "retried",
    """Retry the executions named, and every failed, defect or blocked one the filters match.

    A failed or defect execution starts again as a new execution with the same input, linked to
    the old one; a blocked one is offered to runners again now.""",
)
_action_command(
    "pause",
    "paused",
    """Pause the executions named, and every open one the filters match: each finishes its
    in-flight attempts, then holds until resumed. Timers keep firing into the paused state;
    what they bring is applied after the resume.""",
    "Why: recorded with the execution; the list and timeline show it.",
)
_action_command(
    "resume",
    "resumed",
    """Resume the paused executions named, and every paused one the filters match: each goes
    on now, applying what came due while it was paused.""",
)


# ---- resolve ----------------------------------------------------------------------------------


@executions_group.command("resolve")
@click.argument("app_path", metavar="APP")
@click.argument("execution_id", metavar="ID")
@click.option(
    "--result", "result", metavar="JSON", help="The waiting activity's result, as JSON of its type."
)
@click.option(
    "--error", "error", metavar="TYPE", help="One of the activity's declared errors, by class name."
)
@click.option(
    "--fields", metavar="JSON", default="{}", show_default=True, help="The --error's fields, as JSON."
)
@click.option("--retry", is_flag=True, help="Allow one more attempt (new derived ids), or one more pass.")
@click.option(
    "--fail", "fail_it", is_flag=True, help="Fail it: the activity ends with ActivityOutcomeUnknown."
)
@click.option("--reason", help="Why (kept with an interrupt's resolution).")
@_operator_option
@database_option
@json_option
def resolve_command(
    *,
    app_path: str,
    execution_id: str,
    result: str | None,
    error: str | None,
    fields: str,
    retry: bool,
    fail_it: bool,
    reason: str | None,
    operator: str | None,
    database_url: str | None,
    as_json: bool,
) -> None:
    """Resolve an execution that needs attention: supply the waiting activity's result
    (checked against its declared type), supply a declared error, allow one more attempt, or
    fail it. The decision is recorded as the attempt's exit with who made it, and the
    execution goes on."""
    from akter.operate import actions

    parse_execution_id(execution_id)
    chosen = [
        n
        for n, given in (
            ("result", result is not None),
            ("error", error),
            ("retry", retry),
            ("fail", fail_it),
        )
        if given
    ]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --result, --error, --retry, --fail")
    [decision] = chosen
    value: str | None = None
    try:
        if result is not None:
            value = json.dumps(json.loads(result))
        elif error is not None:
            value = json.dumps({"type": error, "value": json.loads(fields)})
    except ValueError as exc:
        raise click.UsageError(f"--result/--fields must be JSON: {exc}") from exc
    report = _Report("resolved", as_json)

    async def act(client: Any) -> None:
        report(
            await actions.resolve(
                client.sender,
                execution_id,
                caller=client.caller,
                decision=decision,
                value=value,
                reason=reason,
            )
        )

    _with_client(app_path, database_url, _operator(operator), act)
    report.finish()
