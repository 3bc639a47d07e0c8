"""The SQL of a turn. Every statement names the routing key first, so the tables can be
distributed by it; every write happens under the actor row lock taken by ``LOAD``.
"""

from __future__ import annotations

from typing import LiteralString

KEY = "routing_key = %(rk)s AND tenant = %(tenant)s AND actor_type = %(actor_type)s AND actor_id = %(actor_id)s"

# Takes the actor row lock and reads everything a turn needs in one round trip. ``seen_version``
# is read by a sub-select with the statement's snapshot, while ``g`` is the row as locked: when
# another turn committed while this one waited for the lock, the two differ, the joined state and
# receipt are from before that commit, and the kernel reads them again (see kernel._load).
LOAD: LiteralString = """
SELECT g.generation, g.version,
       (SELECT x.version FROM actor_generations x
         WHERE x.routing_key = %(rk)s AND x.tenant = %(tenant)s
           AND x.actor_type = %(actor_type)s AND x.actor_id = %(actor_id)s) AS seen_version,
       g.event_seq, s.state,
       r.command, r.payload_hash, r.caller_key, r.outcome, r.failed,
       (extract(epoch FROM akter_now()) * 1000)::bigint AS now_ms
  FROM actor_generations g
  LEFT JOIN actor_state s
    ON s.routing_key = g.routing_key AND s.tenant = g.tenant
   AND s.actor_type = g.actor_type AND s.actor_id = g.actor_id
  LEFT JOIN actor_receipts r
    ON r.routing_key = g.routing_key AND r.tenant = g.tenant
   AND r.actor_type = g.actor_type AND r.actor_id = g.actor_id AND r.command_id = %(command_id)s
 WHERE g.routing_key = %(rk)s AND g.tenant = %(tenant)s
   AND g.actor_type = %(actor_type)s AND g.actor_id = %(actor_id)s
   FOR UPDATE OF g
"""

CREATE: LiteralString = """
INSERT INTO actor_generations (routing_key, tenant, actor_type, actor_id)
VALUES (%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s)
ON CONFLICT DO NOTHING
"""

# The write of a turn, one statement. Parts are switched on by parameters so that the statement
# text stays one of four (psycopg prepares it after a few uses).
_BUMP = f"""
gen AS (UPDATE actor_generations SET version = version + 1, event_seq = %(event_seq)s
         WHERE {KEY})"""

_STATE = """
st AS (INSERT INTO actor_state (routing_key, tenant, actor_type, actor_id, state, updated_at)
       VALUES (%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(state)s, akter_now())
       ON CONFLICT (routing_key, tenant, actor_type, actor_id)
       DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at)"""

_EVENTS = """
ev AS (INSERT INTO actor_events
         (routing_key, tenant, actor_type, actor_id, sequence, tag, value, command_id, created_at)
       SELECT %(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, e.seq, e.tag, e.value,
              %(command_id)s, akter_now()
         FROM unnest(%(seqs)s::bigint[], %(tags)s::text[], %(values)s::bytea[]) AS e(seq, tag, value))"""

_RECEIPT = """
INSERT INTO actor_receipts (routing_key, tenant, actor_type, actor_id, command_id, command,
                            payload_hash, caller_key, outcome, failed, expires_at, created_at)
VALUES (%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(command_id)s, %(command)s,
        %(payload_hash)s, %(caller_key)s, %(outcome)s, %(failed)s,
        to_timestamp(%(expires_ms)s / 1000.0), akter_now())"""


def write_statement(*, state: bool, events: bool) -> LiteralString:
    parts: list[LiteralString] = [_BUMP]
    if state:
        parts.append(_STATE)
    if events:
        parts.append(_EVENTS)
    return "WITH " + ",".join(parts) + _RECEIPT


WRITES: dict[tuple[bool, bool], LiteralString] = {
    (s, e): write_statement(state=s, events=e) for s in (False, True) for e in (False, True)
}
