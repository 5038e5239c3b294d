"""Streamlit pieces every page shares: the store handle, the visitor's identity, queue ticks, and
the charts-and-cards view of one run (the same on the live Race page and when a run is reopened).
UI only; what it shows is computed in core/."""

from __future__ import annotations

import re
import time
import uuid

import streamlit as st

from core.engine.analysis import plain_reading
from core.engine.explain import demo_device_problem
from core.engine.planning import fmt_duration, fmt_range, plan_from_summary, plan_sentence
from core.runs import jobs
from core.runs.store import Run, Store
from core.view import charts
from core.view.live import RunView, memory_of, result_cards, run_label, run_summary
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


def show_run(run: Run, view: RunView, key: str) -> None:
    """Charts, result cards and the plain reading for one run, live or finished."""
    steps, epochs = view.frames()
    summary = run_summary(run, view)
    if run.status == "failed":
        st.error(f"Run failed: {run.error}. What was measured before it is kept below.")
    counts = view.counts()
    if not run.finished and counts["compiled"] == 0:
        st.markdown(f"**Eager run in progress: {counts['eager']} steps so far. The compiled run starts next.**")
    else:
        st.markdown(f"**{'' if run.finished else 'So far: '}{plain_reading(summary)}**")
    cards = result_cards(summary, memory_of(run))
    for row in (cards[:3], cards[3:]):  # two rows of three: readable on a 1280x720 projector
        for column, card in zip(st.columns(3), row):
            column.metric(
                card.label,
                card.value,
                card.delta,
                card.delta_color,
                help=card.help,
                border=True,
                delta_arrow=card.delta_arrow,
            )
    log = st.toggle(
        "Log scale for step times",
        key=f"log_{key}",
        help="Makes the compile spike and the steady steps visible together.",
    )
    left, right = st.columns(2)
    be = (
        {"step": summary["break_even_step"], "wall_s": summary["break_even_wall_s"]}
        if summary.get("break_even_step")
        else None
    )
    left.altair_chart(charts.step_time_chart(steps, log_scale=log), width="stretch")
    right.altair_chart(charts.cumulative_chart(steps, break_even=be), width="stretch")
    left.altair_chart(charts.epoch_chart(epochs), width="stretch")
    right.altair_chart(charts.loss_chart(steps), width="stretch")


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
            st.error(str(exc))
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


def training_run_length(key: str) -> int:
    """The user's real run length in steps: typed as steps, or as epochs x steps per epoch."""
    how = st.radio(
        "Your run's length in", ["steps", "epochs x steps per epoch"], horizontal=True, key=f"plan_how_{key}"
    )
    if how == "steps":
        return int(st.number_input("Steps", 1, 10**9, 50_000, step=1_000, key=f"plan_steps_{key}"))
    left, right = st.columns(2)
    epochs = left.number_input("Epochs", 1, 10**6, 10, key=f"plan_epochs_{key}")
    per_epoch = right.number_input("Steps per epoch", 1, 10**7, 5_000, step=100, key=f"plan_per_epoch_{key}")
    return int(epochs * per_epoch)


def plan_section(run: Run, key: str) -> None:
    """Plan your training: a finished race's steady rates and compile time over the user's run length."""
    st.subheader("Plan your training")
    st.caption(
        "Predicted from this race: eager = steps x its steady step; compiled = compile time + steps x its steady "
        "step. Intervals come from the measured step times (95%); the compile time is one measurement."
    )
    steps = training_run_length(key)
    plan = plan_from_summary(run.summary or {}, steps) if run.status == "done" else None
    if plan is None:
        st.info("Nothing to plan from: this race did not finish with compiled code running.")
        return
    left, right = st.columns(2)
    for column, label, total, ci in (
        (left, "Eager total", plan.eager_total_s, plan.eager_ci),
        (right, "Compiled total, compile included", plan.compiled_total_s, plan.compiled_ci),
    ):
        interval = f"95% interval {fmt_range(ci[0], ci[1], total)} ({fmt_duration(total).split()[-1]})"
        column.metric(label, fmt_duration(total), help=interval, border=True)
    st.markdown(f"**{plan_sentence(plan)}**")
