"""Streamlit pieces every page shares: the store handle, the visitor's identity, queue ticks, a
run's incremental view and the demos' measure-and-show section (one run on screen, with its
charts and cards, is app_pages/run_screen/). UI only; what it shows is computed in core/."""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st
from altair.utils import schemapi as alt_schemapi
from streamlit.errors import FragmentHandledException
from streamlit.runtime.scriptrunner import get_script_run_ctx

from core.engine import words
from core.engine.explain import demo_device_problem
from core.engine.words import plan_from_summary, plan_sentence
from core.runs import admin, device_history, fleet, processes, queue
from core.runs import limits as host_rules
from core.runs.disk_space import disk_full_message, is_disk_full
from core.runs.limits import ConfigError, HostLimits, client_address, is_browser_token, load_host_limits, owner_of
from core.runs.store import Run, Store, StoreError
from core.view.answers import TUTORIAL_SOURCE, reference_rows
from core.view.compare import plan_caveat
from core.view.host_tables import describe
from core.view.run_screen.shared_board import (
    LiveBoard,
    LiveSnapshot,
    RunView,
    board_for,
    expected_steps,
    run_label,
    snapshot_of,
)
from core.view.safe_text import markdown_text

# A per-browser identity: kept in the browser (localStorage, and a cookie of the same name), so every
# tab of one browser is one visitor (one owner, one host limit) and a reload keeps it, but it is never
# part of a URL (a shared configuration link does not make someone else the owner). The cookie comes
# with a tab's connection, so a second tab knows its visitor from its first script run; only a
# browser whose token the server did not know yet (a cookie cleared or refused) answers with it,
# and that answer costs a rerun, which can swallow a click made in the same instant (it did, in the
# e2e: a Launch, and a second tab that never followed the visitor's run). See core/runs/limits.py.
VISITOR_KEY = "compile_lab_visitor"
_VISITOR_JS = """
export default function(component) {
  const { setStateValue, data } = component;
  const KEY = "compile_lab_visitor";
  const known = data && data.token;  // the server's idea: the cookie, or a new token for a new browser
  let token = null;
  try {
    token = window.localStorage.getItem(KEY) || window.sessionStorage.getItem(KEY);  // sessionStorage: the old per-tab identity keeps its runs
  } catch (e) {}
  if (!token) {
    token = known;
  }
  if (!token) {
    const bytes = new Uint8Array(16);
    window.crypto.getRandomValues(bytes);
    token = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }
  try {
    window.localStorage.setItem(KEY, token);
  } catch (e) {}
  const secure = window.location.protocol === "https:" ? "; Secure" : "";
  document.cookie = `${KEY}=${token}; path=/; max-age=31536000; SameSite=Lax${secure}`;
  if (token !== known) {
    setStateValue("token", token);  // the page redraws for the visitor this browser already was
  }
}
"""
_visitor_component = st.components.v2.component("compile_lab.visitor", js=_VISITOR_JS)
_LOGGER = logging.getLogger("compile_lab")
_TICK_EVERY_S = 1.0
_last_tick = {"t": 0.0}


def store() -> Store:
    """This session's connection to the store (one per session: sqlite connections are not shared).
    A store that cannot be opened stops the page with the reason, not a traceback."""
    if "store" not in st.session_state:
        try:
            st.session_state.store = Store()
        except StoreError as exc:
            st.error(f"Compile Lab cannot open its store: {markdown_text(exc)}")
            st.stop()
    return st.session_state.store


@contextmanager
def one_run(what: int | str) -> Iterator[None]:
    """Where a page draws one run (`what`: its id, or words naming what is drawn): an error in it (a
    stored record this app cannot read: a damaged row, or one an older version let in) is a line
    naming the run, and the page draws the rest; the traceback goes to the server's log only."""
    try:
        yield
    except FragmentHandledException:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever one run's record holds, the page goes on
        name = f"run {what}" if isinstance(what, int) else what
        _LOGGER.exception("%s cannot be drawn", name)
        st.warning(damaged_run_text(what, exc))


def damaged_run_text(what: int | str, exc: BaseException) -> str:
    """'Run 7 cannot be shown: ...' for a run this app cannot read."""
    name = f"Run {what}" if isinstance(what, int) else what
    return markdown_text(
        f"{name} cannot be shown: its stored record is damaged or was not written by this app "
        f"({type(exc).__name__}). The rest of the page is as usual."
    )


def disk_full_text(exc: Exception) -> str:
    """The one line a page says for a write the store refused for want of space (nothing measured
    is lost: it was not written); any other error is raised again as it was."""
    if not is_disk_full(exc):
        raise exc
    return markdown_text(disk_full_message(store().path))


def board() -> LiveBoard:
    """This process's live board: what every viewer of a run sees, read once for all of them."""
    return board_for(store().path)


