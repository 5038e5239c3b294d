"""Streamlit pieces every page shares: the store handle, the visitor's identity, queue ticks, a
run's incremental view and the demos' measure-and-show section (one run on screen, with its
charts and cards, is app_pages/run_display.py). UI only; what it shows is computed in core/."""

from __future__ import annotations

import re
import time
import uuid

import streamlit as st

from core.engine.explain import demo_device_problem
from core.runs import jobs
from core.runs.store import Run, Store
from core.view.live import RunView, run_label
from core.view.reference import TUTORIAL_SOURCE, reference_rows

# A per-tab identity: kept in the tab's sessionStorage, so it survives a reload of that tab but
# is never part of a URL (a shared configuration link does not make someone else the owner).
_VISITOR_JS = """
export default function(component) {
  const { setStateValue } = component;
  const KEY = "compile_lab_visitor";
  let token = window.sessionStorage.getItem(KEY);
  if (!token) {
    const bytes = new Uint8Array(16);
    window.crypto.getRandomValues(bytes);
    token = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    window.sessionStorage.setItem(KEY, token);
  }
  setStateValue("token", token);
}
"""
_visitor_component = st.components.v2.component("compile_lab.visitor", js=_VISITOR_JS)
_TICK_EVERY_S = 1.0
_last_tick = {"t": 0.0}


def store() -> Store:
    """This session's connection to the store (one per session: sqlite connections are not shared)."""
    if "store" not in st.session_state:
        st.session_state.store = Store()
    return st.session_state.store


def identify_visitor() -> None:
    """Ask the browser tab who it is (once per script run, from the entry point)."""
    result = _visitor_component(key="visitor_token", on_token_change=lambda: None)
    token = getattr(result, "token", None) if result is not None else None
    if isinstance(token, str) and re.fullmatch(r"[0-9a-f]{16,64}", token):
        st.session_state.visitor = token
    if "visitor" not in st.session_state:  # until the browser answers (and in tests)
        st.session_state.visitor = uuid.uuid4().hex


def visitor() -> str:
    """The owner name of this browser tab's runs."""
    if "visitor" not in st.session_state:
        st.session_state.visitor = uuid.uuid4().hex
    return f"visitor:{st.session_state.visitor}"


def tick() -> None:
    """Let this app process move the queue along (at most once a second across sessions)."""
    now = time.monotonic()
    if now - _last_tick["t"] >= _TICK_EVERY_S:
        _last_tick["t"] = now
        jobs.tick(store())


def run_view(run: Run) -> RunView:
    """The session's incremental view of a run (created once, then only new events are read)."""
    views = st.session_state.setdefault("run_views", {})
    if run.id not in views:
        views[run.id] = RunView(run.id, run_label(run))
    view = views[run.id]
    view.poll(store())
    return view


def show_reference() -> None:
    st.markdown("**Published figures, for scale**")
    st.dataframe(reference_rows(), hide_index=True, width="stretch")
    st.caption(TUTORIAL_SOURCE + ". The release average covers HuggingFace, TIMM and TorchBench models.")


def demo_section(name: str, params: dict, key: str) -> dict | None:
    """The stored measurement of a demo with these parameters on this device, with a button to
    measure (again). Returns the result when one is stored; shows progress while it runs."""
    run = jobs.stored_demo(store(), name, params)
    cannot = demo_device_problem(name, jobs.known_caps(store()))
    if cannot and run is None:
        st.warning(f"Not measurable on this device: {cannot}.")
        return None
    button = st.empty()
    if run is not None and not run.finished:
        _follow_demo(run.id)
        return None
    if run is not None and run.status == "failed":
        st.error(f"The last measurement failed: {run.error}")
    if run is not None and run.status == "done":
        env = run.environment or {}
        took = (run.finished_at or 0) - (run.started_at or 0)
        st.caption(
            f"Measured {time.strftime('%Y-%m-%d %H:%M', time.localtime(run.finished_at or run.created_at))} "
            f"on {env.get('device_name', '?')} with torch {env.get('torch', '?')} (took {took:.0f} s). "
            "Stored: a revisit shows it at once."
        )
    label = "Measure again" if run is not None else "Measure on this device"
    if button.button(label, key=f"measure_{key}", type="secondary" if run else "primary"):
        try:
            jobs.enqueue(store(), {"demo": name, "params": params}, visitor(), kind="demo")
        except (jobs.JobError, ValueError) as exc:
            st.error(str(exc))  # and no rerun, which would wipe the message before anyone reads it
        else:
            st.rerun()
    if run is None:
        st.info("Not measured on this device yet: the measurement runs as a background job, like a race.")
        return None
    return (run.summary or {}).get("result") if run.status == "done" else None


@st.fragment(run_every=1.0)
def _follow_demo(run_id: int) -> None:
    tick()
    run = store().get_run(run_id)
    if run is None or run.finished:
        st.rerun()
    st.info(f"Measuring: {jobs.describe(store(), run)}")


def wait_for_device() -> None:
    """Until the device probe has answered, re-check every second and redraw the page once it has
    (Launch and Measure need to know which device's queue a job joins)."""
    if jobs.known_caps(store()) is not None:
        return

    @st.fragment(run_every=1.0)
    def _poll() -> None:
        tick()
        if jobs.known_caps(store()) is not None:
            st.rerun()

    _poll()
