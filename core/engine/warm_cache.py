"""Inductor's cache folders under the data dir: the warm cache (one per device type and torch
version, which a warm race compiles with and every cold race fills when it ends) and the fresh cold
cache each cold compile gets (named by its process, swept once that process has gone). No torch.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import Any

from core.engine import words
from core.engine.spec import data_home

# ----------------------------------------------------------------------
# The warm Inductor cache: one folder per device type and torch version under the data dir, which a
# race asked to be warm compiles with, which every cold race fills when it ends (its fresh cache is
# copied in before it is removed), and which keeps a short list of the races that filled it.
#
# So "warm" means warm: a warm race records what it found before compiling (how many files, how many
# bytes, which races filled them), and its reading says whether it found a cache and used it. Without
# this, a first warm race found an empty folder and paid a cold compile under a "warm" label.
# Torch-free: the folder's name takes the torch version as text.

WARM_FOLDER = "inductor-cache"
MANIFEST = "filled-by.json"  # who filled the folder: newest last
MANIFEST_KEPT = 50
NOTHING_COMPILED = "nothing was compiled"  # aot_eager and eager write no Inductor cache: nothing to say
# A cold cache larger than this is not copied (a large model's GPU kernels): the warm folder is a
# convenience, not a second copy of every compile; the race says it was not kept.
MAX_KEPT_BYTES = 2 * 2**30
# The warm folder itself stops growing here: past it, cold races are no longer copied in (a host can
# remove the folder; the next cold races fill it again).
MAX_WARM_BYTES = 10 * 2**30


def warm_cache_dir(device_type: str, torch_version: str) -> str:
    """The warm cache of this device type and torch version (a different torch compiles differently)."""
    return os.path.join(data_home(), WARM_FOLDER, f"{device_type}-torch{torch_version}")


def _files(path: str) -> list[str]:
    out = []
    for folder, _, names in os.walk(path):
        out += [os.path.join(folder, n) for n in names if n != MANIFEST and not n.startswith(".tmp-")]
    return out


def _size(files: list[str]) -> int:
    total = 0
    for name in files:
        try:
            total += os.path.getsize(name)
        except OSError:
            pass
    return total


def filled_by(path: str) -> list[dict[str, Any]]:
    """The races that filled this warm cache, oldest first ([] for a folder without a list)."""
    try:
        with open(os.path.join(path, MANIFEST)) as fh:
            entries = json.load(fh)
    except (OSError, ValueError):
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def found(path: str) -> dict[str, Any]:
    """What a warm race finds before it compiles: files, bytes and the races that filled them."""
    files = _files(path)
    return {"files": len(files), "bytes": _size(files), "filled_by": filled_by(path)}


def note_filled(path: str, entry: dict[str, Any]) -> None:
    """Add a race to the folder's list of who filled it (written whole, then renamed into place)."""
    entries = (filled_by(path) + [{**entry, "at": round(time.time(), 1)}])[-MANIFEST_KEPT:]
    os.makedirs(path, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=path)
    with os.fdopen(handle, "w") as fh:
        json.dump(entries, fh)
    os.replace(temporary, os.path.join(path, MANIFEST))


