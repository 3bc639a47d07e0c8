"""The SQL of the outbox and of bucket ownership, in one place.

Writes of staged intents run in the sender's turn, under its row lock (``intents.py``); the
claim, acknowledge and back-off statements run in the relay, each as one autocommit statement,
so no transaction is ever held open while a delivery runs or while the relay waits
(``relay.py``). Every outbox statement names the sender's routing key first, except the due scan,
which goes through the ``(bucket, due_at)`` index by design. Ownership statements
(``ownership.py``) use the real clock, ``clock_timestamp()``; everything about due times uses the
database's durable clock, ``akter_now()``.
"""

from __future__ import annotations

from typing import LiteralString

from akter.ids import ACTOR_KEY

CHANNEL = "akter_outbox"
#: ``akter.testing.Clock`` notifies this after moving the durable clock
WAKE_CHANNEL = "akter_wake"

SENDER = ACTOR_KEY

# The intent id is minted here, from the turn's clock and the deployment's retry window read in
# the same statement, so the id's expiry is always the one the receiver will check.
# A keyed intent replaces the pending one: new id, body and due time, a fresh attempt count, and
# no claim — so a relay that claimed the old body will not delete the new one.
INSERT: LiteralString = """
INSERT INTO actor_outbox (routing_key, tenant, actor_type, actor_id, intent_id, bucket, due_at,
                          timer_key, target_type, target_id, command, payload, caller, created_at,
                          trace_context)
SELECT %(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s,
       'v1.' || %(now_ms)s::bigint || '.' || (i.due_ms + w.ms) || '.' || i.nonce,
       %(bucket)s, to_timestamp(i.due_ms / 1000.0), i.timer_key, i.target_type, i.target_id,
       i.command, i.payload, i.caller, akter_now(), %(trace)s
  FROM (SELECT (extract(epoch FROM retry_window) * 1000)::bigint AS ms FROM actor_deployment) AS w,
       unnest(%(nonces)s::text[], %(due)s::bigint[], %(keys)s::text[], %(target_types)s::text[],
              %(target_ids)s::text[], %(commands)s::text[], %(payloads)s::bytea[], %(callers)s::bytea[])
         AS i(nonce, due_ms, timer_key, target_type, target_id, command, payload, caller)
ON CONFLICT (routing_key, tenant, actor_type, actor_id, timer_key) WHERE timer_key IS NOT NULL
DO UPDATE SET intent_id = excluded.intent_id, due_at = excluded.due_at,
              target_type = excluded.target_type, target_id = excluded.target_id,
              command = excluded.command, payload = excluded.payload, caller = excluded.caller,
              attempts = 0, last_error = NULL, claim = NULL, claimed_by = NULL,
              created_at = excluded.created_at, trace_context = excluded.trace_context"""

CANCEL: LiteralString = f"DELETE FROM actor_outbox WHERE {SENDER} AND timer_key = ANY(%(cancel)s::text[])"

NOTIFY: LiteralString = "SELECT pg_notify('akter_outbox', %(bucket_text)s)"

# The due scan and the claim, one statement, through the (bucket, due_at) index:
#
# - ``due``: rows due now of the owned buckets, read in index order — bucket by bucket, each in
#   due-time order — until ``limit`` rows are found, so a claim reads what it takes and never the
#   whole backlog (no sort). The buckets come in two runs, ``head`` then ``tail``: the relay
#   rotates the starting bucket on every claim, so no bucket waits behind another's backlog.
#   SKIP LOCKED lets several relays (and a turn replacing a keyed intent) work side by side;
# - ``claimed``: due_at pushed forward by the lease (if this relay dies the row becomes due again
#   by itself), the attempt counted, our token set;
# - ``next_ms``: when asked (``probe``, an idle pass) and nothing was claimed, the milliseconds
#   until the next row falls due within the horizon (the poll interval), so the relay can sleep
#   exactly that long. Only rows due within the horizon are read: timers due later cost one index
#   descent per bucket. A claim that found work skips it, so a woken relay delivers sooner.
#
# Always one row or more: ``next_ms`` first (NULL: none within the horizon, or not asked), then
# the claimed row's columns (all NULL when nothing was claimed).
CLAIM: LiteralString = """
WITH due AS (
    SELECT * FROM (SELECT routing_key, tenant, actor_type, actor_id, intent_id, due_at
                     FROM actor_outbox
                    WHERE bucket = ANY(%(head)s::smallint[]) AND due_at <= akter_now()
                    LIMIT %(limit)s
                      FOR UPDATE SKIP LOCKED) AS h
    UNION ALL
    SELECT * FROM (SELECT routing_key, tenant, actor_type, actor_id, intent_id, due_at
                     FROM actor_outbox
                    WHERE bucket = ANY(%(tail)s::smallint[]) AND due_at <= akter_now()
                    LIMIT %(limit)s
                      FOR UPDATE SKIP LOCKED) AS t
    LIMIT %(limit)s
), claimed AS (
    UPDATE actor_outbox o
       SET due_at = akter_now() + %(lease_ms)s * interval '1 millisecond',
           attempts = o.attempts + 1, claim = %(token)s, claimed_by = %(member)s
      FROM due
     WHERE o.routing_key = due.routing_key AND o.tenant = due.tenant
       AND o.actor_type = due.actor_type AND o.actor_id = due.actor_id
       AND o.intent_id = due.intent_id
    RETURNING o.routing_key, o.tenant, o.actor_type, o.actor_id, o.intent_id, o.timer_key,
              o.target_type, o.target_id, o.command, o.payload, o.caller, o.attempts, o.trace_context,
              (extract(epoch FROM akter_now() - due.due_at) * 1000)::bigint AS late_ms
)
SELECT n.next_ms, c.*
  FROM (SELECT CASE WHEN %(probe)s AND NOT EXISTS (SELECT 1 FROM claimed) THEN
               (SELECT (extract(epoch FROM min(s.due_at) - akter_now()) * 1000)::bigint
                  FROM actor_outbox s
                 WHERE s.bucket = ANY(%(head)s::smallint[] || %(tail)s::smallint[]) AND s.due_at > akter_now()
                   AND s.due_at <= akter_now() + %(horizon_ms)s * interval '1 millisecond')
               END AS next_ms) AS n
  LEFT JOIN claimed c ON true"""

