"""Starts ``akter relay tests.apps.relay_app:app`` processes for the tests that kill them.

Each process gets the test database through ``AKTER_DATABASE_URL``, short ownership leases (so a
SIGKILLed process's buckets move within about a second), and optional ``AKTER_FAULTS``. Its log
goes to a file, read back when a test fails."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: relay settings for tests: failover in about a second, a short claim lease
TEST_SETTINGS = {
    "AKTER_RELAY_HEARTBEAT": "0.2",
    "AKTER_RELAY_OWNERSHIP_LEASE": "1.0",
    "AKTER_RELAY_POLL_INTERVAL": "0.5",
    "AKTER_RELAY_CLAIM_LEASE": "30",
}


class RelayProcess:
    """One ``akter relay`` process."""

    def __init__(
        self,
        database_url: str,
        *,
        faults: str = "",
        app: str = "tests.apps.relay_app:app",
        args: Sequence[str] = (),
        **settings: str,
    ) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="akter-relay-", suffix=".log", delete=False)  # noqa: SIM115 -- kept open for the child's lifetime
        env = {
            **os.environ,
            **TEST_SETTINGS,
            **settings,
            "AKTER_DATABASE_URL": database_url,
            "AKTER_FAULTS": faults,
            "PYTHONPATH": str(ROOT),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "akter.cli", "relay", app, *args],
            env=env,
            cwd=ROOT,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> int:
        self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(timeout=30)

    def terminate(self, timeout: float = 30) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout=timeout)

    def output(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)
