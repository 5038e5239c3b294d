"""Admin: the host's view of the box, unlocked by this host's admin token (COMPILE_LAB_ADMIN_TOKEN).
Every run (cancel any), pause and resume the queue, purge old runs, the workers and their lanes.
The page exists only where the host set a token, and shows nothing but the token prompt until it is given."""

import time

import pandas as pd
import streamlit as st

from app_pages.common import host_limits, store, tick, visitor, visitor_address
from core.runs import admin, disk_budget, fleet, queue
from core.runs import limits as host_rules
from core.view.host_tables import disk_line, fleet_rows, freed_line, lane_rows, last_freed_line, purge_line, run_rows
from core.view.safe_text import markdown_text

st.title("Admin")
if not st.session_state.get("admin_unlocked"):
    who = visitor_address(host_limits()) or visitor()  # counted across sessions (core.runs.admin.GUESSES)
    refused = admin.GUESSES.refusal(who)
    if refused:
        st.error(refused)
        st.stop()
    with st.form("admin_unlock", clear_on_submit=True):
        given = st.text_input("Admin token", type="password")
        submitted = st.form_submit_button("Unlock")
    if submitted:
        if admin.token_matches(given):
            st.session_state.admin_unlocked = True
            st.rerun()
        admin.GUESSES.wrong(who)
        time.sleep(1.0)  # each wrong token also costs its session a second
        st.error("That is not this host's admin token.")
    st.stop()

tick()
db = store()
paused = db.queue_paused()
state_col, pause_col, lock_col = st.columns([4, 1, 1])
if paused:
    state_col.warning("The queue is paused: queued jobs wait, nothing new starts (what runs now finishes).")
else:
    state_col.info("The queue is running.")
if pause_col.button("Resume the queue" if paused else "Pause the queue", width="stretch"):
    admin.set_queue_paused(db, not paused)
    st.rerun()
if lock_col.button("Lock", width="stretch", help="Forget the token in this session."):
    st.session_state.pop("admin_unlocked", None)
    st.rerun()
limits = host_limits()
told_apart = host_rules.ADDRESSES_SEEN.notice(limits) if limits is not None else None
if told_apart:
    st.warning(markdown_text(told_apart))

st.subheader("Workers and lanes")
lanes = lane_rows(admin.lanes(db))
if lanes:
    st.dataframe(pd.DataFrame(lanes), hide_index=True, width="stretch")
else:
    st.caption("Nothing running or waiting.")

fleet_hosts = fleet.hosts(db)
if fleet_hosts:  # a fleet's store: every box's agent and lanes
    st.subheader("Fleet")
    active_runs = db.list_runs(status=("starting", "running"))
    st.dataframe(pd.DataFrame(fleet_rows(fleet_hosts, active_runs, time.time())), hide_index=True, width="stretch")

st.subheader("Every run")
runs = db.list_runs(limit=2000)
table = pd.DataFrame(run_rows(runs))
picked = st.dataframe(table, hide_index=True, on_select="rerun", selection_mode="multi-row", key="admin_runs")
chosen = [runs[i] for i in (picked.selection.rows if picked else []) if i < len(runs)]
active = [r for r in chosen if not r.finished]
if active and st.button(f"Cancel {len(active)} selected active run(s)", type="primary"):
    for run in active:
        try:
            admin.cancel_any(db, run.id)
        except queue.JobError as exc:
            st.error(markdown_text(exc))
    st.session_state.pop("admin_runs", None)
    st.rerun()

st.subheader("Purge old runs")
days = st.number_input("Finished more than this many days ago", 1, 3650, 30)
if st.button(f"Delete finished runs older than {days} days, their events and files"):
    st.success(purge_line(admin.purge_older_than(db, days)))

st.subheader("Disk")
limits = host_limits()
no_budget = "This host sets no disk budget (disk_budget in its host limits)."
if limits is not None and st.button(
    "Free files to the disk budget now",
    disabled=limits.disk_budget is None,
    help=no_budget if not limits.disk_budget else None,
):
    st.success(freed_line(admin.free_to_budget(db, limits)))
st.caption(disk_line(disk_budget.disk_use(db.path, limits.disk_budget if limits else None)))
last = last_freed_line(disk_budget.last_freed(db.path))
if last:
    st.caption(last)
