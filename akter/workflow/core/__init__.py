"""The interpreter: the driver, exits, children, compatibility and manifests. It does no I/O.

Above ``akter.workflow.api`` (it runs what is declared there), below the engine.
"""
