"""A run's files beside the store: the profiler's per-variant traces (Chrome/Perfetto JSON) and
torch's structured compile trace (TORCH_TRACE, what tlparse reads), packaged for download; its
worker's log; and their removal with the run (a deleted or purged run, a file whose run is gone).

No torch here: the app's process offers these files; workers write them. Never removed here: the
events a worker kept while its store was away (core.runs.outage), which are measurements on their way.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from core.runs import bundle
from core.runs.store import Store
from core.runs.store.records import store_files_dir

TLPARSE_TIMEOUT_S = 120


def run_files_dir(store_path: str, run_id: int) -> str:
    """Where a run's files live (profiler traces, torch's compile trace): beside the store."""
    return os.path.join(store_files_dir(store_path), "traces", f"run-{run_id}")


def run_log_paths(store_path: str, run_id: int) -> list[str]:
    """A run's files in the logs folder: its worker's log and its sign of life (core.runs.outage)."""
    logs = os.path.join(store_files_dir(store_path), "logs")
    return [os.path.join(logs, f"run-{run_id}.log"), os.path.join(logs, f"run-{run_id}.alive")]


def run_paths(store_path: str, run_id: int) -> list[str]:
    """Every file and folder that belongs to one run alone."""
    return [run_files_dir(store_path, run_id), *run_log_paths(store_path, run_id)]


def compile_trace_dir(store_path: str, run_id: int) -> str:
    return os.path.join(run_files_dir(store_path, run_id), "torch_trace")


@dataclass(frozen=True)
class RunFile:
    label: str
    path: str
    size_bytes: int


def profiler_traces(store_path: str, run_id: int) -> list[RunFile]:
    """Each variant's profiled steps as a trace that opens in Perfetto or chrome://tracing."""
    folder = run_files_dir(store_path, run_id)
    out = []
    for variant in ("eager", "compiled"):
        path = os.path.join(folder, f"{variant}.trace.json")
        if os.path.isfile(path):
            out.append(RunFile(f"{variant} steps (profiler trace)", path, os.path.getsize(path)))
    return out


def compile_trace_size(store_path: str, run_id: int) -> int | None:
    """Bytes of the run's compile trace, or None when it kept none."""
    folder = compile_trace_dir(store_path, run_id)
    if not os.path.isdir(folder):
        return None
    files = [os.path.join(root, name) for root, _, names in os.walk(folder) for name in names]
    return sum(os.path.getsize(f) for f in files) if files else None


def zip_folder(folder: str) -> bytes:
    """A folder as zip bytes (paths relative to it)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for root, _, names in os.walk(folder):
            for name in sorted(names):
                path = os.path.join(root, name)
                archive.write(path, os.path.relpath(path, folder))
    return buffer.getvalue()


def compile_trace_zip(store_path: str, run_id: int) -> bytes | None:
    folder = compile_trace_dir(store_path, run_id)
    return zip_folder(folder) if compile_trace_size(store_path, run_id) else None


def tlparse_available() -> bool:
    return shutil.which("tlparse") is not None


def tlparse_report_zip(store_path: str, run_id: int) -> tuple[bytes | None, str]:
    """tlparse's HTML report of the compile trace, zipped (open index.html), and a message."""
    folder = compile_trace_dir(store_path, run_id)
    if not compile_trace_size(store_path, run_id):
        return None, "this run kept no compile trace"
    if not tlparse_available():
        return None, "tlparse is not installed here (pip install tlparse)"
    logs = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".log"))
    with tempfile.TemporaryDirectory(prefix="compile-lab-tlparse-") as out:
        done = subprocess.run(
            ["tlparse", logs[0], "-o", out, "--overwrite", "--no-browser"],
            capture_output=True,
            text=True,
            timeout=TLPARSE_TIMEOUT_S,
        )
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return None, f"tlparse failed: {tail[0]}"
        return zip_folder(out), "tlparse's report (open index.html)"


# -- removing them ------------------------------------------------------------------------------

_PER_RUN_NAME = re.compile(r"run-(\d{1,19})(?:\.log|\.alive)?")


@dataclass(frozen=True)
class Freed:
    """What was removed from the data folder: files, their bytes, whose runs, and what else."""

    files: int = 0
    bytes: int = 0
    runs: tuple[int, ...] = ()
    others: tuple[str, ...] = field(default=())  # shared folders, named: "the warm Inductor cache"

    def __add__(self, other: Freed) -> Freed:
        return Freed(
            self.files + other.files, self.bytes + other.bytes, self.runs + other.runs, self.others + other.others
        )

    def to_dict(self) -> dict:
        return {"files": self.files, "bytes": self.bytes, "runs": list(self.runs), "others": list(self.others)}

    @classmethod
    def from_dict(cls, data: dict) -> Freed:
        return cls(int(data["files"]), int(data["bytes"]), tuple(int(i) for i in data["runs"]), tuple(data["others"]))


def tree_size(path: str) -> tuple[int, int]:
    """(files, bytes) under a file or folder; (0, 0) when it is not there."""
    if os.path.isfile(path) or os.path.islink(path):
        try:
            return 1, os.lstat(path).st_size
        except OSError:
            return 0, 0
    files = size = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                size += os.lstat(os.path.join(root, name)).st_size
                files += 1
            except OSError:
                pass
    return files, size


def remove_tree(path: str) -> tuple[int, int]:
    """Remove a file or folder; returns the (files, bytes) that went."""
    files, size = tree_size(path)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.remove(path)
        except OSError:
            pass
    left = tree_size(path)
    return files - left[0], size - left[1]


def remove_run_files(store_path: str, run_ids: Iterable[int]) -> Freed:
    """Remove these runs' traces and logs; returns what went (runs that had none are not named)."""
    freed = Freed()
    for run_id in run_ids:
        files = size = 0
        for path in run_paths(store_path, run_id):
            gone = remove_tree(path)
            files, size = files + gone[0], size + gone[1]
        if files:
            freed += Freed(files, size, (run_id,))
    return freed


def runs_with_files(store_path: str) -> set[int]:
    """The runs that have files in the data folder (a trace folder or a log)."""
    base = store_files_dir(store_path)
    found: set[int] = set()
    for folder in ("traces", "logs"):
        try:
            names = os.listdir(os.path.join(base, folder))
        except OSError:
            continue
        found |= {int(m.group(1)) for m in map(_PER_RUN_NAME.fullmatch, names) if m}
    return found


def sweep_orphans(store_path: str, stored_ids: Callable[[], set[int]]) -> Freed:
    """Remove the files of runs the store no longer holds (deleted before their files were removed).
    The store is asked after the folders are read: a run queued meanwhile is in its answer."""
    with_files = runs_with_files(store_path)
    return remove_run_files(store_path, sorted(with_files - stored_ids()) if with_files else [])


def bundle_text(location: str, run_id: int) -> Callable[[], str]:
    """What builds the bundle of one run (core.runs.bundle) as JSON text when called, on a connection
    of its own to the store at `location`: a page's download button calls it once clicked, on another
    thread, so a view does not build a long run's bundle of tens of MB. A run that cannot be exported
    by then (deleted meanwhile, its events damaged) gives a document saying why, not a traceback."""

    def build() -> str:
        store = Store(location)
        try:
            return json.dumps(bundle.export_bundle(store, run_id))
        except bundle.BundleError as exc:
            return json.dumps(
                {"format": bundle.FORMAT, "version": bundle.VERSION, "error": f"no bundle of run {run_id}: {exc}"}
            )
        finally:
            store.close()

    return build
