"""The migrator against a real PostgreSQL: applies once, serialises concurrent start-ups, refuses
databases it must not touch, re-applies a routine whose file changed and drops one whose file is
gone. Each test starts from an empty database (no template), and every assertion reads the
database through a connection of its own. An edited routine file is a list of routines the
test hands the migrator in place of the shipped one."""

from __future__ import annotations

import hashlib
import re
import threading
import time
import uuid
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

import akter
from akter.cli import main as cli_main
from akter.errors import SchemaError, SchemaTooNew
from akter.store import migrate as migrator
from akter.store.database import with_database
from akter.store.migrate import (
    MIGRATION_LOCK_KEY,
    Migrated,
    Routine,
    known_migrations,
    known_routines,
    migrate,
    schema_version,
)

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

    assert migrate(blank_url) == Migrated(versions=ALL_VERSIONS, routines=[r.name for r in known_routines()])

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

    assert migrate(blank_url) == Migrated()

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
            results.append(migrate(blank_url).versions)
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


def migrated_by(url: str, *versions: tuple[int, str]) -> None:
    """A migration history of ``versions`` (version, name), as another akter would leave it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE akter_schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, name in versions:
            conn.execute(
                "INSERT INTO akter_schema_migrations (version, name, checksum) VALUES (%s, %s, 'x')",
                [version, name],
            )


def test_a_database_from_a_newer_akter_is_refused_untouched(blank_url: str) -> None:
    migrated_by(blank_url, (NEWEST + 1, "future"))
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


def routines(url: str) -> list[tuple[Any, ...]]:
    return rows(url, "SELECT name, checksum, applied_at FROM akter_schema_routines ORDER BY name")


def defined(url: str, name: str) -> list[str]:
    """The signatures (with result type) of the routines named ``name`` in the database."""
    found = rows(
        url,
        "SELECT p.oid::regprocedure::text || ' -> ' || pg_get_function_result(p.oid)"
        " FROM pg_proc p WHERE p.proname = %s AND p.pronamespace = 'public'::regnamespace",
        name,
    )
    return sorted(text for (text,) in found)


def shipped_with(monkeypatch: pytest.MonkeyPatch, *changed: Routine, without: str | None = None) -> None:
    """The migrator sees the shipped routine files, with ``changed`` in place of (or beside) those
    of the same name, and without the file of ``without``."""
    by_name = {r.name: r for r in known_routines()}
    by_name.update({r.name: r for r in changed})
    by_name.pop(without or "", None)
    monkeypatch.setattr(migrator, "known_routines", lambda: [by_name[n] for n in sorted(by_name)])


def routine(text: str) -> Routine:
    name = text.split("(", maxsplit=1)[0].rsplit(maxsplit=1)[-1]
    return Routine(name=name, sql=text, checksum=hashlib.sha256(text.encode()).hexdigest())


def test_every_routine_file_defines_the_routine_it_is_named_for() -> None:
    shipped = known_routines()
    assert [r.name for r in shipped] == sorted(r.name for r in shipped)
    for r in shipped:
        raw = files("akter._schema").joinpath("functions").joinpath(f"{r.name}.sql").read_bytes()
        assert r.checksum == hashlib.sha256(raw).hexdigest()
        assert re.search(rf"^CREATE OR REPLACE (FUNCTION|PROCEDURE) {r.name}\(", r.sql, re.MULTILINE)


def test_every_routine_is_called_by_something_and_every_call_has_its_routine() -> None:
    """No dead routine, and no call of a routine that does not exist: akter's Python and the
    other SQL files name a routine where they call it (``name(``, or a trigger's ``FUNCTION name``)."""
    shipped = {r.name: r.sql for r in known_routines()}
    package = Path(akter.__file__).parent
    python = "\n".join(p.read_text() for p in package.rglob("*.py"))
    schema = "\n".join(m.sql for m in known_migrations())
    calls = re.compile(r"\b(akter_[a-z0-9_]+)\(")
    for name in shipped:
        elsewhere = [python, schema, *(t for n, t in shipped.items() if n != name)]
        assert any(re.search(rf"\b{name}\(", t) for t in elsewhere), f"{name} is called by nothing"
    called = set(calls.findall(python)) | set(calls.findall(schema))
    for text in shipped.values():
        called |= set(calls.findall(text))
    # the routines, less the names that are tables (a CREATE TABLE ... ( ) or column lists
    tables_named = set(re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?(akter_[a-z0-9_]+)", python + schema))
    assert called - tables_named - set(shipped) == set()


def test_a_migrated_database_holds_each_shipped_routine_once_and_records_it(blank_url: str) -> None:
    migrate(blank_url)

    assert [(name, checksum) for name, checksum, _ in routines(blank_url)] == [
        (r.name, r.checksum) for r in known_routines()
    ]
    for r in known_routines():
        assert len(defined(blank_url, r.name)) == 1, r.name
    # no routine in the schema that no file defines
    found = rows(
        blank_url,
        "SELECT proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace ORDER BY proname",
    )
    assert [name for (name,) in found] == [r.name for r in known_routines()]
    before = history(blank_url), routines(blank_url)

    assert migrate(blank_url) == Migrated()

    assert (history(blank_url), routines(blank_url)) == before


def test_an_edited_routine_is_applied_again_and_nothing_else_is(
    blank_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate(blank_url)
    before = {name: (checksum, at) for name, checksum, at in routines(blank_url)}
    edited = routine(
        "CREATE OR REPLACE FUNCTION akter_wf_result_note_max() RETURNS integer\n"
        "LANGUAGE sql IMMUTABLE AS 'SELECT 512';\n"
    )
    shipped_with(monkeypatch, edited)

    assert migrate(blank_url) == Migrated(reapplied=["akter_wf_result_note_max"])

    assert rows(blank_url, "SELECT akter_wf_result_note_max()") == [(512,)]
    after = {name: (checksum, at) for name, checksum, at in routines(blank_url)}
    assert after.pop("akter_wf_result_note_max")[0] == edited.checksum
    before.pop("akter_wf_result_note_max")
    assert after == before
    assert migrate(blank_url) == Migrated()
    assert routines(blank_url) == routines(blank_url)


def test_akter_migrate_says_what_it_applied_re_applied_or_found_current(
    blank_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run() -> str:
        result = CliRunner().invoke(cli_main, ["migrate", "--database-url", blank_url])
        assert result.exit_code == 0, result.output
        return result.output.strip().split(": ", 1)[1]

    first = run()  # a fresh database: its migrations named, its routines counted
    assert first.startswith("applied migration 001")
    assert first.endswith(f", {len(known_routines())} routines")
    assert run() == "applied nothing (already current)"
    shipped_with(
        monkeypatch,
        routine(
            "CREATE OR REPLACE FUNCTION akter_wf_result_note_max() RETURNS integer\n"
            "LANGUAGE sql IMMUTABLE AS 'SELECT 512';\n"
        ),
    )
    assert run() == "re-applied changed routine akter_wf_result_note_max"


def test_a_routine_whose_signature_changed_replaces_its_old_form(
    blank_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate(blank_url)
    # a changed result type: CREATE OR REPLACE is refused, so the old form is dropped first
    shipped_with(
        monkeypatch,
        routine(
            "CREATE OR REPLACE FUNCTION akter_wf_result_note_max() RETURNS bigint\n"
            "LANGUAGE sql IMMUTABLE AS 'SELECT 2048::bigint';\n"
        ),
    )
    migrate(blank_url)
    assert defined(blank_url, "akter_wf_result_note_max") == ["akter_wf_result_note_max() -> bigint"]

    # new argument types: CREATE OR REPLACE would add an overload beside the old one
    shipped_with(
        monkeypatch,
        routine(
            "CREATE OR REPLACE FUNCTION akter_wf_result_note_max(p_scale integer) RETURNS bigint\n"
            "LANGUAGE sql IMMUTABLE AS 'SELECT 1024::bigint * p_scale';\n"
        ),
    )
    migrate(blank_url)
    assert defined(blank_url, "akter_wf_result_note_max") == ["akter_wf_result_note_max(integer) -> bigint"]
    assert rows(blank_url, "SELECT akter_wf_result_note_max(3)") == [(3072,)]


def test_a_routine_whose_file_is_gone_is_dropped(blank_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    migrate(blank_url)
    shipped_with(monkeypatch, without="akter_wf_result_note_max")

    assert migrate(blank_url) == Migrated(dropped=["akter_wf_result_note_max"])

    assert defined(blank_url, "akter_wf_result_note_max") == []
    assert "akter_wf_result_note_max" not in [name for name, *_ in routines(blank_url)]


def test_a_failing_routine_leaves_the_database_as_it_was(
    blank_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate(blank_url)
    before = history(blank_url), routines(blank_url), defined(blank_url, "akter_wf_paused_status")
    # a trigger function cannot change its signature: the trigger depends on it
    shipped_with(
        monkeypatch,
        routine(
            "CREATE OR REPLACE FUNCTION akter_wf_paused_status() RETURNS integer\n"
            "LANGUAGE sql AS 'SELECT 1';\n"
        ),
        routine(
            "CREATE OR REPLACE FUNCTION akter_wf_result_note_max() RETURNS integer\n"
            "LANGUAGE sql IMMUTABLE AS 'SELECT 1';\n"
        ),
    )

    with pytest.raises(psycopg.errors.DependentObjectsStillExist, match="actor_workflow_executions_paused"):
        migrate(blank_url)

    assert (history(blank_url), routines(blank_url), defined(blank_url, "akter_wf_paused_status")) == before
    assert rows(blank_url, "SELECT akter_wf_result_note_max()") == [(1024,)]


def test_a_database_of_the_squashed_development_history_is_refused_with_what_to_do(blank_url: str) -> None:
    migrated_by(blank_url, (1, "actor_kernel"), (25, "finished_keeps_no_pause"))
    before = history(blank_url), tables(blank_url)

    with pytest.raises(SchemaError) as raised:
        migrate(blank_url)

    assert not isinstance(raised.value, SchemaTooNew)
    assert "squashed into 001_schema.sql" in str(raised.value)
    assert "akter migrate --reset" in str(raised.value)
    assert (history(blank_url), tables(blank_url)) == before

    result = CliRunner().invoke(cli_main, ["migrate", "--reset", "--database-url", blank_url])

    assert result.exit_code == 0, result.output
    assert [v for v, *_ in history(blank_url)] == ALL_VERSIONS
    assert rows(blank_url, "SELECT count(*) FROM actor_deployment") == [(1,)]


def test_a_reset_drops_what_akter_keeps_and_nothing_else(blank_url: str) -> None:
    migrate(blank_url)
    with psycopg.connect(blank_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE app_orders (id int)")
        conn.execute("CREATE FUNCTION app_total() RETURNS int LANGUAGE sql AS 'SELECT 1'")
        conn.execute(
            "INSERT INTO actor_generations (routing_key, tenant, actor_type, actor_id)"
            " VALUES (1, 't', 'A', 'a')"
        )

    migrator.reset(blank_url)

    assert tables(blank_url) == ["app_orders"]
    assert defined(blank_url, "app_total") == ["app_total() -> integer"]
    assert rows(blank_url, "SELECT count(*) FROM pg_proc WHERE proname LIKE 'akter%'") == [(0,)]
    assert migrate(blank_url).versions == ALL_VERSIONS
    assert rows(blank_url, "SELECT count(*) FROM actor_generations") == [(0,)]
