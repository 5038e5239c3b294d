"""Clients that send half a request and wait (slowloris), against the app alone and behind the
shipped front (deploy/haproxy.cfg): the app's open file descriptors, how long a health check from
another address takes, and how much the logs grow.

Streamlit's server takes every connection it is offered and never times out a request head that is
never finished, so N such clients hold N of the app's descriptors until it has none left. This
starts `streamlit run app.py` on 127.0.0.1 with its descriptor limit set to --app-fds (the issue's
box had 20,000; a smaller limit shows the same thing with fewer sockets), then for --seconds keeps
--connections half-sent requests open (each one "GET / HTTP/1.1" and a Host header, never the blank
line that ends the head), from --addresses loopback addresses (127.0.0.2 up), reconnecting any the
server closes. Meanwhile, once a second, a health check from 127.0.0.1 (GET /_stcore/health, given
20 s) and the app's descriptors are read. `--front` puts HAProxy with the shipped file in front
(the attack and the checks go to it; the app listens elsewhere on loopback); `--front` needs
haproxy (apt-get install haproxy).

    python bench/slow_clients.py [--front] [--connections 4096] [--app-fds 4096] [--seconds 20] [--addresses 1] [--keep]

Prints one line per second and a summary; never asserts. Loopback only; everything it starts it stops.
"""

from __future__ import annotations

import argparse
import os
import resource
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRONT_CONFIG = os.path.join(ROOT, "deploy", "haproxy.cfg")
HALF_REQUEST = b"GET / HTTP/1.1\r\nHost: demo\r\n"  # no blank line: the head never ends
HEALTH_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def wait_healthy(url: str, process: subprocess.Popen, log: str) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).status == 200:
                return
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                sys.exit(f"{url} did not answer; see {log}")
            time.sleep(0.3)


def app_process(data: str, port: int, fds: int | None = None, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`streamlit run app.py` on 127.0.0.1:port, as the Dockerfile runs it, its store and data in
    `data` (log: app.log); `fds`: its descriptor limit. tests/test_public_demo_front.py starts it so too."""

    def limit_fds() -> None:
        if fds is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fds, fds))

    return subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)]
        + ["--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"]
        + ["--server.fileWatcherType", "none"],
        cwd=ROOT,
        env={
            **os.environ,
            "COMPILE_LAB_DATA": data,
            "COMPILE_LAB_STORE": os.path.join(data, "store.sqlite3"),
            **(env or {}),
        },
        stdout=open(os.path.join(data, "app.log"), "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=limit_fds,
    )


def front_process(data: str, port: int, app_address: str) -> subprocess.Popen:
    """HAProxy with the shipped file on 127.0.0.1:port, in front of `app_address` (log: front.log)."""
    return subprocess.Popen(
        ["haproxy", "-db", "-f", FRONT_CONFIG],
        env={**os.environ, "COMPILE_LAB_FRONT_BIND": f"127.0.0.1:{port}", "COMPILE_LAB_APP": app_address},
        stdout=open(os.path.join(data, "front.log"), "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def start_app(data: str, port: int, fds: int, behind_front: bool) -> subprocess.Popen:
    app = app_process(data, port, fds, {"COMPILE_LAB_ADDRESS_HEADER": "X-Forwarded-For"} if behind_front else None)
    wait_healthy(f"http://127.0.0.1:{port}", app, os.path.join(data, "app.log"))
    return app


def start_front(data: str, port: int, app_port: int) -> subprocess.Popen:
    front = front_process(data, port, f"127.0.0.1:{app_port}")
    wait_healthy(f"http://127.0.0.1:{port}", front, os.path.join(data, "front.log"))
    return front


class Attacker(threading.Thread):
    """Keeps up to `connections` half-sent requests open to (host, port), from `addresses` loopback
    addresses in turn, and replaces each one the server closes."""

    def __init__(self, port: int, connections: int, addresses: int):
        super().__init__(daemon=True)
        self.port, self.connections, self.addresses = port, connections, addresses
        self.selector = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.opened = self.closed_by_server = self.refused = 0
        self.next_address = 0

    def open_one(self) -> None:
        source = f"127.0.0.{2 + self.next_address % self.addresses}"
        self.next_address += 1
        s = socket.socket()
        s.settimeout(1.0)
        try:
            s.bind((source, 0))
            s.connect(("127.0.0.1", self.port))
            s.sendall(HALF_REQUEST)
        except OSError:
            s.close()
            self.refused += 1
            return
        s.setblocking(False)
        self.selector.register(s, selectors.EVENT_READ)
        self.opened += 1

    def held(self) -> int:
        return len(self.selector.get_map())

    def run(self) -> None:
        while not self.stop.is_set():
            for key, _ in self.selector.select(timeout=0):
                try:
                    data = key.fileobj.recv(4096)
                except OSError:
                    data = b""
                if not data:  # closed (or answered, then closed) by the server
                    self.selector.unregister(key.fileobj)
                    key.fileobj.close()
                    self.closed_by_server += 1
            if self.held() < self.connections:
                for _ in range(min(200, self.connections - self.held())):
                    self.open_one()
            else:
                time.sleep(0.05)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()


def health_check(url: str) -> tuple[float | None, str]:
    """Seconds until /_stcore/health answered 200 (from 127.0.0.1), or None and why it did not."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url + "/_stcore/health", timeout=HEALTH_TIMEOUT_S) as answer:
            return (time.monotonic() - started, "") if answer.status == 200 else (None, f"HTTP {answer.status}")
    except OSError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:80]


