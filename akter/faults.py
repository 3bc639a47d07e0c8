"""Fault points: named places in akter's own code where a test can crash or pause the process.

The kernel, the relay and the workflow runner call ``await hit(point, *ids)`` at each named
point. With nothing armed that is a dictionary lookup, so the points stay in production code.

Faults are armed in process through ``akter.testing`` (``crash``, ``pause`` or ``fail``, which
raises ``InjectedFailure`` there, as a bug of akter's own would) or, for
processes a test starts, through the ``AKTER_FAULTS`` environment variable::

    AKTER_FAULTS="turn.before_commit=crash@order-7,relay.before_delete=crash"

Each entry is ``point=crash`` with an optional ``@id`` that must equal one of the ids passed at
the point (an actor id, an execution id, an intent id). A crash is ``SIGKILL`` to the process
itself: no ``finally`` block, no atexit handler, no orderly rollback — the database sees a dead
connection, exactly as after a power cut.

The workflow points, in the order a pass meets them: ``workflow.before_pass`` (a start or resume
turn committed and handed its execution to this process's runner; the pass has loaded nothing —
after a resume, this is "after a resume turn's commit"), ``workflow.before_activity`` (an attempt
written pending, its work not begun), ``workflow.before_settle`` (the work done, its outcome not
recorded), ``workflow.before_clock_settle`` (a sleep held in process is due, or about to be, on the
process's clock estimate; its settle not sent), ``workflow.before_suspend`` (every branch parked,
the suspension not written). Each is passed the actor id and the execution id.
``workflow.before_combined_write`` and ``workflow.after_combined_write`` bracket a combined
step-boundary write (``combine.py``): not sent yet / committed with its rows not handed to the
passes; each is passed the actor id and the execution id of every boundary it carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import attrs

from akter.errors import ConfigurationError

POINTS = frozenset(
    {
        "turn.before_handler",
        "turn.before_commit",
        "turn.after_commit",
        "relay.after_claim",
        "relay.before_delivery",
        "relay.before_delete",
        "workflow.before_pass",
        "workflow.before_activity",
        "workflow.before_settle",
        "workflow.before_clock_settle",
        "workflow.before_suspend",
        "workflow.before_combined_write",
        "workflow.after_combined_write",
        "operate.before_send",
    }
)


@attrs.define(eq=False)
class Pause:
    """A paused fault point. The test awaits ``reached``, acts, then calls ``release()``."""

    point: str
    match: str | None
    once: bool = True
    _reached: asyncio.Event = attrs.field(factory=asyncio.Event)
    _released: asyncio.Event = attrs.field(factory=asyncio.Event)
    hits: int = 0

    # A barrier that is never reached must fail the test waiting on it with a message naming the
    # point, not hang until the whole run times out: so the bound is built in.
    async def reached(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109 -- built-in bound, see above
        """Wait until a turn (or relay, or workflow) is paused here; ``TimeoutError`` after
        ``timeout`` seconds, naming the point."""
        try:
            await asyncio.wait_for(self._reached.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"fault point {self.point} was not reached within {timeout}s") from None

    def release(self) -> None:
        self._released.set()

    async def _block(self) -> None:
        self.hits += 1
        self._reached.set()
        await self._released.wait()


@attrs.frozen
class Crash:
    point: str
    match: str | None


class InjectedFailure(RuntimeError):
    """What a ``Fail`` fault raises: a bug in akter's own code, where the test put it."""


@attrs.define(eq=False)
class Fail:
    """Raise ``InjectedFailure`` at the point, every time it is reached (for ids equal to
    ``match``): the engine meeting a bug of its own there, which it must survive."""

    point: str
    match: str | None
    hits: int = 0


Fault = Pause | Crash | Fail

_armed: dict[str, list[Fault]] = {}


def _check_point(point: str) -> None:
    if point not in POINTS:
        raise ValueError(f"unknown fault point {point!r}; known: {sorted(POINTS)}")


def arm(fault: Fault) -> Fault:
    _check_point(fault.point)
    _armed.setdefault(fault.point, []).append(fault)
    return fault


def disarm(fault: Fault) -> None:
    """Disarm one fault (armed or already gone)."""
    with contextlib.suppress(ValueError):
        _armed.get(fault.point, []).remove(fault)


def disarm_all() -> None:
    _armed.clear()


def load_environment(value: str | None = None) -> None:
    """Arm the crashes named in ``AKTER_FAULTS`` (called whenever an engine starts). Idempotent:
    a crash already armed is not armed again, so an App started twice crashes once per point."""
    spec = os.environ.get("AKTER_FAULTS", "") if value is None else value
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        point, _, rest = entry.partition("=")
        action, _, match = rest.partition("@")
        if action != "crash":
            raise ConfigurationError(
                f"AKTER_FAULTS entry {entry!r}: only 'crash' can be armed from the environment"
            )
        crash = Crash(point=point, match=match or None)
        if crash not in _armed.get(point, []):
            arm(crash)


def armed(point: str) -> bool:
    """Whether anything is armed at ``point`` (callers may take a slower, splittable path)."""
    return bool(_armed.get(point))


async def hit(point: str, *ids: str) -> None:
    faults = _armed.get(point)
    if not faults:
        return
    for fault in list(faults):
        if fault.match is not None and fault.match not in ids:
            continue
        if isinstance(fault, Crash):
            os.kill(os.getpid(), signal.SIGKILL)
            return  # not reached: SIGKILL cannot be caught
        if isinstance(fault, Fail):
            fault.hits += 1
            raise InjectedFailure(f"injected failure at {point}")
        if fault.once:
            if fault not in faults:
                continue  # taken by another caller while this one was blocked
            faults.remove(fault)
        await fault._block()
        return  # one pause per hit: two armed at one point hold two callers side by side
