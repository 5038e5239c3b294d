"""Runs: every stored race; filter, overlay, reopen, download, import, cancel or delete your own."""

import pandas as pd
import streamlit as st

from app_pages.common import (
    damaged_run_text,
    disk_full_text,
    host_limits,
    one_run,
    plan_section,
    run_view,
    store,
    tick,
    visitor,
    visitor_address,
)
from app_pages.run_screen.show import hand_on_downloads, run_file_downloads, show_run
from core.engine import words
from core.runs import queue
from core.runs.bundle import AlreadyImported, BundleError, import_bundle, read_bundle
from core.runs.run_files import bundle_text
from core.runs.store.records import unreadable_runs_text
from core.view import answers
from core.view.compare import (
    FILTERS,
    TABLE_COLUMNS,
    column_headings,
    comparison_labels,
    comparison_rows,
    comparison_words,
    csv_frame,
    run_name,
    runs_page,
    shown_columns,
)
from core.view.host_tables import describe
from core.view.race_charts import overlay_cumulative_chart, overlay_step_chart
from core.view.safe_text import csv_text, markdown_text

owner = visitor()
tick()
st.title("Runs")

# One page of the table at a time, the filters over every race: a view costs one page's rows.
wanted = {key: list(st.session_state.get(f"runs_filter_{key}", [])) for key, _ in FILTERS}
if st.session_state.get("runs_filters_seen", wanted) != wanted:  # other filters: from their first page
    st.session_state.runs_page = 1
st.session_state.runs_filters_seen = wanted
table_page = runs_page(store(), wanted, st.session_state.get("runs_page", 1))
if store().unreadable_runs:  # a damaged page of the store's file: the others are listed
    st.warning(markdown_text(unreadable_runs_text(store().unreadable_runs, store().path)))
if not table_page.options["status"]:
    st.info("No runs yet. Launch one on the Race page, or import a bundle below.")
for run_id, exc in table_page.unreadable:  # a row this app cannot read is named, and left out
    st.warning(damaged_run_text(run_id, exc))
