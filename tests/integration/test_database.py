"""The embedded PostgreSQL, as a user without AKTER_DATABASE_URL meets it: started on demand in its
data directory, reused, and explained when it cannot start.

These tests start servers of their own in temporary data directories (about 1.5 s each), whatever
server the rest of the suite uses."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import psycopg
import pytest

from akter.errors import EmbeddedServerError
from akter.store.database import embedded_url, resolve_database_url


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ``AKTER_DATA_DIR`` whose parents do not exist yet, and no ``AKTER_DATABASE_URL``."""
    path = tmp_path / "nested" / "pg"
    monkeypatch.setenv("AKTER_DATA_DIR", str(path))
    monkeypatch.delenv("AKTER_DATABASE_URL", raising=False)
    return path


def test_without_a_url_akter_starts_the_embedded_server_once(data_dir: Path) -> None:
    url = resolve_database_url()

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT 1, current_database(), current_setting('data_directory'), pg_postmaster_start_time()"
        ).fetchone()
    assert row is not None
    one, database, directory, started = row
    assert (one, database, Path(directory)) == (1, "akter", data_dir)

    assert resolve_database_url() == url
    assert embedded_url(data_dir) == url
    with psycopg.connect(url) as conn:
        again = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    assert again == (started,), "the second call must reuse the running server, not restart it"


@pytest.mark.slow
def test_the_data_survives_into_the_next_process(data_dir: Path) -> None:
    # Each child is a separate run of a program: the first creates a table and exits (stopping
    # the server, as it is the last user), the second starts the server again on the same data.
    first = textwrap.dedent(
        """
        import psycopg
        from akter.store.database import resolve_database_url
        with psycopg.connect(resolve_database_url(), autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (note text)")
            conn.execute("INSERT INTO kept VALUES ('from the first run')")
        """
    )
    second = textwrap.dedent(
        """
        import psycopg
        from akter.store.database import resolve_database_url
        with psycopg.connect(resolve_database_url()) as conn:
            print(conn.execute("SELECT note FROM kept").fetchone()[0])
        """
    )
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    subprocess.run([sys.executable, "-c", first], env=env, check=True, timeout=60)
    out = subprocess.run(
        [sys.executable, "-c", second], env=env, check=True, timeout=60, capture_output=True, text=True
    )
    assert out.stdout.strip() == "from the first run"


def test_a_data_directory_the_server_cannot_use_is_explained(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "PG_VERSION").write_text("99\n")  # looks initialised, holds nothing usable

    with pytest.raises(EmbeddedServerError) as raised:
        embedded_url(broken)

    message = str(raised.value)
    assert str(broken) in message
    assert "postgresql.conf" in message, "the tail of the server's log says what went wrong"
    assert "AKTER_DATABASE_URL" in message
    assert "AKTER_DATA_DIR" in message


def test_a_data_directory_with_whitespace_is_refused_before_anything_starts(tmp_path: Path) -> None:
    spaced = tmp_path / "my data" / "pg"

    with pytest.raises(EmbeddedServerError, match="whitespace"):
        embedded_url(spaced)

    assert not spaced.parent.exists()
