"""Workflow members of actors: declarations, effects, the driver, passes and the runner.

Importing this package registers the ``workflow`` member kind on ``akter.Actor`` (so that
``Actor.workflow(...)`` works while the kernel keeps no import of this layer) and the
``Turn.start`` implementation.
"""

from akter.actor.declare import register_member_kind
from akter.workflow.commands import stage_start
from akter.workflow.declare import Workflow

register_member_kind("workflow", Workflow)
register_member_kind("start", stage_start)
