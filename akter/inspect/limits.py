"""Limits of the inspection views (``akter inspect``); its exit codes are ``akter.cli.support``'s."""

from __future__ import annotations

DEFAULT_LIMIT = 20
MAX_LIMIT = 2**63 - 1  # a LIMIT is a bigint
RAW_BYTES = 48
