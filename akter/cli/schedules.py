"""``akter schedules ...``: list, add, pause, resume, trigger and delete an App's schedules.

Each subcommand imports ``APP`` (``module:attribute``), starts its engine on the App's database
(``--database-url``, the App's own, ``AKTER_DATABASE_URL``, else the embedded server) and calls
``client.schedules`` (``akter.workflow.client.schedule_admin``): a change is a receipted turn on the
schedule's actor, like any other. ``--json`` prints machine-readable output. Exit 0 on success,
1 when the schedule does not exist, 2 for usage, configuration and database errors.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

import click
import psycopg

from akter.cli import support as cli_support
from akter.errors import AkterError, UnknownSchedule

T = TypeVar("T")


def _with_schedules(app_path: str, database_url: str | None, action: Callable[[Any, Any], Awaitable[T]]) -> T:
    app = cli_support.load_app(app_path)
    app.database_url = cli_support.database_url(database_url, app=app, flag_source=cli_support.flag_source())

    async def run() -> T:
        async with app, app.client() as client:
            return await action(app, client.schedules)

    try:
        return asyncio.run(run())
    except UnknownSchedule as exc:
        cli_support.fail(str(exc), cli_support.EXIT_FAILURE)
    except psycopg.OperationalError as exc:
        cli_support.fail(str(cli_support.cannot_connect(exc, app.database_url)))
    except (AkterError, psycopg.Error) as exc:
        cli_support.fail(cli_support.one_line(exc))


def _show(infos: list[Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps([info.as_json() for info in infos], indent=2))
        return
    if not infos:
        click.echo("no schedules")
        return
    for info in infos:
        when = info.cron if info.cron is not None else f"every {info.every}"
        nxt = info.next_slot.isoformat() if info.next_slot else "-"
        last = info.last_slot.isoformat() if info.last_slot else "-"
        click.echo(
            f"{info.tenant}/{info.name}  {info.status}  {info.kind} {info.actor}.{info.member}  "
            f"{when} ({info.timezone}, catch-up {info.catch_up})  next {nxt}  last {last}  "
            f"fired {info.fired}{'  declared' if info.declared else ''}"
        )
        if info.parked_intent is not None:
            why = cli_support.one_line(info.parked_reason or "")
            click.echo(f"    its timer is parked, so it fires nothing: {why}")
            click.echo(f"    deliver it again: akter outbox retry {info.parked_intent}")


_app = click.argument("app_path", metavar="APP")
_url = click.option("--database-url", envvar="AKTER_DATABASE_URL", default=None, help="PostgreSQL URL")
_json = click.option("--json", "as_json", is_flag=True, help="machine-readable output")


@click.group("schedules")
def schedules_group() -> None:
    """An App's schedules: when they fire next, when they fired last; change them at run time."""


@schedules_group.command("list")
@_app
@click.option("--tenant", default=None, help="only this tenant's schedules")
@_url
@_json
def list_command(app_path: str, tenant: str | None, database_url: str | None, as_json: bool) -> None:
    """List the schedules with their next and last slot."""
    _show(_with_schedules(app_path, database_url, lambda app, s: s.list(tenant)), as_json)


def _one(verb: str, doc: str) -> None:
    @schedules_group.command(verb, help=doc)
    @_app
    @click.argument("tenant")
    @click.argument("name")
    @_url
    @_json
    def command(app_path: str, tenant: str, name: str, database_url: str | None, as_json: bool) -> None:
        async def act(app: Any, schedules: Any) -> list[Any]:
            await getattr(schedules, verb)(tenant, name)
            return [] if verb == "delete" else [await schedules.get(tenant, name)]

        infos = _with_schedules(app_path, database_url, act)
        if as_json or infos:
            _show(infos, as_json)
        else:
            click.echo(f"deleted {tenant}/{name}")


_one("pause", "Stop arming the schedule's slots.")
_one("resume", "Arm the first slot after now again.")
_one("trigger", "Deliver the schedule once now, outside its slots.")
_one("delete", "Delete the schedule and its timer.")


@schedules_group.command("add")
@_app
@click.argument("tenant")
@click.argument("name")
@click.option("--actor", "actor_type", required=True, help="the target actor type")
@click.option("--id", "actor_id", required=True, help="the target actor id")
@click.option("--command", "command", default=None, help="a command of the actor type")
@click.option("--workflow", "workflow", default=None, help="a workflow of the actor type")
@click.option("--payload", default="{}", help="the command's or workflow's input, as JSON")
@click.option("--cron", default=None, help="a cron expression, in --timezone")
@click.option("--every", type=float, default=None, help="a fixed interval, in seconds")
@click.option("--timezone", default="UTC", show_default=True)
@click.option("--catch-up", type=click.Choice(["latest", "all"]), default="latest", show_default=True)
@click.option("--max-catch-up", type=int, default=10, show_default=True)
@_url
@_json
def add_command(  # noqa: PLR0917 -- one parameter per option
    app_path: str,
    tenant: str,
    name: str,
    actor_type: str,
    actor_id: str,
    command: str | None,
    workflow: str | None,
    payload: str,
    cron: str | None,
    every: float | None,
    timezone: str,
    catch_up: str,
    max_catch_up: int,
    database_url: str | None,
    as_json: bool,
) -> None:
    """Add a schedule (or replace the one of that name on the same actor)."""
    from akter import codec
    from akter.workflow.api.declare import workflows_of
    from akter.workflow.api.schedules import Schedule

    if (command is None) == (workflow is None):
        cli_support.fail("give either --command or --workflow")
    try:
        primitive = json.loads(payload)
    except json.JSONDecodeError as exc:
        cli_support.fail(f"--payload is not JSON: {exc}")

    async def act(app: Any, schedules: Any) -> list[Any]:
        actor = app.actors.get(actor_type)
        if actor is None:
            cli_support.fail(f"the App has no actor type {actor_type!r}")
        members: dict[str, Any] = actor.commands if command is not None else workflows_of(actor)
        member = members.get(command or workflow or "")
        if member is None:
            cli_support.fail(
                f"{actor_type} has no {'command' if command else 'workflow'} {command or workflow!r}"
            )
        schedule = Schedule(
            name=name,
            actor=actor,
            actor_id=actor_id,
            tenant=tenant,
            member=member,
            payload=codec.from_primitive(primitive, member.input),
            cron=cron,
            every=None if every is None else timedelta(seconds=every),
            timezone=timezone,
            catch_up=catch_up,
            max_catch_up=max_catch_up,
        )
        return [await schedules.add(schedule)]

    _show(_with_schedules(app_path, database_url, act), as_json)
