"""``akter workflows replay APP``: replay open executions, and a sample of finished ones, under
APP's bodies, read-only (``akter.workflow.tools.replay``, ``akter.workflow.tools.replay_read``).

The command only turns flags into a call and a report into output and an exit code: 0 every
checked execution replays, 1 one diverged (the report says where), 2 usage or database errors.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click
import psycopg

from akter.cli import replay_jobs
from akter.cli import support as cli_support
from akter.errors import AkterError, ConfigurationError
from akter.store.pool import connection_kwargs
from akter.workflow.core import manifest
from akter.workflow.tools import replay_read
from akter.workflow.tools.replay_report import ReplayReport

if TYPE_CHECKING:
    from akter.app import App

#: worker processes at most when --jobs is not given
MAX_JOBS = 8


@click.command("replay", cls=cli_support.JsonCommand)
@click.argument("app_path", metavar="APP")
@click.option(
    "--database-url",
    help="PostgreSQL URL; overrides the App's own URL, which overrides AKTER_DATABASE_URL.",
)
@click.option(
    "--sample",
    type=click.IntRange(min=0),
    default=replay_read.DEFAULT_SAMPLE,
    show_default=True,
    help="Also replay this many of the most recently finished executions that kept their steps.",
)
@click.option(
    "--workflow",
    "workflows",
    multiple=True,
    metavar="W",
    help="Only this workflow (Workflow or ActorType.Workflow); repeat for several.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Replay in this many processes (default: one per CPU, up to 8, from "
    f"{replay_jobs.PARALLEL_FROM:,} open executions; else one).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def replay(
    app_path: str,
    database_url: str | None,
    sample: int,
    workflows: tuple[str, ...],
    jobs: int | None,
    *,
    as_json: bool,
) -> None:
    """Would APP's workflow bodies replay what is recorded? APP is module:attribute naming an
    akter.App.

    Runs APP's bodies under akter's driver against the recorded input and step exits of every
    open execution and of the most recently finished ones (--sample), without running anything
    or writing anything (one read-only transaction). Reports, per workflow, how many replayed,
    and for each execution that did not, the first step occurrence where APP's body asked for
    something other than what was recorded, and what it asked for: a reordered await, a skipped
    step, a new branch taken on the same recorded values. Run it beside `akter workflows check`,
    which compares declarations.

    Exit 0 every checked execution replays, 1 one diverged, 2 usage or database errors, 3 a
    crash (a bug in akter)."""
    try:
        app = cli_support.load_app(app_path)
        url = cli_support.database_url(database_url, app=app)
        only = (
            replay_read.choose(manifest.all_workflows(app.actors.values()), workflows) if workflows else None
        )
    except ConfigurationError as exc:
        cli_support.fail_with(exc)
    try:
        report = _replay(app_path, app, url, sample=sample, names=workflows, only=only, jobs=jobs)
    except ConfigurationError as exc:
        cli_support.fail_with(exc)
    except AkterError as exc:
        cli_support.fail(cli_support.one_line(exc), kind=type(exc).__name__)
    except psycopg.Error as exc:
        cli_support.fail_with(cli_support.database_problem(exc, url))
    click.echo(json.dumps(report.data(), indent=2) if as_json else report.text())
    sys.exit(cli_support.EXIT_OK if report.replays else cli_support.EXIT_FAILURE)


def _replay(
    app_path: str,
    app: App,
    url: str,
    *,
    sample: int,
    names: Sequence[str],
    only: Sequence[Any] | None,
    jobs: int | None,
) -> ReplayReport:
    """One process, or ``jobs`` of them (``replay_jobs``); by default several from
    ``PARALLEL_FROM`` open executions."""
    # connections of its own, not the App's runtime: a check must not migrate, nor store
    # anything in, the database it reads
    try:
        conn = psycopg.connect(url, **connection_kwargs(url, name="akter-workflows-replay"))
    except psycopg.OperationalError as exc:
        raise cli_support.cannot_connect(exc, url) from exc
    with conn:
        if jobs is None:
            row = conn.execute(replay_jobs.COUNT_OPEN).fetchone()
            many = row is not None and int(row[0]) >= replay_jobs.PARALLEL_FROM
            jobs = min(os.cpu_count() or 1, MAX_JOBS) if many else 1
        if jobs > 1:
            return replay_jobs.check(conn, app_path, url, jobs=jobs, sample=sample, names=names)
    return asyncio.run(_replay_url(app, url, sample, only))


async def _replay_url(app: App, url: str, sample: int, only: Sequence[Any] | None) -> ReplayReport:
    kwargs = connection_kwargs(url, name="akter-workflows-replay")
    try:
        conn = await psycopg.AsyncConnection.connect(url, **kwargs)
    except psycopg.OperationalError as exc:
        raise cli_support.cannot_connect(exc, url) from exc
    async with conn:
        return await replay_read.check(
            conn, manifest.all_workflows(app.actors.values()), sample=sample, only=only
        )
