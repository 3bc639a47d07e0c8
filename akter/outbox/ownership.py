"""Bucket ownership: which live relay process owns which of the 256 buckets.

Every relay process is a *member*: a row in ``akter_relay_members`` whose ``expires_at`` it
pushes forward on every heartbeat. Each bucket is a row in ``akter_relay_buckets`` with an
``owner`` and a lease ``expires_at``. Both run on the real clock (``clock_timestamp()``), never on
the durable clock tests move.

How a bucket's owner is decided (``wanted``): every member reads the same set of live members and
ranks them per bucket by rendezvous hashing (highest ``blake2b(member, bucket)`` wins). All members
agree on the answer without talking to each other, each gets about ``256 / n`` buckets, and a
member joining or leaving moves only the buckets it gains or loses. A member then, on every tick,
releases the buckets it holds but no longer wants, and takes (or renews) the ones it wants that
are free or whose lease ran out. A bucket is never taken while another member's lease on it is
live, so at most one live member owns it at a time; a bucket changes hands within one heartbeat
of its old owner releasing it, and has no owner in between (its due rows wait that long; the
hand-over gap in docs/relay.md). Every member computes the same assignment, so no bucket stays
unowned once the member set is stable.

Failover after a SIGKILL: the dead member's row and leases stop being renewed; after
``lease`` the survivors see it gone, want its buckets, and take them at their next tick: at most
``lease + heartbeat`` (defaults 4 s + 1 s). A member that cannot reach the database stops
claiming in its buckets when its own lease would have run out (measured locally, from before the
renewal was sent), so two members never both believe they own a bucket for longer than the
clocks' drift.

A draining member (``hold``, while ``relay.stop()`` lets work in flight finish) deletes its
member row, so the others' assignment no longer counts it and they take every bucket it
releases at their next tick, and it renews only the buckets its remaining work needs,
releasing each as that work ends; ``leave`` then releases the rest.

Ownership is a hint for efficiency (invariant 1): outbox deliveries are safe without it (claims
and receipts), and workflow activations are fenced by generations.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from typing import Any

import attrs
import psycopg

from akter.ids import BUCKET_COUNT
from akter.outbox import queries

log = logging.getLogger("akter.relay.ownership")

ALL_BUCKETS: tuple[int, ...] = tuple(range(-(BUCKET_COUNT // 2), BUCKET_COUNT // 2))


def _score(member: str, bucket: int) -> bytes:
    return hashlib.blake2b(f"{bucket}:{member}".encode(), digest_size=8).digest()


def wanted(member: str, members: Sequence[str]) -> frozenset[int]:
    """The buckets ``member`` should own among ``members`` (rendezvous hashing; pure)."""
    if member not in members:
        return frozenset()
    return frozenset(b for b in ALL_BUCKETS if max(members, key=lambda m: _score(m, b)) == member)


@attrs.define
class Ownership:
    """One member's view of its buckets, renewed by ``tick`` on a connection of its own."""

    member: str
    lease_ms: int
    owned: frozenset[int] = frozenset()
    #: monotonic time until which ``owned`` is safe to act on
    valid_until: float = 0.0
    members: tuple[str, ...] = ()

    def current(self) -> frozenset[int]:
        """The buckets this member may claim in right now."""
        return self.owned if time.monotonic() < self.valid_until else frozenset()

    async def tick(self, conn: psycopg.AsyncConnection[Any]) -> frozenset[int]:
        """Heartbeat, then release and take buckets; returns the buckets now owned.

        Each statement commits on its own (autocommit): holding bucket rows across statements
        while other members do the same could deadlock."""
        started = time.monotonic()
        params: dict[str, Any] = {"member": self.member, "ttl_ms": self.lease_ms, "lease_ms": self.lease_ms}
        await conn.execute(queries.HEARTBEAT, params)
        rows = await (await conn.execute(queries.LIVE_MEMBERS)).fetchall()
        members = tuple(r[0] for r in rows)
        want = wanted(self.member, members)
        await conn.execute(queries.RELEASE, {**params, "keep": sorted(want)})
        taken = await (await conn.execute(queries.ACQUIRE, {**params, "want": sorted(want)})).fetchall()
        owned = frozenset(r[0] for r in taken)
        if members != self.members or owned != self.owned:
            log.info(
                "ownership member=%s members=%d owned=%d wanted=%d",
                self.member,
                len(members),
                len(owned),
                len(want),
            )
        if members != self.members:
            await conn.execute(queries.FORGET_MEMBERS)
        self.members = members
        self.owned = owned
        self.valid_until = started + self.lease_ms / 1000
        return owned

    async def hold(self, conn: psycopg.AsyncConnection[Any], keep: frozenset[int]) -> frozenset[int]:
        """The tick of a draining member: out of the member set, release every owned bucket
        but ``keep`` and renew those; returns the buckets still owned. It takes none."""
        started = time.monotonic()
        keep = keep & self.owned
        params: dict[str, Any] = {"member": self.member, "lease_ms": self.lease_ms}
        await conn.execute(queries.RETIRE, params)
        await conn.execute(queries.RELEASE, {**params, "keep": sorted(keep)})
        taken = await (await conn.execute(queries.ACQUIRE, {**params, "want": sorted(keep)})).fetchall()
        owned = frozenset(r[0] for r in taken)
        if owned != self.owned:
            log.info("ownership member=%s draining owned=%d", self.member, len(owned))
        self.members = ()
        self.owned = owned
        self.valid_until = started + self.lease_ms / 1000
        return owned

    async def leave(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Release every bucket and the member row, so survivors take over at their next tick."""
        self.owned = frozenset()
        self.valid_until = 0.0
        await conn.execute(queries.LEAVE, {"member": self.member})
