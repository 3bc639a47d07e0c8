"""The inspector page (``akter ui APP``): a read-only web view of an App's executions, timelines
and actors. A layer above ``akter.app`` and ``akter.inspect``; only ``akter.cli`` imports it.

Needs the ``ui`` extra (Starlette, Jinja2, uvicorn): ``pip install 'akter[ui]'``."""

from __future__ import annotations

from akter.ui.serve import bind, check_host, serve
from akter.ui.web import make_web

__all__ = ["bind", "check_host", "make_web", "serve"]