def host_limits() -> HostLimits | None:
    """The host's limits; a malformed configuration is said on the page (None: nothing can be queued)."""
    try:
        return load_host_limits()
    except ConfigError as exc:
        st.error(
            f"This host's configuration has a problem, so nothing can be queued until it is fixed: {markdown_text(exc)}"
        )
        return None


def admin_configured() -> bool:
    """Whether this host has an admin token (a too-short one counts as none: the Admin page then
    does not exist, and the configuration problem is logged)."""
    try:
        return admin.admin_token() is not None
    except ConfigError as exc:
        _LOGGER.warning("no admin page: %s", exc)
        return False


def adopt_visitor_token() -> None:
    """Before the page runs: take the token the browser answered with (the component's state), so
    the rerun its answer triggers already draws for that visitor (a tab whose cookie was missing
    then follows the visitor's run at once instead of after the next click)."""
    try:
        state = st.session_state.get("visitor_token")
    except Exception:  # noqa: BLE001 - a component state Streamlit cannot present yet
        return
    token = state.get("token") if hasattr(state, "get") else getattr(state, "token", None)
    if is_browser_token(token):
        st.session_state.visitor = token


def identify_visitor() -> None:
    """Tell the browser who this tab thinks it is, and hear back only if the browser knows better
    (once per script run, from the entry point)."""
    result = _visitor_component(key="visitor_token", data={"token": _visitor_token()}, on_token_change=lambda: None)
    token = getattr(result, "token", None) if result is not None else None
    if is_browser_token(token):
        st.session_state.visitor = token


def _visitor_token() -> str:
    """This tab's visitor token: from its first script run, the browser's cookie (set by any earlier
    tab of this browser), else a new one, which the browser then keeps."""
    if "visitor" not in st.session_state:
        st.session_state.visitor = cookie_token() or uuid.uuid4().hex
    return st.session_state.visitor


def cookie_token() -> str | None:
    """The visitor token the browser sent with this tab's connection, if it is one."""
    try:
        token = st.context.cookies.get(VISITOR_KEY)
    except Exception:  # noqa: BLE001 - no browser connection (tests, a bare script run)
        return None
    return token if is_browser_token(token) else None


def visitor() -> str:
    """The owner name of this browser's runs (every tab of it)."""
    return owner_of(_visitor_token())


def session_id() -> str:
    """This browser tab's Streamlit session (what a live board counts as one follower of a run)."""
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "no-session"


def connection_address() -> tuple[str | None, list[tuple[str, str]]]:
    """The client's address as this server sees it, and the request's headers (for a proxy's)."""
    try:
        return st.context.ip_address, list(st.context.headers.items())
    except Exception:  # noqa: BLE001 - no browser connection (tests, a bare script run)
        return None, []


def visitor_address(limits: HostLimits | None) -> str | None:
    """What host limits count this visitor by besides the browser, where the host says so."""
    if limits is None:
        return None
    ip, headers = connection_address()
    address = client_address(limits, ip, headers)
    host_rules.ADDRESSES_SEEN.note(visitor(), address, ip)  # the Admin page says who is told apart by browser alone
    return address


def tick() -> None:
    """Let this app process move the queue along (at most once a second across sessions)."""
    now = time.monotonic()
    if now - _last_tick["t"] >= _TICK_EVERY_S:
        _last_tick["t"] = now
        try:
            queue.tick(store(), prewarm=True)  # the app starts races: its lanes' next job starts warm
        except Exception as exc:
            if not store().is_damage(exc):
                raise
            # A damaged page of the store's file under a job's row: the page reads every other run.
            _LOGGER.warning("the queue cannot move: %s", exc)


def run_view(run: Run) -> LiveSnapshot:
    """A run as show_run draws it: the live board's snapshot, which every session of this process
    shares (a stored run's events read and thinned once, then only new ones), so a run of 390,000
    events reopened in one tab after another is not read again for each. A run the board cannot
    read (gone meanwhile) gets a view of the session's own. A shared snapshot older than the row
    the page holds (the run moved on since: started, finished) is read again, so the page never
    draws a run behind its own row."""
    shared = board().snapshot(run.id)
    if shared is not None and (shared.run.status, shared.run.finished_at) != (run.status, run.finished_at):
        shared = board().snapshot(run.id, fresh=True)
    if shared is not None:
        return shared
    views = st.session_state.setdefault("run_views", {})
    if run.id not in views:
        views[run.id] = RunView(run.id, run_label(run))
    view = views[run.id]
    if run.finished and run.summary:  # its numbers are the stored summary: its steps are drawn thinned
        view.thin_steps(expected=expected_steps(run.params))
    view.poll(store())
    return snapshot_of(run, view)


