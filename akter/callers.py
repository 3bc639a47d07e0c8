"""Who sends a command: a ``User``, ``Anonymous``, or akter itself (``System``).

The caller is an access check and an attribution, never part of a command's dedup key. Its
``key`` is stored with each receipt so that another caller presenting a known command id is
refused. Callers carry names only, never tokens or credentials (invariant 11).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class User:
    """An authenticated principal, named by its subject (a user id, a service account)."""

    subject: str

    @property
    def key(self) -> str:
        return f"user:{self.subject}"


@attrs.frozen
class Anonymous:
    """A caller that did not authenticate."""

    @property
    def key(self) -> str:
        return "anonymous"


Principal = User | Anonymous


@attrs.frozen
class System:
    """akter acting on its own behalf: a relay delivery (``source`` ``actor`` or ``timer``), a
    workflow resume, a staged start. ``on_behalf_of`` is the principal whose action caused it,
    restored from the durable record, never from the ambient caller."""

    source: str
    ref: str = ""
    on_behalf_of: Principal | None = None

    @property
    def key(self) -> str:
        return f"system:{self.source}"


Caller = User | Anonymous | System


def principal_of(caller: Caller) -> Principal | None:
    """The principal a caller acts for: itself, or for a System caller its ``on_behalf_of``."""
    if isinstance(caller, System):
        return caller.on_behalf_of
    return caller
