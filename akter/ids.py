"""Identities: actor references, routing keys, buckets and command ids.

Everything here is pure and validated on construction; a malformed value is a typed
``InvalidInput`` error and never reaches the database.

Routing key, encoding v1 (stable forever; a change gets a new version and a migration)::

    digest = blake2b(b"akter.rk.v1" + part(tenant) + part(actor_type) + part(actor_id), digest_size=8)
    part(s) = len(utf8(s)).to_bytes(4, "big") + utf8(s)
    routing_key = int.from_bytes(digest, "big", signed=True)        # a signed 64-bit integer
    bucket = routing_key >> 56                                       # -128..127: 256 buckets

Command ids are ``v1.<issued ms>.<expires ms>.<uuid4 hex>``: minted once by the caller, reused
verbatim on retry; the expiry is the end of the retry window, after which the id is refused.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import uuid
from typing import Final

import attrs

from akter.errors import InvalidActorId, InvalidCommandId, InvalidExecutionId, InvalidExecutionKey

ROUTING_KEY_VERSION = 1
BUCKET_COUNT = 256
MAX_TENANT_BYTES = 128
MAX_ACTOR_TYPE_BYTES = 128
MAX_ACTOR_ID_BYTES = 512

_COMMAND_ID = re.compile(r"v1\.([0-9]{1,15})\.([0-9]{1,15})\.([0-9a-f]{32})")

#: the one SQL predicate addressing an actor's rows by its key, with ``ActorRef.key_params()``
#: (routing key first, so every index on an actor's rows leads with it)
ACTOR_KEY: Final = (
    "routing_key = %(rk)s AND tenant = %(tenant)s AND actor_type = %(actor_type)s AND actor_id = %(actor_id)s"
)


def _part(value: str) -> bytes:
    raw = value.encode("utf-8")
    return len(raw).to_bytes(4, "big") + raw


def routing_key(tenant: str, actor_type: str, actor_id: str) -> int:
    """The signed 64-bit routing key of an actor (encoding v1, see the module docstring)."""
    digest = hashlib.blake2b(
        b"akter.rk.v1" + _part(tenant) + _part(actor_type) + _part(actor_id), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


def bucket_of(key: int) -> int:
    """The bucket (-128..127) a routing key falls in: its top byte."""
    return key >> 56


def _check_name(kind: str, value: object, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidActorId(f"{kind} must be a str, got {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidActorId(f"{kind} {value!r} is not valid UTF-8") from exc
    if size == 0:
        raise InvalidActorId(f"{kind} must not be empty")
    if size > limit:
        raise InvalidActorId(f"{kind} is {size} UTF-8 bytes, over the limit of {limit}")
    if "\x00" in value:
        raise InvalidActorId(f"{kind} {value!r} contains a NUL character")
    return value


@attrs.frozen
class ActorRef:
    """One actor: ``(tenant, actor_type, actor_id)``. Two tenants' equal ids are two actors."""

    tenant: str
    actor_type: str
    actor_id: str
    routing_key: int = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        _check_name("tenant", self.tenant, MAX_TENANT_BYTES)
        _check_name("actor type", self.actor_type, MAX_ACTOR_TYPE_BYTES)
        _check_name("actor id", self.actor_id, MAX_ACTOR_ID_BYTES)
        object.__setattr__(self, "routing_key", routing_key(self.tenant, self.actor_type, self.actor_id))

    @property
    def bucket(self) -> int:
        return bucket_of(self.routing_key)

    def key_params(self) -> dict[str, object]:
        """The query parameters that address this actor's rows (routing key first, always), as
        ``ACTOR_KEY`` names them."""
        return {
            "rk": self.routing_key,
            "tenant": self.tenant,
            "actor_type": self.actor_type,
            "actor_id": self.actor_id,
        }

    def __str__(self) -> str:
        return f"{self.tenant}/{self.actor_type}/{self.actor_id}"


