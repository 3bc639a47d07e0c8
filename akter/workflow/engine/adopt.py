"""Before a pass: may this runner replay the execution, and onto which manifest? (invariant 7)

``replay_problems`` loads the execution's start manifest (``manifest_store.load``), asks the pure
``compat.judge`` and, when nothing stands in the way but another start manifest, *moves* the
execution onto this code's manifest (its ``manifest_hash`` updated, fenced like every engine
write), so later checks compare with what it now runs under. Problems make the pass leave the
execution suspended for a compatible runner (``passes.Pass._leave_blocked``), never fail it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, LiteralString

from akter import logs
from akter.workflow.api.declare import workflows_of
from akter.workflow.core import manifest
from akter.workflow.core.compat import judge
from akter.workflow.engine import manifest_store, queries

if TYPE_CHECKING:
    import psycopg_pool

    from akter.actor.declare import Actor
    from akter.workflow.core.driver import StepKey, StepRow

log = logging.getLogger("akter.workflow")

# Move an execution onto this code's manifest, fenced like every engine write (a stale runner
# moves nothing), storing that manifest if no process stored it yet. The blocked reason an
# incompatible runner left goes too: this runner can replay it.
MOVE: LiteralString = (
    "WITH "
    + queries.FENCE
    + """,
accepted AS ("""
    + manifest_store.ACCEPT
    + """)
UPDATE actor_workflow_executions e
   SET manifest_hash = %(to_hash)s, blocked_reason = NULL, updated_at = akter_now()
  FROM fence
 WHERE e.routing_key = %(rk)s AND e.execution_id = %(eid)s AND e.manifest_hash = %(from_hash)s
   AND e.status <> 'finished'"""
)


async def replay_problems(
    actors: Mapping[str, Actor[Any]],
    pool: psycopg_pool.AsyncConnectionPool[Any],
    params: Mapping[str, Any],
    head: Mapping[str, Any],
    history: Mapping[StepKey, list[StepRow]],
) -> list[str]:
    """Why this runner cannot replay the execution whose row is ``head`` (as ``queries.LOAD``
    reads it) and whose recorded steps are ``history`` — one message per problem; none means
    go ahead. ``params`` are the pass's fenced-write parameters (owner, execution, generation).
    A compatible execution started under another manifest is moved onto this code's."""
    actor_type: str = params["actor_type"]
    name: str = head["workflow"]
    actor = actors.get(actor_type)
    workflow = workflows_of(actor).get(name)
    current, digest = (None, "") if workflow is None else manifest.of(workflow)
    start_hash: str = head["manifest_hash"]
    start = current
    if current is not None and start_hash != digest:
        start = await manifest_store.load(pool, actor_type, name, start_hash)
    problems = judge(
        actor_type=actor_type,
        workflow=name,
        declared_types=actors,
        current=current,
        start=start,
        start_hash=start_hash,
        recorded={key.step: rows[0].kind for key, rows in history.items() if rows},
        versions=_versions(head["versions"]),
    )
    if not problems and workflow is not None and start_hash != digest:
        async with pool.connection() as conn:
            cur = await conn.execute(
                MOVE,
                {
                    **params,
                    **manifest_store.accept_params([workflow]),
                    "from_hash": start_hash,
                    "to_hash": digest,
                },
            )
        if cur.rowcount:
            log.info(
                "execution moved from manifest %s to %s",
                start_hash[:12],
                digest[:12],
                extra=logs.fields(execution=params["eid"]),
            )
    return [p.message for p in problems]


def _versions(raw: Any) -> dict[str, int]:
    loaded: Any = json.loads(raw) if isinstance(raw, str | bytes) else raw
    return {str(k): int(v) for k, v in (loaded or {}).items()}
