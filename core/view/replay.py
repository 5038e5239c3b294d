"""Replays: a recorded race played back through the very same live view as a real one.

On stage a cold compile can stall, and the GPU box can be busy or out of reach. A race already
measured (a stored run, or a bundle shipped in assets/recordings) holds every event with the time
it was recorded; played back, its events reach the live view at their recorded offsets (1x, 2x, 5x,
or all at once), so the page shows the same states, progress, charts, cards and reading as it did
live. Nothing is measured: no job is queued and no device is used, and the page says it is a replay,
with the device and date of the recording.

Torch-free: this is the view layer; the clock is passed in, so tests drive it by hand.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import time
from dataclasses import dataclass, field
from typing import Any

from core import PROJECT_ROOT
from core.engine import words
from core.engine.compile_stats import recompiles_of
from core.engine.events import StepEvent
from core.engine.spec import RunSpec
from core.engine.summary import NEVER, NO_GAIN, NO_VERDICT, NOT_REACHED, PROJECTED, REACHED, Summary
from core.runs.bundle import BundleError, export_bundle, load_bundle_file, validate_bundle
from core.runs.store import DamagedEvents, Run, Store, id_from_text
from core.view.compare import run_name
from core.view.race_form import CPU_BREAK_EVEN_PRESET
from core.view.run_screen.shared_board import LiveSnapshot, RunView, snapshot_of

RECORDINGS_DIR = os.path.join(PROJECT_ROOT, "assets", "recordings")
SPEEDS: dict[str, float | None] = {"1x": 1.0, "2x": 2.0, "5x": 5.0, "instant": None}
# A replay redraws its live view from every event shown so far, twice a second, in the session of
# each tab that plays it: a stored race of more events than this is not replayed (one at the bundle
# cap, 560,000 events, held 0.7 GB per tab, 1 GB at the peak of its first frame).
MAX_REPLAY_EVENTS = 20_000


@dataclass(frozen=True)
class Recording:
    """A finished race and its events in recorded order, each with its offset from the first."""

    key: str  # "file:<stem>" or "run:<id>": what a link names
    run: Run
    events: tuple[dict[str, Any], ...]

    @property
    def duration_s(self) -> float:
        return self.events[-1]["offset_s"] if self.events else 0.0

    @property
    def label(self) -> str:
        """'pointwise_mlp, batch 4,096, 3 x 500 steps: recorded on Intel Xeon (cpu) with load 0.1 at the start
        and 1.2 at the end on 2 cores, torch 2.14.1, YYYY-MM-DD' (the load: load_reading)."""
        shows = shows_words(self.run.summary)
        return (f"{shows}: " if shows else "") + self.race_label

    @property
    def race_label(self) -> str:
        """The label without what the recording shows: which race, where and when ('a race small_cnn,
        batch 128, ...' in the replay's banner, which says what it shows as it plays)."""
        p, env = self.run.params or {}, self.run.environment or {}
        when = time.strftime("%Y-%m-%d", time.localtime(self.run.finished_at or self.run.created_at))
        device = env.get("device_name") or env.get("cpu_name") or "an unnamed device"
        return (
            f"{p.get('model', '?')}, batch {p.get('batch_size', 0):,}, {p.get('epochs', '?')} x "
            f"{p.get('steps_per_epoch', '?')} steps: recorded on {device} ({env.get('device_type', '?')}) "
            f"{recorded_load(env)}, torch {env.get('torch', '?')}, {when}"
        )


# A 1-minute load average above this share of the cores, beyond the race's own threads, means other
# work was running: the recorded times (a compile above all) are slower than this device's on a
# quiet day.
BUSY_LOAD_PER_CORE = 0.5


