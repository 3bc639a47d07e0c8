"""Keyed starts that do not surprise: what a start finds under its key decides what it does.

A workflow declared with a ``key`` function (or a start given an explicit key) names its
execution by that key, so a second start with the same key meets the first. Before, it
attached silently and dropped its own input. Now, as Temporal's id conflict and reuse policies
make it explicit:

=====================  ========================  =============================================
the key's execution    the same input            another input
=====================  ========================  =============================================
none                   starts                    starts
open                   attaches                  ``ExecutionKeyConflict``, nothing written
finished               attaches (its result)     the workflow's ``key_reuse`` policy decides
=====================  ========================  =============================================

``KeyReuse`` (declared on the member, ``Actor.workflow(..., key_reuse=...)``):

* ``REFUSE`` (the default): ``ExecutionKeyConflict(finished=True)``. A key is most often an
  idempotency key (an order id); another input under it is far more often a bug than a wish to
  run again, and refusing is the one answer that neither loses the new input nor the old result.
* ``ATTACH``: the old behaviour, asked for explicitly — the start returns the finished execution.
* ``NEW_RUN``: the execution starts again under the same id as a new run
  (``sql/functions/akter_wf_new_run.sql``): the finished run is kept as a run record with its outcome, and
  handles on the id follow the new run.

Input identity is the input's canonical primitive (what the codec stores, before compression):
the stored payload is decoded to primitives and compared with the new one, so no hash column is
needed and executions started before this rule are judged the same way. The decision is taken
in the start turn, under the owner's row lock, so two starts of one key cannot both start.
"""

from __future__ import annotations

import enum
import json
from typing import TYPE_CHECKING, Any, Final, LiteralString

from akter import codec
from akter.errors import ExecutionKeyConflict
from akter.workflow.api.policies import KeyReuse

if TYPE_CHECKING:
    from akter.actor.kernel import UnderLock
    from akter.workflow.api.declare import StartMark


class Decision(enum.Enum):
    START = "start"
    ATTACH = "attach"
    NEW_RUN = "new_run"


READ: Final[LiteralString] = """
SELECT status, payload FROM actor_workflow_executions WHERE routing_key = %(rk)s AND execution_id = %(eid)s"""

NEW_RUN: Final[LiteralString] = """
SELECT akter_wf_new_run(%(rk)s, %(eid)s, %(bucket)s::smallint, %(payload)s, %(principal)s,
                        %(manifest_hash)s, %(versions)s::jsonb, %(trace)s)"""


def decide(status: str | None, same_input: bool, policy: KeyReuse, eid: str) -> Decision:
    """The table above, without I/O."""
    if status is None:
        return Decision.START
    if same_input:
        return Decision.ATTACH
    if status != "finished":
        raise ExecutionKeyConflict(
            f"{eid} is open with another input: a keyed start attaches only with the same input",
            execution_id=eid,
        )
    if policy is KeyReuse.ATTACH:
        return Decision.ATTACH
    if policy is KeyReuse.NEW_RUN:
        return Decision.NEW_RUN
    raise ExecutionKeyConflict(
        f"{eid} finished with another input, and its workflow's key_reuse is REFUSE "
        "(declare key_reuse=KeyReuse.NEW_RUN to start it again, or ATTACH to return it)",
        execution_id=eid,
        finished=True,
    )


async def judge(conn: UnderLock, base: dict[str, Any], item: StartMark, staged: dict[str, Any]) -> Decision:
    """Read the key's execution (the turn holds the owner's row lock) and decide. ``staged``:
    the inputs of the keyed starts this turn wrote so far, by execution id — their rows are
    written with the turn's own write, after every decision, so they are judged from here."""
    eid = str(item.execution_id)
    new = json.loads(codec.check(item.payload, item.workflow.input))
    if eid in staged:
        return decide("running", staged[eid] == new, item.workflow.key_reuse, eid)
    row = await (await conn.execute(READ, {**base, "eid": eid})).fetchone()
    if row is None:
        staged[eid] = new
        return Decision.START
    status, stored = row
    decision = decide(status, codec.decode_primitive(bytes(stored)) == new, item.workflow.key_reuse, eid)
    if decision is Decision.NEW_RUN:
        staged[eid] = new
    return decision
