"""An imported event's note, checked for what its kind keeps there (core.runs.bundle checks the rest
of the event first): text of bounded length, and where the kind packs a field into it (a busy
stretch's last step, a replicate process's result), a row its kind's codec reads back
(core.engine.events), kept as this app writes it. Apart from bundle.py so that each stays one
screenful of checks. No torch."""

from __future__ import annotations

from typing import Any

from core.engine import events
from core.runs.store.records import utf8_text

MAX_NOTE = 2000


def event_note(row: dict[str, Any], where: str, error: type[Exception]) -> str | None:
    """The note of an imported row (its other fields checked already) as the store keeps it; a
    note that is not what its kind records raises `error` naming the field."""
    note = _note(row.get("note"), where, error)
    kind = events.ROW_KINDS[row["kind"]]
    if not kind.note_is:  # words (a compile's), or nothing the codec reads
        return note
    event = events.from_row({**row, "note": note})
    if event is None:
        raise error(f"{where} {kind.note_is}")
    return event.to_row(row["recorded_at"])["note"]  # as this app writes it, nothing else kept


def _note(value: Any, where: str, error: type[Exception]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_NOTE:
        raise error(f"{where} must be text of at most {MAX_NOTE} characters")
    return utf8_text(value)
