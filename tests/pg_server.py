"""A throwaway PostgreSQL server for the tests: `initdb` into a temporary folder, `pg_ctl start` on
a free 127.0.0.1 port, stopped and removed at the end. PostgreSQL refuses to run as root, so as root
the folder belongs to the `postgres` user and the server runs as it (runuser).

Used by tests/conftest.py (a session fixture, when no server is named by COMPILE_LAB_TEST_PG) and
runnable by hand: `python tests/pg_server.py start DIR` prints the URL, `... stop DIR` stops it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile

URL_VARIABLE = "COMPILE_LAB_TEST_PG"


def available() -> bool:
    """Whether this machine can start a server: initdb and pg_ctl on the PATH."""
    return bool(shutil.which("initdb") and shutil.which("pg_ctl"))


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _environment() -> dict[str, str]:
    """The server's environment: none of the tests' own variables (the process guard's test id
    must not mark the server or its backends as a test's leftover)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("COMPILE_LAB_")}


def start(folder: str | None = None) -> tuple[str, str]:
    """Start a server; returns (its URL, its folder). Raises RuntimeError with the server's log."""
    folder = folder or tempfile.mkdtemp(prefix="compile-lab-pg-")
    os.makedirs(folder, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    data, sockets, log = (os.path.join(folder, name) for name in ("data", "sockets", "server.log"))
    env = _environment()
    run = dict(env=env, cwd=folder, capture_output=True, text=True)
    made = subprocess.run(_as_server_user(["initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]), **run)
    if made.returncode:
        raise RuntimeError(f"initdb failed: {made.stderr.strip()}")
    subprocess.run(_as_server_user(["mkdir", "-p", sockets]), **run)
    port = _free_port()
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300"
    with open(os.path.join(folder, "options"), "w") as fh:  # for resume()
        fh.write(options)
    _start(folder, options)
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", folder


def _start(folder: str, options: str) -> None:
    data, log = os.path.join(folder, "data"), os.path.join(folder, "server.log")
    started = subprocess.run(
        _as_server_user(["pg_ctl", "-D", data, "-o", options, "-l", log, "-w", "start"]),
        env=_environment(),
        cwd=folder,
        capture_output=True,
        text=True,
    )
    if started.returncode:
        text = open(log).read() if os.path.exists(log) else started.stderr
        raise RuntimeError(f"pg_ctl start failed: {text.strip()[-2000:]}")


def pause(folder: str) -> None:
    """Stop the server in `folder` and keep its data (a server gone for a while, as a fault)."""
    done = subprocess.run(
        _as_server_user(["pg_ctl", "-D", os.path.join(folder, "data"), "-m", "fast", "-w", "stop"]),
        env=_environment(),
        cwd=folder,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"pg_ctl stop failed: {done.stderr.strip()}")


def resume(folder: str) -> None:
    """Start a paused server again, on its port."""
    with open(os.path.join(folder, "options")) as fh:
        _start(folder, fh.read())


def restart(folder: str) -> None:
    """Restart the server in `folder` (fast: its clients' connections are cut), as a fault."""
    done = subprocess.run(
        _as_server_user(
            [
                "pg_ctl",
                "-D",
                os.path.join(folder, "data"),
                "-l",
                os.path.join(folder, "server.log"),
                "-m",
                "fast",
                "-w",
                "restart",
            ]
        ),  # (-l again: without it the new server would write to, and hold open, our pipes)
        env=_environment(),
        cwd=folder,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"pg_ctl restart failed: {done.stderr.strip()}")


def stop(folder: str) -> None:
    """Stop the server in `folder` (at once: it holds only test data) and remove the folder."""
    subprocess.run(
        _as_server_user(["pg_ctl", "-D", os.path.join(folder, "data"), "-m", "immediate", "-w", "stop"]),
        env=_environment(),
        cwd=folder,
        capture_output=True,
    )
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    action, where = sys.argv[1], sys.argv[2]
    if action == "start":
        print(start(where)[0])
    else:
        stop(where)
