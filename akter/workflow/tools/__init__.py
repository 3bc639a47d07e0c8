"""Tools: the deploy check, replay, its reading and reports, and history files.

A top layer of ``akter.workflow``, independent of ``akter.workflow.client``.
"""
