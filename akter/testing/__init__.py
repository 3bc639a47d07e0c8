"""What users need to test their own actors and workflows: the database clock and fault points.

**The clock.** All durable time (due times, timeouts, expiries) is ``akter_now()`` in the
database: the server's clock plus an offset stored in the ``akter_clock`` row. ``Clock`` moves
that offset, so every connection and every process a test starts sees the jump at once, and a
test can skip a day without sleeping::

    clock = akter.testing.Clock(database_url)
    await clock.advance(timedelta(days=1))

**Fault points.** ``crash(point)`` makes the process SIGKILL itself when it reaches ``point``;
``pause(point)`` blocks there until the test calls ``release()``::

    gate = akter.testing.pause("turn.before_commit", match="order-7")
    task = asyncio.create_task(handle.send(pay, Pay(...)))
    await gate.reached()      # the turn holds the actor's lock now
    ...                       # act: a second connection, a rival send
    gate.release()

Processes a test starts arm crashes through ``AKTER_FAULTS`` (see ``akter.faults``). The points
are listed in ``akter.faults.POINTS``.

**Histories.** ``export_history`` writes executions, as the database holds them, to a JSON file
(``akter.workflow.tools.history_file``); ``replay_history`` replays a file's executions under an App's
bodies with no database and no I/O — what ``akter workflows replay`` does against the database —
so a test suite can keep histories recorded by earlier versions of its code and fail when a
change would not replay them::

    await akter.testing.export_history(database_url, "tests/golden/ship.json", [run.execution_id])
    ...
    akter.testing.replay_history(app, "tests/golden/ship.json").assert_replays()

**Crashes at every boundary.** ``explore`` (``akter.testing._explore``) runs a workflow once, then once
crashed at each step boundary with a fresh runner finishing it, and reports every crash that
duplicated, lost or changed an effect::

    report = await akter.testing.explore(app, Shop, "shop-1", Pay, Payment(...), probe=count)
    report.assert_exactly_once()

The pytest plugin (``akter.pytest_plugin``) offers it as the ``explorer`` fixture, on the test's
fresh database: ``report = await explorer(app, Shop, "shop-1", Pay, Payment(...))``.
"""

from akter.faults import POINTS, Crash, Fail, Pause
from akter.testing._clock import Clock
from akter.testing._explore import Explorer, ExploreReport, explore
from akter.testing._faults import crash, disarm_all, fail, pause
from akter.testing._histories import export_history, load_history, read_history, replay_history
from akter.workflow.tools.history_file import History
from akter.workflow.tools.replay_report import ReplayReport

__all__ = [
    "POINTS",
    "Clock",
    "Crash",
    "ExploreReport",
    "Explorer",
    "Fail",
    "History",
    "Pause",
    "ReplayReport",
    "crash",
    "disarm_all",
    "explore",
    "export_history",
    "fail",
    "load_history",
    "pause",
    "read_history",
    "replay_history",
]
