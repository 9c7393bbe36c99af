#!/usr/bin/env python3
"""Real PostgreSQL and MariaDB servers for the tests: throwaway, loopback only, fast.

    python scripts/dbservers.py run [--only postgres|mysql] [--autoinc-lock-mode N] -- COMMAND...
        start the servers, run COMMAND with JOBQ_TEST_POSTGRES_URL and
        JOBQ_TEST_MYSQL_URL exported, stop them, exit with COMMAND's code.
        --autoinc-lock-mode: MariaDB's innodb_autoinc_lock_mode (0, 1 or 2); its
        default is 1, "consecutive", and MySQL 8's 2, "interleaved".
    python scripts/dbservers.py serve [--only ...]
        start them and print the URLs until Ctrl-C (for a test session by hand).
    python scripts/dbservers.py install [--only ...]
        install the server binaries from Debian's packages if they are missing.

Each server gets a fresh temporary folder (data, unix socket, log), listens on
127.0.0.1 on a free port, and is stopped and deleted on exit, Ctrl-C or error.
When JOBQ_TEST_POSTGRES_URL or JOBQ_TEST_MYSQL_URL is already set, that server
is used instead and none is started.

The URLs are server-level, in SQLAlchemy's form, for superuser `jobq`
(password `jobq`):
    postgresql+psycopg://jobq:jobq@127.0.0.1:PORT/postgres
    mysql+pymysql://jobq:jobq@127.0.0.1:PORT          (no default database:
        a statement that forgets to pick one fails instead of writing into `mysql`)
Tests make their own database on them (tests/dbfixtures.py: fresh_database).

Standard library only: it runs before any virtual environment exists.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import functools
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

USER = PASSWORD = "jobq"
ENV = {"postgres": "JOBQ_TEST_POSTGRES_URL", "mysql": "JOBQ_TEST_MYSQL_URL"}
KINDS = tuple(ENV)
# Debian's packages that hold the binaries; the MariaDB "core" ones skip the
# service scripts, perl and galera that `mariadb-server` pulls in.
PACKAGES = {
    "postgres": ["postgresql"],
    "mysql": ["mariadb-server-core", "mariadb-client-core"],
}
START_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0


class ServerError(RuntimeError):
    """A server could not be installed or started; the message says what to do."""


def log(msg: str) -> None:
    print(f"[dbservers] {msg}", file=sys.stderr, flush=True)


# --- finding and installing the binaries -------------------------------------


def _version_key(path: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path))


def find_postgres_bindir() -> Path | None:
    """The newest Debian-layout bin dir (/usr/lib/postgresql/N/bin), else initdb on PATH."""
    dirs = [d for d in glob.glob("/usr/lib/postgresql/*/bin") if os.path.exists(f"{d}/initdb")]
    if dirs:
        return Path(max(dirs, key=_version_key))
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _which(*names: str) -> str | None:
    path = os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin:/sbin:/usr/local/sbin:/usr/local/bin"
    for name in names:
        found = shutil.which(name, path=path)
        if found:
            return found
    return None


def find_mariadb() -> tuple[str, str] | None:
    """(server binary, install-db script) or None."""
    server = _which("mariadbd", "mysqld")
    install_db = _which("mariadb-install-db", "mysql_install_db")
    return (server, install_db) if server and install_db else None


def _installed(kind: str) -> bool:
    return (find_postgres_bindir() if kind == "postgres" else find_mariadb()) is not None


def ensure_installed(kinds: Sequence[str]) -> None:
    """apt-get install whatever of `kinds` is missing, in one go."""
    missing = [k for k in kinds if not _installed(k)]
    if not missing:
        return
    packages = [p for k in missing for p in PACKAGES[k]]
    if os.geteuid() == 0:
        prefix: list[str] = []
    elif shutil.which("sudo"):
        prefix = ["sudo", "env", "DEBIAN_FRONTEND=noninteractive"]
    else:
        raise ServerError(
            f"{' and '.join(missing)} not installed, and installing needs root or sudo: "
            f"run `apt-get install {' '.join(packages)}` as root, or point "
            + " / ".join(ENV[k] for k in missing)
            + " at a server of yours"
        )
    if not shutil.which("apt-get"):
        raise ServerError(
            f"{' and '.join(missing)} not installed and there is no apt-get here: install "
            "the server yourself, or set " + " / ".join(ENV[k] for k in missing)
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log(f"installing {' '.join(packages)} (first time only)")
    began = time.monotonic()
    for cmd in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
    ):
        done = subprocess.run(
            prefix + cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        if done.returncode != 0:
            raise ServerError(
                f"`{' '.join(cmd)}` failed ({done.returncode}):\n{_tail(done.stdout)}"
            )
    log(f"installed in {time.monotonic() - began:.1f}s")
    still = [k for k in missing if not _installed(k)]
    if still:
        raise ServerError(f"installed {' '.join(packages)} but found no binaries for {still}")


# --- one running server -------------------------------------------------------


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def free_port() -> int:
    # The kernel picks a free port; another process could take it before the
    # server binds, which is rare enough and shows as a clear start failure.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_PR_SET_PDEATHSIG = 1


def _die_with_parent(sig: signal.Signals) -> Callable[[], None]:
    """preexec_fn: the kernel sends `sig` to the server if this runner is killed -9."""
    try:  # looked up here: the forked child should only make the call
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: no such safety net
        return lambda: None

    def set_it() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig))

    return set_it


@dataclass(eq=False)
class Server:
    """A server process and its temp folder; close() stops it and deletes the folder."""

    kind: str
    tmp: Path
    log_path: Path
    ready_line: str  # printed to the log once it accepts connections
    stop_signal: signal.Signals
    port: int = 0
    url: str = ""
    argv: list[str] = field(default_factory=list)
    run_as: pwd.struct_passwd | None = None
    proc: subprocess.Popen[bytes] | None = None

    def spawn(self) -> None:
        """Start the process; call it from the main thread (the death signal is per thread)."""
        uid, gid, groups = _ids(self.run_as)
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.tmp,
                # Its own session: a Ctrl-C meant for the tests does not stop
                # the server under them; close() stops it after them.
                start_new_session=True,
                preexec_fn=_die_with_parent(self.stop_signal),
                user=uid,
                group=gid,
                extra_groups=groups,
            )

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        assert self.proc is not None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.fail(f"exited with code {self.proc.returncode} while starting")
            if self.ready_line in self.log_text() and _accepts(self.port):
                return
            time.sleep(0.05)
        self.fail(f"did not accept connections on 127.0.0.1:{self.port} within {timeout:.0f}s")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def fail(self, why: str) -> NoReturn:
        raise ServerError(
            f"{self.kind} server {why}. Its log ({self.log_path}):\n{_tail(self.log_text())}"
        )

    def stop(self) -> None:
        """Stop the process, keeping its data and port: spawn() and wait_ready() start it again.

        For outage tests, on a server of their own. Its log so far is set aside,
        so that the next start's ready line is that start's own.
        """
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(self.stop_signal)
            proc.wait(STOP_TIMEOUT)
        if self.log_path.exists():
            self.log_path.replace(self.log_path.with_name(self.log_path.name + ".before"))

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(self.stop_signal)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                log(f"{self.kind} did not stop within {STOP_TIMEOUT:.0f}s: killing it")
                proc.kill()
                proc.wait()
        _live.discard(self)
        shutil.rmtree(self.tmp, ignore_errors=True)


_live: set[Server] = set()


@atexit.register
def _close_all() -> None:
    for server in list(_live):
        server.close()


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def _unprivileged() -> pwd.struct_passwd | None:
    """Postgres refuses to run as root: as root, use the `postgres` user (Debian's) or `nobody`."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise ServerError(
        "running as root and there is no `postgres` or `nobody` user to run Postgres as"
    )


