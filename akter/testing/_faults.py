"""Arming fault points from a test (``akter.testing``): a crash, a pause or a failure at one of
``akter.faults.POINTS``."""

from __future__ import annotations

from akter import faults
from akter.faults import Crash, Fail, Pause


def crash(point: str, *, match: str | None = None) -> Crash:
    """SIGKILL this process when it reaches ``point`` (for ids equal to ``match``, if given)."""
    fault = Crash(point=point, match=match)
    faults.arm(fault)
    return fault


def pause(point: str, *, match: str | None = None, once: bool = True) -> Pause:
    """Block at ``point`` until ``release()``; await ``reached()`` to know it got there."""
    fault = Pause(point=point, match=match, once=once)
    faults.arm(fault)
    return fault


def fail(point: str, *, match: str | None = None) -> Fail:
    """Raise ``akter.faults.InjectedFailure`` at ``point`` every time it is reached (for ids
    equal to ``match``), until disarmed: what a bug in akter's own code there would do."""
    fault = Fail(point=point, match=match)
    faults.arm(fault)
    return fault


def disarm_all() -> None:
    faults.disarm_all()
