"""One race drawn by Streamlit, live or finished (the Race page and a run reopened on the Runs
page): what is happening in words, the result cards, then the charts with the race first. UI only;
what it shows, and when, is core.view.run_screen's (the plan in its layout module)."""

from __future__ import annotations

import os

import streamlit as st

from app_pages.common import draw_chart, one_run, store, vega_spec, visitor
from core.engine import words
from core.engine.summary import Summary
from core.runs import run_files
from core.runs.store import Run
from core.view import answers
from core.view.run_screen import cadence, layout, sentences, why_per_step
from core.view.run_screen.shared_board import LiveSnapshot
from core.view.safe_text import markdown_text

# Compact cards: three to a row on a wide screen, two on a phone (Streamlit would stack all six),
# with a smaller value font and labels that wrap instead of being cut, so the race chart is on the
# first screen on both.
CARD_CSS = """<style>
.st-key-result_cards [data-testid="stHorizontalBlock"] { flex-direction: row; flex-wrap: wrap; gap: 0.6rem; }
.st-key-result_cards [data-testid="stColumn"] {
  flex: 1 1 calc(33.3% - 0.6rem) !important; min-width: calc(33.3% - 0.6rem) !important;
}
.st-key-result_cards [data-testid="stMetric"] { padding: 0.1rem 0.2rem; }
.st-key-result_cards [data-testid="stMetricValue"] { font-size: 1.6rem; }
.st-key-result_cards [data-testid="stMetricValue"] * { white-space: normal; text-overflow: clip; }
.st-key-result_cards [data-testid="stMetricLabel"] p,
.st-key-result_cards [data-testid="stMetricDelta"] p { white-space: normal; overflow: visible; text-overflow: clip; }
.st-key-result_cards [data-testid="stMetricDelta"] { height: auto; }
@media (max-width: 640px) {
  .st-key-result_cards [data-testid="stColumn"] {
    flex: 1 1 calc(50% - 0.6rem) !important; min-width: calc(50% - 0.6rem) !important;
  }
  .st-key-result_cards [data-testid="stMetric"] { padding: 0; }
  .st-key-result_cards [data-testid="stMetricValue"] { font-size: 1.25rem; }
  .st-key-result_cards [data-testid="stMetricLabel"] p { font-size: 0.8rem; }
}
</style>"""
# Presenter mode: a projector at 1280x720 read from the back of a room, in either theme (sizes
# only, colours stay the theme's): no sidebar, toolbar or header band (empty here, it covered the
# first line of the page once scrolled), the words and cards in large type, the six cards in one row
# (div. outranks CARD_CSS's three a row) so they stay above the fold at 1280x720. The card sizes are !important: CARD_CSS, drawn later with the cards, would otherwise win (caught by the e2e).
PRESENTER_CSS = """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stToolbar"],
[data-testid="stHeader"] { display: none; }
[data-testid="stMainBlockContainer"] { padding-top: 0.75rem; max-width: 100%; }
[data-testid="stMarkdownContainer"] p, [data-testid="stAlertContainer"] p { font-size: 1.5rem; line-height: 1.3; }
[data-testid="stProgress"] p { font-size: 1.4rem; }
.st-key-replay_note [data-testid="stAlertContainer"] p { font-size: 1.2rem; }
@media (min-width: 641px) { div.st-key-result_cards [data-testid="stColumn"] {
  flex: 1 1 calc(16.6% - 0.6rem) !important; min-width: calc(16.6% - 0.6rem) !important;
} }
.st-key-result_cards [data-testid="stMetricValue"] { font-size: 2rem !important; line-height: 1.15; }
.st-key-result_cards [data-testid="stMetricValue"] * { white-space: normal !important; text-overflow: clip !important; }
.st-key-result_cards [data-testid="stMetricLabel"] p { font-size: 1.1rem !important; line-height: 1.25; }
.st-key-result_cards [data-testid="stMetricDelta"] p { font-size: 1rem !important; }
</style>"""
# On a phone the page title takes three lines at Streamlit's size: two at this one.
PHONE_TITLE_CSS = """<style>
@media (max-width: 640px) { [data-testid="stHeading"] h1 { font-size: 1.8rem; } }
</style>"""


def expected_compile_s(run: Run) -> tuple[float | None, bool]:
    """About how long this run's compile takes here (core.view.run_screen.layout.expected_compile), once
    per run for this session."""
    cache = st.session_state.setdefault("expected_compile", {})
    if run.id not in cache:
        cache[run.id] = layout.expected_compile(store(), run)
    return cache[run.id]


