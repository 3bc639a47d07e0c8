"""Operating executions: find them across actors, show one as a timeline, act on them.

The Python API an operator's tools are built on, and the ``akter executions`` commands
(``akter.cli.executions``) print:

* ``query``: ``ExecutionFilter``, newest-first pages behind a keyset cursor (``read_page``,
  ``iterate``) and counts by workflow and status (``read_counts``), served by the indexes of
  ``sql/001_schema.sql``;
* ``timeline``: one execution's every step attempt, its timer and why it waits, built on the
  views of ``akter.inspect``;
* ``actions``: interrupt (with a reason), retry, pause, resume and resolve (an execution that
  needs attention), one execution or every one a filter matches — a page at a time — each a
  receipted command sent as the operator;
* ``why``: the one line that says why an execution is where it is.

A workflow client reaches them as ``client.executions(...)``, ``client.execution_counts(...)``,
``client.timeline(id)``, ``client.interrupt_executions(...)``, ``client.retry_executions(...)``,
``client.pause_executions(...)``, ``client.resume_executions(...)``, ``client.resolve(id, ...)``
and ``client.each_matching(verb, filter)`` (``client.py``).
"""

from __future__ import annotations

from akter.operate.actions import Acted
from akter.operate.query import Count, ExecutionFilter, ExecutionRow, Page
from akter.operate.timeline import Entry, Timeline

__all__ = ["Acted", "Count", "Entry", "ExecutionFilter", "ExecutionRow", "Page", "Timeline"]
