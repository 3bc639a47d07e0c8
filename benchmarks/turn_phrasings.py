"""How to phrase a turn's SQL: the candidates side by side, without the kernel around them.

    python benchmarks/turn_phrasings.py [--database-url URL] [--n 1000] [--rounds 3]
                                        [--variants floor,simple,...]

Each variant performs the database side of one turn on a random one of 10,000 existing actors
(lock the row, read state and receipt, then write generation, state, one event and the receipt,
and commit), with fixed payloads so that only the phrasing differs:

* ``floor``: the commit floor, one autocommit single-row INSERT (what a turn is compared with);
* ``simple``: two simple-protocol batches with client-side binding, ``BEGIN; <load>`` and
  ``<write>; COMMIT`` (the kernel before its turn procedures): the server parses and plans both every turn;
* ``pipeline``: psycopg pipeline mode with server-side prepared statements, BEGIN + load in one
  flush and write + COMMIT in a second;
* ``prepared``: psycopg's prepared statements without a pipeline: four round trips;
* ``execute``: SQL-level ``PREPARE`` once per connection, then ``BEGIN; EXECUTE load(...)`` and
  ``EXECUTE write(...); COMMIT`` in two simple-protocol batches;
* ``functions``: the same PL/pgSQL bodies as functions, ``BEGIN; SELECT * FROM load(...)`` and
  ``SELECT write(...); COMMIT`` (created in the benchmark database only);
* ``procedures``: the kernel's PL/pgSQL procedures (``sql/functions/akter_turn_load_versioned.sql``,
  ``akter_turn_write.sql``), ``BEGIN; CALL akter_turn_load_versioned(...)`` and
  ``CALL akter_turn_write(...); COMMIT``, as the kernel sends them.

Variants run interleaved, one operation each in a shuffled order, every variant on its own
connection, so all meet the same machine at the same moments (the machines are shared and their
load swings within seconds). Reports, per variant: median latency and its ratio to the floor's,
this process's CPU per operation and, when the server runs on this machine, the CPU its backend
spent per operation (from /proc, 10 ms ticks: read it over thousands of operations).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, LiteralString

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from akter.actor import queries
from akter.ids import routing_key
from akter.store.database import resolve_database_url
from akter.store.migrate import migrate
from akter.store.pool import connection_kwargs

ACTORS = 10_000
KEYS = [
    {
        "rk": routing_key("bench", "Bench", f"a{i}"),
        "tenant": "bench",
        "actor_type": "Bench",
        "actor_id": f"a{i}",
    }
    for i in range(ACTORS)
]

_KEY = (
    "routing_key = %(rk)s AND tenant = %(tenant)s AND actor_type = %(actor_type)s AND actor_id = %(actor_id)s"
)

# The statements of the kernel before its turn procedures: the lock and the read in one statement (with a
# sub-select that tells whether another turn committed while this one waited for the lock) and
# the write as one statement of CTEs.
LOAD: LiteralString = """
SELECT g.event_seq, g.version,
       (SELECT x.version FROM actor_generations x
         WHERE x.routing_key = %(rk)s AND x.tenant = %(tenant)s
           AND x.actor_type = %(actor_type)s AND x.actor_id = %(actor_id)s) AS seen_version,
       s.state, r.command, r.payload_hash, r.caller_key, r.outcome,
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

WRITE: LiteralString = """
WITH gen AS (UPDATE actor_generations SET version = version + 1, event_seq = %(event_seq)s + 1
              WHERE routing_key = %(rk)s AND tenant = %(tenant)s
                AND actor_type = %(actor_type)s AND actor_id = %(actor_id)s),
st AS (INSERT INTO actor_state (routing_key, tenant, actor_type, actor_id, state, shape, updated_at)
       VALUES (%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(state)s, %(state_shape)s, akter_now())
       ON CONFLICT (routing_key, tenant, actor_type, actor_id)
       DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at),
ev AS (INSERT INTO actor_events
         (routing_key, tenant, actor_type, actor_id, sequence, tag, value, command_id, created_at)
       VALUES (%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(event_seq)s + 1, %(tag0)s, %(value0)s,
               %(command_id)s, akter_now()))
INSERT INTO actor_receipts (routing_key, tenant, actor_type, actor_id, command_id, command,
                            payload_hash, caller_key, outcome, failed, expires_at, created_at)
VALUES (%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(command_id)s, %(command)s,
        %(payload_hash)s, %(caller_key)s, %(outcome)s, %(failed)s,
        to_timestamp(%(expires_ms)s / 1000.0), akter_now())
"""