def _ids(user: pwd.struct_passwd | None) -> tuple[int | None, int | None, list[int] | None]:
    """Popen's user, group and extra_groups: the user's alone, none of root's groups."""
    return (None, None, None) if user is None else (user.pw_uid, user.pw_gid, [])


def _run(kind: str, argv: list[str], server: Server, log_name: str) -> None:
    """Run a set-up step (initdb, install-db) with its output in the server's folder."""
    out = server.tmp / log_name
    uid, gid, groups = _ids(server.run_as)
    with out.open("wb") as f:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=f,
            stderr=subprocess.STDOUT,
            cwd=server.tmp,
            user=uid,
            group=gid,
            extra_groups=groups,
        )
    if done.returncode != 0:
        text = out.read_text(errors="replace")
        raise ServerError(f"{kind}: `{' '.join(argv)}` failed ({done.returncode}):\n{_tail(text)}")


def _new_tmp(kind: str, owner: pwd.struct_passwd | None) -> Path:
    # /tmp rather than $TMPDIR when handing the folder to another user: it
    # must be able to reach it; the unix socket path must stay short too.
    tmp = Path(tempfile.mkdtemp(prefix=f"jobq-{kind}-", dir="/tmp" if owner else None))
    if owner is not None:
        os.chown(tmp, owner.pw_uid, owner.pw_gid)
    return tmp


