"""Workflow members of actors: declarations, effects, the driver, passes and the runner.

``akter.Actor`` is this layer's ``Actor`` (``akter.workflow.api.actor``, on ``WorkflowActor`` of
``akter.workflow.api.declare``): the kernel's actor type with ``workflow(...)`` and ``schedule(...)``
members added from above, so the kernel never imports this layer.
"""
