"""An imported event's note, checked for what its kind keeps there (core.runs.bundle checks the rest
of the event): a busy stretch's last step, a replicate process's result (core.engine.replicates),
other kinds' words. Apart from bundle.py so that each stays one screenful of checks. No torch."""

from __future__ import annotations

import json
from typing import Any

from core.engine.replicates import ProcessResult
from core.runs.store.records import utf8_text

MAX_NOTE = 2000


def event_note(e: dict[str, Any], where: str, error: type[Exception]) -> str | None:
    """The event's note as the store keeps it; a note that is not what its kind records raises
    `error` naming the field."""
    note = _note(e.get("note"), where, error)
    kind = e.get("kind")
    if kind == "busy" and not (isinstance(note, str) and note.isdecimal() and note.isascii()):
        raise error(f"{where} of a busy stretch must be its last step")
    if kind == "replicate":
        try:
            process = ProcessResult.from_dict(json.loads(note or ""))
        except ValueError:
            process = None
        if process is None or process.number < 2:
            raise error(f"{where} of a replicate must be its result")
        return json.dumps(process.to_dict())  # as this app writes it, nothing else kept
    return note


def _note(value: Any, where: str, error: type[Exception]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_NOTE:
        raise error(f"{where} must be text of at most {MAX_NOTE} characters")
    return utf8_text(value)
