"""Who sends a command: a ``User``, ``Anonymous``, or akter itself (``System``).

The caller is an access check and an attribution, never part of a command's dedup key. Its
``key`` is stored with each receipt so that another caller presenting a known command id is
refused. Callers carry names only, never tokens or credentials (invariant 11).
"""

from __future__ import annotations

import attrs

from akter.errors import InvalidInput

#: the longest subject a User may carry (it is stored with every receipt)
MAX_SUBJECT = 256


def _storable_name(_: object, attribute: attrs.Attribute[str], value: object) -> None:
    """A name that PostgreSQL can store as text: a non-empty str of valid Unicode, no NUL."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"a caller's {attribute.name} must be a non-empty str, got {value!r}")
    if len(value) > MAX_SUBJECT:
        raise InvalidInput(f"a caller's {attribute.name} is {len(value)} characters; at most {MAX_SUBJECT}")
    if "\x00" in value:
        raise InvalidInput(f"a caller's {attribute.name} contains a NUL character")
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"a caller's {attribute.name} is not valid Unicode: {exc}") from exc


@attrs.frozen
class User:
    """An authenticated principal, named by its subject (a user id, a service account): a
    non-empty string of at most ``MAX_SUBJECT`` characters, without NUL (else ``InvalidInput``)."""

    subject: str = attrs.field(validator=_storable_name)

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