def keep_for_warm(cold: str, warm: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Copy a cold race's cache into the warm one (files it lacks only; each written under a
    temporary name and renamed, so a warm race never reads half a file) and list the race as one
    that filled it. Returns what happened: files and bytes copied, or why nothing was."""
    files = _files(cold)
    size = _size(files)
    if not files:
        return {"kept": False, "why": NOTHING_COMPILED}
    if size > MAX_KEPT_BYTES:
        return {"kept": False, "why": f"its cache ({words.bytes_(size)}) is larger than the warm folder keeps"}
    held = _size(_files(warm)) if os.path.isdir(warm) else 0
    if held + size > MAX_WARM_BYTES:
        return {"kept": False, "why": f"the warm cache already holds {words.bytes_(held)}, its limit"}
    copied = 0
    try:
        for source in files:
            target = os.path.join(warm, os.path.relpath(source, cold))
            if os.path.exists(target):
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(target))
            os.close(handle)
            shutil.copy2(source, temporary)
            os.replace(temporary, target)
            copied += 1
        note_filled(warm, entry)
    except OSError as exc:  # a full disk or a folder it may not write: the race stands, the cache is not kept
        return {"kept": False, "why": f"copying it failed ({exc.strerror or exc})"}
    return {"kept": True, "files": copied, "bytes": size}


def races_named(entries: list[dict[str, Any]]) -> str:
    """'runs 3 and 5' (or 'a terminal race'): who filled a cache, as the reading names them."""
    runs = sorted({int(e["run"]) for e in entries if isinstance(e.get("run"), int)})
    others = sum(1 for e in entries if not isinstance(e.get("run"), int))
    parts = []
    if runs:
        shown = [str(r) for r in runs[-5:]]
        words = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
        parts.append(
            f"run{'s' if len(runs) > 1 else ''} {words}" + (f" (and {len(runs) - 5} earlier)" if len(runs) > 5 else "")
        )
    if others:
        parts.append(f"{others} race{'s' if others > 1 else ''} outside the store")
    return " and ".join(parts) or "races before this list was kept"


def cache_words(environment: dict[str, Any] | None, compile_info: dict[str, Any] | None = None) -> str | None:
    """Whether a race asked to be warm found a cache, who filled it and whether its compile used it;
    for a cold race, whether what it compiled was kept for later warm races; for a precompiled one, what
    the ahead-of-time compile cost in its own process. None where the race
    recorded neither (older races)."""
    env = environment or {}
    ahead = env.get("precompiled")
    if env.get("inductor_cache") == "precompiled" and isinstance(ahead, dict) and "compile_s" in ahead:
        return (
            f"precompiled: another process compiled the step ahead of time in {words.seconds(ahead['compile_s'])} "
            f"(a {words.bytes_(ahead.get('bytes') or 0)} artifact); this race loaded it at its first compiled step, "
            "so its compile time is what a process starting from that artifact pays."
        )
    if env.get("inductor_cache") == "warm" and isinstance(env.get("warm_cache"), dict):
        state = env["warm_cache"]
        hits = (compile_info or {}).get("cache_hits")
        misses = (compile_info or {}).get("cache_misses")
        if not state.get("files"):
            return (
                "asked to be warm, this race found the warm cache empty (no race here had filled it yet), so its "
                "compile was cold. It is filled now: the same race again compiles warm."
            )
        who = races_named(state.get("filled_by") or [])
        size = words.bytes_(state.get("bytes") or 0)
        head = f"warm: it found {words.count(state['files'], 'file')} ({size}) that {who} compiled"
        if isinstance(hits, int) and isinstance(misses, int) and hits + misses > 0:
            if hits == 0:
                return head + ", but none of its graphs were among them (other settings), so its compile was cold."
            return head + f"; {hits} of its {hits + misses} graphs were read from there instead of compiled."
        return head + "."
    kept = env.get("kept_for_warm")
    if env.get("inductor_cache") == "cold" and isinstance(kept, dict) and kept.get("why") != NOTHING_COMPILED:
        if kept.get("kept"):
            return "cold (a fresh cache, what a new user pays); what it compiled now fills the warm cache for later warm races."
        return f"cold (a fresh cache); what it compiled was not kept for warm races: {kept.get('why')}."
    return None


COLD, WARM = "cold", "warm"


def cache_state(
    environment: dict[str, Any] | None, params: dict[str, Any] | None = None, compile_info: dict[str, Any] | None = None
) -> tuple[str | None, str | None]:
    """(how the race compiled, a short label) from what it recorded: COLD or WARM, and 'cold',
    'warm', 'warm but empty, so compiled cold' or 'warm but none of its graphs there, so compiled cold'.
    A race asked to be warm that found nothing to read compiled cold, whatever its settings say.
    Races that recorded nothing (older ones) fall back to their settings; (None, None) without either."""
    env = environment or {}
    asked = env.get("inductor_cache") or (params or {}).get("cache")
    if asked not in (COLD, WARM):
        return None, None
    if asked == COLD:
        return COLD, "cold"
    state = env.get("warm_cache")
    if isinstance(state, dict) and not state.get("files"):
        return COLD, "warm but empty, so compiled cold"
    hits, misses = (compile_info or {}).get("cache_hits"), (compile_info or {}).get("cache_misses")
    if isinstance(hits, int) and isinstance(misses, int) and hits == 0 and misses > 0:
        return COLD, "warm but none of its graphs there, so compiled cold"
    return WARM, "warm"


# ----------------------------------------------------------------------
# Cold-cache folders: a fresh Inductor cache for each cold compile, under the data dir, named by the
# process that uses it, and swept once that process has gone. No torch.
#
# A worker past its time limit is SIGKILLed with its whole group, so it never removes its own folder;
# the next one to make a cold cache removes the folders of processes no longer running. Kept under
# the data dir (not the system temp folder) so the host sees them, on the volume it sized for them.

COLD_CACHE_FOLDER = "cold-caches"


def cold_cache_root() -> str:
    return os.path.join(data_home(), COLD_CACHE_FOLDER)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: not ours to judge
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill(0) said it runs


def sweep_stale_cold_caches(root: str | None = None) -> list[str]:
    """Remove the cold-cache folders of processes no longer running; returns what it removed."""
    root = root or cold_cache_root()
    try:
        names = os.listdir(root)
    except OSError:
        return []
    removed = []
    for name in names:
        pid_text = name.split("-", 2)[1] if name.startswith("pid-") and name.count("-") >= 2 else ""
        if not pid_text.isdecimal() or not pid_text.isascii() or _running(int(pid_text)):
            continue
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)
        removed.append(name)
    return removed


def make_cold_cache(purpose: str = "race") -> str:
    """A fresh, empty folder for one cold compile (the caller removes it when done), after sweeping
    the folders that killed processes left."""
    root = cold_cache_root()
    os.makedirs(root, exist_ok=True)
    sweep_stale_cold_caches(root)
    return tempfile.mkdtemp(prefix=f"pid-{os.getpid()}-{purpose}-", dir=root)
