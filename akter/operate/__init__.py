"""Operating executions: find them across actors, show one as a timeline, act on them.

The Python API an operator's tools are built on, and the ``akter executions`` commands
(``akter.cli.executions``) print:

* ``query``: ``ExecutionFilter``, newest-first pages behind a keyset cursor (``read_page``,
  ``iterate``) and counts by workflow and status (``read_counts``), served by the indexes of
  ``sql/012``;
* ``timeline``: one execution's every step attempt, its timer and why it waits, built on the
  views of ``akter.inspect``;
* ``actions``: interrupt (with a reason) and retry, one execution or every one a filter
  matches, each a receipted command sent as the operator;
* ``why``: the one line that says why an execution is where it is.

A workflow client reaches them as ``client.executions(...)``, ``client.execution_counts(...)``,
``client.timeline(id)``, ``client.interrupt_executions(...)`` and ``client.retry_executions(...)``
(``akter.workflow.run``).
"""

from __future__ import annotations

from akter.operate.actions import Acted
from akter.operate.query import Count, ExecutionFilter, ExecutionRow, Page
from akter.operate.timeline import Entry, Timeline

__all__ = ["Acted", "Count", "Entry", "ExecutionFilter", "ExecutionRow", "Page", "Timeline"]
