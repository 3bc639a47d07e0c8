"""``akter ui APP``: the read-only inspector page (``akter.ui``), registered lazily in ``akter.cli``."""

from __future__ import annotations

import click

from akter.cli import support as cli_support
from akter.errors import ConfigurationError


@click.command("ui")
@click.argument("app_path", metavar="APP")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback).")
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free port."
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Listen on a non-loopback address: the page has no login, so put your own access control in front.",
)
@click.option(
    "--database-url",
    help="PostgreSQL URL; overrides the App's own URL, which overrides AKTER_DATABASE_URL.",
)
def ui_command(app_path: str, host: str, port: int, allow_remote: bool, database_url: str | None) -> None:
    """Serve a read-only inspector page of APP's executions and actors.

    It shows the executions (with filters and counts), each execution's timeline, and each
    actor's state, events, receipts and outbox; what needs attention on top.

    APP is module:attribute, an akter.App. Exit codes: 0 stopped, 2 usage/configuration error."""
    try:
        from akter import ui
    except ImportError as exc:  # the optional extra is not installed
        cli_support.fail(f"akter ui needs the ui extra (pip install 'akter[ui]'): {exc}")
    try:
        ui.check_host(host, allow_remote=allow_remote)
        app = cli_support.load_app(app_path)
        url = cli_support.database_url(database_url, app=app)
        sock = ui.bind(host, port)
    except ConfigurationError as exc:
        cli_support.fail_with(exc)
    web = ui.make_web(app, url)

    def announce(address: str) -> None:
        click.echo(f"akter ui: serving {address} (read-only; Ctrl-C to stop)", err=False)

    ui.serve(web, sock, announce)
