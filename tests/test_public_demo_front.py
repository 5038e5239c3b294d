"""The front of a public demo (deploy/haproxy.cfg, HAProxy) before the real app: clients that send
half a request and wait get a bounded number of connections per address, never reach the app, and
are closed after the request timeout, while a visitor from another address is served; websockets
pass; the address the app is told is the one the front saw. And the app alone, out of descriptors,
keeps its log short (core/runs/server_log.py).

Loopback only: the attacker's connections come from 127.0.0.2 and up, the visitor's from 127.0.0.1."""

import http.server
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from support import ROOT, machine_seconds
from websockets.sync.client import connect as websocket_connect

sys.path.insert(0, os.path.join(ROOT, "bench"))
import slow_clients  # noqa: E402 - the benchmark's own way to start the app and the front

pytestmark = pytest.mark.slow  # a real app and a real HAProxy, and the front's request timeout waited out

FRONT_CONFIG = slow_clients.FRONT_CONFIG
HALF_REQUEST = b"GET / HTTP/1.1\r\nHost: demo\r\n"  # the blank line that would end the head never comes


def front_setting(pattern: str) -> int:
    """A number from the shipped front's file (the test holds the front to what the file says)."""
    with open(FRONT_CONFIG) as fh:
        return int(re.search(pattern, fh.read(), re.MULTILINE).group(1))


PER_ADDRESS = front_setting(r"reject if \{ sc0_conn_cur gt (\d+) \}")
REQUEST_TIMEOUT_S = front_setting(r"^\s*timeout http-request (\d+)s")
CLIENT_TIMEOUT_S = front_setting(r"^\s*timeout client (\d+)s")
# A half-sent request must be closed by the request timeout, not the longer client timeout: the test
# waits until halfway between them from when it opened the first (HAProxy's timers are exact; only
# this test's polling is late on a busy machine, and never by seconds).
CLOSED_WITHIN_S = (REQUEST_TIMEOUT_S + CLIENT_TIMEOUT_S) / 2


def require_haproxy() -> None:
    """HAProxy comes from Debian (.ci/run installs it): CI must run these tests; elsewhere say what is missing."""
    if shutil.which("haproxy"):
        return
    if os.environ.get("CI"):
        pytest.fail("the public demo's front needs haproxy (apt-get install haproxy)")
    pytest.skip("needs haproxy: apt-get install haproxy")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def answered(url: str, bound_s: float = 10.0) -> int | None:
    """The HTTP status `url` answers with within `bound_s` (a bound on a hang, not a speed), or None."""
    try:
        with urllib.request.urlopen(url, timeout=machine_seconds(bound_s)) as answer:
            return answer.status
    except OSError:
        return None


def wait_for(url: str, process: subprocess.Popen, log: str) -> None:
    deadline = time.monotonic() + machine_seconds(90)
    while answered(url, 2) != 200:
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            with open(log, errors="replace") as fh:
                pytest.fail(f"{url} did not answer: {fh.read()[-2000:]}")
        time.sleep(0.3)


