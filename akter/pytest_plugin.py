"""pytest fixtures that give every test a fresh, migrated PostgreSQL database.

akter's own suite loads this plugin from ``pyproject.toml`` (``-p akter.pytest_plugin``); an
application can load it the same way to test its actors against a real database.

The server is ``$AKTER_TEST_DATABASE_URL`` when set (that URL is used as the administrative
connection, so its user must be allowed to create databases), otherwise the embedded server of
``akter.store.database`` with its data in ``<rootdir>/.akter/test-postgres`` (or
``$AKTER_TEST_DATA_DIR``). Nothing starts until a test asks for a database: a run of unit tests
never touches PostgreSQL.

Per session, the schema is migrated once into a template database named after the migrations'
checksums (``akter_tpl_<12 hex>``, ``migrate.schema_checksum``: versioned and routine files),
kept across runs and rebuilt only when a file of ``sql/`` changes.
Per test, ``database_url`` copies that template into ``akter_t_<16 hex>`` (a file copy, much
faster than migrating) and drops it afterwards. Tests under ``tests/integration/`` are marked
``integration`` automatically.

Fixtures: ``admin_url`` (session), ``template_database`` (session), ``database_url`` (function),
``explorer`` (function: the crash-point explorer on ``database_url``, ``akter.testing.Explorer``).

Every test also checks, when it ends, that no connection akter opened outside a pool (a relay's
heartbeat, listener or release connection: ``akter.store.connections``) is still open: a test
that leaves one open fails, naming where it was opened, and the connection is closed.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import TupleRow

if TYPE_CHECKING:
    from akter.testing import Explorer

ENV_TEST_DATABASE_URL: Final = "AKTER_TEST_DATABASE_URL"
ENV_TEST_DATA_DIR: Final = "AKTER_TEST_DATA_DIR"
TEMPLATE_PREFIX: Final = "akter_tpl_"
TEST_DATABASE_PREFIX: Final = "akter_t_"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "integration: needs a real PostgreSQL (AKTER_TEST_DATABASE_URL or the embedded server)"
    )


def pytest_report_header(config: pytest.Config) -> str:
    configured = os.environ.get(ENV_TEST_DATABASE_URL)
    if configured:
        from akter.store.database import describe

        return f"akter test database: {describe(configured)} (from {ENV_TEST_DATABASE_URL})"
    return f"akter test database: embedded PostgreSQL in {_embedded_data_dir(config)} (started on first use)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    integration = config.rootpath / "tests" / "integration"
    for item in items:
        if item.path.is_relative_to(integration):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def _no_leaked_connections() -> Iterator[None]:
    """Fail the test that leaves a dedicated connection open (it would reach the GC still open)."""
    from akter.store import connections

    before = {id(opened.conn) for opened in connections.open_connections()}
    yield
    leaked = [opened for opened in connections.open_connections() if id(opened.conn) not in before]
    for opened in leaked:
        opened.conn.pgconn.finish()  # the event loop may be gone: end the session synchronously
    if leaked:
        report = "\n".join(
            f"- {opened.name}, opened at:\n    " + "\n    ".join(opened.where) for opened in leaked
        )
        pytest.fail(f"{len(leaked)} dedicated connection(s) left open by this test:\n{report}", pytrace=False)


@pytest.fixture(scope="session")
def admin_url(pytestconfig: pytest.Config) -> str:
    """A URL through which the tests may create and drop databases on the test server."""
    configured = os.environ.get(ENV_TEST_DATABASE_URL)
    if configured:
        return configured
    from akter.store.database import embedded_admin_url

    return embedded_admin_url(_embedded_data_dir(pytestconfig))


@pytest.fixture(scope="session")
def template_database(admin_url: str) -> str:
    """The name of a database holding the migrated schema, for ``CREATE DATABASE ... TEMPLATE``.

    It is built under a temporary name and renamed when complete, so nobody copies a
    half-migrated one, and one process at a time builds it (an advisory lock named after the
    template): pytest-xdist's workers, or runs started side by side, wait for the first builder
    and use its template. Nothing stays connected to it (copying needs that).
    """
    from akter.store.database import with_database
    from akter.store.migrate import migrate, schema_checksum

    name = TEMPLATE_PREFIX + schema_checksum()[:12]
    with _admin(admin_url) as conn:
        if _exists(conn, name):
            return name
        # a session lock: released when this connection closes, even if the build fails
        conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", [name])
        if _exists(conn, name):
            return name  # built by whoever held the lock before us
        building = f"{name}_build_{uuid.uuid4().hex[:8]}"
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
        try:
            migrate(with_database(admin_url, building))
            conn.execute(
                sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                    sql.Identifier(building), sql.Identifier(name)
                )
            )
        except psycopg.errors.DuplicateDatabase:
            pass  # built meanwhile by a process that takes no lock (an older akter); as good as ours
        finally:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(building)))
    return name


@pytest.fixture
def database_url(admin_url: str, template_database: str) -> Iterator[str]:
    """The URL of a fresh database with akter's schema, dropped when the test ends."""
    from akter.store.database import with_database

    name = TEST_DATABASE_PREFIX + uuid.uuid4().hex[:16]
    with _admin(admin_url) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_database)
            )
        )
    try:
        yield with_database(admin_url, name)
    finally:
        # FORCE ends connections a test leaked (or a process it started left behind); the test's
        # outcome is already decided, and the next test must not inherit a busy server.
        with _admin(admin_url) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def explorer(database_url: str) -> Explorer:
    """The crash-point explorer on this test's fresh database::

        async def test_pay_survives_every_crash(explorer):
            report = await explorer(app, Shop, "shop-1", Pay, Payment("o1"), probe=provider.count)
            report.assert_exactly_once()

    The App names the actor types; the exploration runs on ``database_url`` whatever database
    the App itself is configured with."""
    from akter.testing import Explorer

    return Explorer(database_url)


def _embedded_data_dir(config: pytest.Config) -> Path:
    configured = os.environ.get(ENV_TEST_DATA_DIR)
    if configured:
        return Path(configured).expanduser()
    return config.rootpath / ".akter" / "test-postgres"


def _admin(url: str) -> psycopg.Connection[TupleRow]:
    # CREATE/DROP DATABASE cannot run inside a transaction block.
    return psycopg.connect(url, autocommit=True, application_name="akter-pytest")


def _exists(conn: psycopg.Connection[TupleRow], name: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None
