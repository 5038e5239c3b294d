"""The store's reads for a page that pages through the runs (core.view.runs_table): every run's
three small columns, some runs' settings, some runs whole. A part of Store (core.runs.store), apart
so that each file stays one reading; the same SQL on both backends.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.runs.store.records import Run, decoded, run_of

ID_CHUNK = 500  # ids per `IN (...)` list: well under either backend's limit on a query's parameters


class RunPages:
    """Store's paged reads (mixed into Store: they use its _all, is_damage and _readable_rows)."""

    unreadable_runs: set[int]

    def run_index(self) -> list[tuple[int, str, str]]:
        """Every run's (id, kind, status), newest first: three small columns, all a page that
        pages through the runs needs of each (core.view.runs_table). Around a damaged page of
        the table, as list_runs: its rows left out and kept in unreadable_runs."""
        sql = "SELECT id, kind, status FROM runs"
        try:
            return [(r[0], r[1], r[2]) for r in self._all(sql + " ORDER BY id DESC")]
        except Exception as exc:
            if not self.is_damage(exc):
                raise
        return [(r[0], r[1], r[2]) for r in self._readable_rows("id, kind, status", [], [])]

    def run_settings(self, ids: Iterable[int]) -> dict[int, tuple[dict[str, Any], dict[str, Any] | None, str]]:
        """(params, environment, device_key) of these runs, by id: what they ran, on what, and
        nothing they measured (no summary, no details). A row on a damaged page is left out."""
        found = {}
        for row in self._rows_by_id("id, params, environment, device_key", ids):
            data = decoded(row)
            found[data["id"]] = (data["params"], data["environment"], data["device_key"])
        return found

    def runs_by_id(self, ids: Iterable[int]) -> list[Run]:
        """These runs, in the order of `ids`; one gone (or on a damaged page) is left out."""
        by_id = {run.id: run for run in map(run_of, self._rows_by_id("*", ids))}
        return [by_id[i] for i in ids if i in by_id]

    def _rows_by_id(self, columns: str, ids: Iterable[int], chunk: int = ID_CHUNK) -> list[Any]:
        ids = list(dict.fromkeys(int(i) for i in ids))
        rows: list[Any] = []
        for start in range(0, len(ids), chunk):
            part = ids[start : start + chunk]
            sql = f"SELECT {columns} FROM runs WHERE id IN ({', '.join('?' for _ in part)})"
            try:
                rows += self._all(sql, part)
            except Exception as exc:
                if not self.is_damage(exc):
                    raise
                for run_id in part:  # one at a time: only the damaged page's rows are lost
                    try:
                        rows += self._all(f"SELECT {columns} FROM runs WHERE id = ?", (run_id,))
                    except Exception as one:
                        if not self.is_damage(one):
                            raise
                        self.unreadable_runs.add(run_id)
        return rows
