"""PostgreSQL for the tests: a server that takes CREATE DATABASE, and a fresh database per test.

`postgres_admin_url` (session) picks the server, in this order:

1. `AGENT_TEST_POSTGRES_URL`, when set (it must answer: a set URL that does not is an error);
2. a server answering on 127.0.0.1:5432 as user `postgres` without a password;
3. a throwaway cluster of this session (`throwaway_cluster`): `initdb` (Debian's binaries
   under /usr/lib/postgresql/*/bin, else PATH's) into a temporary directory, run as the
   `postgres` OS user when the tests run as root (initdb refuses root), trust auth,
   listening on 127.0.0.1 on a free port; stopped and removed at the session's end.

No server and no binaries fails the tests with what to do (`make postgres`): they never
skip. `postgres_url` (per test) and `postgres_module_url` (per module) are a database of
their own, `CREATE DATABASE test_<uuid>`, dropped WITH (FORCE) afterwards.
"""

from __future__ import annotations

import glob
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import psycopg
import pytest
from psycopg import sql

from tests.support.children import harness_children

ENV_URL = "AGENT_TEST_POSTGRES_URL"
LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DEBIAN_BINARIES = "/usr/lib/postgresql/*/bin"
OS_USER = "postgres"  # who runs the cluster when the tests run as root
START_S = 60.0  # deadline for a new cluster to take connections
STOP_S = 30.0
POLL_S = 0.05
PORT_ATTEMPTS = 3  # a free port can be taken between picking it and the server binding it
LOG_TAIL = 2000

NO_BINARIES = (
    "these tests need PostgreSQL and there is none: {env} is not set, nothing answers on "
    "127.0.0.1:5432 as user postgres, and no initdb/pg_ctl was found under "
    "/usr/lib/postgresql/*/bin or on PATH. Run `make postgres` (installs Debian's "
    "postgresql package; the tests then start a throwaway cluster themselves), or set "
    "{env} to a server where CREATE DATABASE works."
)
NO_OS_USER = (
    "running as root, the throwaway PostgreSQL cluster must run as the {user!r} OS user "
    "(initdb refuses root), and there is none: run `make postgres` (Debian's package "
    "creates it) or set {env}"
)
ENV_UNANSWERED = "{env} is set but its server does not answer: {error}"


class ProvisioningError(RuntimeError):
    """No PostgreSQL server could be found or started."""


def connect_error(url: str) -> str | None:
    """None when `url` takes a connection now; else why not."""
    try:
        with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return str(exc).strip() or type(exc).__name__
    return None


def find_binaries() -> Path | None:
    """The directory of the newest Debian PostgreSQL with initdb and pg_ctl, else PATH's."""

    def version(path: str) -> tuple[int, ...]:
        number = Path(path).parent.name
        return tuple(int(part) for part in number.split(".") if part.isdigit())

    for found in sorted(glob.glob(DEBIAN_BINARIES), key=version, reverse=True):
        directory = Path(found)
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    initdb = shutil.which("initdb")
    if initdb is not None:
        directory = Path(initdb).resolve().parent
        if (directory / "pg_ctl").is_file() and (directory / "postgres").is_file():
            return directory
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def with_database(url: str, name: str) -> str:
    """`url` pointing at database `name` instead of its own."""
    parts = urlsplit(url)
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "dbname"])
    return parts._replace(path=f"/{name}", query=query).geturl()


