"""With no OpenTelemetry SDK configured, akter's wrappers call straight through.

Run in a fresh interpreter: a test elsewhere in the suite installs an SDK for its process, and
OpenTelemetry allows one global provider per process."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import asyncio
from akter import telemetry

assert telemetry.active() is False

class Boom(Exception):
    pass

async def handler(*args):
    return args

async def failing(*args):
    raise Boom("no span, no swallowing")

async def main():
    args = (None, None, None, None, "c-1", None, None)
    assert await telemetry.traced_turn(handler)(*args) == args
    try:
        await telemetry.traced_turn(failing)(*args)
    except Boom:
        pass
    else:
        raise AssertionError("the exception was swallowed")
    assert telemetry.carrier() is None  # nothing to store with an intent

asyncio.run(main())
print("ok")
"""


def test_without_an_sdk_the_wrappers_call_straight_through() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