runs = table_page.runs
table = pd.DataFrame(table_page.rows, columns=[key for key, _ in TABLE_COLUMNS])
if table_page.options["status"]:
    for column, (key, label) in zip(st.columns(len(FILTERS)), FILTERS):
        st.session_state[f"runs_filter_{key}"] = table_page.wanted[key]  # a value no race has any more is let go
        column.multiselect(label, table_page.options[key], key=f"runs_filter_{key}")
    view = (table_page.page, *(tuple(v) for v in table_page.wanted.values()))
    if st.session_state.get("runs_view", view) != view:  # another page or filter: a selection by row position is void
        st.session_state.pop("runs_table", None)
    st.session_state.runs_view = view
    shown = table
    headings = column_headings()
    picked = st.dataframe(
        shown,
        hide_index=True,
        on_select="rerun",
        selection_mode="multi-row",
        key="runs_table",
        placeholder="–",
        column_order=shown_columns(table_page.rows),
        column_config={
            **{key: heading for key, heading in headings.items()},
            "speedup": st.column_config.NumberColumn(headings["speedup"], format=words.SPEEDUP_FORMAT),
            "overhead_s": st.column_config.NumberColumn(headings["overhead_s"], format="%+.1f"),
            "batch_size": st.column_config.NumberColumn(headings["batch_size"], format="%d"),
            "id": st.column_config.NumberColumn(headings["id"], format="%d", width="small"),
        },
    )
    # A selection is kept by row position and can outlive its rows (a filter, a deletion): drop those.
    selected = [int(shown.iloc[i]["id"]) for i in picked.selection.rows if i < len(shown)] if picked else []
    left, right = st.columns([3, 1])
    left.caption(table_page.line())
    if table_page.pages > 1:
        st.session_state.runs_page = table_page.page  # within the pages there are now
        right.number_input(f"Page (of {table_page.pages:,})", 1, table_page.pages, key="runs_page")
    # the table's columns, then the numbers behind its words (compile_s in seconds, the break-even step)
    csv = csv_text(csv_frame(table_page.rows))
    st.download_button("Download this page as CSV", csv, "compile_lab_runs.csv", "text/csv")
    if table_page.numbering:  # why the numbers have gaps
        st.caption(table_page.numbering)
    chosen = [r for r in runs if r.id in selected]
    if len(chosen) == 1:
        run = chosen[0]
        st.subheader(f"{run_name(run.id).capitalize()}: {markdown_text(describe(store(), run))}")
        with one_run(run.id):
            show_run(run, run_view(run), key=f"runs_{run.id}")
            run_file_downloads(run)
            hand_on_downloads(run, key="runs")
            if run.status == "done":
                plan_section(run, key=f"runs_{run.id}")
    elif len(chosen) > 1:
        st.subheader(f"Comparing {len(chosen)} runs")
        with one_run("The comparison of runs " + ", ".join(str(r.id) for r in chosen)):
            for line in comparison_words(chosen):  # what differs, and whether the verdicts agree
                st.markdown(markdown_text(line))
            st.dataframe(comparison_rows(chosen), hide_index=True, width="stretch")
            for run in chosen[:6]:  # each run's cause and what to try next on its device
                found = answers.finished_answers(run.summary, run.params, run.environment)
                nxt = " · ".join(f"[{markdown_text(r.label)}]({r.link})" for r in found.next_races)
                if found.cause_text:
                    st.markdown(
                        f"**{run_name(run.id).capitalize()}:** {markdown_text(found.cause_text)}"
                        + (f" **Try next:** {nxt}." if nxt else "")
                    )
            labels = comparison_labels(chosen)
            frames = [run_view(r).frames()[0].assign(run=labels[r.id]) for r in chosen]
            steps = pd.concat(frames, ignore_index=True)
            st.caption("Colour tells the runs apart, the line style the variant: solid eager, dashed compiled.")
            left, right = st.columns(2)
            left.altair_chart(overlay_step_chart(steps), width="stretch")
            right.altair_chart(overlay_cumulative_chart(steps), width="stretch")
    for run in chosen:
        a, b, c = st.columns([2, 1, 1])
        damaged = run_view(run).damaged
        if damaged:  # a damaged run: no bundle of part of it
            a.caption(f"No bundle of {run_name(run.id)}: {markdown_text(f'cannot export it whole: {damaged}')}")
        else:  # built when it is asked for (a long run's bundle is tens of MB), not on every view
            a.download_button(
                f"Bundle of {run_name(run.id)} (JSON)",
                bundle_text(store().path, run.id),
                f"compile_lab_run_{run.id}.json",
                "application/json",
                key=f"bundle_{run.id}",
            )
        if run.owner == owner:
            if not run.finished and b.button("Cancel", key=f"cancel_{run.id}"):
                queue.cancel(store(), run.id, owner)
                st.rerun()
            if c.button("Delete", key=f"delete_{run.id}"):
                queue.delete(store(), run.id, owner)
                st.session_state.pop("runs_table", None)  # the selected rows are gone
                st.rerun()

st.subheader("Import a bundle")
upload = st.file_uploader("A run bundle exported from Compile Lab (JSON)", type=["json"])
if upload is not None and st.session_state.get("imported_name") != upload.name:
    limits = host_limits()
    try:
        max_imports = limits.max_imports_per_owner if limits is not None else None
        new_id = import_bundle(store(), read_bundle(upload), owner, max_imports, visitor_address(limits))
        st.session_state.imported_name = upload.name
        st.success(f"Imported as {run_name(new_id)}.")
    except AlreadyImported as exc:  # one bundle, one run: the visitor is sent to the run it already is
        st.session_state.imported_name = upload.name
        st.info(
            f"Already here as {run_name(exc.run_id)}: this bundle was imported before, so it was not imported again."
        )
    except BundleError as exc:
        st.error(f"Not imported: {markdown_text(exc)}")
    except Exception as exc:  # noqa: BLE001 - a full disk is one line; anything else is raised again
        st.error(f"Not imported: {disk_full_text(exc)}")