def show_words(run: Run, view: LiveSnapshot, summary: Summary, total: int | None) -> None:
    """What is happening now, or what the race says (core.view.run_screen.layout.live_words)."""
    words = layout.live_words(run, view, summary, total, lambda: expected_compile_s(run), quote=markdown_text)
    if words is None:
        return
    if words.compiling:
        st.info(words.text, icon=":material/hourglass_top:")
    else:
        st.markdown(f"**{words.text}**")


def show_answers(run: Run, view: LiveSnapshot, summary: Summary) -> None:
    """Under the verdict: why (the cause), the recompiles, the cost, and what to try next with links
    that fill the Race form (core.view.answers)."""
    found = view.derive(
        "answers",
        lambda: answers.finished_answers(summary, run.params, run.environment, (run.details or {}).get("compile")),
    )
    with st.container(key=f"answers_{run.id}"):
        for head, text in (("Why", found.cause_text), ("Recompiles", found.recompiles), ("Cache", found.warm_cache)):
            if text:
                st.markdown(f"**{head}:** {markdown_text(text)}")
        advice = found.advice
        if advice is not None and (advice.cost or found.next_races):
            links = " · ".join(f"[{markdown_text(r.label)}]({r.link})" for r in found.next_races)
            first = f" {markdown_text(found.next_races[0].why)}" if found.next_races else ""
            cost = f"{markdown_text(advice.cost)} " if advice.cost else ""
            st.markdown(f"**Next:** {cost}" + (f"Try {links}.{first}" if links else ""))


def show_cards(summary: Summary, run: Run, view: LiveSnapshot, total: int | None) -> None:
    cards = layout.cards(run, view, summary, total)  # once per snapshot for every viewer
    if not cards:
        return
    st.html(CARD_CSS)
    with st.container(key="result_cards"):  # one row of six that CARD_CSS wraps: 3 a row, 2 on a phone
        for column, card in zip(st.columns(len(cards), gap="small"), cards):
            column.metric(
                card.label,
                card.value,
                card.delta,
                card.delta_color,
                help=markdown_text(card.help),  # can hold torch's or a bundle's words (why compile failed)
                border=True,
                delta_arrow=card.delta_arrow,
            )


def show_run(run: Run, view: LiveSnapshot, key: str, present: bool = False) -> None:
    """Words, the race chart, result cards and the other charts for one run, live or finished. What is derived from the
    snapshot (reading, cards, charts ready for the browser) is built once per snapshot however many
    sessions draw it (core.view.run_screen.shared_board). `present`: presenter mode (the words and cards in large
    type, the race and step charts side by side filling the screen, nothing else). A run whose record
    cannot be drawn is one line saying so (common.one_run)."""
    with one_run(run.id):
        _show_run(run, view, key, present)


def _show_run(run: Run, view: LiveSnapshot, key: str, present: bool) -> None:
    params = run.params or {}
    total = sentences.total_steps(params)
    summary = view.summary()  # the stored one when finished; else from the events so far
    if run.status == "failed":
        st.error(f"Run failed: {markdown_text(run.error)}. What was measured before it is kept below.")
    if view.damaged:
        st.warning(f"Part of this run cannot be read: {markdown_text(view.damaged)}. Shown: what can.")
    show_words(run, view, summary, total)
    if run.finished and not present:
        show_answers(run, view, summary)
    note = cadence.watching_note(run)
    if note:
        st.caption(note)  # one core: the open page is part of the measurement
    log = bool(st.session_state.get(f"log_{key}")) and not present  # the toggle below, as last drawn
    built = layout.chart_builders(run, view, summary, present, log_scale=log)
    stamp = layout.chart_stamp(run, view)  # the compile bar's second

    def chart(name):
        return view.derive((name, stamp), lambda: vega_spec(built[name]()))  # converted once per snapshot

    if not built:
        st.caption(layout.WAITING_FOR_STEPS)
        return

    if present:  # the race itself first: at 1280x720 the sentence and both charts fill the first screen
        left, right = st.columns(2)
        draw_chart(left, chart("present_cumulative"))
        draw_chart(right, chart("present_steps"))
        show_cards(summary, run, view, total)
        return
    # The race first, under the sentence that reads it: on a 1280x720 screen or a phone it is on the
    # first screen, with the cards (the same story in numbers) right under it.
    draw_chart(st, chart("cumulative"))
    show_cards(summary, run, view, total)
    if "lead" in built:  # a lead needs both variants at the same step
        draw_chart(st, chart("lead"))
    if "processes" in built:  # the race's processes, a dot each (core.view.process_chart)
        draw_chart(st, chart("processes"))
    left, right = st.columns(2)
    with left:
        st.toggle(
            "Every step, log scale",
            key=f"log_{key}",
            help="The default axis is cut just above the steady steps so their difference shows; "
            "this shows every step in full, the compile step included.",
        )
        draw_chart(st, chart(("step_time", log)))
    draw_chart(right, chart("epochs"))
    left, right = st.columns(2)
    draw_chart(left, chart("loss"))
    agreement = layout.loss_words(view)
    if agreement:
        right.markdown(f"**Loss**: {agreement}")
    if run.finished:
        show_why(summary, view)


