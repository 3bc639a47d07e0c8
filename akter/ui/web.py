"""The inspector page: a read-only Starlette app over one App's database.

Every request opens one read-only, repeatable-read connection (``akter.inspect.connect``) and
renders a Jinja2 template; nothing is ever written. What it lists and how it pages is
``akter.operate``'s (``ExecutionFilter``, keyset pages, counts, the timeline) and
``akter.outbox.admin``'s (parked intents), so the page, ``akter executions`` and a client's
``client.executions()`` always agree. A page whose subject is still moving (an open
execution, a list with open executions) polls its own URL with ``?part=live`` and swaps the
``#live`` section in place (``static/live.js``), so a running execution's timeline advances
without a reload and the polling stops once it finishes."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import attrs
import psycopg
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from akter.errors import AkterError, InvalidInput
from akter.ids import ActorRef, ExecutionId
from akter.inspect.decode import Shown, iso_time, one_line
from akter.inspect.read import connect, read_actor
from akter.inspect.render import jsonable, span, when
from akter.operate import query
from akter.operate.query import ExecutionFilter, ExecutionRow
from akter.operate.timeline import read_timeline
from akter.outbox.admin import read_parked
from akter.ui.timeline import lay_out

if TYPE_CHECKING:
    from akter.app import App

HERE = Path(__file__).parent
#: how often a live page asks for its section again, in milliseconds
REFRESH_MS = 1000
#: rows on a page of executions unless ``limit`` says otherwise
PAGE_ROWS = 50
#: rows in each alert at the top (undeliverable intents, executions needing attention)
ALERT_ROWS = 20
#: the query-string criteria the list takes, as ``ExecutionFilter`` names them
TEXT_CRITERIA = ("tenant", "actor_type", "actor_id", "workflow", "key_prefix")


@attrs.frozen
class Listing:
    """What a request for the list asks: the filter, the page size, and the cursor it starts
    after (``None``: the newest page)."""

    where: ExecutionFilter
    limit: int = PAGE_ROWS
    after: str | None = None

    @classmethod
    def of(cls, params: Mapping[str, str], multi: Mapping[str, list[str]]) -> Listing:
        """From a query string: empty values mean "any"; ``status`` and ``outcome`` may repeat.
        ``InvalidInput`` (with the reason) for anything the operate filter refuses."""
        criteria: dict[str, Any] = {k: params[k].strip() for k in TEXT_CRITERIA if params.get(k, "").strip()}
        for name in ("status", "outcome"):
            chosen = [v for v in multi.get(name, []) if v.strip()]
            if chosen:
                criteria[name] = chosen
        limit = params.get("limit", "").strip() or str(PAGE_ROWS)
        if not limit.isdigit() or not 1 <= int(limit) <= query.MAX_PAGE:
            raise InvalidInput(f"limit must be a number from 1 to {query.MAX_PAGE}, not {limit!r}")
        where = ExecutionFilter.of(None, **criteria)
        return cls(where, int(limit), params.get("after") or None)

    def link(self, **changes: str | None) -> str:
        """The query string of this listing with ``changes`` (``None`` drops a parameter)."""
        pairs = [(k, getattr(self.where, k)) for k in TEXT_CRITERIA if getattr(self.where, k) is not None]
        pairs += [("status", s) for s in self.where.status] + [("outcome", o) for o in self.where.outcome]
        if self.limit != PAGE_ROWS:
            pairs.append(("limit", str(self.limit)))
        if self.after is not None:
            pairs.append(("after", self.after))
        kept = [(k, v) for k, v in pairs if k not in changes]
        kept += [(k, v) for k, v in changes.items() if v is not None]
        return "?" + urlencode(kept) if kept else "?"


def attention_filters() -> list[ExecutionFilter]:
    """What needs a person: executions an operator must resolve (``needs_attention``, where the
    engine has that status), the ones a runner left blocked, and the ones that finished failed or
    with a defect."""
    filters = [ExecutionFilter(status="blocked"), ExecutionFilter(outcome=["failed", "defect"])]
    if "needs_attention" in query.STATUSES:
        filters.insert(0, ExecutionFilter(status="needs_attention"))
    return filters


async def read_attention(conn: psycopg.AsyncConnection[Any]) -> tuple[list[ExecutionRow], int]:
    """The newest ``ALERT_ROWS`` executions needing attention, and how many there are."""
    rows: dict[str, ExecutionRow] = {}
    total = 0
    for where in attention_filters():
        for row in (await query.read_page(conn, where, limit=ALERT_ROWS)).rows:
            rows.setdefault(row.execution_id, row)
        total += sum(c.count for c in await query.read_counts(conn, where))
    newest = sorted(rows.values(), key=lambda r: (r.started_at, r.execution_id), reverse=True)
    return newest[:ALERT_ROWS], total


def shown_status(row: ExecutionRow) -> str:
    """The word a row's badge shows: a finished execution's outcome, ``interrupting`` while an
    interrupt is being carried out, else the status."""
    if row.status == "finished":
        return row.outcome or "finished"
    return "interrupting" if row.interrupt_requested else row.status


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
    env.filters["span"] = span
    env.globals["when"] = when
    env.globals["refresh_ms"] = REFRESH_MS
    env.globals["shown_status"] = shown_status
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
        q = request.query_params
        try:
            listing = Listing.of(q, {k: q.getlist(k) for k in ("status", "outcome")})
        except AkterError as exc:
            return self._problem(request, one_line(exc), 400)

        async def read(conn: psycopg.AsyncConnection[Any]) -> Response:
            try:
                page = await query.read_page(conn, listing.where, limit=listing.limit, after=listing.after)
            except InvalidInput as exc:  # a cursor that is not one
                return self._problem(request, one_line(exc), 400)
            counts = await query.read_counts(conn, listing.where)
            attention, attention_total = await read_attention(conn)
            parked = await read_parked(conn, limit=ALERT_ROWS)
            return self._render(
                request,
                "executions.html",
                rows=page.rows,
                next_link=None if page.next_cursor is None else listing.link(after=page.next_cursor),
                first_link=None if listing.after is None else listing.link(after=None),
                counts=_by_status(counts),
                total=sum(c.count for c in counts),
                attention=attention,
                attention_total=attention_total,
                parked=parked,
                listing=listing,
                where=listing.where,
                statuses=query.STATUSES,
                outcomes=query.OUTCOMES,
                live=any(r.status != "finished" for r in page.rows),
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
            found = await read(conn)
            if found is None:
                return self._problem(request, missing, 404)
            view = getattr(found, "view", found)  # a timeline shows its execution's view too
            return self._render(request, template, view=view, **context(found))

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
            lambda conn: read_timeline(conn, self.app, eid),
            f"no execution {text} is stored",
            lambda t: {"eid": eid, "t": t, "layout": lay_out(t), "live": t.status != "finished"},
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


@attrs.frozen
class StatusCount:
    """One line of the counts: a workflow and the status its badge shows (a finished
    execution's outcome), summed over actor types."""

    workflow: str
    status: str
    count: int


def _by_status(counts: list[query.Count]) -> list[StatusCount]:
    summed: dict[tuple[str, str], int] = {}
    for c in counts:
        key = (c.workflow, (c.outcome or "finished") if c.status == "finished" else c.status)
        summed[key] = summed.get(key, 0) + c.count
    return [StatusCount(w, s, n) for (w, s), n in sorted(summed.items())]


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
