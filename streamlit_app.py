"""Compile Lab: the entry point builds navigation and the sidebar every page shares."""

import time

import streamlit as st

from app_pages.common import (
    admin_configured,
    adopt_visitor_token,
    board,
    identify_visitor,
    store,
    tick,
)
from app_pages.run_screen.feed import sidebar_every
from core.runs import fleet, warm_start
from core.runs.queue import ensure_probe, ready_at_start
from core.runs.race_conditions import seal_from_workers
from core.view.host_tables import device_type_lines, fleet_summary, gpu_lines, lane_lines
from core.view.safe_text import markdown_text

seal_from_workers()  # no worker (a model file's code) reads this server's environment from /proc
warm_start.owned_by_this_app()  # the warm servers of its jobs leave when this server process does
ready_at_start()  # once per process (app.py did it as the server started): the first Launch finds them ready
st.set_page_config(page_title="Compile Lab", page_icon="⚡", layout="wide")

pages = [
    st.Page("app_pages/race.py", title="Race", icon=":material/sports_score:", default=True),
    st.Page("app_pages/sweep.py", title="Sweep", icon=":material/stacked_line_chart:"),
    st.Page("app_pages/runs.py", title="Runs", icon=":material/table_view:"),
    st.Page("app_pages/under_the_hood.py", title="Under the hood", icon=":material/memory:"),
]
if admin_configured():  # no admin token on this host: no admin page at all
    unlocked = st.session_state.get("admin_unlocked", False)
    pages.append(
        st.Page(
            "app_pages/admin.py",
            title="Admin",
            icon=":material/admin_panel_settings:",
            url_path="admin",
            visibility="visible" if unlocked else "hidden",
        )
    )
page = st.navigation(pages)


def sidebar_status() -> None:
    """Device card and queue, refreshed on their own so they stay true while a page sits still
    (every 5 s, or 30 s in a tab following a run through the live feed: each refresh is a script
    run per open tab, and a run's own view is on the page)."""
    tick()
    queue = board().queue()  # read once a second for every session of this process
    env = queue.environment
    hosts = fleet.hosts(store())  # a fleet's store: its boxes run the races (core.view.host_tables)
    if env is None and not hosts:
        ensure_probe(store())  # a queued job: this process never touches the GPU itself
    st.subheader("Device")
    if env is None:
        st.info("Races run on the fleet's boxes (below)." if hosts else "Probing the device…")
    elif queue.cuda:
        for line in gpu_lines(queue.probe_summary):
            st.text(line)
    else:
        st.markdown(
            f"**CPU only**: {markdown_text(env['cpu_name'])}  \n{env['cpu_count']} cores, torch {markdown_text(env['torch'])}"
        )
    st.subheader("Queue")
    for line in lane_lines(queue.caps, list(queue.active), list(queue.queued), queue.paused):  # one lane per device
        st.text(line)
    if queue.paused:
        st.warning("The host has paused the queue: new jobs wait until it resumes.")
    if store().damage:  # a file cut short: what it holds is shown, nothing is written
        st.warning(markdown_text(store().damage))
    if hosts:
        st.text(fleet_summary(hosts, list(queue.active), time.time()))
        for line in device_type_lines(hosts, list(queue.active), time.time()):
            st.text(line)


adopt_visitor_token()  # first: the sidebar's interval depends on who this tab is
with st.sidebar:
    st.fragment(run_every=sidebar_every(page.url_path == ""))(sidebar_status)()
    with st.expander("What am I looking at?"):
        st.markdown(
            "Each race trains one model twice from identical weights on identical batches: once eagerly, "
            "once under `torch.compile`. The compiled run pays a **compile overhead** up front (a slow first "
            "epoch), then may run each step faster (**steady-state speedup**). **Break-even** is the step where "
            "its total time catches up with eager's. On small CPUs compile often does not pay off; the app says so."
        )


page.run()
# Last, so the tab's answer (one rerun) never interrupts a first render of the page's widgets.
identify_visitor()