TYPES = {
    "rk": "bigint",
    "tenant": "text",
    "actor_type": "text",
    "actor_id": "text",
    "command_id": "text",
    "command": "text",
    "payload_hash": "bytea",
    "caller_key": "text",
    "outcome": "bytea",
    "failed": "boolean",
    "expires_ms": "bigint",
    "event_seq": "bigint",
    "state": "bytea",
    "tag0": "text",
    "value0": "bytea",
}


def positional(named: str, name: str) -> tuple[str, str]:
    """``PREPARE name (types) AS <named with $n>`` and the ``EXECUTE name(%(p)s, ...)`` text."""
    order: list[str] = []

    def number(m: re.Match[str]) -> str:
        if m.group(1) not in order:
            order.append(m.group(1))
        return f"${order.index(m.group(1)) + 1}"

    body = re.sub(r"%\((\w+)\)s", number, named)
    prepare = f"PREPARE {name} ({', '.join(TYPES[p] for p in order)}) AS {body}"
    execute = f"EXECUTE {name}({', '.join(f'%({p})s' for p in order)})"
    return prepare, execute


PREPARE_LOAD, EXECUTE_LOAD = positional(LOAD, "bench_load")
PREPARE_WRITE, EXECUTE_WRITE = positional(WRITE, "bench_write")


def write_params(key: dict[str, Any], command_id: str, event_seq: int) -> dict[str, Any]:
    return {
        **key,
        "command_id": command_id,
        "command": "bump",
        "payload_hash": os.urandom(32),
        "caller_key": "anonymous",
        "outcome": b'\x00{"ok":1}',
        "failed": False,
        "expires_ms": int(time.time() * 1000) + 86_400_000,
        "event_seq": event_seq,
        "state": b'\x00{"count":%d}' % (event_seq + 1),
        "state_shape": "bench",  # actor_state.shape is NOT NULL; no App reads these states
        "tag0": "Bumped",
        "value0": b'\x00{"total":1}',
    }


Conn = psycopg.AsyncConnection[Any]


async def floor(conn: Conn, key: dict[str, Any], command_id: str) -> None:
    await conn.execute("INSERT INTO bench_floor (k, v) VALUES (%s, %s)", (command_id, 1))


async def simple(conn: Conn, key: dict[str, Any], command_id: str) -> None:
    cur = psycopg.AsyncClientCursor(conn)
    await cur.execute("BEGIN; " + LOAD, {**key, "command_id": command_id})
    cur.nextset()
    row = await cur.fetchone()
    assert row is not None
    await cur.execute(WRITE + "; COMMIT", write_params(key, command_id, row[0]))


async def pipeline(conn: Conn, key: dict[str, Any], command_id: str) -> None:
    async with conn.pipeline() as p:
        cur = conn.cursor()
        await conn.execute("BEGIN")
        await cur.execute(LOAD, {**key, "command_id": command_id}, prepare=True)
        await p.sync()
        row = await cur.fetchone()
        assert row is not None
        await cur.execute(WRITE, write_params(key, command_id, row[0]), prepare=True)
        await conn.execute("COMMIT")
        await p.sync()


async def prepared(conn: Conn, key: dict[str, Any], command_id: str) -> None:
    cur = conn.cursor()
    await conn.execute("BEGIN")
    await cur.execute(LOAD, {**key, "command_id": command_id}, prepare=True)
    row = await cur.fetchone()
    assert row is not None
    await cur.execute(WRITE, write_params(key, command_id, row[0]), prepare=True)
    await conn.execute("COMMIT")


_executes: set[int] = set()


