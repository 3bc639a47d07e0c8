"""``RelaySettings``: how a relay behaves, validated when built.

The relay (``relay.py``) runs by these numbers and each delivery (``delivery.py``) backs off and
parks by them, so they live apart from both.
"""

from __future__ import annotations

from datetime import timedelta

import attrs

from akter.errors import ConfigurationError


@attrs.frozen
class RelaySettings:
    """How a relay behaves. The defaults suit production; tests shorten the leases.

    ``concurrency``: deliveries in flight at once (each holds a pooled connection while it runs).
    ``batch_size``: rows claimed per statement at most. ``poll_interval``: the longest sleep
    between scans when no notification arrives. ``claim_lease``: how far a claim pushes a row's due
    time (a dead relay's claimed rows are retried after it). ``heartbeat`` / ``ownership_lease``:
    see ``ownership.py``. ``backoff_base`` / ``backoff_cap``: a failed delivery is retried after
    ``min(base * 2 ** (attempts - 1), cap)``. ``max_attempts``: a row whose delivery failed this
    many times is parked for an operator instead of retried (10 attempts take about 8.5 minutes
    of back-off with the defaults); see ``delivery.park_reason``. ``drain_timeout``: how long
    ``stop()`` lets deliveries, workflow passes and activity attempts in flight finish before it
    abandons them (25 s: under the 30 s a container platform waits before SIGKILL by default,
    leaving time to release the buckets)."""

    concurrency: int = 8
    batch_size: int = 64
    poll_interval: timedelta = timedelta(seconds=1)
    claim_lease: timedelta = timedelta(seconds=30)
    heartbeat: timedelta = timedelta(seconds=1)
    ownership_lease: timedelta = timedelta(seconds=4)
    backoff_base: timedelta = timedelta(seconds=1)
    backoff_cap: timedelta = timedelta(minutes=5)
    max_attempts: int = 10
    #: listen for notifications; off only to measure polling
    notifications: bool = True
    #: how often expired receipts of the owned buckets are pruned, and how many per statement
    retention_every: timedelta = timedelta(minutes=1)
    retention_batch: int = 1000
    #: the longest the listener waits on its connection before it checks it and looks up
    listen_timeout: timedelta = timedelta(seconds=5)
    drain_timeout: timedelta = timedelta(seconds=25)

    def __attrs_post_init__(self) -> None:
        problems = []
        if min(self.concurrency, self.batch_size, self.max_attempts, self.retention_batch) < 1:
            problems.append("concurrency, batch_size, max_attempts and retention_batch must be at least 1")
        durations = (
            "poll_interval",
            "claim_lease",
            "heartbeat",
            "ownership_lease",
            "backoff_base",
            "backoff_cap",
            "retention_every",
            "listen_timeout",
        )
        problems.extend(
            f"{name} must be positive" for name in durations if getattr(self, name) <= timedelta(0)
        )
        if self.drain_timeout < timedelta(0):
            problems.append("drain_timeout must not be negative")
        if self.heartbeat * 2 >= self.ownership_lease:
            problems.append("heartbeat must be under half the ownership_lease, or leases lapse between beats")
        if problems:
            raise ConfigurationError("; ".join(problems))

    def backoff_ms(self, attempts: int) -> int:
        base = self.backoff_base // timedelta(milliseconds=1)
        cap = self.backoff_cap // timedelta(milliseconds=1)
        return int(min(base * 2 ** min(max(attempts - 1, 0), 40), cap))
