"""One factory from a URL to an Optuna storage.

The default is a SQLite file under the working directory, set up for one writing
driver and other readers (optuna-dashboard, reports): write-ahead logging, so readers
don't block the writer, and a generous lock timeout. Any other SQLAlchemy URL that
Optuna supports (PostgreSQL on a cluster) is passed through.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import sqlite3
import urllib.parse
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import optuna
import psycopg
import psycopg.conninfo
import sqlalchemy
from sqlalchemy.engine import URL, make_url

from storage.database_lock import DatabaseHeldError, database_lock, held_elsewhere

STORE_FILE = Path("runs") / "optuna.db"  # the default SQLite store, in the runs folder (trainers.outputs.RUNS_DIR)
DEFAULT_STORAGE_URL = f"sqlite:///{STORE_FILE}"
SQLITE_SIDECARS = ("-journal", "-wal", "-shm")  # files SQLite keeps beside a database
WRITER_LOCK_SUFFIX = ".writer-lock"  # ``single_writer``'s lock file, beside the database
STORAGE_URL_VARIABLE = "DAMCHA_STORAGE_URL"
CONNECT_TIMEOUT_S = 10
SCHEMA_LOCK_NAME = "\0optuna tables"  # the ``StudyLock`` held while Optuna creates a store's tables (no study has a NUL)
SUPPORTED_DIALECTS = ("sqlite", "postgresql", "mysql")
EXAMPLES = "sqlite:///runs/optuna.db or postgresql+psycopg://USER@HOST:PORT/DATABASE"
SQLITE_TIMEOUT_S = 60
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
        and _is_true(parsed.query.get("uri"))
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
    except (ValueError, TypeError, sqlalchemy.exc.SAWarning, psycopg.Error) as error:
        message = _masked_text(str(error).split(";")[0].splitlines()[0] if str(error) else type(error).__name__)
        raise StorageURLError(
            f"storage URL {masked_url(url)!r}: its query arguments ({', '.join(sorted(parsed.query))}) are not what "
            f"its driver takes: {message}; fix or drop them"
        ) from None


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


class StoreBusyError(RuntimeError):
    """Another driver is writing to this SQLite store."""


@contextlib.contextmanager
def single_writer(url: str) -> Iterator[None]:
    """Hold the store's writer lock for a run: SQLite is safe with one writing driver only.

    A lock file next to the database's real file (``<file>.writer-lock``, symbolic links
    resolved; an advisory ``flock`` that the operating system releases when the process
    dies, even by SIGKILL). Other
    databases need no lock: several drivers may share a PostgreSQL store.

    Raises:
        StoreBusyError: another process holds the lock; names its pid and the fix.
        StorageURLError: the lock file cannot be created.
    """
    database = sqlite_path(url)
    if database is None:
        yield
        return
    # Next to the database's real file: every path to it (symbolic links too) meets the same lock.
    path = database.with_name(database.name + WRITER_LOCK_SUFFIX)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle = open(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+")  # noqa: SIM115 (closed below)
    except OSError as error:
        raise StorageURLError(
            f"cannot create the SQLite store's lock file {path}: {error.strerror}; "
            "fix the folder's permissions, or pass another --storage file"
        ) from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise StoreBusyError(f"another driver (pid {holder}) {_BUSY.format(masked_url(url))}") from None
        try:
            try:  # unbuffered: nothing is left to flush (and fail again) when the file closes
                os.ftruncate(handle.fileno(), 0)
                os.pwrite(handle.fileno(), str(os.getpid()).encode(), 0)
            except OSError as error:  # a full disk: the pid needs a block
                raise OSError(error.errno, error.strerror, str(path)) from error
            with _database_file_lock(database, url):
                yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_BUSY = (
    "is running a study on the SQLite store {}; SQLite is safe with one writing driver: wait for it, use another "
    "--storage file, or use PostgreSQL for several drivers"
)


@contextlib.contextmanager
def _database_file_lock(database: Path, url: str) -> Iterator[None]:
    """The lock of the database file itself (``storage.database_lock``): a driver given another path to
    the same file (a bind mount of it) meets it, where it finds no lock file beside its path.

    Raises:
        StoreBusyError: another driver holds it.
        StorageURLError: the file cannot be opened for writing (the system's reason).
    """
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(database_lock(database))
        except DatabaseHeldError:
            through = "another driver, through another path to the same file,"
            raise StoreBusyError(f"{through} {_BUSY.format(masked_url(url))}") from None
        except OSError as error:
            raise StorageURLError(
                f"cannot open the SQLite store {database} for writing: {error.strerror}; pass another --storage file"
            ) from None
        yield


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


def _scrubbed(text: str, url: str) -> str:
    for secret in secrets_of(url):
        text = text.replace(secret, "***")
    return text


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL, every symbolic link resolved; None for other databases.

    A URL may name the file as a path (``sqlite:///runs/s.db``) or, with ``?uri=true``, as a SQLite
    URI (``sqlite:///file:runs/s.db?uri=true``, ``sqlite:///file:///abs/s.db?uri=true``): both give
    the same file, and so the same writer lock and output checks.

    Raises:
        StorageURLError: see ``parse_storage_url``.
    """
    parsed = parse_storage_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    return _sqlite_file(parsed.database, _is_true(parsed.query.get("uri"))).resolve()


def sqlite_read_only_flags(url: str) -> list[str]:
    """The flags of a SQLite URI URL (``?uri=true``) that open its file read-only: ``mode=ro``, ``immutable=1``.

    Raises:
        StorageURLError: see ``parse_storage_url``.
    """
    parsed = parse_storage_url(url)
    if parsed.get_backend_name() != "sqlite" or not _is_true(parsed.query.get("uri")):
        return []
    flags = []
    if str(parsed.query.get("mode", "")).lower() == "ro":
        flags.append("mode=ro")
    if "immutable" in parsed.query and _is_true(parsed.query["immutable"]):
        flags.append("immutable=1")
    return flags


def _is_true(value: object) -> bool:
    """A URL query flag as SQLAlchemy's SQLite driver reads it (``true``, ``1``, ...)."""
    return str(value[-1] if isinstance(value, tuple) else value).strip().lower() in ("true", "1", "yes", "on")


def _sqlite_file(database: str, uri: bool) -> Path:
    """The file a SQLite URL's database part names: a path, or (``uri``) a ``file:`` URI's path."""
    if uri and database.startswith("file:"):
        return Path(urllib.parse.unquote(urllib.parse.urlsplit(database).path))
    return Path(database)


def full_disk(error: BaseException, url: str) -> str | None:
    """What ran out of space, when an exception (or one in its chain of causes) says a disk is full.

    Args:
        error: An exception a run raised: Optuna's ``StorageInternalError`` wraps the database's.
        url: The run's storage URL.

    Returns:
        ``the store <url, masked>`` for SQLite's SQLITE_FULL ("database or disk is full") or
        PostgreSQL's ``disk_full`` (its server's disk); the file an ``ENOSPC`` OSError names, ``""``
        for one that names none; None when no disk is full.
    """
    chain: list[BaseException] = []
    cause: BaseException | None = error
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    if any(isinstance(c, psycopg.errors.DiskFull) or getattr(c, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL for c in chain):
        return f"the store {masked_url(url)}"
    full = [c for c in chain if isinstance(c, OSError) and c.errno == errno.ENOSPC]
    named = [str(c.filename) for c in full if c.filename]
    return named[0] if named else "" if full else None


def store_files(url: str) -> list[Path]:
    """The files that make up a SQLite store, every symbolic link resolved: the database, its rollback
    journal, write-ahead log and shared memory, and the writer lock (none for other databases).

    Raises:
        StorageURLError: see ``parse_storage_url``.
    """
    database = sqlite_path(url)
    if database is None:
        return []
    return [database, *(database.with_name(database.name + suffix) for suffix in (*SQLITE_SIDECARS, WRITER_LOCK_SUFFIX))]


OPTUNA_TABLE = "studies"  # a table every Optuna store has


def check_sqlite_store(path: Path, *, writing: bool) -> None:
    """Check a SQLite store's file before anything opens it: it is one, it is whole, and
    (``writing``) it is empty or an Optuna store, and it, its folder or the nearest folder that
    exists can be written.

    Nothing is created or changed: the check only reads (SQLite's ``quick_check``).

    Raises:
        StorageURLError: one sentence naming the file, the fault and the fix.
    """
    try:
        exists = path.exists()
    except OSError as error:  # a folder on the way that this user may not enter
        raise StorageURLError(
            f"cannot reach the SQLite store {path}: {error.strerror}; fix the folders' permissions, "
            "or pass another --storage file"
        ) from None
    if not exists:
        if not writing:
            raise StorageURLError(f"there is no SQLite store at {path}: run a study first, or pass --storage")
        existing = next(folder for folder in path.parents if folder.exists())
        cause = (  # each cause in its own words: the system tells them apart (ENOTDIR, EROFS, EACCES)
            "is a file, so no folder can be made there"
            if not existing.is_dir()
            else "is on a read-only file system"
            if on_read_only_medium(existing)
            else "is a folder this user cannot write (permission denied)"
            if not os.access(existing, os.W_OK | os.X_OK)
            else None
        )
        if cause:
            raise StorageURLError(f"cannot create the SQLite store {path}: {existing} {cause}; pass another --storage file")
        return
    if not path.is_file():
        raise StorageURLError(f"the SQLite store {path} is not a file")
    if writing and (links := path.stat().st_nlink) > 1:  # other names of the file: other logs, another lock
        raise StorageURLError(
            f"the SQLite store {path} has {links} hard links: through another name SQLite would keep another "
            "write-ahead log (and corrupt the store), and a second driver would not meet this one's writer lock; "
            "keep one name (remove the other links), or pass another --storage file"
        )
    if on_read_only_medium(path.parent):
        if writing:
            raise StorageURLError(
                f"the SQLite store {path} is on a read-only file system: a study writes its trials there; copy it to "
                "a writable folder, or pass another --storage file (python -m reports reads it where it is)"
            )
    if writing and held_elsewhere(path):  # before SQLite opens it here, beside another path's logs
        raise StoreBusyError(f"another driver {_BUSY.format(masked_url(f'sqlite:///{path}'))}")
    # Only SQLite opens the file: closing any other descriptor of it would drop the locks this
    # process's SQLite connections hold there (POSIX locks), and another process could then
    # checkpoint and delete the write-ahead log under them.
    try:
        # mode=rw never creates the file, and reads a write-ahead log as writers see it (a
        # read-only connection may not, and then reports a healthy store as malformed). On a
        # read-only medium nothing can write: the file is read as it is (``immutable``).
        with contextlib.closing(sqlite3.connect(_reading_uri(path), uri=True, timeout=SQLITE_TIMEOUT_S)) as connection:
            (verdict,) = connection.execute("PRAGMA quick_check(1)").fetchone()
            tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as error:
        verdict, tables = str(error), set()
    if verdict == "file is not a database":
        raise StorageURLError(f"{path} is not a SQLite database; pass another --storage file")
    if verdict != "ok":
        raise StorageURLError(
            f"the SQLite store {path} is damaged ({verdict}); it was left as it is: restore it from a backup, "
            "or pass another --storage file"
        )
    if writing and tables and OPTUNA_TABLE not in tables:  # another program's database: its data stays its own
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise StorageURLError(
            f"the SQLite file {path} holds another program's tables ({shown}), not an Optuna store; it was left as it "
            "is: pass a new file, or a store a study wrote"
        )
    if writing and not (os.access(path, os.R_OK | os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)):
        raise StorageURLError(
            f"cannot write to the SQLite store {path} (permission denied on the file or its folder {path.parent}); "
            "fix the permissions, or pass another --storage file"
        )


def on_read_only_medium(folder: Path) -> bool:
    """Whether the file system holding ``folder`` is mounted read-only (where a write-ahead log cannot be read as usual,
    and where no permission lets anything be written)."""
    return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)


def _reading_uri(path: Path) -> str:
    """A SQLite URI that reads ``path`` without creating it: as writers see it. On a read-only medium,
    where SQLite cannot create a write-ahead log's index: read-only with the log and index that are
    there, or, when the store was closed cleanly (no log left), as an immutable file."""
    quoted = urllib.parse.quote(str(path))
    if not on_read_only_medium(path.parent):
        return f"file:{quoted}?mode=rw"
    return f"file:{quoted}?mode=ro" if Path(f"{path}-wal").exists() else f"file:{quoted}?mode=ro&immutable=1"


def open_storage(url: str | None = None, *, read_only: bool = False, **heartbeat: Any) -> optuna.storages.RDBStorage:
    """An Optuna storage for a URL (``resolve_storage_url(None)`` when None).

    For writing, a SQLite file's folder is created if missing (user-only) and the file is
    switched to write-ahead logging (a setting stored in the file). ``read_only`` (reports,
    browsing) creates, migrates and reconfigures nothing: the store must exist.
    ``heartbeat``: ``RDBStorage``'s heartbeat arguments (``heartbeat_interval``,
    ``grace_period``, ``heartbeat_stale_trial_callback``), for a driver.

    Raises:
        StorageURLError: see ``parse_storage_url`` and ``check_sqlite_store``; or the
            database cannot be reached.
    """
    url = url or resolve_storage_url(None)
    parsed = parse_storage_url(url)
    engine_kwargs = {}
    connect = url
    if parsed.get_backend_name() == "sqlite":
        path = sqlite_path(url)
        check_sqlite_store(path, writing=not read_only)
        if read_only and on_read_only_medium(path.parent):  # read as an immutable file: see _reading_uri
            connect = f"sqlite:///{_reading_uri(path)}&uri=true"
        if not read_only:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            # A store describes its studies: its owner's alone (SQLite gives its -wal file the same mode).
            with contextlib.suppress(FileExistsError):  # an existing store: only SQLite may open it (check_sqlite_store)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # an empty file is an empty database
            with contextlib.closing(sqlite3.connect(path, timeout=SQLITE_TIMEOUT_S)) as connection:
                connection.execute("PRAGMA journal_mode=WAL")
        engine_kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}}
    elif parsed.get_backend_name() == "postgresql":
        engine_kwargs = {"pool_pre_ping": True, "connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}
    else:
        engine_kwargs = {"pool_pre_ping": True}
    try:
        # Optuna creates a new database's tables unguarded: two drivers starting at once on an empty PostgreSQL
        # database would both issue CREATE TABLE, and the second fail ("relation ... already exists").
        schema_lock = contextlib.nullcontext() if read_only else StudyLock(url, SCHEMA_LOCK_NAME).held()
        with schema_lock, warnings.catch_warnings():  # Optuna marks its heartbeat experimental
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            storage = optuna.storages.RDBStorage(connect, engine_kwargs=engine_kwargs, skip_table_creation=read_only, **heartbeat)
        if read_only:  # nothing was read yet (no tables created): read once, so that a store it cannot use fails here
            storage.get_all_studies()
        return storage
    except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.DatabaseError, ModuleNotFoundError, ImportError) as error:
        raise StorageURLError(f"storage URL {masked_url(url)!r}: cannot open the database: {_first_line(error, url)}") from None
    except optuna.exceptions.StorageInternalError as error:  # Optuna 5 wraps the driver's error
        cause = error.__cause__ or error
        if re.search(r"no such table|relation .* does not exist", str(cause)):
            raise StorageURLError(
                f"storage URL {masked_url(url)!r}: the database holds no Optuna store (no study tables); "
                "pass the --storage of a store a study wrote"
            ) from None
        raise StorageURLError(f"storage URL {masked_url(url)!r}: cannot open the database: {_first_line(cause, url)}") from None


