"""A failure of the machine, not of the model: out of disk space or over a quota, out of open files,
a read-only or failing drive. torch.compile writes to disk (Inductor its generated code and cache),
so such an error can come out of a compile; it says nothing about what the model does under
torch.compile. The race ends failed saying what the machine lacked, with what it measured kept,
and is never a finding (core.engine.failures) nor a shared result (core.runs.device_history).

No torch: the store's readers ask it too, of a reason recorded by an older release.
"""

from __future__ import annotations

import errno
import os
import re

_FREE_SPACE = "free some space on the drive of the compile caches and the store"
_FILES = "raise the open-files limit (ulimit -n) or end the programs holding files open"

# errno: (what the machine did, what to do). One row per failure of the machine.
MACHINE_ERRNOS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("ran out of disk space", _FREE_SPACE),
    errno.EDQUOT: ("passed its disk quota", _FREE_SPACE),
    errno.EMFILE: ("ran out of open files", _FILES),
    errno.ENFILE: ("ran out of open files", _FILES),
    errno.EROFS: ("found its drive read-only", "make the data folder and the compile caches writable"),
    errno.EIO: ("could not read or write its drive (I/O error)", "check the drive"),
}
_ERRNO_TEXT = re.compile(r"\[Errno (\d+)\]")
_CHAIN_DEPTH = 8  # causes followed: torch wraps a backend's error once or twice


def machine_fault(exc: BaseException) -> str | None:
    """The reason a run ends with when `exc` (or what caused it: torch wraps Inductor's OSError in
    its own error) is a failure of the machine; None when it is not."""
    seen: BaseException | None = exc
    for _ in range(_CHAIN_DEPTH):
        if seen is None:
            break
        number = _errno_of(seen)
        if number is not None:
            return machine_reason(number, _first_line(seen))
        seen = seen.__cause__ or seen.__context__
    return None


def machine_reason(number: int, detail: str) -> str:
    """'this machine ran out of disk space (OSError: [Errno 28] ...): not a finding about the model; ...'."""
    what, advice = MACHINE_ERRNOS[number]
    return f"this machine {what} ({detail}): not a finding about the model; {advice}, then run the race again"


def is_machine_fault_text(text: str | None) -> bool:
    """Whether a recorded reason names a failure of the machine (a compile 'failure' that an older
    release recorded as a finding about the model)."""
    return bool(text) and _errno_in_text(text) is not None


def _errno_of(exc: BaseException) -> int | None:
    if isinstance(exc, OSError) and exc.errno in MACHINE_ERRNOS:
        return exc.errno
    return _errno_in_text(str(exc))  # an error that came back as text (a compile worker's)


def _errno_in_text(text: str) -> int | None:
    for match in _ERRNO_TEXT.finditer(text):
        if int(match.group(1)) in MACHINE_ERRNOS:
            return int(match.group(1))
    return next((number for number in MACHINE_ERRNOS if os.strerror(number) in text), None)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {line}" if line else type(exc).__name__
    return line or type(exc).__name__
