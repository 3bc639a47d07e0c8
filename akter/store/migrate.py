"""The migrator: brings a database's schema up to the ``sql/`` folder this akter ships.

``sql/`` is the one and only schema definition, in two kinds of file (Flyway's model):

* **versioned migrations**, ``sql/NNN_name.sql``: the tables, indexes and triggers.
  ``001_schema.sql`` is the baseline; every later change is a forward migration of its own.
  Applied once each, in version order, and never edited once released: a recorded checksum that
  differs from its file is refused (``SchemaError``), as is a database migrated further by a
  newer akter (``SchemaTooNew``); nothing is changed in either case.
* **routines**, ``sql/functions/<name>.sql``: one function or procedure each, defined by
  ``CREATE OR REPLACE`` under the file's name. A routine file is applied when it is new and
  re-applied whenever its checksum changes, so a routine is edited in place, in its one file.

What ran is recorded in ``akter_schema_migrations`` (version, name, SHA-256, time) and
``akter_schema_routines`` (name, SHA-256, time). One ``migrate(url)`` does everything it has
to do in one transaction, so a failure leaves the database as it found it, in this order:

1. the new or changed routines, in name order, with ``check_function_bodies`` off. They go
   *before* the versioned migrations so that a table's default, check or trigger can name a
   routine (the baseline's ``DEFAULT akter_now()``, its triggers) and a migration's backfill can
   call one. With the check off, a body is resolved when it is first called, against the schema
   the whole transaction leaves (PL/pgSQL bodies always are; SQL-language ones otherwise would be
   at creation). A routine's *signature* is resolved at creation: it may name built-in types
   only, or types of a versioned migration already applied by an earlier release.
   A changed signature cannot be ``CREATE OR REPLACE``d: PostgreSQL refuses a changed return
   type or parameter name, and a changed list of argument types makes a second overload. Either
   way the migrator drops the routine's old forms (``DROP ROUTINE``) and creates the new one, so
   one routine of each name exists. A routine that something depends on (a trigger function, a
   function named by a column default) cannot be dropped: its signature must not change, and
   PostgreSQL's refusal names the dependent object.
2. the pending versioned migrations, in version order.
3. routines whose file is gone: dropped. The database holds exactly the routines of
   ``sql/functions/``. A versioned migration of the same release drops what depends on one
   (a trigger) first, since step 3 runs after it.

A database migrated by akter's development versions before the migrations were squashed into
``001_schema.sql`` (its version 1 is ``actor_kernel``) is refused, saying what to do: nothing
upgrades from that history, so ``reset(url)`` (``akter migrate --reset``) drops what akter keeps
in the database, and it is migrated afresh.

A session advisory lock serialises concurrent migrators (several processes starting at once):
the first applies the files, the others wait, then find nothing to do. The app calls this at
start-up and the CLI exposes it; the test plugin builds its template database with it, named
by ``schema_checksum()``. It uses plain synchronous psycopg: it runs once, before any pool
exists.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import logging
import re
from collections.abc import Mapping
from typing import Any, Final

import attrs
import psycopg

from akter.errors import SchemaError, SchemaTooNew

# The advisory lock key every migrator takes: the ASCII bytes of "akterMig" read as a big-endian
# signed 64-bit integer. Advisory locks are per database, so migrating two databases of one
# server in parallel does not serialise.
MIGRATION_LOCK_KEY: Final = int.from_bytes(b"akterMig", "big", signed=True)
MIGRATIONS_TABLE: Final = "akter_schema_migrations"
ROUTINES_TABLE: Final = "akter_schema_routines"

_FILE_NAME = re.compile(r"(\d{3})_([a-z0-9_]+)\.sql")
_ROUTINE_FILE_NAME = re.compile(r"([a-z0-9_]+)\.sql")
_CREATE_ROUTINE = re.compile(r"^CREATE OR REPLACE (?:FUNCTION|PROCEDURE) ([a-z0-9_]+)\(", re.MULTILINE)

# The name of version 1 in the development history that 001_schema.sql squashed.
_SQUASHED_BASELINE: Final = "actor_kernel"

# The routines of the current schema with a given name, each as its DROP statement.
_DROPS = """
SELECT format('DROP ROUTINE %%s', p.oid::regprocedure)
  FROM pg_proc p
 WHERE p.proname = %s AND p.pronamespace = current_schema()::regnamespace
 ORDER BY p.oid