def load_reading(environment: dict[str, Any] | None) -> tuple[str, bool]:
    """How busy the machine was while a race was recorded, and whether that was busy: ('with load
    0.1 at the start and 1.2 at the end on 2 cores', False). The loads are 1-minute averages: at
    the start, before the race's own work counts; at the end, with its torch threads in it (so
    those are allowed for). ('load not recorded', False) for a recording older than the load record."""
    env = environment or {}
    try:
        start = float(env["load_at_start"]["load_average"][0])
        cores = int(env["load_at_start"].get("cpu_count") or 0)
    except (TypeError, KeyError, IndexError, ValueError):
        return "(load not recorded)", False
    try:
        end = float(env["load_at_end"]["load_average"][0])
    except (TypeError, KeyError, IndexError, ValueError):
        end = None
    own = env.get("torch_threads")
    own = own if isinstance(own, int) and not isinstance(own, bool) else 1  # as recorded: a whole number
    on = f" on {cores} core{'s' if cores != 1 else ''}" if cores else ""
    text = f"with load {start:.1f}" + (f" at the start and {end:.1f} at the end" if end is not None else "") + on
    busy = bool(cores) and (start > BUSY_LOAD_PER_CORE * cores or (end or 0.0) - own > BUSY_LOAD_PER_CORE * cores)
    return text, busy


def recorded_load(environment: dict[str, Any] | None) -> str:
    """The load reading for a page, with a warning when the machine was busy ('..., busy: its
    times are slower than on a quiet machine')."""
    text, busy = load_reading(environment)
    return text + (" (busy: its times are slower than on a quiet machine)" if busy else "")


def recording_from_bundle(data: dict[str, Any], key: str) -> Recording:
    """A bundle as a recording, checked exactly as an import checks it (BundleError if it is not one)."""
    fields, events = validate_bundle(data)
    if not any(e.get("recorded_at") is not None for e in events):
        raise BundleError("events: a replay needs the time each event was recorded (recorded_at)")
    run = Run(
        id=0,
        kind="race",
        params=fields["params"],
        owner="recording",
        device_key="recording",
        status=fields["status"],
        phase=fields["status"],
        progress=1.0,
        created_at=fields["created_at"],
        started_at=fields.get("started_at"),
        finished_at=fields.get("finished_at"),
        heartbeat_at=None,
        pid=None,
        host=None,
        time_limit_s=None,
        cancel_requested=0,
        environment=fields.get("environment"),
        summary=fields.get("summary"),
        details=fields.get("details"),
        error=fields.get("error"),
        imported=1,
    )
    timed = sorted(enumerate(events), key=lambda ie: (float(ie[1].get("recorded_at") or 0.0), ie[0]))
    first = float(timed[0][1].get("recorded_at") or 0.0)
    ordered = tuple(
        {**e, "id": n, "offset_s": max(float(e.get("recorded_at") or first) - first, 0.0)}
        for n, (_, e) in enumerate(timed, start=1)
    )
    return Recording(key, run, ordered)


def recording_from_run(store: Store, run_id: int) -> Recording:
    """A stored finished race as a recording (through its bundle, so it is checked like one)."""
    return recording_from_bundle(export_bundle(store, run_id), f"run:{run_id}")


def shipped_recordings(folder: str = RECORDINGS_DIR) -> dict[str, str]:
    """The recordings shipped with the app: key ('file:<stem>') -> bundle path."""
    return {
        f"file:{os.path.splitext(os.path.basename(path))[0]}": path
        for path in sorted(glob.glob(os.path.join(folder, "*.json")))
    }


def load_recording(key: str, store: Store | None = None, folder: str = RECORDINGS_DIR) -> Recording:
    """The recording a key names: 'file:<stem>' (shipped) or 'run:<id>' (a stored race)."""
    kind, _, name = key.partition(":")
    if kind == "file":
        path = shipped_recordings(folder).get(key)
        if path is None:
            raise BundleError(f"there is no shipped recording named {name!r}")
        return recording_from_bundle(load_bundle_file(path), key)
    run_id = id_from_text(name)
    if kind == "run" and run_id is not None and store is not None:
        run = store.get_run(run_id)
        if run is None or run.kind != "race" or not run.finished:
            raise BundleError(f"run {run_id} is not a finished race")
        try:
            too_long = len(store.events_after(run_id, limit=MAX_REPLAY_EVENTS + 1)) > MAX_REPLAY_EVENTS
        except DamagedEvents:
            too_long = False  # export says why it cannot be replayed
        if too_long:
            raise BundleError(
                f"run {run_id} recorded more than {MAX_REPLAY_EVENTS:,} events, too many to replay: "
                "open it on the Runs page instead"
            )
        return recording_from_run(store, run_id)
    raise BundleError(f"not a recording: {key!r}")


