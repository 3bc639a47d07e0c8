"""Receipt retention: expired receipts of the owned buckets are deleted in bounded batches.

A receipt (``actor_receipts``) is kept until its command id expires (issued time plus the
deployment's retry window): after that no retry can carry the id, so the receipt can never be
read again. Every relay prunes the receipts of the buckets it owns (a receipt's bucket is its
actor's, ``routing_key >> 56``), so an App without workflows prunes too and two relays never
touch the same rows. Rows are locked with ``SKIP LOCKED``: a prune never waits for another
prune, and a receipt some other transaction holds is taken next round. The scan goes through
``actor_receipts_bucket_expiry`` (``sql/001_schema.sql``), one index descent per owned bucket.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, LiteralString

import psycopg
from psycopg_pool import AsyncConnectionPool

PRUNE_RECEIPTS: LiteralString = """
DELETE FROM actor_receipts r USING (
    SELECT routing_key, tenant, actor_type, actor_id, command_id FROM actor_receipts
     WHERE (routing_key >> 56) = ANY(%(buckets)s::bigint[]) AND expires_at < akter_now()
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED) old
 WHERE r.routing_key = old.routing_key AND r.tenant = old.tenant AND r.actor_type = old.actor_type
   AND r.actor_id = old.actor_id AND r.command_id = old.command_id"""

#: batches per round at most, so one round never runs for long
MAX_BATCHES = 10


async def prune_receipts(
    pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]], buckets: Collection[int], limit: int
) -> int:
    """Delete expired receipts of ``buckets``, ``limit`` per statement; returns how many."""
    if not buckets:
        return 0
    params = {"buckets": sorted(buckets), "limit": limit}
    deleted = 0
    async with pool.connection() as conn:
        for _ in range(MAX_BATCHES):
            cur = await conn.execute(PRUNE_RECEIPTS, params)
            deleted += cur.rowcount
            if cur.rowcount < limit:
                break
    return deleted
