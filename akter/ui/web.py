"""The inspector page: a read-only Starlette app over one App's database.

Every request opens one read-only, repeatable-read connection (``akter.inspect.connect``) and
renders a Jinja2 template; nothing is ever written. A page whose subject is still moving (an open
execution, a list with open executions) polls its own URL with ``?part=live`` and swaps the
``#live`` section in place (``static/live.js``), so a running execution's timeline advances
without a reload and the polling stops once it finishes."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from akter.errors import AkterError
from akter.ids import ActorRef, ExecutionId
from akter.inspect.decode import Shown, iso_time, one_line
from akter.inspect.read import connect, read_actor, read_execution
from akter.inspect.render import jsonable, when
from akter.ui import queries
from akter.ui.timeline import lay_out

if TYPE_CHECKING:
    from akter.app import App

HERE = Path(__file__).parent
#: how often a live page asks for its section again, in milliseconds
REFRESH_MS = 1000


def _stored_json(shown: Shown | None) -> str:
    if shown is None:
        return ""
    return json.dumps(jsonable(shown.data), indent=2, sort_keys=True, default=str)


def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["iso"] = iso_time
    env.filters["one_line"] = one_line
    env.filters["stored_json"] = _stored_json
    env.globals["when"] = when
    env.globals["refresh_ms"] = REFRESH_MS
    return env


class Inspector:
    """The page's handlers, bound to one App (for decoding) and one database URL."""

    def __init__(self, app: App, url: str) -> None:
        self.app = app
        self.url = url
        self.env = _environment()

    def _render(self, request: Request, template: str, status: int = 200, **context: Any) -> Response:
        part = request.query_params.get("part")
        name = template if part != "live" else template.replace(".html", "_live.html")
        html = self.env.get_template(name).render(request=request, **context)
        return HTMLResponse(html, status_code=status)

    def _problem(self, request: Request, message: str, status: int) -> Response:
        return HTMLResponse(
            self.env.get_template("problem.html").render(request=request, message=message),
            status_code=status,
        )

    async def _read(
        self, request: Request, read: Callable[[psycopg.AsyncConnection[Any]], Awaitable[Response]]
    ) -> Response:
        try:
            conn = await connect(self.url)
        except psycopg.OperationalError as exc:
            return self._problem(request, f"cannot connect to the database: {one_line(exc)}", 503)
        async with conn:
            return await read(conn)

    async def executions(self, request: Request) -> Response:
        try:
            where = queries.ListFilter.of(dict(request.query_params))
        except AkterError as exc:
            return self._problem(request, one_line(exc), 400)

        async def read(conn: psycopg.AsyncConnection[Any]) -> Response:
            rows = await queries.list_executions(conn, where)
            counts = await queries.count_executions(conn, where)
            attention = await queries.needing_attention(conn)
            parked = await queries.parked_intents(conn)
            return self._render(
                request,
                "executions.html",
                rows=rows,
                counts=counts,
                total=sum(c.count for c in counts),
                attention=attention,
                parked=parked,
                where=where,
                statuses=queries.STATUSES,
                outcomes=queries.OUTCOMES,
                live=any(r.open for r in rows),
            )

        return await self._read(request, read)

    async def _one(
        self,
        request: Request,
        template: str,
        read: Callable[[psycopg.AsyncConnection[Any]], Awaitable[Any]],
        missing: str,
        context: Callable[[Any], dict[str, Any]],
    ) -> Response:
        """A page about one stored thing: 404 saying ``missing`` when ``read`` finds nothing."""

        async def page(conn: psycopg.AsyncConnection[Any]) -> Response:
            view = await read(conn)
            if view is None:
                return self._problem(request, missing, 404)
            return self._render(request, template, view=view, **context(view))

        return await self._read(request, page)

    async def execution(self, request: Request) -> Response:
        text = request.path_params["execution_id"]
        try:
            eid = ExecutionId.parse(text)
        except AkterError as exc:
            return self._problem(request, one_line(exc), 400)
        return await self._one(
            request,
            "execution.html",
            lambda conn: read_execution(conn, self.app, eid),
            f"no execution {text} is stored",
            lambda view: {"eid": eid, "layout": lay_out(view), "live": view.status != "finished"},
        )

    async def actor(self, request: Request) -> Response:
        q = request.query_params
        try:
            ref = ActorRef(q.get("tenant", ""), q.get("type", ""), q.get("id", ""))
        except AkterError as exc:
            return self._problem(request, one_line(exc), 400)
        return await self._one(
            request,
            "actor.html",
            lambda conn: read_actor(conn, self.app, ref),
            f"actor {ref} never committed a turn",
            lambda view: {"ref": ref, "live": any(e.status != "finished" for e in view.executions)},
        )


def make_web(app: App, url: str) -> Starlette:
    """The page for ``app``'s actors and workflows, reading the database at ``url``."""
    inspector = Inspector(app, url)
    return Starlette(
        routes=[
            Route("/", inspector.executions),
            Route("/executions/{execution_id:path}", inspector.execution),
            Route("/actor", inspector.actor),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]
    )
