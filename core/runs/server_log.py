"""The app server's log, kept readable when something repeats without end.

When Streamlit's server has used every file descriptor (a client holding thousands of half-sent
requests), Python's asyncio logs "socket.accept() out of system resource" with its traceback for
each connection it could not accept: 2,048 a second per listening socket, a log of hundreds of MB
within a minute. `guard_repeated_errors` lets the first such record through, then one a minute that
says how many it left out, so the log still says what happened and when, and nothing else drowns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

# Messages that repeat once per connection the server could not take (asyncio's, as it words them):
# its accept loop logs each failed accept and schedules a retry for each, which all fail together
# once the listening socket is closed (the server stopping while the flood lasts).
REPEATING = ("socket.accept() out of system resource", "Exception in callback BaseSelectorEventLoop._start_serving")
ONE_LINE_EVERY_S = 60.0


class RepeatedLines(logging.Filter):
    """Passes one record of each repeating message per `every_s` seconds; the next one it passes
    says how many it left out meanwhile. Any other record passes untouched."""

    def __init__(
        self,
        beginnings: Iterable[str] = REPEATING,
        every_s: float = ONE_LINE_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.beginnings, self.every_s, self.clock = tuple(beginnings), every_s, clock
        self._last: dict[str, tuple[float, int]] = {}  # message -> (when one last passed, left out since)
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        repeating = next((b for b in self.beginnings if text.startswith(b)), None)
        if repeating is None:
            return True
        now = self.clock()
        with self._lock:
            passed_at, left_out = self._last.get(repeating, (None, 0))
            if passed_at is not None and now - passed_at < self.every_s:
                self._last[repeating] = (passed_at, left_out + 1)
                return False
            self._last[repeating] = (now, 0)
        if left_out:
            record.msg = f"{text}\n({left_out} more like it in the last {now - passed_at:.0f} s were not logged)"
            record.args = ()
        return True


def guard_repeated_errors(logger_name: str = "asyncio") -> RepeatedLines:
    """Fit the app server's `logger_name` logger (asyncio's, which the server's accept loop logs to)
    with one RepeatedLines filter; calling it again keeps the one it has."""
    logger = logging.getLogger(logger_name)
    for existing in logger.filters:
        if isinstance(existing, RepeatedLines):
            return existing
    guard = RepeatedLines()
    logger.addFilter(guard)
    return guard