class _Cluster:
    """One cluster's directory and server process; `start()` returns its admin URL."""

    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        self.owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self.owner = pwd.getpwnam(OS_USER)
            except KeyError:
                raise ProvisioningError(NO_OS_USER.format(user=OS_USER, env=ENV_URL)) from None
        self.root = Path(tempfile.mkdtemp(prefix="react-agent-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.server: subprocess.Popen[bytes] | None = None
        if self.owner is not None:
            os.chown(self.root, self.owner.pw_uid, self.owner.pw_gid)

    def _command(self, program: str, *args: str | Path) -> list[str]:
        """`program` from the binaries with `args`, as the cluster's OS user."""
        argv = [str(self.binaries / program), *map(str, args)]
        if self.owner is None:
            return argv
        if shutil.which("runuser"):
            return ["runuser", "-u", self.owner.pw_name, "--", *argv]
        return ["su", self.owner.pw_name, "-s", "/bin/sh", "-c", "exec " + shlex.join(argv)]

    def _run(self, program: str, *args: str | Path, timeout: float = 120.0) -> None:
        done = subprocess.run(
            self._command(program, *args),
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "LC_ALL": "C"},
            cwd=self.root,
        )
        if done.returncode != 0:
            output = (done.stdout + done.stderr)[-LOG_TAIL:]
            raise ProvisioningError(f"{program} failed (exit status {done.returncode}):\n{output}")

    def start(self) -> str:
        # C locale and UTF-8: any machine has them; --no-sync: nothing here must survive.
        self._run(
            "initdb",
            "-D",
            self.data,
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        exited = ""
        for _ in range(PORT_ATTEMPTS):
            port = free_port()
            url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
            exited = self._serve(port, url)
            if not exited:
                return url
        raise ProvisioningError(f"the throwaway PostgreSQL cluster did not start: {exited}")

    def _serve(self, port: int, url: str) -> str:
        """Start the server on `port` and wait until it takes a connection: "" then; how it
        ended when it exited first (another port may do). Raises when it never answers."""
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.root),
            "max_connections": "200",
            # A throwaway cluster: durability only costs the tests time.
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
        }
        options = [f"-c{name}={value}" for name, value in settings.items()]
        with self.log.open("ab") as log:
            self.server = subprocess.Popen(
                self._command("postgres", "-D", self.data, "-p", str(port), *options),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "LC_ALL": "C"},
                cwd=self.root,
            )
        deadline = time.monotonic() + START_S
        while True:
            if self.server.poll() is not None:  # e.g. the port was taken meanwhile
                return f"exit status {self.server.returncode}:\n{self._log_tail()}"
            error = connect_error(url)
            if error is None:
                return ""
            if time.monotonic() > deadline:
                self.stop()
                raise ProvisioningError(
                    f"the throwaway PostgreSQL cluster took no connection within {START_S:g} s"
                    f" ({error}):\n{self._log_tail()}"
                )
            time.sleep(POLL_S)  # polling interval of the readiness check, not a wait for it

    def _log_tail(self) -> str:
        with suppress(OSError):
            return self.log.read_text(errors="replace")[-LOG_TAIL:]
        return ""

    def stop(self) -> None:
        """Stop the server (immediate: nothing of it is kept)."""
        server, self.server = self.server, None
        if server is None or server.poll() is not None:
            return
        with suppress(ProvisioningError, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop", timeout=STOP_S)
        try:
            server.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=STOP_S)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def throwaway_cluster(binaries: Path | None = None) -> Iterator[str]:
    """A new PostgreSQL cluster in a temporary directory; its admin URL (user postgres).

    Made with `binaries` (default: `find_binaries()`), serving 127.0.0.1 on a free port
    and a unix socket in its directory; stopped, and its directory removed, at the end.
    Raises ProvisioningError when there are no binaries or the cluster does not start.
    """
    binaries = binaries or find_binaries()
    if binaries is None:
        raise ProvisioningError(NO_BINARIES.format(env=ENV_URL))
    cluster = _Cluster(binaries)
    try:
        with harness_children():  # every test's server, not the one asking first
            url = cluster.start()
        yield url
    finally:
        with harness_children():
            cluster.remove()


@contextmanager
def fresh_database(admin_url: str) -> Iterator[str]:
    """A new, empty database on the server of `admin_url`; its URL. Dropped at the end,
    connections still open to it included."""
    name = f"test_{uuid.uuid4().hex}"
    _admin(admin_url, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield with_database(admin_url, name)
    finally:
        _admin(
            admin_url,
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)),
        )


def _admin(url: str, statement: sql.Composed) -> None:
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        conn.execute(statement)


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    """A `postgresql://` URL to a database where CREATE DATABASE works (see the module)."""
    configured = os.environ.get(ENV_URL, "").strip()
    if configured:
        error = connect_error(configured)
        if error is not None:
            pytest.fail(ENV_UNANSWERED.format(env=ENV_URL, error=error), pytrace=False)
        yield configured
        return
    if connect_error(LOCAL_URL) is None:
        yield LOCAL_URL
        return
    with ExitStack() as stack:
        try:
            url = stack.enter_context(throwaway_cluster())
        except ProvisioningError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield url


@pytest.fixture
def postgres_url(postgres_admin_url: str) -> Iterator[str]:
    """A database of this test's own (`postgresql://...`), dropped after it."""
    with fresh_database(postgres_admin_url) as url:
        yield url


@pytest.fixture(scope="module")
def postgres_module_url(postgres_admin_url: str) -> Iterator[str]:
    """A database of this module's own, for module-scoped servers; dropped after it."""
    with fresh_database(postgres_admin_url) as url:
        yield url