_THIS_CLAIM = f"{SENDER} AND intent_id = %(intent_id)s AND claim = %(token)s"

# Delivered rows, deleted in a batch; a row whose claim token changed (a keyed replacement, a
# reclaim after the lease) is not ours any more and stays.
ACK: LiteralString = """
DELETE FROM actor_outbox o
 USING unnest(%(rks)s::bigint[], %(tenants)s::text[], %(types)s::text[], %(ids)s::text[],
              %(intents)s::text[], %(tokens)s::uuid[])
       AS a(rk, tenant, actor_type, actor_id, intent_id, token)
 WHERE o.routing_key = a.rk AND o.tenant = a.tenant AND o.actor_type = a.actor_type
   AND o.actor_id = a.actor_id AND o.intent_id = a.intent_id AND o.claim = a.token"""

# One delivered row, deleted inside its receiver's turn (with the turn's write, sql-side one
# round trip): only while our claim token is still on it.
ACK_IN_TURN: LiteralString = f"DELETE FROM actor_outbox WHERE {_THIS_CLAIM}"

BACK_OFF: LiteralString = f"""
UPDATE actor_outbox
   SET due_at = akter_now() + %(delay_ms)s * interval '1 millisecond',
       last_error = %(error)s, claim = NULL, claimed_by = NULL
 WHERE {_THIS_CLAIM}"""

# Renewed: an intent of a renewable command (``Command.renewable``) whose id expired before it
# could be delivered gets a fresh id, one retry window from now, and is due now with its attempts
# from zero — only while our claim is still on it — and the owning relay is woken. One statement:
# a crash before it leaves the row claimed, and the next claim meets the same refusal.
RENEW: LiteralString = f"""
WITH renewed AS (
    UPDATE actor_outbox
       SET intent_id = akter_mint_intent_id(NULL), due_at = akter_now(), attempts = 0,
           last_error = %(error)s, claim = NULL, claimed_by = NULL
     WHERE {_THIS_CLAIM}
    RETURNING bucket)
SELECT pg_notify('akter_outbox', bucket::text) FROM renewed"""

# Parked (sql/functions/akter_parked_due.sql): the relay gives up on the row. Its due time becomes the
# far-future sentinel, so no due scan reads it again; anything that gives it a due time again un-parks it
# (a trigger).
PARK: LiteralString = f"""
UPDATE actor_outbox
   SET due_at = akter_parked_due(), last_error = %(error)s, parked_at = akter_now(),
       parked_reason = %(reason)s, claim = NULL, claimed_by = NULL
 WHERE {_THIS_CLAIM}"""

# --- ownership (real clock) ---

HEARTBEAT: LiteralString = """
INSERT INTO akter_relay_members (member_id, expires_at)
VALUES (%(member)s, clock_timestamp() + %(ttl_ms)s * interval '1 millisecond')
ON CONFLICT (member_id) DO UPDATE
   SET heartbeat_at = clock_timestamp(), expires_at = excluded.expires_at"""

LIVE_MEMBERS: LiteralString = """
SELECT member_id FROM akter_relay_members WHERE expires_at > clock_timestamp() ORDER BY member_id"""

# Members gone for a while are forgotten; a minute's grace keeps the table readable for operators.
FORGET_MEMBERS: LiteralString = """
DELETE FROM akter_relay_members WHERE expires_at < clock_timestamp() - interval '1 minute'"""

RELEASE: LiteralString = """
UPDATE akter_relay_buckets SET owner = NULL, expires_at = NULL
 WHERE owner = %(member)s AND NOT (bucket = ANY(%(keep)s::smallint[]))"""

# Take (or renew) the wanted buckets that are ours, free, or whose owner's lease ran out.
ACQUIRE: LiteralString = """
UPDATE akter_relay_buckets
   SET owner = %(member)s, expires_at = clock_timestamp() + %(lease_ms)s * interval '1 millisecond'
 WHERE bucket = ANY(%(want)s::smallint[])
   AND (owner = %(member)s OR owner IS NULL OR expires_at <= clock_timestamp())
RETURNING bucket"""

# A draining member leaves the member set first and its buckets one by one (``Ownership.hold``).
RETIRE: LiteralString = "DELETE FROM akter_relay_members WHERE member_id = %(member)s"

LEAVE: LiteralString = """
WITH b AS (UPDATE akter_relay_buckets SET owner = NULL, expires_at = NULL WHERE owner = %(member)s)
DELETE FROM akter_relay_members WHERE member_id = %(member)s"""
