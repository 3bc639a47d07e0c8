"""Workflow members of actors: declarations, effects, the driver, passes and the runner.

``akter.Actor`` is this layer's ``Actor`` (``akter.workflow.declare``): the kernel's actor type
with ``workflow(...)`` members added from above, so the kernel never imports this layer.
"""
