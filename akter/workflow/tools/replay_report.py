"""What the replay check found, added up per workflow: ``ReplayReport``, as text or data.

``Tally`` takes the verdicts of ``replay.replay`` one by one (the reader feeds it page by page,
so a check of a hundred thousand executions holds counts, not verdicts) and keeps, per
workflow, how many open and finished executions were checked, how many replayed, and each
divergence — the first ``KEEP`` of them with their execution ids, all of them counted by
pattern (the same recorded occurrence, recorded step and ask), which is what a person reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from akter.workflow.api.declare import Workflow
from akter.workflow.tools.replay import Divergence, RecordedExecution, Replay, replay

#: divergences listed with their execution per workflow; the rest are counted
KEEP = 100
#: example executions shown per pattern in the text
EXAMPLES = 3


@attrs.frozen
class Diverged:
    execution_id: str
    finished: bool
    divergence: Divergence


@attrs.frozen
class WorkflowReplays:
    """One workflow's executions: checked, replayed, and how the others diverged."""

    actor_type: str
    workflow: str
    open: int
    finished: int
    replayed: int
    diverged: tuple[Diverged, ...]
    #: (divergence, how many executions, up to EXAMPLES of their ids), most frequent first
    patterns: tuple[tuple[Divergence, int, tuple[str, ...]], ...]

    @property
    def checked(self) -> int:
        return self.open + self.finished

    @property
    def diverged_count(self) -> int:
        return self.checked - self.replayed

    def data(self) -> dict[str, Any]:
        return {
            "actor_type": self.actor_type,
            "workflow": self.workflow,
            "open_checked": self.open,
            "finished_checked": self.finished,
            "replayed": self.replayed,
            "diverged": self.diverged_count,
            "divergences": [
                {
                    "execution_id": d.execution_id,
                    "finished": d.finished,
                    "at": d.divergence.at,
                    "recorded": d.divergence.recorded,
                    "asked": d.divergence.asked,
                }
                for d in self.diverged
            ],
            "divergences_not_listed": self.diverged_count - len(self.diverged),
            "patterns": [
                {"at": d.at, "recorded": d.recorded, "asked": d.asked, "executions": n, "examples": list(ids)}
                for d, n, ids in self.patterns
            ],
        }


@attrs.frozen
class ReplayReport:
    """Every checked workflow. ``replays``: no checked execution diverged."""

    workflows: tuple[WorkflowReplays, ...]

    @property
    def replays(self) -> bool:
        return all(w.diverged_count == 0 for w in self.workflows)

    @property
    def checked(self) -> int:
        return sum(w.checked for w in self.workflows)

    def data(self) -> dict[str, Any]:
        return {
            "replays": self.replays,
            "checked": self.checked,
            "diverged": sum(w.diverged_count for w in self.workflows),
            "workflows": [w.data() for w in self.workflows],
        }

    def text(self) -> str:
        if not self.workflows:
            return "replays: no execution to check"
        diverged = sum(w.diverged_count for w in self.workflows)
        head = "replays" if self.replays else f"diverged: {diverged} of {_n(self.checked, 'execution')}"
        lines = [f"{head}: {_n(self.checked, 'execution')} replayed by this code" if self.replays else head]
        for w in self.workflows:
            lines.append(
                f"  {w.actor_type}.{w.workflow}: {w.replayed} of {w.checked} replayed "
                f"({w.open} open, {w.finished} finished)"
            )
            for d, n, ids in w.patterns:
                more = f" and {n - len(ids)} more" if n > len(ids) else ""
                lines += [
                    f"    - {_n(n, 'execution')} {d.text()}",
                    f"      e.g. {', '.join(ids)}{more}",
                ]
        return "\n".join(lines)

    def assert_replays(self) -> None:
        """Raise ``AssertionError`` with the report unless every execution replayed."""
        if not self.replays:
            raise AssertionError(self.text())


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


class _One:
    def __init__(self) -> None:
        self.open = 0
        self.finished = 0
        self.replayed = 0
        self.kept: list[Diverged] = []
        self.patterns: dict[Divergence, list[Any]] = {}


class Tally:
    """Adds verdicts up; ``report()`` when done. ``expect`` names workflows to list even when
    no execution of theirs was found."""

    def __init__(self, expect: Iterable[tuple[str, str]] = ()) -> None:
        self._by: dict[tuple[str, str], _One] = {key: _One() for key in expect}

    def add(self, verdict: Replay) -> None:
        one = self._by.setdefault((verdict.actor_type, verdict.workflow), _One())
        if verdict.finished:
            one.finished += 1
        else:
            one.open += 1
        if verdict.divergence is None:
            one.replayed += 1
            return
        if len(one.kept) < KEEP:
            one.kept.append(Diverged(verdict.execution_id, verdict.finished, verdict.divergence))
        seen = one.patterns.setdefault(verdict.divergence, [0, []])
        seen[0] += 1
        if len(seen[1]) < EXAMPLES:
            seen[1].append(verdict.execution_id)

    def merge(self, other: Tally) -> None:
        """Add another tally's counts (of another range of executions) to this one."""
        for key, theirs in other._by.items():
            mine = self._by.setdefault(key, _One())
            mine.open += theirs.open
            mine.finished += theirs.finished
            mine.replayed += theirs.replayed
            mine.kept.extend(theirs.kept[: KEEP - len(mine.kept)])
            for divergence, (n, ids) in theirs.patterns.items():
                seen = mine.patterns.setdefault(divergence, [0, []])
                seen[0] += n
                seen[1].extend(ids[: EXAMPLES - len(seen[1])])

    def report(self) -> ReplayReport:
        return ReplayReport(
            tuple(
                WorkflowReplays(
                    actor_type,
                    workflow,
                    one.open,
                    one.finished,
                    one.replayed,
                    tuple(one.kept),
                    tuple(
                        (d, n, tuple(ids))
                        for d, (n, ids) in sorted(
                            one.patterns.items(), key=lambda p: (-p[1][0], p[0].at, p[0].recorded, p[0].asked)
                        )
                    ),
                )
                for (actor_type, workflow), one in sorted(self._by.items())
            )
        )


def replay_all(
    declared: Iterable[Workflow[Any, Any]],
    executions: Iterable[RecordedExecution],
    *,
    now_ms: int,
    into: Tally | None = None,
) -> Tally:
    """Replay each execution under the declared workflow of its name (none: a divergence)."""
    tally = into if into is not None else Tally()
    workflows = {(w.actor.name, w.name): w for w in declared}
    for execution in executions:
        tally.add(replay(workflows.get((execution.actor_type, execution.workflow)), execution, now_ms=now_ms))
    return tally