def show_why(summary: Summary, view: LiveSnapshot) -> None:
    """Why, per step: each variant's anatomy side by side, the compiles and recompiles with what
    happened, and the compile's phases (forward and backward apart, adding up)."""
    anatomy = why_per_step.anatomy_rows(summary.profile)
    events = why_per_step.compile_event_rows(summary, view.compiles())
    phases = why_per_step.phase_rows(summary)
    if not (anatomy or events or phases):
        return
    st.subheader("Why, per step")
    if anatomy:
        cause = why_per_step.cause_words(summary, view.run.params, view.run.environment)
        if cause:
            st.markdown(f"**{markdown_text(cause)}**")
        reading = why_per_step.profile_words(summary.profile)
        if reading:
            st.caption(markdown_text(reading))
        st.dataframe(anatomy, hide_index=True, width="stretch")
        counted = why_per_step.kernels_counted(summary.profile)
        st.caption(
            "Profiled after the timed epochs, never inside them"
            + (f"; kernels counted here: {markdown_text(counted)}" if counted else "")
            + ". The traces open in Perfetto (ui.perfetto.dev) or chrome://tracing: download them on the Runs page."
        )
        left, right = st.columns(2)
        for column, variant in ((left, "eager"), (right, "compiled")):
            lines = why_per_step.top_kernel_lines(summary.profile, variant)
            if lines:  # as wrapped lines: Inductor's fused kernels' names run past any table cell
                column.markdown(f"**Top kernels, {variant}**")
                column.markdown("\n".join(f"- {markdown_text(line)}" for line in lines))
    left, right = st.columns(2)
    if events:
        recompiles = why_per_step.recompile_count(summary) or 0
        left.markdown(f"**Compiles: {len(events)}, of which recompiles: {recompiles}**")
        story = why_per_step.recompile_story(summary, view.run.params)
        if story:  # each guard in full, wrapped: a table cell would cut it
            left.markdown(markdown_text(story))
        wide = {"what happened": st.column_config.TextColumn(width="large")}
        left.dataframe(events, hide_index=True, width="stretch", column_config=wide)
    if phases:
        right.markdown("**Where the compile went (torch's own timers)**")
        right.dataframe(phases, hide_index=True, width="stretch")
        right.caption(
            "The backward graph compiles at the first backward, after the forward one: each part adds up to its "
            "total, and the two totals to the whole."
        )


def run_file_downloads(run: Run) -> None:
    """The run's files: each variant's profiler trace (Perfetto / chrome://tracing), torch's compile
    trace as a zip, and tlparse's report of it where tlparse is installed. Files are read only when
    a button is pressed. Offered to the run's owner (and an unlocked admin) only: a trace holds the
    box's folders (the data folder, the caches, the Python environment's)."""
    path = store().path
    traces = run_files.profiler_traces(path, run.id)
    trace_size = run_files.compile_trace_size(path, run.id)
    if not traces and not trace_size:
        return
    if run.owner != visitor() and not st.session_state.get("admin_unlocked"):
        st.caption("This run's trace files are offered to whoever ran it: they name the folders of the box it ran on.")
        return
    st.markdown("**Files of this run**")
    columns = st.columns(4)
    for column, trace in zip(columns, traces):
        column.download_button(
            f"{trace.label.capitalize()}, {words.bytes_(trace.size_bytes)}",
            data=lambda p=trace.path: _file_bytes(p),
            file_name=f"compile_lab_run_{run.id}_{os.path.basename(trace.path)}",
            mime="application/json",
            key=f"trace_{run.id}_{trace.label}",
            on_click="ignore",
        )
    if trace_size:
        columns[2].download_button(
            f"Compile trace (TORCH_TRACE), {words.bytes_(trace_size)} before zipping",
            data=lambda: run_files.compile_trace_zip(path, run.id) or b"",
            file_name=f"compile_lab_run_{run.id}_compile_trace.zip",
            mime="application/zip",
            key=f"compile_trace_{run.id}",
            on_click="ignore",
        )
        if run_files.tlparse_available():
            columns[3].download_button(
                "tlparse report (zip: open index.html)",
                data=lambda: run_files.tlparse_report_zip(path, run.id)[0] or b"",
                file_name=f"compile_lab_run_{run.id}_tlparse.zip",
                mime="application/zip",
                key=f"tlparse_{run.id}",
                on_click="ignore",
            )
        else:
            columns[3].caption("tlparse reads the compile trace into an HTML report: pip install tlparse")


def _file_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()
