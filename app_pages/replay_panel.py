"""Replays on the Race page: choose a recording (shipped with the app, or a race finished here),
a speed, and watch it through the live view; pause, restart, stop. UI only: the recordings, the
clock and the snapshots come from core.view.replay. A replay queues nothing and uses no device."""

from __future__ import annotations

import time

import streamlit as st

from app_pages.common import store
from app_pages.run_screen.show import show_run
from core.runs.bundle import BundleError
from core.view import replay
from core.view.safe_text import markdown_text, terminal_text


@st.cache_data(show_spinner=False)
def _shipped_labels(paths: tuple[str, ...]) -> dict[str, str]:
    """Each shipped recording's label (read once per process)."""
    labels = {}
    for key in replay.shipped_recordings():
        try:
            labels[key] = replay.load_recording(key).label
        except BundleError as exc:
            labels[key] = f"{key} (cannot be replayed: {exc})"
    return labels


def recording_choices() -> dict[str, str]:
    """key -> label: the shipped recordings, then this store's finished races (newest first)."""
    shipped = replay.shipped_recordings()
    choices = {key: f"Recorded: {label}" for key, label in _shipped_labels(tuple(shipped.values())).items()}
    races = store().list_runs(kind="race", status=["done"], limit=20)
    for run in races:
        choices[f"run:{run.id}"] = replay.stored_race_label(run)
    return choices


def start(key: str, speed: str) -> None:
    """Play (a button's callback, before the page redraws): the replay, with the form folded away."""
    _begin(key, speed)
    st.query_params["replay"] = key
    st.query_params["speed"] = speed
    st.query_params.pop("run", None)
    st.session_state.race_form = False


def _begin(key: str, speed: str) -> None:
    st.session_state.replay = {"key": key, "clock": replay.ReplayClock(replay.SPEEDS[speed], time.time())}


def stop() -> None:
    st.session_state.pop("replay", None)
    st.query_params.pop("replay", None)
    st.query_params.pop("speed", None)


def replay_picker() -> None:
    """The 'Replay a recorded run' panel."""
    choices = recording_choices()
    if not choices:
        st.caption(
            "No recordings yet: finish a race, or add a bundle to assets/recordings (docs/app.md, 'Recordings shipped with the app')."
        )
        return
    pick, speed, play = st.columns([4, 3, 1], vertical_alignment="bottom")  # room for every speed's name
    # A select box shows its options as plain text: markdown escapes would show as backslashes.
    key = pick.selectbox("Recording", list(choices), format_func=lambda k: terminal_text(choices[k]), key="replay_pick")
    rate = speed.segmented_control("Speed", list(replay.SPEEDS), default="2x", key="replay_speed") or "2x"
    play.button("Play", on_click=start, args=(key, rate), key="replay_play", width="stretch")
    st.caption("A replay plays recorded events through the live view at their recorded pace: nothing is measured.")


def active_replay() -> dict | None:
    """The replay this tab shows: started here, or named by the link (?replay=file:...&speed=2x)."""
    key = st.query_params.get("replay")
    current = st.session_state.get("replay")
    if key and (current is None or current["key"] != key):
        speed = st.query_params.get("speed", "2x")
        _begin(key, speed if speed in replay.SPEEDS else "2x")  # a link: started as the page draws
        current = st.session_state.replay
    return current if key else None


def show_replay(state: dict, present: bool) -> None:
    """The replay, through the live view, refreshed while it plays."""
    try:
        recording = replay.load_recording(state["key"], store())
    except BundleError as exc:
        st.error(f"Cannot replay this: {markdown_text(exc)}")
        st.button("Back", on_click=stop)
        return
    clock: replay.ReplayClock = state["clock"]
    playing = clock.paused_at is None and not replay.replay_finished(recording, clock, time.time())

    @st.fragment(run_every=0.5 if playing else None)
    def frame() -> None:
        now = time.time()
        snap = replay.replay_view(recording, clock, now)
        speed = "instant" if clock.speed is None else f"{clock.speed:g}x"
        # Presenter mode: under the run (its state line says "Replay: ..."), so the cards stay above the fold.
        note = st.container(key="replay_note") if not present else None
        bar, pause, again, leave = st.columns([6, 1, 1, 1], vertical_alignment="center")
        bar.progress(snap.run.progress, text=f"Replay: {markdown_text(snap.state)}")
        if clock.paused_at is None:
            if pause.button("Pause", key="replay_pause", disabled=snap.run.finished):
                clock.pause(time.time())
                st.rerun()
        elif pause.button("Resume", key="replay_resume"):
            clock.resume(time.time())
            st.rerun()
        if again.button("Restart", key="replay_restart"):
            clock.restart(time.time())
            st.rerun()
        leave.button("Stop", key="replay_stop", on_click=stop)
        show_run(snap.run, snap, key="replay", present=present)
        (note or st.container(key="replay_note")).info(
            f"Replay at {speed} of a race {markdown_text(recording.race_label)}. Nothing is measured now.",
            icon=":material/replay:",
        )
        if playing and snap.run.finished:
            st.rerun()  # stop refreshing: draw the finished replay once

    frame()
