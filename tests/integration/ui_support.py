"""``akter ui`` as a user starts it, for the tests of the page: a real process on a free port."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def serving_ui(app: str, database_url: str) -> Iterator[str]:
    """Run ``akter ui APP`` on a free port until the block ends; yields the URL it prints.
    ``AKTER_DATABASE_URL`` is left out of its environment so only ``database_url`` is used."""
    env = {k: v for k, v in os.environ.items() if k != "AKTER_DATABASE_URL"}
    env["PYTHONPATH"] = str(ROOT)
    command = [sys.executable, "-m", "akter.cli", "ui", app, "--database-url", database_url, "--port", "0"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        try:
            line = proc.stdout.readline()
            assert line.startswith("akter ui: serving http://127.0.0.1:"), line + proc.stderr.read()
            yield line.split()[3]
        finally:
            proc.terminate()
            proc.wait(timeout=20)