def shows_words(summary: Summary | dict[str, Any] | None) -> str | None:
    """What a recorded race shows, first in its label (a recording is chosen for what it shows, not
    for its settings), from its headline speedup and the break-even state every surface reads
    (Summary.headline): '1.30x, breaks even at step 523', '0.97x, no clear per-step gain, no
    break-even to count on', '0.75x, compiled steps slower, compile never pays off', '1.57x faster,
    breaks even past the run (about step 1,200)', and '1 recompile'."""
    s = Summary.of(summary)
    if not s.compiled or s.steady_state_speedup is None:
        return None
    x = words.speedup(s.steady_state_speedup)
    state = s.break_even
    if state == REACHED:
        said = f"{x}, breaks even at step {words.number(s.break_even_step)}"
    elif state == PROJECTED:
        said = f"{x} faster, breaks even past the run ({words.break_even_step(s.projected_position, False)})"
    elif state == NOT_REACHED:
        said = f"{x} faster, but does not break even within the run"
    elif state == NEVER:
        said = f"{x}, compiled steps slower, compile never pays off"
    elif state == NO_GAIN:  # the break-even's words: none to count on, never 'never pays off'
        said = f"{x}, no clear per-step gain, no break-even to count on"
    elif state == NO_VERDICT:
        said = f"{x}, {words.verdict(s.verdict)}"
    else:
        return None
    recompiles = len(recompiles_of(s))
    return said + (f", {words.count(recompiles, 'recompile')}" if recompiles else "")


def stored_race_label(run: Run) -> str:
    """How the replay picker names a stored race: 'Run 3 here: mlp, batch 64', or 'Run 4
    (imported): ...' for a bundle from another machine, which was not measured here; what it shows
    after that where it finished with a verdict (shows_words)."""
    p = run.params or {}
    where = "(imported)" if run.imported else "here"
    shows = shows_words(run.summary)
    return f"{run_name(run.id).capitalize()} {where}: {p.get('model')}, batch {p.get('batch_size')}" + (
        f" ({shows})" if shows else ""
    )


@dataclass
class ReplayClock:
    """Where a replay is in its recording: seconds of recorded time, at a speed (None: instant),
    with pause, resume and restart. Times are passed in (time.time() on a page, anything in tests)."""

    speed: float | None
    started: float
    paused_at: float | None = None
    paused_s: float = field(default=0.0)

    def position(self, now: float) -> float:
        if self.speed is None:
            return float("inf")
        end = self.paused_at if self.paused_at is not None else now
        return max(end - self.started - self.paused_s, 0.0) * self.speed

    def pause(self, now: float) -> None:
        if self.paused_at is None:
            self.paused_at = now

    def resume(self, now: float) -> None:
        if self.paused_at is not None:
            self.paused_s += now - self.paused_at
            self.paused_at = None

    def restart(self, now: float) -> None:
        self.started, self.paused_at, self.paused_s = now, None, 0.0

    def wall_time_of(self, offset_s: float) -> float:
        """When, on the wall clock, a recorded offset was (or will be) replayed."""
        if self.speed is None:
            return self.started
        return self.started + self.paused_s + offset_s / self.speed


def events_until(recording: Recording, position: float) -> list[dict[str, Any]]:
    """The events recorded up to `position` seconds into the recording, in recorded order."""
    return [e for e in recording.events if e["offset_s"] <= position]


