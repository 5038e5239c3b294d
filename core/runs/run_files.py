"""A run's files beside the store: the profiler's per-variant traces (Chrome/Perfetto JSON) and
torch's structured compile trace (TORCH_TRACE, what tlparse reads), packaged for download.

No torch here: the app's process offers these files; workers write them.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

from core.runs import bundle
from core.runs.store import Store
from core.runs.store.records import store_files_dir

TLPARSE_TIMEOUT_S = 120


def run_files_dir(store_path: str, run_id: int) -> str:
    """Where a run's files live (profiler traces, torch's compile trace): beside the store."""
    return os.path.join(store_files_dir(store_path), "traces", f"run-{run_id}")


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
