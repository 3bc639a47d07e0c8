"""The engine: passes, the runner, the turn hook, the step combiner, claims and the SQL they run.

The I/O layer of ``akter.workflow``, above the interpreter (``akter.workflow.core``).
"""
