"""What every ``akter`` subcommand shares about its input and its failures.

The subcommands (the modules of ``akter.cli``) turn what a user typed into an App and a database
URL here, and every problem with it into a ``ConfigurationError`` whose message names what to
fix. They print it as one ``akter: <message>`` line on stderr and exit 2 (``fail``); the ``akter``
group turns an exception nobody expected into exit 3 with its traceback, so that no crash reads
as a command's answer (1: refused, not found).

- ``load_app``: ``module:attribute`` to an ``akter.App``, importing from the current directory
  first (as uvicorn and celery do). A module that raises while it is imported is the user's code
  failing: its traceback is kept (``AppImportFailed.details``), trimmed to the user's frames.
- ``database_url``: the URL a command uses (a flag, the App's own, ``AKTER_DATABASE_URL``, else
  the embedded server), refused unless it is UTF-8 and parses as a PostgreSQL URL, with where it
  came from in the message.
- ``cannot_connect`` / ``database_problem``: psycopg errors as messages that name the database
  (its password hidden) and say what to do.

Under ``--json`` a failure is JSON too: one document on stdout,
``{"error": {"type": ..., "message": ..., "exit_code": ...}}`` (``type`` the error's class, or
``UsageError`` / ``NotFound``), with the same exit code, so a script that reads the JSON never
has to parse an ``akter:`` line. ``JsonCommand`` (the command class of the groups whose commands
take ``--json``) does the same for click's own usage errors.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import traceback
from typing import TYPE_CHECKING, Any, NoReturn

import click
import psycopg
from click.core import Context, ParameterSource
from psycopg.conninfo import conninfo_to_dict

from akter.errors import AkterError, ConfigurationError

if TYPE_CHECKING:
    from akter.app import App

# The exit codes of every ``akter`` command, defined here once.
#: done, and the answer is yes: found, compatible, replays, acted on
EXIT_OK = 0
#: done, and the answer is no: nothing found or matched, incompatible, diverged, refused
EXIT_FAILURE = 1
#: the command could not run as typed: a bad flag, APP, URL or database (``fail``)
EXIT_USAGE = 2
#: an exception nobody expected: a bug in akter, with its traceback
EXIT_INTERNAL = 3
#: stopped by Ctrl-C (SIGINT)
EXIT_INTERRUPTED = 130

ENV_DATABASE_URL = "AKTER_DATABASE_URL"

_EXAMPLE = "like myapp.main:app"
_NO_SCHEMA = "the database has no akter schema (run `akter migrate`, or check the URL)"


#: an error's ``type`` under ``--json`` when no exception names it, by exit code
_KINDS = {EXIT_FAILURE: "NotFound", EXIT_USAGE: "UsageError"}


def json_wanted(ctx: Context | None = None) -> bool:
    """Whether the command running (or one of its groups) was given ``--json``."""
    ctx = ctx or click.get_current_context(silent=True)
    while ctx is not None:
        if ctx.params.get("as_json"):
            return True
        ctx = ctx.parent
    return False


def error_json(message: str, code: int, kind: str | None = None) -> str:
    """The document a failure is under ``--json``."""
    error = {"type": kind or _KINDS.get(code, "Error"), "message": message, "exit_code": code}
    return json.dumps({"error": error}, indent=2, sort_keys=True)


def fail(message: str, code: int = EXIT_USAGE, *, kind: str | None = None) -> NoReturn:
    """Print ``akter: message`` on stderr (under ``--json``: ``error_json`` on stdout) and exit
    with ``code``; ``kind`` names the error's type in the JSON."""
    if json_wanted():
        click.echo(error_json(message, code, kind))
    else:
        click.echo(f"akter: {message}", err=True)
    sys.exit(code)


def fail_with(exc: ConfigurationError) -> NoReturn:
    """``fail`` with a ``ConfigurationError``'s message, after the user's traceback if it has one."""
    if isinstance(exc, AppImportFailed):
        click.echo(exc.details, err=True, nl=False)
    fail(str(exc), kind=type(exc).__name__)


