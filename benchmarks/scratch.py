"""A throwaway database for one benchmark run: created on the chosen server, dropped after."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg


@contextmanager
def scratch_database(server_url: str) -> Iterator[tuple[str, str]]:
    """``(url, server version)`` of a new, empty database, dropped (connections and all) after."""
    dbname = f"akter_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {dbname}")  # type: ignore[arg-type]
        row = admin.execute("SHOW server_version").fetchone()
    try:
        yield psycopg.conninfo.make_conninfo(server_url, dbname=dbname), str(row[0] if row else "?")
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {dbname} WITH (FORCE)")  # type: ignore[arg-type]