def _first_line(error: BaseException, url: str) -> str:
    """An error's first line, without the URL's secrets."""
    text = str(error).strip()
    return _scrubbed(text.splitlines()[0] if text else type(error).__name__, url)


class StudyLock:
    """A lock shared by every driver of one study on a PostgreSQL store (an advisory lock);
    on SQLite, where ``single_writer`` admits one driver, it does nothing.

    Drivers hold it while they count the study's trials and ask for the next one, so that
    together they never start more trials than the budget; and, named ``SCHEMA_LOCK_NAME``,
    while Optuna creates the store's tables (``open_storage``).
    """

    def __init__(self, url: str, study_name: str, on_wait: Callable[[], None] | None = None) -> None:
        self._url = url if parse_storage_url(url).get_backend_name() == "postgresql" else None
        self._key = int.from_bytes(hashlib.sha256(study_name.encode()).digest()[:8], "big", signed=True)
        self._engine = None
        self._on_wait = on_wait  # called once each time the lock is found held, before waiting for it

    def __getstate__(self) -> dict:  # engines don't pickle (Ray Tune pickles the searcher)
        return {"_url": self._url, "_key": self._key, "_engine": None, "_on_wait": None}

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock for the block: at once when it is free, else after saying so (``on_wait``) and waiting
        for the driver that holds it."""
        if self._url is None:
            yield
            return
        if self._engine is None:
            self._engine = sqlalchemy.create_engine(
                self._url, poolclass=sqlalchemy.pool.NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}
            )
        with self._engine.connect() as connection:
            free = connection.execute(sqlalchemy.text("SELECT pg_try_advisory_lock(:key)"), {"key": self._key}).scalar()
            if not free:
                if self._on_wait is not None:
                    self._on_wait()
                connection.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": self._key})
            try:
                yield
            finally:
                connection.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": self._key})