class JsonCommand(click.Command):
    """A command whose click usage errors (a bad option value, a missing argument) are JSON
    documents on stdout when it was given ``--json``, as its other failures are."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Context | None = None, **extra: Any
    ) -> Context:
        wants_json = "--json" in args
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.ClickException as exc:
            if not wants_json:
                raise
            _json_exit(exc)

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            if not json_wanted(ctx):
                raise
            _json_exit(exc)


def _json_exit(exc: click.ClickException) -> NoReturn:
    kind = "UsageError" if isinstance(exc, click.UsageError) else type(exc).__name__
    click.echo(error_json(exc.format_message(), exc.exit_code, kind))
    sys.exit(exc.exit_code)


class JsonGroup(click.Group):
    """A group whose commands are ``JsonCommand``s."""

    command_class = JsonCommand


def one_line(value: object) -> str:
    return " ".join(str(value).split())


# ---- APP --------------------------------------------------------------------------------------


class AppImportFailed(ConfigurationError):
    """APP's module raised while it was imported. ``details``: its traceback, from the user's
    first frame (what akter and importlib did to get there is left out)."""

    def __init__(self, message: str, details: str) -> None:
        super().__init__(message)
        self.details = details


def load_app(path: str) -> App:
    """Import ``module:attribute`` (the current directory first on ``sys.path``) and return the
    ``akter.App`` it names; a ``ConfigurationError`` saying what is wrong otherwise."""
    from akter.app import App

    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(
            f"APP must be module:attribute naming an akter.App, {_EXAMPLE}: got {path!r}"
        )
    if module_name.startswith("."):
        raise ConfigurationError(
            f"APP must name its module absolutely, {_EXAMPLE}, from the current directory: got {path!r}"
        )
    if "/" in module_name or "\\" in module_name:
        dotted = module_name.removesuffix(".py").replace("\\", "/").strip("/").replace("/", ".")
        raise ConfigurationError(f"APP names a module, not a file: write {dotted}:{attribute}")
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise ConfigurationError(
            f"{module_name!r} is not a module name (APP is module:attribute, {_EXAMPLE})"
        )
    module = _import(module_name, attribute)
    app: object = module
    for part in attribute.split("."):
        try:
            app = getattr(app, part)
        except AttributeError:
            raise ConfigurationError(f"{module_name!r} has no attribute {attribute!r}") from None
    if not isinstance(app, App):
        raise ConfigurationError(f"{path} is not an akter.App (it is {_kind(app)})")
    return app


def _import(module_name: str, attribute: str) -> object:
    _current_directory_first()
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name + ".").startswith(exc.name + "."):
            raise _import_failed(module_name, exc) from exc
        where = "in the current directory or on sys.path"
        if module_name.endswith(".py"):
            where += f" (APP names a module, not a file: write {module_name.removesuffix('.py')}:{attribute})"
        raise ConfigurationError(f"cannot import {module_name!r}: no module {exc.name!r} {where}") from exc
    except AkterError as exc:
        # a declaration refused at import: akter's own message lists every problem
        raise ConfigurationError(f"importing {module_name!r} failed: {exc}") from exc
    except Exception as exc:  # the user's module raised: show them where
        raise _import_failed(module_name, exc) from exc
    except SystemExit as exc:
        # A module that exits when imported (a script's main() at module level) would end the
        # command with its own code, and 0 from ``workflows check`` means "deploy".
        raise _import_failed(module_name, exc, f"it called sys.exit({exc.code!r})") from exc


def _current_directory_first() -> None:
    try:
        here = os.getcwd()
    except OSError:  # the directory was removed under us: nothing to import from it
        return
    if here not in sys.path:
        sys.path.insert(0, here)


def _import_failed(module_name: str, exc: BaseException, summary: str | None = None) -> AppImportFailed:
    tb = exc.__traceback__
    while tb is not None and _is_machinery(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    details = "".join(traceback.format_exception(type(exc), exc, tb))
    summary = summary or traceback.format_exception_only(type(exc), exc)[-1].strip()
    return AppImportFailed(f"importing {module_name!r} failed: {summary}", details)


def _is_machinery(filename: str) -> bool:
    return filename == __file__ or filename.startswith("<frozen importlib") or filename == importlib.__file__


def _kind(value: object) -> str:
    cls = type(value)
    if cls.__module__ == "builtins":
        name = cls.__name__
    elif cls.__module__.startswith("akter."):
        name = f"akter.{cls.__name__}"
    else:
        name = f"{cls.__module__}.{cls.__name__}"
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


# ---- database URLs ----------------------------------------------------------------------------


def database_url(flag: str | None, *, app: App | None = None, flag_source: str = "--database-url") -> str:
    """The URL a command uses: ``flag``, else the App's own, else ``AKTER_DATABASE_URL``, else the
    embedded server's. ``flag_source`` names where ``flag`` came from (a flag with an envvar
    passes ``AKTER_DATABASE_URL`` when the value came from there)."""
    from akter.store.database import resolve_database_url

    if flag:
        return checked_url(flag, flag_source)
    if app is not None and app.database_url:
        return checked_url(app.database_url, "the App's database_url")
    configured = os.environ.get(ENV_DATABASE_URL)
    if configured:
        return checked_url(configured, ENV_DATABASE_URL)
    return resolve_database_url(None)


def flag_source(name: str = "database_url") -> str:
    """Where the current command's ``--database-url`` came from: the flag or its envvar."""
    ctx = click.get_current_context()
    if ctx.get_parameter_source(name) is ParameterSource.ENVIRONMENT:
        return ENV_DATABASE_URL
    return "--" + name.replace("_", "-")


def checked_url(url: str, source: str) -> str:
    """``url`` if it is UTF-8 and parses as a PostgreSQL URL; else a ``ConfigurationError``
    naming ``source`` (a command line and the environment can hold any bytes)."""
    try:
        url.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = url[exc.start]
        shown = f"byte 0x{ord(bad) - 0xDC00:02x}" if "\udc80" <= bad <= "\udcff" else f"{bad!r}"
        raise ConfigurationError(f"{source} is not valid UTF-8: {shown} at position {exc.start}") from None
    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        reason = hide_passwords(one_line(exc))
        raise ConfigurationError(f"{source} is not a PostgreSQL URL: {reason}") from None
    return url


_URI_PASSWORD = re.compile(r"(postgres(?:ql)?://[^:@/\s\"]*):[^@\s\"]*@")
_KEYWORD_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s\"]+)")


def hide_passwords(text: str) -> str:
    """``text`` with the password of any database URL in it replaced by ``***``."""
    return _KEYWORD_PASSWORD.sub(r"\1***", _URI_PASSWORD.sub(r"\1:***@", text))


# ---- database errors --------------------------------------------------------------------------


def cannot_connect(exc: psycopg.Error, url: str) -> ConfigurationError:
    """A failed connection attempt as the message a user acts on."""
    from akter.store.database import describe

    reason = one_line(exc).removeprefix("connection failed: ")
    return ConfigurationError(f"cannot connect to the database at {describe(url)}: {reason}")


def database_problem(exc: psycopg.Error, url: str) -> ConfigurationError:
    """A statement that failed on a database akter could connect to."""
    from akter.store.database import describe

    if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedFunction):
        return ConfigurationError(_NO_SCHEMA)
    return ConfigurationError(f"cannot read the database at {describe(url)}: {one_line(exc)}")
