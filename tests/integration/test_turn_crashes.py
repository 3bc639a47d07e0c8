"""Crash recovery of a turn: a real process is SIGKILLed at a fault point; a new process retries
the same command id; rows are checked through a separate connection."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from akter.ids import CommandId
from tests.integration.conftest import Peek

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _send(url: str, actor_id: str, command_id: str, faults: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AKTER_FAULTS": faults, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tests.apps.send_one", url, actor_id, command_id, "5"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _cid() -> str:
    import time

    now = time.time_ns() // 1_000_000
    return str(CommandId.mint(now, 3_600_000))


async def test_killed_before_commit_leaves_nothing_and_a_retry_commits_once(
    database_url: str, peek: Peek
) -> None:
    cid = _cid()
    died = _send(database_url, "k1", cid, faults="turn.before_commit=crash@k1")
    assert died.returncode == -signal.SIGKILL, died.stderr
    for table in ("actor_receipts", "actor_events", "actor_state", "actor_generations"):
        assert await peek.count(table) == 0, table
    retry = _send(database_url, "k1", cid)
    assert retry.returncode == 0, retry.stderr
    assert "<Success: 5>" in retry.stdout
    assert await peek.count("actor_receipts") == 1
    assert await peek.count("actor_events") == 1


async def test_killed_after_commit_a_retry_replays(database_url: str, peek: Peek) -> None:
    cid = _cid()
    died = _send(database_url, "k2", cid, faults="turn.after_commit=crash@k2")
    assert died.returncode == -signal.SIGKILL, died.stderr
    assert await peek.count("actor_receipts") == 1
    retry = _send(database_url, "k2", cid)
    assert retry.returncode == 0, retry.stderr
    assert "<Success: 5>" in retry.stdout
    assert await peek.count("actor_receipts") == 1
    assert await peek.count("actor_events") == 1
    assert await peek.value("SELECT event_seq FROM actor_generations") == 1


async def test_killed_before_the_handler_leaves_nothing(database_url: str, peek: Peek) -> None:
    died = _send(database_url, "k3", _cid(), faults="turn.before_handler=crash")
    assert died.returncode == -signal.SIGKILL, died.stderr
    assert await peek.count("actor_generations") == 0