def prepare_postgres() -> Server:
    """initdb a fresh cluster (superuser jobq/jobq) in a temp folder; not started yet."""
    bindir = find_postgres_bindir()
    if bindir is None:
        raise ServerError(
            "no PostgreSQL binaries found (looked for /usr/lib/postgresql/*/bin/initdb"
            " and initdb on PATH)"
        )
    user = _unprivileged()
    tmp = _new_tmp("postgres", user)
    server = Server(
        "postgres",
        tmp,
        tmp / "postgres.log",
        "database system is ready to accept connections",
        signal.SIGINT,
        run_as=user,
    )  # SIGINT: fast shutdown, clients disconnected
    _live.add(server)
    try:
        pwfile = tmp / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if user is not None:
            os.chown(pwfile, user.pw_uid, user.pw_gid)
        data = tmp / "data"
        _run("postgres", [
            str(bindir / "initdb"), "-D", str(data), "-U", USER, f"--pwfile={pwfile}",
            "--auth-local=trust", "--auth-host=scram-sha-256",
            "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions",
        ], server, "initdb.log")  # fmt: skip
        server.port = free_port()
        server.argv = [
            str(bindir / "postgres"), "-D", str(data), "-p", str(server.port),
            "-c", "listen_addresses=127.0.0.1",
            "-c", f"unix_socket_directories={tmp}",
            "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
            "-c", "max_connections=200", "-c", "shared_buffers=128MB",
            "-c", "logging_collector=off",
        ]  # fmt: skip
        server.url = f"postgresql+psycopg://{USER}:{PASSWORD}@127.0.0.1:{server.port}/postgres"
        return server
    except BaseException:
        server.close()
        raise


def prepare_mysql(*, autoinc_lock_mode: int | None = None) -> Server:
    """mariadb-install-db a fresh data dir with user jobq/jobq; not started yet.

    ``autoinc_lock_mode``: the server's innodb_autoinc_lock_mode (None: MariaDB's
    default, 1). At 2, MySQL 8's default, INSERTs that run at once may take their
    AUTO_INCREMENT values in turns: those of one statement need not be consecutive.
    """
    if autoinc_lock_mode not in (None, 0, 1, 2):
        raise ServerError(f"innodb_autoinc_lock_mode is 0, 1 or 2, not {autoinc_lock_mode}")
    found = find_mariadb()
    if found is None:
        raise ServerError(
            "no MariaDB binaries found (looked for mariadbd or mysqld, and"
            " mariadb-install-db or mysql_install_db)"
        )
    mariadbd, install_db = found
    tmp = _new_tmp("mysql", None)
    server = Server("mysql", tmp, tmp / "mariadb.log", "ready for connections", signal.SIGTERM)
    _live.add(server)
    try:
        data, scratch = tmp / "data", tmp / "tmp"
        scratch.mkdir()
        as_root = ["--user=root"] if os.geteuid() == 0 else []
        # Run once at start-up, before the first connection is accepted.
        init = tmp / "init.sql"
        init.write_text(
            f"CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{PASSWORD}';\n"
            f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'%' WITH GRANT OPTION;\n"
        )
        # The same InnoDB settings for install-db's bootstrap server, so the
        # server need not resize its log at its first start.
        fast = [
            "--skip-name-resolve",
            "--innodb-flush-log-at-trx-commit=0",
            "--innodb-doublewrite=0",
            "--innodb-buffer-pool-size=256M",
            "--innodb-log-file-size=32M",
        ]
        _run("mysql", [
            install_db, "--no-defaults", f"--datadir={data}", "--basedir=/usr",
            "--auth-root-authentication-method=normal", "--skip-test-db",
            *as_root, *fast,
        ], server, "install-db.log")  # fmt: skip
        server.port = free_port()
        server.argv = [
            mariadbd, "--no-defaults", f"--datadir={data}", "--basedir=/usr", *as_root,
            "--bind-address=127.0.0.1", f"--port={server.port}",
            f"--socket={tmp / 'mysqld.sock'}", f"--pid-file={tmp / 'mysqld.pid'}",
            f"--tmpdir={scratch}", f"--log-error={server.log_path}", f"--init-file={init}",
            *fast, "--skip-log-bin", "--max-connections=300",
            # Debian's config (skipped by --no-defaults) and MySQL 8 default to utf8mb4.
            "--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci",
        ]  # fmt: skip
        if autoinc_lock_mode is not None:
            server.argv.append(f"--innodb-autoinc-lock-mode={autoinc_lock_mode}")
        # This server has no TLS (have_ssl DISABLED). Without ssl_disabled, PyMySQL 2.2.8
        # tries TLS at each connection and builds a context for it first: 43 ms of CPU a
        # connection, which the tests' fresh databases and commands paid thousands of times.
        server.url = f"mysql+pymysql://{USER}:{PASSWORD}@127.0.0.1:{server.port}/?ssl_disabled=true"
        return server
    except BaseException:
        server.close()
        raise


