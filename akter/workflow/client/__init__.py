"""Clients: starting, finding and awaiting runs (``run``) and administering schedules.

A top layer of ``akter.workflow``, independent of ``akter.workflow.tools``.
"""
