"""The migrator: brings a database's schema up to the ``sql/NNN_name.sql`` files this akter ships.

The SQL files are the one and only schema definition; they are forward-only and never edited
once released. They travel inside the package as ``akter._schema`` (a link to the top-level
``sql/`` folder), so an installed wheel migrates exactly like a checkout.

``migrate(url)`` records what it applied in ``akter_schema_migrations`` (version, name, SHA-256
of the file, time). It refuses a database that was migrated further by a newer akter
(``SchemaTooNew``) or whose recorded checksums differ from the files (``SchemaError``: someone
edited a released migration), and changes nothing in either case. Each missing file runs in its
own transaction together with its version row, so a failing file leaves the database at the
previous version. A session advisory lock serialises concurrent migrators (several processes
starting at once): the first applies the files, the others wait, then find nothing to do.

The app calls this at start-up and the CLI exposes it; the test plugin builds its template
database with it. It uses plain synchronous psycopg: it runs once, before any pool exists.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import logging
import re
from typing import Final

import attrs
import psycopg

from akter.errors import SchemaError, SchemaTooNew

# The advisory lock key every migrator takes: the ASCII bytes of "akterMig" read as a big-endian
# signed 64-bit integer. Advisory locks are per database, so migrating two databases of one
# server in parallel does not serialise.
MIGRATION_LOCK_KEY: Final = int.from_bytes(b"akterMig", "big", signed=True)
MIGRATIONS_TABLE: Final = "akter_schema_migrations"

_FILE_NAME = re.compile(r"(\d{3})_([a-z0-9_]+)\.sql")

_log = logging.getLogger(__name__)


@attrs.frozen
class Migration:
    """One migration file: its version (the ``NNN``), name, SQL text and SHA-256 (hex) of its bytes."""

    version: int
    name: str
    sql: str = attrs.field(repr=False)
    checksum: str


def known_migrations() -> list[Migration]:
    """The migrations this akter ships, in version order.

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


def migrate(url: str) -> list[int]:
    """Apply the missing migrations to the database at ``url``; the versions applied, in order.

    Raises ``SchemaTooNew`` when the database holds a version above the newest file, and
    ``SchemaError`` when a recorded checksum differs from its file; nothing is changed then.
    Safe to call from several processes at once (see the module docstring).
    """
    migrations = known_migrations()
    newest = migrations[-1].version if migrations else 0
    applied: list[int] = []
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
        _check_recorded(recorded, migrations, newest)
        for migration in migrations:
            if migration.version in recorded:
                continue
            _log.info("applying migration %03d_%s", migration.version, migration.name)
            with conn.transaction():
                # Sent as bytes without parameters: psycopg then neither parses nor interpolates
                # the file, and PostgreSQL runs its statements one after another.
                conn.execute(migration.sql.encode("utf-8"))
                conn.execute(
                    "INSERT INTO akter_schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                    [migration.version, migration.name, migration.checksum],
                )
            applied.append(migration.version)
    return applied


def schema_version(url: str) -> int:
    """The highest migration version recorded in the database at ``url``; 0 if none ever ran."""
    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [MIGRATIONS_TABLE]).fetchone()
        if exists is None or not exists[0]:
            return 0
        row = conn.execute("SELECT coalesce(max(version), 0) FROM akter_schema_migrations").fetchone()
        return int(row[0]) if row is not None else 0


def _check_recorded(recorded: dict[int, tuple[str, str]], migrations: list[Migration], newest: int) -> None:
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