async def execute(conn: Conn, key: dict[str, Any], command_id: str) -> None:
    # This process never rolls back on these connections; in the kernel, psycopg's DEALLOCATE ALL
    # after a rollback (on a connection where it prepared statements) would drop these.
    if id(conn) not in _executes:
        await conn.execute(PREPARE_LOAD)
        await conn.execute(PREPARE_WRITE)
        _executes.add(id(conn))
    cur = psycopg.AsyncClientCursor(conn)
    await cur.execute("BEGIN; " + EXECUTE_LOAD, {**key, "command_id": command_id})
    cur.nextset()
    row = await cur.fetchone()
    assert row is not None
    await cur.execute(EXECUTE_WRITE + "; COMMIT", write_params(key, command_id, row[0]))


# The bodies of the kernel's first turn procedures (today's are sql/functions/akter_turn_*.sql) as
# functions: a set-returning load and a void write.
FUNCTIONS = """
CREATE FUNCTION bench_load(p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_command_id text)
RETURNS TABLE (event_seq bigint, state bytea, command text, payload_hash bytea, caller_key text,
               outcome bytea, now_ms bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM FROM actor_generations g
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant AND g.actor_type = p_actor_type
       AND g.actor_id = p_actor_id
       FOR UPDATE;
    RETURN QUERY
    SELECT g.event_seq, s.state, r.command, r.payload_hash, r.caller_key, r.outcome,
           (extract(epoch FROM akter_now()) * 1000)::bigint
      FROM actor_generations g
      LEFT JOIN actor_state s
        ON s.routing_key = g.routing_key AND s.tenant = g.tenant
       AND s.actor_type = g.actor_type AND s.actor_id = g.actor_id
      LEFT JOIN actor_receipts r
        ON r.routing_key = g.routing_key AND r.tenant = g.tenant
       AND r.actor_type = g.actor_type AND r.actor_id = g.actor_id AND r.command_id = p_command_id
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant AND g.actor_type = p_actor_type
       AND g.actor_id = p_actor_id;
END $$;
CREATE FUNCTION bench_write(
    p_rk bigint, p_tenant text, p_actor_type text, p_actor_id text, p_command_id text,
    p_command text, p_payload_hash bytea, p_caller_key text, p_outcome bytea, p_failed boolean,
    p_expires_ms bigint, p_state bytea, p_state_shape text, p_event_seq bigint, p_tags text[],
    p_values bytea[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    emitted integer := coalesce(cardinality(p_tags), 0);
BEGIN
    UPDATE actor_generations g SET version = g.version + 1, event_seq = p_event_seq + emitted
     WHERE g.routing_key = p_rk AND g.tenant = p_tenant AND g.actor_type = p_actor_type
       AND g.actor_id = p_actor_id;
    IF p_state IS NOT NULL THEN
        INSERT INTO actor_state (routing_key, tenant, actor_type, actor_id, state, shape, updated_at)
        VALUES (p_rk, p_tenant, p_actor_type, p_actor_id, p_state, p_state_shape, akter_now())
        ON CONFLICT (routing_key, tenant, actor_type, actor_id)
        DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at;
    END IF;
    IF emitted > 0 THEN
        INSERT INTO actor_events
            (routing_key, tenant, actor_type, actor_id, sequence, tag, value, command_id, created_at)
        SELECT p_rk, p_tenant, p_actor_type, p_actor_id, p_event_seq + e.n, e.tag, e.value,
               p_command_id, akter_now()
          FROM unnest(p_tags, p_values) WITH ORDINALITY AS e(tag, value, n);
    END IF;
    INSERT INTO actor_receipts (routing_key, tenant, actor_type, actor_id, command_id, command,
                                payload_hash, caller_key, outcome, failed, expires_at, created_at)
    VALUES (p_rk, p_tenant, p_actor_type, p_actor_id, p_command_id, p_command, p_payload_hash,
            p_caller_key, p_outcome, p_failed, to_timestamp(p_expires_ms / 1000.0), akter_now());
END $$;
"""


