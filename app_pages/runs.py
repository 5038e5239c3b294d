"""Runs: every stored race; filter, overlay, reopen, download, import, cancel or delete your own."""

import json

import pandas as pd
import streamlit as st

from app_pages.common import plan_section, run_view, show_run, store, tick, visitor
from core.runs import jobs
from core.runs.bundle import BundleError, export_bundle, import_bundle, parse_bundle
from core.view import charts
from core.view.live import run_row

owner = visitor()
tick()
st.title("Runs")

runs = store().list_runs(kind="race", limit=1000)
if not runs:
    st.info("No runs yet. Launch one on the Race page, or import a bundle below.")
table = pd.DataFrame([run_row(r) for r in runs])
if not table.empty:
    table["mine"] = [r.owner == owner for r in runs]
    f1, f2, f3 = st.columns(3)
    statuses = f1.multiselect("Status", sorted(table["status"].unique()))
    models = f2.multiselect("Model", sorted(table["model"].unique()))
    devices = f3.multiselect("Device", sorted(table["device"].unique()))
    keep = pd.Series(True, index=table.index)
    for column, wanted in (("status", statuses), ("model", models), ("device", devices)):
        if wanted:
            keep &= table[column].isin(wanted)
    shown = table[keep]
    picked = st.dataframe(
        shown.drop(columns=["error"]),
        hide_index=True,
        on_select="rerun",
        selection_mode="multi-row",
        key="runs_table",
        column_config={
            "first_epoch_overhead_s": st.column_config.NumberColumn("overhead (s)", format="%+.1f"),
            "steady_state_speedup": st.column_config.NumberColumn("speedup", format="%.2fx"),
            "break_even_step": st.column_config.NumberColumn("break-even step"),
        },
    )
    # A selection is kept by row position and can outlive its rows (a filter, a deletion): drop those.
    selected = [int(shown.iloc[i]["id"]) for i in picked.selection.rows if i < len(shown)] if picked else []
    st.download_button("Download table as CSV", shown.to_csv(index=False), "compile_lab_runs.csv", "text/csv")
    chosen = [r for r in runs if r.id in selected]
    if len(chosen) == 1:
        run = chosen[0]
        st.subheader(f"Run #{run.id}: {jobs.describe(store(), run)}")
        show_run(run, run_view(run), key=f"runs_{run.id}")
        if run.status == "done":
            plan_section(run, key=f"runs_{run.id}")
    elif len(chosen) > 1:
        frames = [run_view(r).frames()[0] for r in chosen]
        steps = pd.concat(frames, ignore_index=True)
        left, right = st.columns(2)
        left.altair_chart(charts.overlay_step_chart(steps), width="stretch")
        right.altair_chart(charts.overlay_cumulative_chart(steps), width="stretch")
    for run in chosen:
        a, b, c = st.columns([2, 1, 1])
        a.download_button(
            f"Bundle of run #{run.id} (JSON)",
            json.dumps(export_bundle(store(), run.id)),
            f"compile_lab_run_{run.id}.json",
            "application/json",
            key=f"bundle_{run.id}",
        )
        if run.owner == owner:
            if not run.finished and b.button("Cancel", key=f"cancel_{run.id}"):
                jobs.cancel(store(), run.id, owner)
                st.rerun()
            if c.button("Delete", key=f"delete_{run.id}"):
                jobs.delete(store(), run.id, owner)
                st.session_state.pop("runs_table", None)  # the selected rows are gone
                st.rerun()

st.subheader("Import a bundle")
upload = st.file_uploader("A run bundle exported from Compile Lab (JSON)", type=["json"])
if upload is not None and st.session_state.get("imported_name") != upload.name:
    try:
        new_id = import_bundle(store(), parse_bundle(upload.getvalue()), owner)
        st.session_state.imported_name = upload.name
        st.success(f"Imported as run #{new_id}.")
    except BundleError as exc:
        st.error(f"Not imported: {exc}")