def size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--front", action="store_true", help="attack HAProxy with deploy/haproxy.cfg in front")
    parser.add_argument("--connections", type=int, default=4096)
    parser.add_argument("--app-fds", type=int, default=4096, help="the app's RLIMIT_NOFILE")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--addresses", type=int, default=1, help="attacking addresses (127.0.0.2 up)")
    parser.add_argument("--keep", action="store_true", help="keep the app's and the front's logs")
    args = parser.parse_args()
    if args.front and not shutil.which("haproxy"):
        sys.exit("--front needs haproxy: apt-get install haproxy")
    own = resource.getrlimit(resource.RLIMIT_NOFILE)
    if own[0] < args.connections + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(own[1], args.connections + 1024), own[1]))

    data = tempfile.mkdtemp(prefix="slow-clients-")
    app_port = free_port()
    started = []
    try:
        app = start_app(data, app_port, args.app_fds, args.front)
        started.append(app)
        target = app_port
        if args.front:
            target = free_port()
            started.append(start_front(data, target, app_port))
        url = f"http://127.0.0.1:{target}"
        logs = [os.path.join(data, name) for name in ("app.log", "front.log")]
        log_before = sum(size(p) for p in logs)
        idle_fds = open_fds(app.pid)
        attacker = Attacker(target, args.connections, args.addresses)
        attacker.start()
        checks: list[float | None] = []
        peak_fds = idle_fds
        t0 = time.monotonic()
        print(f"{'s':>4} {'app fds':>8} {'held':>6} {'health s':>9}")
        while time.monotonic() - t0 < args.seconds:
            latency, why = health_check(url)
            checks.append(latency)
            fds = open_fds(app.pid)
            peak_fds = max(peak_fds, fds)
            shown = f"{latency:.2f}" if latency is not None else f">{HEALTH_TIMEOUT_S:.0f}"
            print(f"{time.monotonic() - t0:4.0f} {fds:8d} {attacker.held():6d} {shown:>9} {why}", flush=True)
            time.sleep(max(0.0, 1.0 - (latency or 0)))
        attacker.stop.set()
        attacker.join(timeout=30)
        log_growth = sum(size(p) for p in logs) - log_before
        with open(logs[0], errors="replace") as fh:
            too_many = fh.read().count("Too many open files")
        answered = [c for c in checks if c is not None]
        print(
            f"\n{'front' if args.front else 'app alone'}: {args.connections} half requests from "
            f"{args.addresses} address(es), app limit {args.app_fds} fds, {args.seconds:.0f} s"
        )
        print(f"  app fds: {idle_fds} idle, {peak_fds} at most under attack")
        print(
            f"  health checks: {len(answered)} of {len(checks)} answered; "
            + (f"median {statistics.median(answered):.3f} s, max {max(answered):.3f} s" if answered else "none")
        )
        print(
            f"  attacker: {attacker.opened} opened, {attacker.closed_by_server} closed by the server, "
            f"{attacker.refused} not accepted within 1 s"
        )
        print(f"  logs grew {log_growth} bytes; 'Too many open files' {too_many} times")
    finally:
        for process in reversed(started):
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=15)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(process.pid, signal.SIGKILL)
        if args.keep:
            print("logs kept in", data)
        else:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
