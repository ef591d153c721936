"""Storage URLs: read from the command line or the environment, checked without touching a database,
and shown with every credential masked."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import psycopg
import psycopg.conninfo
import sqlalchemy
from sqlalchemy.engine import URL, make_url

STORE_FILE = Path("runs") / "optuna.db"  # the default SQLite store, in the runs folder (common.outputs.RUNS_DIR)
DEFAULT_STORAGE_URL = f"sqlite:///{STORE_FILE}"
STORAGE_URL_VARIABLE = "DAMCHA_STORAGE_URL"
SUPPORTED_DIALECTS = ("sqlite", "postgresql", "mysql")
EXAMPLES = "sqlite:///runs/optuna.db or postgresql+psycopg://USER@HOST:PORT/DATABASE"
# Query parameters whose values are credentials (libpq's password, sslpassword, ...; tokens and keys).
CREDENTIAL_PARAMETER = re.compile(r"pass|pwd|secret|token|key|credential|auth", re.IGNORECASE)


class StorageURLError(ValueError):
    """A storage URL that cannot be used; the message names it and shows valid forms."""


def resolve_storage_url(value: str | None) -> str:
    """The URL to use: ``value``; ``env:NAME`` reads variable NAME; None reads ``$DAMCHA_STORAGE_URL``, else the default.

    Reading the URL from the environment keeps passwords off command lines and out of
    process lists.

    Raises:
        StorageURLError: ``env:NAME`` names a variable that is not set.
    """
    if value is None:
        return os.environ.get(STORAGE_URL_VARIABLE) or DEFAULT_STORAGE_URL
    if value.startswith("env:"):
        name = value.removeprefix("env:")
        if not os.environ.get(name):
            raise StorageURLError(f"--storage {value}: environment variable {name} is not set (or empty)")
        return os.environ[name]
    return value


def parse_storage_url(url: str) -> URL:
    """Check a storage URL without touching any database.

    Raises:
        StorageURLError: not a SQLAlchemy URL, a port that is not a number, a password
            with an unencoded ``@``, an unsupported database, or a SQLite URL without a
            file path.
    """
    try:
        url.encode("utf-8")
    except UnicodeEncodeError:
        raise StorageURLError(
            f"storage URL {url.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8: rename the store's file, or pass another"
        ) from None
    try:
        parsed = make_url(url)
    except sqlalchemy.exc.ArgumentError:
        raise StorageURLError(f"storage URL {masked_url(url)!r} is not a database URL; use e.g. {EXAMPLES}") from None
    except ValueError:  # SQLAlchemy parses the port with int()
        raise StorageURLError(f"storage URL {masked_url(url)!r}: the port is not a number; use e.g. {EXAMPLES}") from None
    if "@" in (parsed.host or ""):
        raise StorageURLError(
            f"storage URL {masked_url(url)!r}: the password holds an unencoded '@'; percent-encode it as %40 "
            "(or pass the password in the environment: --storage env:NAME)"
        )
    if parsed.get_backend_name() not in SUPPORTED_DIALECTS:
        raise StorageURLError(
            f"storage URL {masked_url(url)!r}: database {parsed.get_backend_name()!r} is not supported by Optuna's RDB storage; "
            f"use one of {', '.join(SUPPORTED_DIALECTS)}, e.g. {EXAMPLES}"
        )
    memory = (
        parsed.get_backend_name() == "sqlite"
        and is_true(parsed.query.get("uri"))
        and ("memory" in str(parsed.query.get("mode", "")) or (parsed.database or "").removeprefix("file:") in ("", ":memory:"))
    )
    if parsed.get_backend_name() == "sqlite" and (parsed.database in (None, "", ":memory:") or memory):
        raise StorageURLError(
            f"storage URL {masked_url(url)!r}: SQLite needs a file, e.g. sqlite:///runs/optuna.db "
            "(an in-memory store would be lost)"
        )
    _check_driver_arguments(parsed, url)
    return parsed


def _check_driver_arguments(parsed: URL, url: str) -> None:
    """The URL's query arguments, as its driver reads them, without connecting: a value the driver cannot
    read (``?timeout=abc``) or an argument it would ignore fails here, before any store is written.

    Raises:
        StorageURLError: naming the argument and the driver's complaint.
    """
    if not parsed.query:
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", sqlalchemy.exc.SAWarning)  # an argument the driver would ignore
            _, arguments = sqlalchemy.create_engine(parsed).dialect.create_connect_args(parsed)
        if parsed.get_backend_name() == "postgresql":
            psycopg.conninfo.make_conninfo("", **{k: v for k, v in arguments.items() if k != "context"})
            _check_whole_numbers(arguments)
    except (ValueError, TypeError, sqlalchemy.exc.SAWarning, psycopg.Error) as error:
        message = _masked_text(str(error).split(";")[0].splitlines()[0] if str(error) else type(error).__name__)
        raise StorageURLError(
            f"storage URL {masked_url(url)!r}: its query arguments ({', '.join(sorted(parsed.query))}) are not what "
            f"its driver takes: {message}; fix or drop them"
        ) from None


# libpq's connection options that take a whole number: libpq reads them only when it connects.
_LIBPQ_WHOLE_NUMBERS = (
    "connect_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
)


def _check_whole_numbers(arguments: dict) -> None:
    """libpq's whole-number options, read as libpq will read them when it connects.

    Raises:
        ValueError: one that is not a whole number.
    """
    for name in _LIBPQ_WHOLE_NUMBERS:
        value = arguments.get(name)
        if value is not None and not str(value).strip().lstrip("+-").isdigit():
            raise ValueError(f"invalid integer value {str(value)!r} for connection option {name!r}")


def masked_url(url: str) -> str:
    """The URL with every credential replaced by ``***``, for messages, reports and logs:
    the password of its user and the value of every credential query parameter
    (``password=``, ``sslpassword=``, ``token=`` ...). A text that is not a URL is masked
    as one would be, up to the last ``@`` of its user part.
    """
    try:
        parsed = make_url(url)
    except (sqlalchemy.exc.ArgumentError, ValueError):
        parsed = None
    if parsed is None or "@" in (parsed.host or ""):  # not a URL, or a password with an unencoded '@'
        return _masked_text(url)
    shown = parsed.set(query={}).render_as_string(hide_password=True)
    parameters = [
        (name, value) for name, values in parsed.query.items() for value in (values if isinstance(values, tuple) else (values,))
    ]
    if parameters:
        shown += "?" + "&".join(f"{name}={'***' if CREDENTIAL_PARAMETER.search(name) else value}" for name, value in parameters)
    return shown


def _masked_text(text: str) -> str:
    """Credentials hidden in a text that does not parse as a URL."""
    head, separator, rest = text.partition("//")
    if not separator:
        head, rest = "", text
    rest = re.sub(r"^([^:/@\s]*:)\S*@", r"\1***@", rest)  # user:password@host, the password up to the last '@'
    rest = re.sub(rf"([?&][^=&\s]*(?:{CREDENTIAL_PARAMETER.pattern})[^=&\s]*=)[^&\s]*", r"\1***", rest, flags=re.IGNORECASE)
    return head + separator + rest


def secrets_of(url: str) -> list[str]:
    """The credentials a URL holds (its password, credential query values), to scrub from any text."""
    try:
        parsed = make_url(url)
    except (sqlalchemy.exc.ArgumentError, ValueError):
        return []
    values = [parsed.password] if parsed.password else []
    for name, value in parsed.query.items():
        if CREDENTIAL_PARAMETER.search(name):
            values += list(value) if isinstance(value, tuple) else [value]
    return [str(value) for value in values if value]


def scrubbed(text: str, url: str) -> str:
    """``text`` with every credential of ``url`` replaced by ``***``."""
    for secret in secrets_of(url):
        text = text.replace(secret, "***")
    return text


def is_true(value: object) -> bool:
    """A URL query flag as SQLAlchemy's SQLite driver reads it (``true``, ``1``, ...)."""
    return str(value[-1] if isinstance(value, tuple) else value).strip().lower() in ("true", "1", "yes", "on")