@attrs.frozen(order=True)
class CommandId:
    """A parsed command id. ``str(cid)`` is the canonical form stored in receipts."""

    issued_ms: int
    expires_ms: int
    nonce: str

    @classmethod
    def mint(cls, now_ms: int, window_ms: int) -> CommandId:
        return cls(issued_ms=now_ms, expires_ms=now_ms + window_ms, nonce=uuid.uuid4().hex)

    @classmethod
    def parse(cls, text: object) -> CommandId:
        if not isinstance(text, str):
            raise InvalidCommandId(f"a command id must be a str, got {type(text).__name__}")
        match = _COMMAND_ID.fullmatch(text)
        if match is None:
            shown = text if len(text) <= 80 else text[:77] + "..."
            raise InvalidCommandId(
                f"{shown!r} is not a command id; expected v1.<issued ms>.<expires ms>.<32 hex digits>"
            )
        issued, expires = int(match.group(1)), int(match.group(2))
        if expires < issued:
            raise InvalidCommandId(f"{text!r} expires before it was issued")
        return cls(issued_ms=issued, expires_ms=expires, nonce=match.group(3))

    def __str__(self) -> str:
        return f"v1.{self.issued_ms}.{self.expires_ms}.{self.nonce}"


MAX_EXECUTION_KEY_BYTES = 256
MAX_EXECUTION_ID_CHARS = 1024
_EXECUTION_PREFIX = "x1."


def check_execution_key(key: object) -> str:
    """A workflow key: 1..256 UTF-8 bytes, no NUL."""
    if not isinstance(key, str):
        raise InvalidExecutionKey(f"a workflow key must be a str, got {type(key).__name__}", 0)
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidExecutionKey(f"workflow key {key!r} is not valid UTF-8", 0) from exc
    if not 1 <= size <= MAX_EXECUTION_KEY_BYTES:
        raise InvalidExecutionKey(
            f"a workflow key must be 1..{MAX_EXECUTION_KEY_BYTES} UTF-8 bytes; this one is {size}", size
        )
    if "\x00" in key:
        raise InvalidExecutionKey(f"workflow key {key!r} contains a NUL character", size)
    return key


@attrs.frozen
class ExecutionId:
    """One workflow execution: ``(tenant, actor type, actor id, workflow, key)``.

    Canonical form, version 1: ``x1.`` + unpadded URL-safe base64 of the canonical JSON array
    ``[tenant, actor_type, actor_id, workflow, key]``; at most 1,024 characters."""

    owner: ActorRef
    workflow: str
    key: str
    #: the canonical form, made once (a pass formats its execution's id on every statement)
    _text: str = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        check_execution_key(self.key)
        if not isinstance(self.workflow, str) or not self.workflow:
            raise InvalidExecutionId(
                f"an execution's workflow must be a non-empty str, got {self.workflow!r}"
            )
        try:
            self.workflow.encode()
        except UnicodeEncodeError as exc:
            raise InvalidExecutionId(f"workflow name {self.workflow!r} is not valid UTF-8") from exc
        parts = [self.owner.tenant, self.owner.actor_type, self.owner.actor_id, self.workflow, self.key]
        raw = json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode()
        object.__setattr__(
            self, "_text", _EXECUTION_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")
        )
        if len(str(self)) > MAX_EXECUTION_ID_CHARS:
            raise InvalidExecutionKey(
                f"the execution id of key {self.key[:40]!r}... would be {len(str(self))} characters, over "
                f"{MAX_EXECUTION_ID_CHARS}; use a shorter key or actor id",
                len(self.key.encode()),
            )

    def __str__(self) -> str:
        return self._text

    @classmethod
    def parse(cls, text: object) -> ExecutionId:
        if not isinstance(text, str) or not text.startswith(_EXECUTION_PREFIX):
            raise InvalidExecutionId(f"{str(text)[:80]!r} is not an akter execution id (x1.<base64>)")
        if len(text) > MAX_EXECUTION_ID_CHARS:
            raise InvalidExecutionId(f"an execution id is at most {MAX_EXECUTION_ID_CHARS} characters")
        body = text[len(_EXECUTION_PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            parts = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidExecutionId(f"{text[:80]!r} is not a well-formed execution id") from exc
        if not (isinstance(parts, list) and len(parts) == 5 and all(isinstance(p, str) for p in parts)):
            raise InvalidExecutionId(f"{text[:80]!r} is not a well-formed execution id")
        try:
            eid = cls(ActorRef(parts[0], parts[1], parts[2]), parts[3], parts[4])
        except (InvalidActorId, InvalidExecutionKey, InvalidExecutionId) as exc:
            raise InvalidExecutionId(f"{text[:80]!r} names an invalid execution: {exc}") from exc
        if str(eid) != text:
            raise InvalidExecutionId(f"{text[:80]!r} is not in canonical form")
        return eid
