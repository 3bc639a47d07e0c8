"""Continue-as-new: a long-lived execution ends its run and starts the next one, in one write.

Every pass replays the run's whole history, so a body that loops for months gets slower with
every step, and its rows grow without bound. ``wf.continue_as_new(payload)`` raises
``ContinueAsNew`` (a ``BaseException``, so no ``except Exception`` in the body takes it); once the
body's finalizers ran (its compensations do not: the run succeeded), the pass sends one fenced
statement (``akter_wf_continue``, ``sql/functions/akter_wf_continue.sql``) that

* records the ended run in ``actor_workflow_runs`` (its number, input, step count, times) — the
  link the timeline follows from one run to the next;
* deletes the run's steps, so the next run's history starts empty and every pass of it loads
  what that run recorded, never what the runs before it did;
* turns the execution row into the next run: the new input, ``run_number + 1``, the manifest
  hash and version markers of the code that continued it, status ``running`` — and keeps the
  execution id, the principal, the interrupt flag and the **event cursor**, so an event emitted
  between the two runs is behind neither: the next run's first wait scans from where the last
  one's cursor stood.

The execution id stays the same across runs, so a ``Run`` handle, ``client.run(...)`` and
``run.result()`` follow the chain to the latest run by construction, and a deadline set at
start (``deadline.py``) bounds the whole chain, as Temporal's execution timeout does. The next
run's first pass runs at once in the same runner (the generation still holds); its timer is the
usual recovery timer meanwhile.

Activity ids derived inside a run (``activity.py``) and the seeded helpers (``determinism.py``)
take the run number, so run 2 never repeats run 1's command ids.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from akter import codec
from akter.errors import InvalidInput
from akter.workflow.core import manifest

if TYPE_CHECKING:
    from akter.workflow.api.declare import ContinueAsNew, Workflow


# Continue (a lock-first function, sql/functions/akter_wf_continue.sql, after akter_wf_settle_steps).
CONTINUE = """
SELECT fenced, continued
  FROM akter_wf_continue(%(rk)s, %(tenant)s, %(actor_type)s, %(actor_id)s, %(generation)s, %(eid)s,
                         %(bucket)s::smallint, %(steps)s::text[], %(scopes)s::text[],
                         %(occurrences)s::int[], %(attempts)s::int[], %(exits)s::bytea[],
                         %(payload)s, %(manifest_hash)s, %(versions)s::jsonb, %(recovery)s)"""


def params(workflow: Workflow[Any, Any], signal: ContinueAsNew) -> dict[str, Any]:
    """The next run's columns; ``InvalidInput`` when the payload is not the workflow's input."""
    if not isinstance(signal.payload, workflow.input):
        raise InvalidInput(
            f"continue_as_new of {workflow!r} takes a {workflow.input.__name__}, "
            f"got {type(signal.payload).__name__}"
        )
    _, digest = manifest.of(workflow)
    return {
        "payload": codec.encode(signal.payload, workflow.input),
        "manifest_hash": digest,
        "versions": json.dumps({k: v.current for k, v in workflow.versions.items()}),
    }
