"""The ``akter`` command as the tests run it, answering as a finished process does (exit code,
stdout, stderr): ``akter_cli`` starts the real process, ``akter_in_process`` runs the same
command line through click's runner in this process.

A test runs the command in process when what it prints and how it exits is the point, which is
most of them: a process costs a Python start and an import of akter and the App each time. A
real process stays where it is the point: one smoke test per command family, a command whose
environment differs from the test's, every crash and signal test.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from akter.cli import main

ROOT = Path(__file__).resolve().parents[2]


def akter_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m akter.cli ARGS`` in its own process, with this tree on its path."""
    return subprocess.run(
        [sys.executable, "-m", "akter.cli", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT), "AKTER_LOG_LEVEL": "warning", **(env or {})},
        cwd=ROOT, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip


async def akter_in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The same command line through click's runner, in a worker thread (the command runs an
    event loop of its own). Under pytest the command leaves logging as the test runner set it
    (``akter.logs.configure`` keeps a root logger that has handlers), so its log lines reach the
    test's capture, not its stderr."""
    result = await asyncio.to_thread(CliRunner().invoke, main, list(args))
    return subprocess.CompletedProcess(["akter", *args], result.exit_code, result.stdout, result.stderr)