def start_app(data, port: int, fds: int | None = None, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The app on 127.0.0.1:port as the benchmark starts it (slow_clients.app_process), once healthy."""
    app = slow_clients.app_process(str(data), port, fds, env)
    wait_for(f"http://127.0.0.1:{port}/_stcore/health", app, str(data / "app.log"))
    return app


def start_front(data, port: int, app_address: str, health: str = "/_stcore/health") -> subprocess.Popen:
    """HAProxy with the shipped file, on 127.0.0.1:port, in front of `app_address`."""
    front = slow_clients.front_process(str(data), port, app_address)
    wait_for(f"http://127.0.0.1:{port}{health}", front, str(data / "front.log"))
    return front


def stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=machine_seconds(20))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


def half_requests(port: int, source: str, count: int) -> list[socket.socket]:
    """`count` connections from `source` that each send half a request head and wait."""
    held = []
    for _ in range(count):
        s = socket.socket()
        s.settimeout(5)
        s.bind((source, 0))
        try:
            s.connect(("127.0.0.1", port))
            s.sendall(HALF_REQUEST)
        except OSError:  # refused before it was taken: as good as closed
            s.close()
            continue
        held.append(s)
    return held


def still_open(sockets: list[socket.socket]) -> list[socket.socket]:
    """Those the other side has not closed (a closed one reads as readable, then EOF or a reset)."""
    # poll, not select: in the whole suite this process holds more than select's 1,024 descriptors
    poller = select.poll()
    for sock in sockets:
        poller.register(sock, select.POLLIN)
    ready = {fd for fd, _ in poller.poll(0)}
    readable = {sock for sock in sockets if sock.fileno() in ready}
    alive = []
    for s in sockets:
        if s in readable:
            try:
                s.setblocking(False)
                while s.recv(65536):  # an answer before the close (HAProxy's 408) is read past
                    pass
            except BlockingIOError:
                alive.append(s)  # readable data, not yet the close
                continue
            except OSError:
                pass
            s.close()
        else:
            alive.append(s)
    return alive


def wait_until_closed(sockets: list[socket.socket], within_s: float, but: int = 0) -> list[socket.socket]:
    """Those still open once all `but` of them are closed, or `within_s` has passed."""
    deadline = time.monotonic() + within_s
    alive = still_open(sockets)
    while len(alive) > but and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = still_open(alive)
    return alive


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The app on loopback behind the shipped front, as deploy/compose.yaml runs them."""
    require_haproxy()
    data = tmp_path_factory.mktemp("front-demo")
    app_port, front_port = free_port(), free_port()
    app = start_app(data, app_port, env={"COMPILE_LAB_ADDRESS_HEADER": "X-Forwarded-For"})
    try:
        front = start_front(data, front_port, f"127.0.0.1:{app_port}")
    except BaseException:
        stop(app)
        raise
    yield {"app": app, "port": front_port, "data": data}
    stop(front)
    stop(app)


def test_half_sent_requests_never_reach_the_app_and_close_after_the_request_timeout(demo):
    app, port = demo["app"], demo["port"]
    health = f"http://127.0.0.1:{port}/_stcore/health"
    idle_fds = open_fds(app.pid)
    logs_before = sum(os.path.getsize(demo["data"] / name) for name in ("app.log", "front.log"))

    opened = time.monotonic()
    # One address keeps the front's number of connections; every one past it is closed at once.
    one_address = wait_until_closed(half_requests(port, "127.0.0.2", 4 * PER_ADDRESS), machine_seconds(5), PER_ADDRESS)
    assert len(one_address) == PER_ADDRESS
    many_addresses = [s for i in range(100) for s in half_requests(port, f"127.0.1.{i + 1}", 3)]
    assert len(still_open(many_addresses)) == 300  # many addresses, a few each: all held by the front
    # None of them reached the app (the app alone took one descriptor each), and a visitor gets in.
    assert open_fds(app.pid) <= idle_fds + 4, (idle_fds, open_fds(app.pid))
    assert answered(health) == 200
    assert answered(f"http://127.0.0.1:{port}/") == 200

    # The front closes every unfinished request after its request timeout, whatever the client does.
    assert REQUEST_TIMEOUT_S < CLOSED_WITHIN_S < CLIENT_TIMEOUT_S
    left = wait_until_closed(one_address + many_addresses, opened + CLOSED_WITHIN_S - time.monotonic())
    assert not left, f"{len(left)} half-sent requests still open {CLOSED_WITHIN_S:.0f} s after the first was"
    assert answered(health) == 200
    # Nothing is logged per connection: the logs hardly grow (the app's is untouched by the attack).
    grown = sum(os.path.getsize(demo["data"] / name) for name in ("app.log", "front.log")) - logs_before
    assert grown < 2000, grown
    assert "told apart by browser alone" not in (demo["data"] / "app.log").read_text()  # the front names them


def test_a_websocket_reaches_the_app_through_the_front(demo):
    with websocket_connect(f"ws://127.0.0.1:{demo['port']}/_stcore/stream", subprotocols=["streamlit"]) as ws:
        assert ws.protocol.state.name == "OPEN"
        ws.ping().wait(timeout=machine_seconds(10))  # the app answers through the front


class _EchoAddress(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        body = repr(self.headers.get_all("X-Forwarded-For")).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_app_is_told_the_address_the_front_saw_never_the_clients_own_header(tmp_path):
    """The app's address_header (X-Forwarded-For) then counts visitors by their real address: a client
    that writes the header itself is not believed."""
    require_haproxy()
    echo = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoAddress)
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    port = free_port()
    front = start_front(tmp_path, port, f"127.0.0.1:{echo.server_address[1]}", health="/")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=("127.0.0.3", 0)) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: demo\r\nX-Forwarded-For: 6.6.6.6\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
        assert b" 200 " in answer.split(b"\r\n")[0] and answer.endswith(b"['127.0.0.3']"), answer
    finally:
        stop(front)
        echo.shutdown()
        echo.server_close()


def test_the_app_alone_out_of_descriptors_logs_it_once_not_once_per_connection(tmp_path):
    """Served directly (no front), the app under the same attack runs out of descriptors: asyncio
    logged a traceback for every connection it could not accept, thousands a second, and as many
    again when the server stopped. The app's log says it once."""
    port = free_port()
    app = start_app(tmp_path, port, fds=256)
    log = tmp_path / "app.log"
    held = []
    try:
        held = half_requests(port, "127.0.0.2", 400)
        deadline = time.monotonic() + machine_seconds(20)
        while "out of system resource" not in log.read_text(errors="replace") and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)  # asyncio retries the accept every second: two more rounds of failures
    finally:
        stop(app)
        for s in held:
            s.close()
    text = log.read_text(errors="replace")
    assert text.count("socket.accept() out of system resource") == 1, text[-3000:]
    assert text.count("Exception in callback BaseSelectorEventLoop._start_serving") <= 1
    assert text.count("Traceback") <= 2 and len(text.splitlines()) < 200, len(text.splitlines())
    # Served directly on loopback with no address_header, the app said at its start that visitors are
    # told apart by browser alone (core.runs.limits.by_browser_alone); behind the front it does not.
    assert "told apart by browser alone" in text
