"""PostgreSQL for the `ours-pg` replica (issue 12): the server, a fresh database, its CPU.

The admin URL is `AGENT_TEST_POSTGRES_URL` when set (as in the tests), else
`postgresql://postgres@127.0.0.1:5432/postgres` when a server answers there. The bench
creates `bench_<random>` on it (`CREATE DATABASE`, autocommit) and drops it at the end,
connections still open to it included. No server: the PostgreSQL figures are not measured.

The backends serving that database are the postmaster's children whose process title
names it (`postgres: <cluster>: <user> <database> <client> <state>`); their CPU is read
from /proc like a server's. A server on another host (or whose processes this user cannot
read) has no such processes here: its CPU is then not measured.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit

import psycopg
from psycopg import sql

from bench.procs import cpu_seconds

ENV_URL = "AGENT_TEST_POSTGRES_URL"
LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
CONNECT_TIMEOUT_S = 5
NO_POSTGRES = f"no PostgreSQL: set {ENV_URL}"
SHOWN_SETTINGS = ("server_version", "synchronous_commit", "fsync")


def shown(url: str) -> str:
    """`url` without its password and parameters, for logs and the report."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port:
        netloc += f":{parts.port}"
    return f"{parts.scheme}://{netloc}{parts.path}"


def with_database(url: str, name: str) -> str:
    """`url` pointing at database `name` instead of its own."""
    parts = urlsplit(url)
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "dbname"])
    return parts._replace(path=f"/{name}", query=query).geturl()


def configured_url() -> str:
    """`AGENT_TEST_POSTGRES_URL` ("" if unset): read before the environment is scrubbed."""
    return os.environ.get(ENV_URL, "").strip()


def admin_url(configured: str) -> tuple[str | None, str]:
    """The server to use and "", or None and why there is none."""
    url = configured or LOCAL_URL
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        if configured:  # a URL someone set and that fails: say why
            why = " ".join(str(exc).split())[:300]
            return None, f"{ENV_URL} ({shown(url)}) does not answer: {why}"
        return None, NO_POSTGRES
    return url, ""


@dataclass
class Backends:
    """The backend processes of one database under a local postmaster, and their CPU.

    `cpu_s()` is a counter that never goes back: a backend seen once keeps its last
    reading after it exits (the pool closes idle connections), and a new one counts
    from its start.
    """

    postmaster: int
    database: str
    seen: dict[int, float] = field(default_factory=dict)

    def pids(self) -> list[int]:
        """The postmaster's children whose process title names the database."""
        try:
            with open(f"/proc/{self.postmaster}/task/{self.postmaster}/children") as children:
                candidates = [int(pid) for pid in children.read().split()]
        except OSError:
            return []
        found = []
        for pid in candidates:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    title = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if self.database in title.split():
                found.append(pid)
        return found

    def cpu_s(self) -> float:
        """CPU seconds of every backend of the database seen so far."""
        for pid in self.pids():
            reading = cpu_seconds([pid])
            if reading > 0:  # 0: it ended between the listing and the reading
                self.seen[pid] = reading
        return sum(self.seen.values())


@dataclass
class Database:
    """A fresh database for the benchmark: its URL, and its backends when they are local."""

    admin_url: str
    name: str
    url: str
    backends: Backends | None
    settings: dict[str, str] = field(default_factory=dict)

    def describe(self) -> dict[str, object]:
        """What the raw JSON keeps (no password)."""
        return {
            "server": shown(self.admin_url),
            "database": self.name,
            "backend_cpu": self.backends is not None,
            **self.settings,
        }


def _local_postmaster(conn: psycopg.Connection[tuple[object, ...]]) -> int | None:
    """The postmaster's pid if it runs on this machine and /proc shows it, else None."""
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    if row is None:
        return None
    backend = int(str(row[0]))
    try:
        with open(f"/proc/{backend}/stat", "rb") as stat:
            ppid = int(stat.read().rpartition(b")")[2].split()[1])
        with open(f"/proc/{ppid}/cmdline", "rb") as cmdline:
            command = cmdline.read().split(b"\0")[0]
    except OSError:
        return None  # another host, or a pid namespace of its own
    return ppid if command.endswith(b"postgres") else None


def _show(conn: psycopg.Connection[tuple[object, ...]], setting: str) -> str:
    row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(setting))).fetchone()
    return "" if row is None else str(row[0])


def create(admin: str) -> Database:
    """`CREATE DATABASE bench_<random>` on the server of `admin`."""
    name = f"bench_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(admin, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        postmaster = _local_postmaster(conn)
        # What a commit costs depends on them: the report names them.
        settings = {setting: _show(conn, setting) for setting in SHOWN_SETTINGS}
    backends = None if postmaster is None else Backends(postmaster, name)
    return Database(admin, name, with_database(admin, name), backends, settings)


def drop(database: Database) -> None:
    """Drop the database, closing whatever connections are still open to it."""
    statement = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
    with psycopg.connect(
        database.admin_url, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True
    ) as conn:
        conn.execute(statement.format(sql.Identifier(database.name)))