def replay_state(recording: Recording, shown: list[dict[str, Any]]) -> tuple[str, str, float]:
    """(status, phase, progress) of the race as of the events shown, worded as the worker words them."""
    spec = RunSpec.stored(recording.run.params) or RunSpec(epochs=1, steps_per_epoch=1)  # a bundle's: checked
    total = 2 * spec.total_steps
    train = [e for e in shown if e["kind"] == StepEvent.kind and e.get("phase") == "train"]  # a step row: its fields
    if len(shown) == len(recording.events):
        return recording.run.status, recording.run.status, 1.0
    progress = min(len(train) / total, 1.0) if total else 0.0
    if not train:
        return "running", "starting", progress
    last = train[-1]
    eager_done = sum(1 for e in train if e["variant"] == "eager") >= total // 2
    if last["variant"] == "eager" and eager_done:
        return "running", "compiling", progress  # the first compiled step, compile included, is not in yet
    return "running", f"{last['variant']} epoch {last.get('epoch') or 1}/{spec.epochs}", progress


def replay_view(recording: Recording, clock: ReplayClock, now: float) -> LiveSnapshot:
    """The live view's snapshot of the replay at `now`: the run as it stood then, its events so far
    (their recorded times moved to when they are replayed, so 'compiling: 6 s so far' counts replay time)."""
    shown = [
        {**e, "recorded_at": clock.wall_time_of(e["offset_s"])} for e in events_until(recording, clock.position(now))
    ]
    status, phase, progress = replay_state(recording, shown)
    finished = status == recording.run.status and len(shown) == len(recording.events)
    run = dataclasses.replace(
        recording.run,
        status=status,
        phase=phase,
        progress=progress,
        summary=recording.run.summary if finished else None,
        details=recording.run.details if finished else None,
        error=recording.run.error if finished else None,
        finished_at=recording.run.finished_at if finished else None,
    )
    view = RunView(0, "replay")
    view.feed(shown)
    return snapshot_of(run, view, phase)


def replay_finished(recording: Recording, clock: ReplayClock, now: float) -> bool:
    return clock.position(now) >= recording.duration_s


# ----------------------------------------------------------------------
# The recordings shipped with the app (assets/recordings): one row each, what it shows and the race
# it records, so `python -m core record NAME` makes it again, the same race every time.
#
# A recording carries the load its machine was under (core.engine.environment.machine_load): a
# recording made while other work shared a small CPU shows a compile many times slower than a quiet
# machine does, so `record` waits for a quiet machine and refuses a busy one (BUSY_LOAD_PER_CORE).


@dataclass(frozen=True)
class ShippedRecording:
    name: str  # the file's stem: its name in links (?replay=file:NAME)
    shows: str  # what a speaker plays it for
    params: dict[str, Any]  # the race, over RunSpec's defaults


SHIPPED = (
    ShippedRecording(  # recorded before races ran on one core, at the demo's size then (its date is in its file)
        "cpu-break-even-demo",
        "the CPU break-even demo as recorded on two cores (3 x 200 steps): compile pays for itself inside the run",
        {**CPU_BREAK_EVEN_PRESET, "steps_per_epoch": 200, "device": "cpu"},
    ),
    ShippedRecording(
        "cpu-compile-never-pays-off",
        "mlp, batch 64: compiled steps not clearly faster (the interval spans 1x), so nothing earns the compile back",
        {"model": "mlp", "batch_size": 64, "epochs": 2, "steps_per_epoch": 60, "device": "cpu"},
    ),
    ShippedRecording(
        "cpu-recompiles-varying-shapes",
        "small_cnn, a smaller last batch with dynamic=false: a recompile, marked with the guard that failed",
        {
            "model": "small_cnn",
            "batch_size": 48,
            "epochs": 3,
            "steps_per_epoch": 15,
            "dynamic": False,
            "shapes": "varying",
            "device": "cpu",
        },
    ),
)
BY_NAME = {r.name: r for r in SHIPPED}


def machine_busy(load: dict[str, Any] | None, share: float = BUSY_LOAD_PER_CORE) -> str | None:
    """Why a recording made now would mislead ('load 3.1 on 2 cores'), or None on a quiet machine:
    a 1-minute load above `share` of the cores."""
    if not load:
        return None
    one, cores = float(load["load_average"][0]), int(load.get("cpu_count") or 1)
    if one > share * cores:
        return f"load {one:.1f} on {cores} core{'s' if cores != 1 else ''}"
    return None
