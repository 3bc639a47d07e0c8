"""The migrator against a real PostgreSQL: applies once, serialises concurrent start-ups, refuses
databases it must not touch. Each test starts from an empty database (no template), and every
assertion reads the database through a connection of its own."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Iterator
from importlib.resources import files
from typing import Any

import psycopg
import pytest
from psycopg import sql

from akter.errors import SchemaError, SchemaTooNew
from akter.store.database import with_database
from akter.store.migrate import MIGRATION_LOCK_KEY, known_migrations, migrate, schema_version

ALL_VERSIONS = [m.version for m in known_migrations()]
NEWEST = ALL_VERSIONS[-1]


@pytest.fixture
def blank_url(admin_url: str) -> Iterator[str]:
    """A database made with a plain CREATE DATABASE: no template, no schema."""
    name = f"akter_m_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield with_database(admin_url, name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def rows(url: str, query: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query.encode(), params or None).fetchall()


def history(url: str) -> list[tuple[Any, ...]]:
    return rows(
        url, "SELECT version, name, checksum, applied_at FROM akter_schema_migrations ORDER BY version"
    )


def tables(url: str) -> list[str]:
    found = rows(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
    return [name for (name,) in found]


def test_the_shipped_migrations_are_numbered_and_checksummed_from_their_files() -> None:
    migrations = known_migrations()
    assert [m.version for m in migrations] == sorted({m.version for m in migrations})
    for m in migrations:
        raw = files("akter._schema").joinpath(f"{m.version:03d}_{m.name}.sql").read_bytes()
        assert m.checksum == hashlib.sha256(raw).hexdigest()
        assert m.sql == raw.decode()


def test_an_empty_database_gets_every_migration(blank_url: str) -> None:
    assert schema_version(blank_url) == 0

    assert migrate(blank_url) == ALL_VERSIONS

    recorded = history(blank_url)
    assert [(v, name, checksum) for v, name, checksum, _ in recorded] == [
        (m.version, m.name, m.checksum) for m in known_migrations()
    ]
    assert schema_version(blank_url) == NEWEST
    # The schema itself is there, seeded rows included.
    assert {"actor_deployment", "actor_generations", "actor_receipts"} <= set(tables(blank_url))
    assert rows(blank_url, "SELECT protocol_version FROM actor_deployment") == [(1,)]


def test_a_second_migrate_applies_nothing_and_changes_nothing(blank_url: str) -> None:
    migrate(blank_url)
    before = history(blank_url), tables(blank_url)

    assert migrate(blank_url) == []

    assert (history(blank_url), tables(blank_url)) == before


def test_two_migrators_at_once_leave_one_schema_applied_once(blank_url: str) -> None:
    # The test holds the migration lock until both migrators are queued behind it, so they really
    # contend for it, rather than one finishing before the other connects.
    results: list[list[int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def run() -> None:
        start.wait()
        try:
            results.append(migrate(blank_url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    with psycopg.connect(blank_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK_KEY])
        for thread in threads:
            thread.start()
        start.wait()
        wait_for_lock_waiters(holder, 2)
        holder.execute("SELECT pg_advisory_unlock(%s)", [MIGRATION_LOCK_KEY])
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert sorted(results) == [[], ALL_VERSIONS]
    assert [v for v, *_ in history(blank_url)] == ALL_VERSIONS
    assert rows(blank_url, "SELECT count(*) FROM actor_deployment") == [(1,)]


def wait_for_lock_waiters(conn: psycopg.Connection[Any], count: int) -> None:
    """Until ``count`` sessions wait for an advisory lock in this database (pg_locks is the only
    place that shows a session blocked inside the server; there is no event to wait on)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
        if row is not None and row[0] >= count:
            return
        time.sleep(0.01)
    pytest.fail(f"{count} migrators never queued for the migration lock")


def test_a_database_from_a_newer_akter_is_refused_untouched(blank_url: str) -> None:
    with psycopg.connect(blank_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE akter_schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute(
            "INSERT INTO akter_schema_migrations (version, name, checksum) VALUES (%s, 'future', 'x')",
            [NEWEST + 1],
        )
    before = history(blank_url), tables(blank_url)

    with pytest.raises(SchemaTooNew) as raised:
        migrate(blank_url)

    assert (raised.value.database_version, raised.value.known_version) == (NEWEST + 1, NEWEST)
    # Not even the older migrations, which the database lacks, were applied.
    assert (history(blank_url), tables(blank_url)) == before
    assert tables(blank_url) == ["akter_schema_migrations"]


def test_an_edited_migration_is_refused(blank_url: str) -> None:
    migrate(blank_url)
    with psycopg.connect(blank_url, autocommit=True) as conn:
        conn.execute("UPDATE akter_schema_migrations SET checksum = 'edited' WHERE version = %s", [NEWEST])
    before = history(blank_url)

    with pytest.raises(SchemaError) as raised:
        migrate(blank_url)

    assert not isinstance(raised.value, SchemaTooNew)
    assert f"{NEWEST:03d}_" in str(raised.value)
    assert "edited" in str(raised.value)
    assert history(blank_url) == before