# Altair validates every schema object it creates against the Vega-Lite schema (its "debug mode"),
# about a fifth of a live chart's build, which this process repeats for each new snapshot of a live
# run. The builders' whole specs are validated by tests/test_charts.py instead. (Altair also toggles
# this flag around its own copies, unguarded across threads, so in a server with one thread per
# session it was not reliably on anyway.)
alt_schemapi.disable_debug_mode()


def vega_spec(chart):
    """An Altair chart converted the way st.altair_chart converts it (datasets as Arrow), so the
    conversion is done once per snapshot for every viewer; st.vega_lite_chart then only copies it.
    Skips Altair's JSON-schema validation, most of a conversion's cost: the race charts'
    builders are validated by their tests, and live they only change data. Falls back to the chart
    itself (drawn by st.altair_chart) if this Streamlit lacks the converter."""
    try:
        from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec
    except ImportError:
        return chart
    unvalidated = chart.copy(deep=False)
    object.__setattr__(unvalidated, "to_dict", functools.partial(type(chart).to_dict, unvalidated, validate=False))
    return _convert_altair_to_vega_lite_spec(unvalidated)


def draw_chart(column, spec) -> None:
    if isinstance(spec, dict):
        column.vega_lite_chart(spec=spec, width="stretch")
    else:
        column.altair_chart(spec, width="stretch")


def show_reference() -> None:
    st.markdown("**Published figures, for scale**")
    st.dataframe(reference_rows(), hide_index=True, width="stretch")
    st.caption(TUTORIAL_SOURCE + ". The release average covers HuggingFace, TIMM and TorchBench models.")


def demo_section(name: str, params: dict, key: str) -> dict | None:
    """The stored measurement of a demo with these parameters on this device, with a button to
    measure (again). Returns the result when one is stored; shows progress while it runs."""
    run = device_history.stored_demo(store(), name, params)
    cannot = demo_device_problem(name, fleet.known_caps(store()))
    if cannot and run is None:
        st.warning(f"Not measurable on this device: {cannot}.")
        return None
    button = st.empty()
    if run is not None and not run.finished:
        _follow_demo(run.id)
        return None
    if run is not None and run.status == "failed":
        st.error(f"The last measurement failed: {markdown_text(run.error)}")
    if run is not None and run.status == "done":
        env = run.environment or {}
        took = (run.finished_at or 0) - (run.started_at or 0)
        st.caption(
            f"Measured {time.strftime('%Y-%m-%d %H:%M', time.localtime(run.finished_at or run.created_at))} "
            f"on {markdown_text(env.get('device_name', '?'))} with torch {markdown_text(env.get('torch', '?'))} "
            f"(took {words.duration(took)}). "
            "Stored: a revisit shows it at once."
        )
    label = "Measure again" if run is not None else "Measure on this device"
    if button.button(label, key=f"measure_{key}", type="secondary" if run else "primary"):
        limits = host_limits()  # a broken configuration is said on the page
        if limits is not None:
            try:
                address = visitor_address(limits)
                queue.enqueue(store(), {"demo": name, "params": params}, visitor(), "demo", limits, address=address)
                st.rerun()
            except (queue.JobError, ValueError) as exc:
                st.error(markdown_text(exc))
            except Exception as exc:  # noqa: BLE001 - a full disk is one line; anything else is raised again
                st.error(disk_full_text(exc))
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
    st.info(f"Measuring: {markdown_text(describe(store(), run))}")


def lanes_readying(caps: fleet.DeviceCaps | None) -> bool:
    """Whether a lane's warm server is still starting (importing torch: core.runs.processes.warming),
    as on a freshly started app: a race launched now would wait for it in the queue, so Launch waits
    for it instead, and then starts its race as quickly as every later one."""
    return caps is not None and bool(processes.warming(fleet.device_lanes(caps)))


def wait_for_device() -> None:
    """Until the device probe has answered and the lanes' warm servers are ready, re-check every
    second and redraw the page once they are (Launch and Measure need to know which device's queue a
    job joins; a job started before its server is ready waits for it)."""
    caps = fleet.known_caps(store())
    if caps is not None and not lanes_readying(caps):
        return

    @st.fragment(run_every=1.0)
    def _poll() -> None:
        tick()
        known = fleet.known_caps(store())
        if known is not None and not lanes_readying(known):
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
        "Predicted from this race: its own steps as measured (compile included), then eager's steady step and "
        "compiled's at the headline speedup for the rest, so it breaks even where the race's card says. The saving's "
        "and the compiled total's intervals are the headline's 95% interval (the one its card shows) applied; eager's "
        "total's is from eager's own steps."
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
        column.metric(label, words.duration(total), help=words.duration_interval(ci[0], ci[1], total), border=True)
    st.markdown(f"**{plan_sentence(plan)}**")
    caveat = plan_caveat(run, store().list_runs(kind="race", status=["done"], limit=200), steps)
    if caveat:  # one race's extrapolation: what other races of it here predict, or that there are none
        st.caption(caveat)
