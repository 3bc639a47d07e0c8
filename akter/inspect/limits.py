"""Exit codes and limits of ``akter inspect``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2

DEFAULT_LIMIT = 20
MAX_LIMIT = 2**63 - 1  # a LIMIT is a bigint
RAW_BYTES = 48