"""

# Everything ``reset`` drops, in order: akter's tables (with their triggers), then its routines
# (without CASCADE: another object that needs one stops the reset, naming it). Sent without
# parameters, so psycopg leaves the % signs alone.
_RESET_DROPS = r"""
SELECT statement FROM (
    SELECT 1 AS pass, format('DROP TABLE IF EXISTS %I CASCADE', c.relname) AS statement
      FROM pg_class c
     WHERE c.relkind IN ('r', 'p') AND c.relnamespace = current_schema()::regnamespace
       AND (c.relname LIKE 'actor\_%' OR c.relname LIKE 'akter\_%')
    UNION ALL
    SELECT 2, format('DROP ROUTINE IF EXISTS %s', p.oid::regprocedure)
      FROM pg_proc p
     WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'akter\_%'
) AS d
 ORDER BY pass"""

_log = logging.getLogger(__name__)


@attrs.frozen
class Migration:
    """One migration file: its version (the ``NNN``), name, SQL text and SHA-256 (hex) of its bytes."""

    version: int
    name: str
    sql: str = attrs.field(repr=False)
    checksum: str


@attrs.frozen
class Routine:
    """One routine file: the function or procedure it defines (its file's name), its SQL text
    and the SHA-256 (hex) of its bytes."""

    name: str
    sql: str = attrs.field(repr=False)
    checksum: str


@attrs.frozen
class Migrated:
    """What one ``migrate`` changed: the versioned migrations it applied (their versions, in
    order); the routines it applied for the first time, those it applied again because their
    file changed, and those it dropped because their file is gone (names, in name order). All
    empty: the schema was current."""

    versions: list[int] = attrs.field(factory=list)
    routines: list[str] = attrs.field(factory=list)
    reapplied: list[str] = attrs.field(factory=list)
    dropped: list[str] = attrs.field(factory=list)


def known_migrations() -> list[Migration]:
    """The versioned migrations this akter ships, in version order.

    A ``.sql`` file whose name is not ``NNN_name.sql``, or two files with one version, is a
    packaging defect and raises ``SchemaError``.
    """
    found: dict[int, Migration] = {}
    for entry in importlib.resources.files("akter._schema").iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _FILE_NAME.fullmatch(entry.name)
        if match is None:
            raise SchemaError(f"migration file {entry.name!r} is not named NNN_name.sql")
        raw = entry.read_bytes()
        migration = Migration(
            version=int(match.group(1)),
            name=match.group(2),
            sql=raw.decode("utf-8"),
            checksum=hashlib.sha256(raw).hexdigest(),
        )
        if migration.version in found:
            other = found[migration.version].name
            raise SchemaError(
                f"migrations {other!r} and {migration.name!r} share version {migration.version}"
            )
        found[migration.version] = migration
    return [found[v] for v in sorted(found)]


def known_routines() -> list[Routine]:
    """The routines this akter ships (``sql/functions/``), in name order.

    A file that is not ``<name>.sql`` with exactly one ``CREATE OR REPLACE FUNCTION|PROCEDURE
    <name>(`` in it is a packaging defect and raises ``SchemaError``.
    """
    found: list[Routine] = []
    for entry in importlib.resources.files("akter._schema").joinpath("functions").iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _ROUTINE_FILE_NAME.fullmatch(entry.name)
        raw = entry.read_bytes()
        text = raw.decode("utf-8")
        if match is None or _CREATE_ROUTINE.findall(text) != [match.group(1)]:
            raise SchemaError(
                f"routine file {entry.name!r} must be <name>.sql and define exactly one routine,"
                " with CREATE OR REPLACE FUNCTION|PROCEDURE <name>("
            )
        found.append(Routine(name=match.group(1), sql=text, checksum=hashlib.sha256(raw).hexdigest()))
    return sorted(found, key=lambda r: r.name)


def schema_checksum() -> str:
    """A SHA-256 (hex) over every file of ``sql/``, versioned and routine: equal for two akters
    whose migrate leaves the same schema."""
    hasher = hashlib.sha256()
    for migration in known_migrations():
        hasher.update(f"{migration.version}:{migration.checksum}\n".encode())
    for routine in known_routines():
        hasher.update(f"{routine.name}:{routine.checksum}\n".encode())
    return hasher.hexdigest()


def migrate(url: str) -> Migrated:
    """Bring the database at ``url`` up to this akter's ``sql/``; what it applied and dropped.

    Raises ``SchemaTooNew`` when the database holds a version above the newest file, and
    ``SchemaError`` when a recorded checksum differs from its file or the database carries the
    squashed development history; nothing is changed then. Safe to call from several processes
    at once (see the module docstring).
    """
    migrations = known_migrations()
    routines = known_routines()
    # The advisory lock is a session lock held by this connection: closing the connection (at the
    # end of the block, or when this process dies) releases it.
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK_KEY])
        conn.execute(
            """
            CREATE TABLE IF NOT EXISTS akter_schema_migrations (
                version    integer PRIMARY KEY,
                name       text NOT NULL,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """
        )
        rows = conn.execute("SELECT version, name, checksum FROM akter_schema_migrations").fetchall()
        recorded = {version: (name, checksum) for version, name, checksum in rows}
        check_recorded(recorded, migrations)
        done = Migrated()
        with conn.transaction():
            conn.execute(
                """
                CREATE TABLE IF NOT EXISTS akter_schema_routines (
                    name       text PRIMARY KEY,
                    checksum   text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """
            )
            found = conn.execute("SELECT name, checksum FROM akter_schema_routines").fetchall()
            applied_routines: dict[str, str] = dict(found)
            conn.execute("SET LOCAL check_function_bodies = off")
            for routine in routines:
                if applied_routines.get(routine.name) != routine.checksum:
                    _apply_routine(conn, routine)
                    fresh = routine.name not in applied_routines
                    (done.routines if fresh else done.reapplied).append(routine.name)
            for migration in migrations:
                if migration.version not in recorded:
                    _log.info("applying migration %03d_%s", migration.version, migration.name)
                    # Sent as bytes without parameters: psycopg then neither parses nor
                    # interpolates the file, and PostgreSQL runs its statements one after another.
                    conn.execute(migration.sql.encode("utf-8"))
                    conn.execute(
                        "INSERT INTO akter_schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                        [migration.version, migration.name, migration.checksum],
                    )
                    done.versions.append(migration.version)
            shipped = {routine.name for routine in routines}
            for name in sorted(set(applied_routines) - shipped):
                _log.info("dropping routine %s: this akter has no sql/functions/%s.sql", name, name)
                _drop_routine(conn, name)
                conn.execute("DELETE FROM akter_schema_routines WHERE name = %s", [name])
                done.dropped.append(name)
    return done


def reset(url: str) -> None:
    """Drop everything akter keeps in the database at ``url`` — its tables (``actor_*``,
    ``akter_*``: every actor's state, every execution), its routines and its migration
    history — so that ``migrate`` starts afresh. For development databases only; under the
    migration lock, in one transaction."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK_KEY])
        with conn.transaction():
            drops = conn.execute(_RESET_DROPS).fetchall()
            for (drop,) in drops:
                conn.execute(drop.encode("utf-8"))
        _log.info("reset: dropped %d tables and routines", len(drops))


def _apply_routine(conn: psycopg.Connection[Any], routine: Routine) -> None:
    """(Re)create one routine and record its checksum: ``CREATE OR REPLACE``, or, when its
    signature changed, its old forms dropped and the new one created."""
    _log.info("applying routine %s", routine.name)
    before = _overloads(conn, routine.name)
    try:
        with conn.transaction():  # a savepoint: a refused replace leaves the old form intact
            conn.execute(routine.sql.encode("utf-8"))
    except (psycopg.errors.InvalidFunctionDefinition, psycopg.errors.WrongObjectType):
        # a changed return type, parameter name or kind (function/procedure)
        _drop_routine(conn, routine.name)
        conn.execute(routine.sql.encode("utf-8"))
    else:
        if set(_overloads(conn, routine.name)) - set(before):
            # new argument types made a second overload: the old forms go
            for drop in before:
                conn.execute(drop.encode("utf-8"))
    conn.execute(
        "INSERT INTO akter_schema_routines (name, checksum) VALUES (%s, %s)"
        " ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, applied_at = now()",
        [routine.name, routine.checksum],
    )


def _overloads(conn: psycopg.Connection[Any], name: str) -> list[str]:
    """The DROP statements of every routine of the current schema named ``name``."""
    return [drop for (drop,) in conn.execute(_DROPS, [name]).fetchall()]


def _drop_routine(conn: psycopg.Connection[Any], name: str) -> None:
    for drop in _overloads(conn, name):
        conn.execute(drop.encode("utf-8"))


def schema_version(url: str) -> int:
    """The highest migration version recorded in the database at ``url``; 0 if none ever ran."""
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [MIGRATIONS_TABLE]).fetchone()
        if exists is None or not exists[0]:
            return 0
        row = conn.execute("SELECT coalesce(max(version), 0) FROM akter_schema_migrations").fetchone()
        return int(row[0]) if row is not None else 0


def check_recorded(recorded: Mapping[int, tuple[str, str]], migrations: list[Migration]) -> None:
    """Raise unless the recorded versioned migrations (version → name, checksum) are a prefix of
    ``migrations``, unedited: ``SchemaError`` for the squashed development history or an edited
    or unknown file, ``SchemaTooNew`` for a version above the newest file."""
    first = recorded.get(1)
    if first is not None and first[0] == _SQUASHED_BASELINE:
        raise SchemaError(
            "the database was migrated by a development version of akter whose migrations "
            f"(001_{_SQUASHED_BASELINE} … 025) were squashed into 001_schema.sql before the first "
            "release; nothing upgrades from that history. Run `akter migrate --reset` (it drops "
            "every akter table, with its data, and migrates afresh) or use a new database "
            "(see docs/operations.md, Migrations)"
        )
    newest = migrations[-1].version if migrations else 0
    if recorded and max(recorded) > newest:
        raise SchemaTooNew(max(recorded), newest)
    by_version = {m.version: m for m in migrations}
    problems: list[str] = []
    for version in sorted(recorded):
        name, checksum = recorded[version]
        migration = by_version.get(version)
        if migration is None:
            problems.append(f"migration {version:03d}_{name} was applied but this akter has no such file")
        elif checksum != migration.checksum:
            problems.append(
                f"migration {version:03d}_{migration.name} was applied with checksum {checksum}, "
                f"but its file now has {migration.checksum}"
            )
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems)
        raise SchemaError(
            "the database's migration history does not match this akter's migration files "
            f"(released migrations must never change):\n{listed}"
        )


def stale_routines(applied: Mapping[str, str]) -> list[str]:
    """The names of the routines whose recorded checksum (``applied``: name → checksum) is not
    the one of this akter's file, or that have no file: what a migrate would (re)apply or drop."""
    shipped = {routine.name: routine.checksum for routine in known_routines()}
    return sorted(name for name in set(shipped) | set(applied) if shipped.get(name) != applied.get(name))