async def functions(conn: Conn, key: dict[str, Any], command_id: str) -> None:
    cur = psycopg.AsyncClientCursor(conn)
    load = "BEGIN; SELECT * FROM bench_load(%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(command_id)s)"
    await cur.execute(load, {**key, "command_id": command_id})
    cur.nextset()
    row = await cur.fetchone()
    assert row is not None
    write = queries.write(1).replace("CALL akter_turn_write(", "SELECT bench_write(")
    await cur.execute(write + "; COMMIT", write_params(key, command_id, row[0]))


async def procedures(conn: Conn, key: dict[str, Any], command_id: str) -> None:
    cur = psycopg.AsyncClientCursor(conn)
    await cur.execute(queries.BEGIN_AND_LOAD, {**key, "command_id": command_id})
    cur.nextset()
    row = await cur.fetchone()
    assert row is not None
    await cur.execute(queries.write(1) + "; COMMIT", write_params(key, command_id, row[0]))


VARIANTS: dict[str, Callable[[Conn, dict[str, Any], str], Awaitable[None]]] = {
    "floor": floor,
    "simple": simple,
    "pipeline": pipeline,
    "prepared": prepared,
    "execute": execute,
    "functions": functions,
    "procedures": procedures,
}


def backend_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of a local server process; None when it is not local."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(url: str, names: list[str], n: int) -> None:
    conns = {name: await psycopg.AsyncConnection.connect(url, **connection_kwargs(url)) for name in names}
    pids = {name: conns[name].info.backend_pid for name in names}
    latencies: dict[str, list[float]] = {name: [] for name in names}
    python_cpu = dict.fromkeys(names, 0.0)
    server_cpu: dict[str, float | None] = dict.fromkeys(names, 0.0)
    rng = random.Random(5)
    for i in range(n + 100):  # the first 100 warm connections and plan caches
        order = names[:]
        rng.shuffle(order)
        for name in order:
            key, command_id = KEYS[rng.randrange(ACTORS)], uuid.uuid4().hex
            s0, c0, t0 = backend_cpu(pids[name]), time.process_time(), time.perf_counter()
            await VARIANTS[name](conns[name], key, command_id)
            t1, c1, s1 = time.perf_counter(), time.process_time(), backend_cpu(pids[name])
            if i < 100:
                continue
            latencies[name].append(t1 - t0)
            python_cpu[name] += c1 - c0
            spent = server_cpu[name]
            server_cpu[name] = None if spent is None or s0 is None or s1 is None else spent + s1 - s0
    base = statistics.median(latencies["floor"]) if "floor" in latencies else None
    for name in names:
        p50 = statistics.median(latencies[name]) * 1000
        ratio = f"x{p50 / (base * 1000):5.2f}" if base else ""
        spent = server_cpu[name]
        server = f"{spent / n * 1e6:6.0f} us" if spent is not None else "   n/a"
        print(
            f"  {name:10} p50 {p50:7.3f} ms {ratio}   python cpu {python_cpu[name] / n * 1e6:5.0f} us/op"
            f"   backend cpu {server}/op"
        )
    for conn in conns.values():
        await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--n", type=int, default=1000, help="operations per variant and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    names = args.variants.split(",")

    server_url = resolve_database_url(args.database_url)
    dbname = f"akter_phrasings_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {dbname}")
        row = admin.execute("SHOW server_version").fetchone()
    url = psycopg.conninfo.make_conninfo(server_url, dbname=dbname)
    try:
        migrate(url)
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as setup:
            await setup.execute("CREATE TABLE bench_floor (k text PRIMARY KEY, v int)")
            await setup.execute(FUNCTIONS)
            async with setup.cursor().copy(
                "COPY actor_generations (routing_key, tenant, actor_type, actor_id) FROM STDIN"
            ) as copy:
                for key in KEYS:
                    await copy.write_row((key["rk"], key["tenant"], key["actor_type"], key["actor_id"]))
        print(f"PostgreSQL {row[0] if row else '?'}, {os.cpu_count()} cores, {args.n} operations per round")
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}")
            await measure(url, names, args.n)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {dbname} WITH (FORCE)")


if __name__ == "__main__":
    asyncio.run(main())
