"""How akter picks its database, and how it shows a URL in logs. Nothing here starts a server:
a configured URL must be used as given, without touching the embedded one."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from akter.errors import ConfigurationError
from akter.store import database
from akter.store.database import default_data_dir, describe, resolve_database_url, with_database


@pytest.fixture(autouse=True)
def no_embedded_server(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(data_dir: Path | None = None) -> str:
        raise AssertionError("the embedded server must not start when a URL is configured")

    monkeypatch.setattr(database, "embedded_admin_url", refuse)


def test_an_explicit_url_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AKTER_DATABASE_URL", "postgresql://env@db/env")
    assert resolve_database_url("postgresql://code@db/code") == "postgresql://code@db/code"


def test_the_environment_is_used_when_no_url_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AKTER_DATABASE_URL", "postgresql://env@db/env")
    assert resolve_database_url() == "postgresql://env@db/env"
    assert resolve_database_url("") == "postgresql://env@db/env"


def test_the_data_directory_follows_akter_data_dir_then_xdg(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("AKTER_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_data_dir() == tmp_path / "xdg" / "akter" / "postgres"

    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_data_dir() == tmp_path / "home" / ".local" / "share" / "akter" / "postgres"

    monkeypatch.setenv("AKTER_DATA_DIR", str(tmp_path / "mine"))
    assert default_data_dir() == tmp_path / "mine"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:s3cret@db.example.com:5432/prod", "postgresql://app:***@db.example.com:5432/prod"),
        (
            "postgresql://app@db/prod?password=s3cret&sslmode=require",
            "postgresql://app:***@db/prod?sslmode=require",
        ),
        ("host=db user=app password=s3cret dbname=prod", "user=app password=*** dbname=prod host=db"),
        ("postgresql://postgres@/akter?host=/var/run/pg", "postgresql://postgres@/akter?host=/var/run/pg"),
    ],
)
def test_describe_hides_the_password_and_nothing_else(url: str, shown: str) -> None:
    assert describe(url) == shown
    assert "s3cret" not in describe(url)


def test_describe_does_not_echo_a_url_it_cannot_parse() -> None:
    assert "s3cret" not in describe("postgresql://app:s3cret@db:notaport/x?=")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres@/akter?host=/tmp/with%20space/pg",
        "postgresql://app:p%40ss@db.example.com:6432/prod?sslmode=require",
        "postgresql://app@[::1]:5433/prod",
        "postgresql://app@h1:1,h2:2/prod",
        "host=/tmp/pg user=postgres dbname=akter",
    ],
)
def test_with_database_changes_only_the_database(url: str) -> None:
    before = conninfo_to_dict(url)
    after = conninfo_to_dict(with_database(url, "akter_t_1"))
    assert after.pop("dbname") == "akter_t_1"
    before.pop("dbname")
    assert after == before


def test_a_data_dir_that_is_a_file_is_refused_before_anything_touches_it(tmp_path: Path) -> None:
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0\n")
    before = target.stat()
    with pytest.raises(ConfigurationError, match="is not a directory"):
        database.embedded_url(target)
    after = target.stat()
    assert (after.st_uid, after.st_gid, after.st_mode, target.read_text()) == (
        before.st_uid,
        before.st_gid,
        before.st_mode,
        "root:x:0:0\n",
    )
