"""Actor manifests: the shape of an actor type as deployed, derived from its declaration alone.

An actor manifest describes what reading an actor type's stored rows depends on, fingerprinted
the same way as workflow types (``akter.fingerprint``)::

    {"akter_actor_manifest": 1,
     "actor_type": "Cart",
     "state":    <fingerprint of the state type>,
     "upgrades": [<fingerprint of each upgrade's from-type>, ...],      # oldest first
     "events":   {"<event type __name__>": <fingerprint>, ...},
     "commands": {"<command name>": {"payload": <fingerprint>, "output": <fingerprint>,
                                     "errors": {"<error class __name__>": <fingerprint>}}, ...}}

``state`` is what stored states (``actor_state``) are written as — each carries the hash of
this fingerprint as its shape (``akter.actor.upgrade``) — and ``upgrades`` the older shapes
this code reads too. Events are stored under their type's name, so ``events`` is keyed by it;
command payloads are stored in undelivered outbox intents, so ``commands`` has each payload
(and, for reference, the output and declared errors receipts hold). Access policies, initial
states, size limits and handlers are not part of it: they change what happens next, never how
a stored row reads.

The manifest hash is the SHA-256 of its canonical JSON. Every manifest an App opens its
runtime with (after ``akter.actor.compat`` found that it reads the stored data), and every one
``akter workflows check`` accepts, is stored in ``actor_manifests`` (``accept``); the check and
an App opening compare with the latest stored manifest of each type, and look up the shapes of
stored states in all of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, LiteralString

from akter import codec
from akter.fingerprint import Fingerprint, fingerprint

if TYPE_CHECKING:
    import psycopg

    from akter.actor.declare import Actor

#: bumped only when the manifest's own layout changes (every stored hash would change with it)
ACTOR_MANIFEST_VERSION = 1

Manifest = dict[str, Any]


def _errors(errors: Iterable[type[BaseException]]) -> dict[str, Fingerprint]:
    return {e.__name__: fingerprint(e) for e in errors}


def derive(actor: Actor[Any]) -> Manifest:
    """The manifest of ``actor`` (see this module's docstring for its layout)."""
    return {
        "akter_actor_manifest": ACTOR_MANIFEST_VERSION,
        "actor_type": actor.name,
        "state": fingerprint(actor.state_type),
        "upgrades": [fingerprint(up.source) for up in actor.upgrades],
        "events": {tag: fingerprint(tp) for tag, tp in actor.event_types.items()},
        "commands": {
            name: {
                "payload": fingerprint(c.input),
                "output": fingerprint(c.output),
                "errors": _errors(c.errors),
            }
            for name, c in actor.commands.items()
        },
    }


def manifest_hash(manifest: Manifest) -> str:
    """SHA-256 (hex) of the manifest's canonical JSON: equal manifests, equal hashes."""
    return hashlib.sha256(codec.canonical_json(manifest)).hexdigest()


def of(actor: Actor[Any]) -> tuple[Manifest, str]:
    """The actor type's manifest and its hash, derived once (commands are declared while its
    module loads, and workflows add internal ones; the cache is rebuilt if one was added)."""
    cached: tuple[int, Manifest, str] | None = getattr(actor, "_akter_actor_manifest", None)
    if cached is None or cached[0] != len(actor.commands):
        m = derive(actor)
        cached = (len(actor.commands), m, manifest_hash(m))
        actor._akter_actor_manifest = cached  # type: ignore[attr-defined]
    return cached[1], cached[2]


# ---- storage ----------------------------------------------------------------------------------

ACCEPT: LiteralString = """
INSERT INTO actor_manifests (actor_type, manifest_hash, manifest, accepted_at)
SELECT t.actor_type, t.manifest_hash, t.manifest, akter_now()
  FROM unnest(%(actor_types)s::text[], %(hashes)s::text[], %(manifests)s::jsonb[])
       AS t(actor_type, manifest_hash, manifest)
ON CONFLICT (actor_type, manifest_hash) DO NOTHING"""


def accept_params(actors: Iterable[Actor[Any]]) -> dict[str, list[str]]:
    """Parameters of ``ACCEPT`` for these actor types' manifests."""
    params: dict[str, list[str]] = {"actor_types": [], "hashes": [], "manifests": []}
    for actor in actors:
        m, digest = of(actor)
        params["actor_types"].append(actor.name)
        params["hashes"].append(digest)
        params["manifests"].append(codec.canonical_json(m).decode())
    return params


async def accept(conn: psycopg.AsyncConnection[Any], actors: Iterable[Actor[Any]]) -> None:
    """Store the manifests of ``actors`` (those already stored stay as they are)."""
    params = accept_params(actors)
    if params["hashes"]:
        await conn.execute(ACCEPT, params)
