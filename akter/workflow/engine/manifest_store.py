"""Stored manifests: ``actor_workflow_manifests``, written when an engine starts, read by hash.

Every manifest a process may start executions under is stored (``accept``) before any start can
commit, so a runner can always load an execution's start manifest (``load``), cached forever in
the process because a hash names one manifest. Derivation (``manifest.derive``) is pure and
lives in ``akter.workflow.core.manifest``.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from akter import codec
from akter.workflow.core.manifest import Manifest, all_workflows, of

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

    from akter.actor.declare import Actor
    from akter.workflow.api.declare import Workflow

ACCEPT: typing.LiteralString = """
INSERT INTO actor_workflow_manifests (actor_type, workflow, manifest_hash, manifest, accepted_at)
SELECT t.actor_type, t.workflow, t.manifest_hash, t.manifest, akter_now()
  FROM unnest(%(actor_types)s::text[], %(workflows)s::text[], %(hashes)s::text[], %(manifests)s::jsonb[])
       AS t(actor_type, workflow, manifest_hash, manifest)
ON CONFLICT (actor_type, workflow, manifest_hash) DO NOTHING"""

LOAD: typing.LiteralString = """
SELECT manifest FROM actor_workflow_manifests
 WHERE actor_type = %(actor_type)s AND workflow = %(workflow)s AND manifest_hash = %(manifest_hash)s"""


def accept_params(workflows: Iterable[Workflow[Any, Any]]) -> dict[str, list[str]]:
    """Parameters of ``ACCEPT`` for these workflows' manifests."""
    params: dict[str, list[str]] = {"actor_types": [], "workflows": [], "hashes": [], "manifests": []}
    for workflow in workflows:
        m, digest = of(workflow)
        params["actor_types"].append(workflow.actor.name)
        params["workflows"].append(workflow.name)
        params["hashes"].append(digest)
        params["manifests"].append(codec.canonical_json(m).decode())
    return params


async def accept(conn: psycopg.AsyncConnection[Any], actors: Iterable[Actor[Any]]) -> None:
    """Store the manifests of every workflow of ``actors`` (those already stored stay as they
    are). Done whenever an engine starts, so every execution a process starts has its start
    manifest stored before the start can commit."""
    params = accept_params(all_workflows(actors))
    if params["hashes"]:
        await conn.execute(ACCEPT, params)


#: stored manifests by (actor type, workflow, hash): a hash names one manifest forever
_loaded: dict[tuple[str, str, str], Manifest] = {}


async def load(
    pool: psycopg_pool.AsyncConnectionPool[Any], actor_type: str, workflow: str, digest: str
) -> Manifest | None:
    """The stored manifest with this hash, or None when it was never stored (or was deleted)."""
    key = (actor_type, workflow, digest)
    found = _loaded.get(key)
    if found is not None:
        return found
    async with pool.connection() as conn:
        cur = await conn.execute(
            LOAD, {"actor_type": actor_type, "workflow": workflow, "manifest_hash": digest}
        )
        row = await cur.fetchone()
    if row is None:
        return None  # not cached: it may be stored later, by the code that has it
    manifest: Manifest = row[0]
    _loaded[key] = manifest
    return manifest
