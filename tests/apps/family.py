"""Parents and children across actors: an ``Orders`` actor whose workflows start ``Fulfil``
executions on ``Warehouse`` actors. Used in process and by relay processes the tests start
(``akter relay tests.apps.family:app``)."""

from __future__ import annotations

from datetime import timedelta

import attrs
from returns.result import Failure, Success

import akter


@attrs.frozen
class Stock:
    picked: tuple[str, ...] = ()


@attrs.frozen
class Released:
    sku: str


@attrs.frozen
class Release:
    sku: str


@attrs.frozen
class Line:
    sku: str
    warehouse: str = "w-1"
    #: "ok", "oos" (a declared error), "hold" (waits for a Released event first)
    mode: str = "ok"


@attrs.frozen
class Shipped:
    sku: str
    by: str


@attrs.frozen
class OutOfStock(Exception):
    sku: str


@attrs.frozen
class OrderIn:
    lines: tuple[Line, ...]
    limit: int | None = None
    linger: int = 0


@attrs.frozen
class Summary:
    shipped: tuple[str, ...]
    failed: tuple[str, ...]


Warehouse = akter.Actor("Warehouse", state=Stock, events=[Released])
Orders = akter.Actor("Orders", state=Stock)


@Warehouse.command
def release(turn: akter.Turn[Stock], cmd: Release) -> None:
    turn.emit(Released(sku=cmd.sku))


Fulfil = Warehouse.workflow("Fulfil", input=Line, output=Shipped, errors=[OutOfStock])
pick = Fulfil.activity("pick", success=str, errors=[OutOfStock])
released = Fulfil.wait("released", Released)

#: how many times each sku's pick really ran in this process
PICKS: dict[str, int] = {}


def _pick(line: Line) -> str:
    PICKS[line.sku] = PICKS.get(line.sku, 0) + 1
    if line.mode == "oos":
        raise OutOfStock(line.sku)
    ctx = akter.activity_context()
    return repr(ctx.principal)


@Fulfil.body
async def fulfil(wf: akter.WorkflowContext, line: Line) -> Shipped:
    if line.mode == "hold":
        await released(where=lambda e: e.sku == line.sku)
    by = await pick(_pick, line)
    return Shipped(sku=line.sku, by=by)


Order = Orders.workflow("Order", input=OrderIn, output=Summary)
ship_line = Order.child("ship-line", Fulfil)
linger = Order.sleep("linger")


@Order.body
async def order(wf: akter.WorkflowContext, o: OrderIn) -> Summary:
    results = await akter.all(
        *(wf.run(Warehouse, line.warehouse, Fulfil, line) for line in o.lines), limit=o.limit
    )
    if o.linger:
        await linger(timedelta(seconds=o.linger))
    shipped, failed = [], []
    for result in results:
        match result:
            case Success(done):
                shipped.append(f"{done.sku} by {done.by}")
            case Failure(error):
                failed.append(f"{type(error).__name__}: {error}")
    return Summary(tuple(shipped), tuple(failed))


One = Orders.workflow("One", input=Line, output=str)
one_line = One.child("line", Fulfil)
after = One.sleep("after")
Detached = Orders.workflow("Detached", input=OrderIn, output=str)
detached_line = Detached.child("line", Fulfil, on_parent_interrupt="run_on")


@One.body
async def one(wf: akter.WorkflowContext, line: Line) -> str:
    child = await one_line.start(line.warehouse, line)
    outcome = await child.result()
    again = await child.result()  # a second await of the same result reads the same record
    assert again == outcome
    await after(timedelta(seconds=30))
    return f"{child.execution_id}: {outcome}"


@Detached.body
async def detached(wf: akter.WorkflowContext, o: OrderIn) -> str:
    results = await akter.all(*(detached_line.run(line.warehouse, line) for line in o.lines))
    return repr(results)


@attrs.frozen
class Rounds:
    sku: str
    left: int
    done: tuple[str, ...] = ()


Rounds_ = Orders.workflow("Rounds", input=Rounds, output=str)
round_line = Rounds_.child("line", Fulfil)


@Rounds_.body
async def rounds(wf: akter.WorkflowContext, r: Rounds) -> str:
    """One child per run, the same start in every run: each run's child is a new execution."""
    child = await round_line.start("w-r", Line(r.sku))
    done = (*r.done, child.execution_id)
    if r.left > 0:
        return wf.continue_as_new(Rounds(r.sku, r.left - 1, done))
    return " ".join(done)


app = akter.App([Orders, Warehouse])


def make_app(database_url: str) -> akter.App:
    return akter.App([Orders, Warehouse], database_url=database_url)