PREPARE: dict[str, Callable[[], Server]] = {"postgres": prepare_postgres, "mysql": prepare_mysql}


@contextlib.contextmanager
def servers(
    kinds: Sequence[str] = KINDS, *, autoinc_lock_mode: int | None = None
) -> Iterator[dict[str, str]]:
    """Start the servers of `kinds` (or use those in the env); yield {env var: URL}.

    Set-up (initdb, install-db) runs in parallel threads; the servers are
    spawned from this thread and waited for together. `autoinc_lock_mode`:
    MariaDB's, as prepare_mysql takes it (a server in the env is used as it is).
    """
    prepare = {
        **PREPARE,
        "mysql": functools.partial(prepare_mysql, autoinc_lock_mode=autoinc_lock_mode),
    }
    urls: dict[str, str] = {}
    wanted: list[str] = []
    for kind in kinds:
        given = os.environ.get(ENV[kind])
        if given:
            log(f"{kind}: using the server in {ENV[kind]} ({_hide_password(given)}); starting none")
            urls[ENV[kind]] = given
        else:
            wanted.append(kind)
    ensure_installed(wanted)
    started: list[Server] = []
    try:
        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, len(wanted))) as pool:
            futures = [pool.submit(prepare[kind]) for kind in wanted]
            errors: list[BaseException] = []
            for fut in futures:
                try:
                    started.append(fut.result())
                except BaseException as e:
                    errors.append(e)
            if errors:
                raise errors[0]
        for server in started:
            server.spawn()
        for server in started:
            server.wait_ready()
            urls[ENV[server.kind]] = server.url
            log(f"{server.kind}: {server.url} (data in {server.tmp})")
        if started:
            names = " and ".join(s.kind for s in started)
            log(f"started {names} in {time.monotonic() - began:.1f}s")
        yield urls
    finally:
        for server in started:
            server.close()


def _hide_password(url: str) -> str:
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


# --- command line -------------------------------------------------------------


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # so the servers are stopped and deleted


def run(kinds: Sequence[str], command: list[str], autoinc_lock_mode: int | None = None) -> int:
    with servers(kinds, autoinc_lock_mode=autoinc_lock_mode) as urls:
        env = {**os.environ, **urls}
        proc = subprocess.Popen(command, env=env)
        # Like a shell: Ctrl-C goes to the command (same process group); wait
        # for it to finish its own clean-up, then stop the servers.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            code = proc.wait()
            return 128 - code if code < 0 else code  # killed by a signal: as a shell says it
        finally:
            signal.signal(signal.SIGINT, previous)
            if proc.poll() is None:
                proc.terminate()
                proc.wait()


def serve(kinds: Sequence[str], autoinc_lock_mode: int | None = None) -> int:
    with servers(kinds, autoinc_lock_mode=autoinc_lock_mode) as urls:
        for name, url in urls.items():
            print(f"export {name}='{url}'", flush=True)
        log("serving; Ctrl-C stops and deletes them")
        # Even when started in the background, where the shell ignores SIGINT.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="action", required=True)
    for name in ("run", "serve", "install"):
        p = sub.add_parser(name)
        p.add_argument(
            "--only", choices=KINDS, action="append", help="this server only (repeatable)"
        )
        if name != "install":
            p.add_argument(
                "--autoinc-lock-mode",
                type=int,
                choices=(0, 1, 2),
                help="MariaDB's innodb_autoinc_lock_mode (default: MariaDB's, 1)",
            )
        if name == "run":
            p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND...")
    args = parser.parse_args(argv)
    kinds: list[str] = args.only or list(KINDS)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        if args.action == "install":
            ensure_installed(kinds)
            return 0
        if args.action == "serve":
            return serve(kinds, args.autoinc_lock_mode)
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            parser.error("run needs a command: run -- COMMAND...")
        return run(kinds, command, args.autoinc_lock_mode)
    except ServerError as e:
        log(f"error: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
