"""One race drawn by Streamlit, live or finished (the Race page and a run reopened on the Runs
page): what is happening in words (a finished race: its one verdict line), the result cards and the
race chart, a finished race's answers in short lines, then the other charts. UI only;
what it shows, and when, is core.view.run_screen's (the plan in its layout module)."""

from __future__ import annotations

import os

import streamlit as st

from app_pages.common import draw_chart, one_run, store, vega_spec, visitor
from core.engine import words
from core.engine.summary import Summary
from core.runs import race_script, run_files
from core.runs.store import Run
from core.view import answers
from core.view.compare import run_name
from core.view.run_screen import layout, sentences, why_per_step
from core.view.run_screen.layout import Card
from core.view.run_screen.shared_board import LiveSnapshot, watching_note
from core.view.safe_text import markdown_text

# Compact cards: the four a race leads with in one row on a wide screen, two a row on a phone (Streamlit
# would stack them), with a smaller value font and labels that wrap instead of being cut, so the
# verdict, the cards and the race chart are on the first screen on both. The cards after the chart
# (throughput, memory: key result_cards_more) look the same.
CARD_CSS = """<style>
[class*="st-key-result_cards"] [data-testid="stHorizontalBlock"] { flex-direction: row; flex-wrap: wrap; gap: 0.6rem; }
[class*="st-key-result_cards"] [data-testid="stColumn"] {
  flex: 1 1 calc(25% - 0.6rem) !important; min-width: calc(25% - 0.6rem) !important;
}
[class*="st-key-result_cards"] [data-testid="stMetric"] { padding: 0.1rem 0.2rem; }
[class*="st-key-result_cards"] [data-testid="stMetric"] > div { padding: 0.45rem 0.6rem; }
[class*="st-key-result_cards"] [data-testid="stMetricValue"] { font-size: 1.6rem; }
[class*="st-key-result_cards"] [data-testid="stMetricDelta"] p { font-size: 0.8rem; }
[class*="st-key-result_cards"] [data-testid="stMetricValue"] * { white-space: normal; text-overflow: clip; }
[class*="st-key-result_cards"] [data-testid="stMetricLabel"] p,
[class*="st-key-result_cards"] [data-testid="stMetricDelta"] p { white-space: normal; overflow: visible; text-overflow: clip; }
[class*="st-key-result_cards"] [data-testid="stMetricDelta"] { height: auto; }
@media (max-width: 640px) {
  [class*="st-key-result_cards"] [data-testid="stColumn"] {
    flex: 1 1 calc(50% - 0.6rem) !important; min-width: calc(50% - 0.6rem) !important;
  }
  [class*="st-key-result_cards"] [data-testid="stMetric"] { padding: 0; }
  [class*="st-key-result_cards"] [data-testid="stMetricValue"] { font-size: 1.25rem; }
  [class*="st-key-result_cards"] [data-testid="stMetricLabel"] p { font-size: 0.8rem; }
}
</style>"""
# Presenter mode: a 1920x1080 screen (or a 1280x720 projector) read from the back of a room, in
# either theme (sizes only, colours stay the theme's): no sidebar, toolbar or header band (empty here,
# it covered the first line of the page once scrolled); the verdict in headline type, the four lead
# cards in one row, and the two charts below them as tall as the screen leaves. Type grows with the
# screen's height (vh: at 1080 px the card labels are 29 px, the verdict 41 px, every other word at
# least 24 px; at 720 px two thirds of that), so the charts' box, the viewport's height less what
# is above and below them (PRESENT_CHROME: a fixed part and a part that grows with the type), fills
# the screen at any height; the charts' own fonts are core.view.race_charts.PRESENTER_FONTS. The card
# sizes are !important: CARD_CSS, drawn later with the cards, would otherwise win (caught by the e2e).
PRESENT_CHROME = "130px - 27.8vh"
PRESENTER_CSS = """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stToolbar"],
[data-testid="stHeader"] { display: none; }
[data-testid="stMainBlockContainer"] { padding: 0.75rem 2rem 0.5rem; max-width: 100%; }
[data-testid="stMarkdownContainer"] p, [data-testid="stAlertContainer"] p { font-size: max(2.6vh, 16px); line-height: 1.3; }
.st-key-verdict [data-testid="stMarkdownContainer"] p { font-size: max(3.8vh, 22px); line-height: 1.2; }
[data-testid="stProgress"] p { font-size: max(2.6vh, 16px); }
.st-key-replay_note [data-testid="stAlertContainer"] p { font-size: max(2.3vh, 16px); }
@media (min-width: 641px) { div[class*="st-key-result_cards"] [data-testid="stColumn"] {
  flex: 1 1 calc(25% - 0.6rem) !important; min-width: calc(25% - 0.6rem) !important;
} }
[class*="st-key-result_cards"] [data-testid="stMetricValue"],
[class*="st-key-result_cards"] [data-testid="stMetricValue"] p { font-size: max(4.8vh, 26px) !important; line-height: 1.15; }
[class*="st-key-result_cards"] [data-testid="stMetricValue"] * { white-space: normal !important; text-overflow: clip !important; }
[class*="st-key-result_cards"] [data-testid="stMetricLabel"] p { font-size: max(2.7vh, 16px) !important; line-height: 1.25; }
[class*="st-key-result_cards"] [data-testid="stMetricDelta"] p { font-size: max(2.6vh, 15px) !important; line-height: 1.3; }
.st-key-present_charts [data-testid="stVegaLiteChart"] { height: max(calc(100vh - CHROME), 280px) !important; }
.st-key-leave_present button p { font-size: max(2.3vh, 16px) !important; }
</style>""".replace("CHROME", PRESENT_CHROME)
# The Race page's first screen (not presenter mode): less room above the title and a smaller title,
# so a finished race's verdict, cards and race chart are above the fold at 1280x720. On a phone the
# title takes two lines.
PHONE_TITLE_CSS = """<style>
[data-testid="stMainBlockContainer"] { padding-top: 3rem; }
[data-testid="stHeading"] h1 { font-size: 2rem; padding-top: 0.25rem; }
.st-key-present_button { padding-top: 0.75rem; }
@media (max-width: 640px) { [data-testid="stHeading"] h1 { font-size: 1.6rem; } }
</style>"""


def expected_compile_s(run: Run) -> tuple[float | None, bool]:
    """About how long this run's compile takes here (core.view.run_screen.layout.expected_compile), once
    per run for this session."""
    cache = st.session_state.setdefault("expected_compile", {})
    if run.id not in cache:
        cache[run.id] = layout.expected_compile(store(), run)
    return cache[run.id]


def show_words(run: Run, view: LiveSnapshot, summary: Summary, total: int | None) -> None:
    """What is happening now, or a finished race's one verdict line (core.view.run_screen.layout.headline)."""
    words = layout.headline(run, view, summary, total, lambda: expected_compile_s(run), quote=markdown_text)
    if words is None:
        return
    if words.compiling:
        st.info(words.text, icon=":material/hourglass_top:")
    else:
        with st.container(key="verdict"):
            st.markdown(f"**{words.text}**")


def show_answers(run: Run, view: LiveSnapshot, summary: Summary, total: int | None, key: str) -> None:
    """Under the race chart: why (the cause), the recompiles, the cache and what to try next, one
    short line each, Next with links that fill the Race form (core.view.run_screen.layout); the
    reading and every answer in full one click away, in the expander under them (core.view.answers)."""
    found = view.derive(
        "answers",
        lambda: answers.finished_answers(summary, run.params, run.environment, (run.details or {}).get("compile")),
    )
    with st.container(key=f"answers_{run.id}"):
        for line in view.derive("short_lines", lambda: layout.short_lines(found, summary)):
            links = " · ".join(f"[{markdown_text(label)}]({link})" for label, link in line.links)
            st.markdown(f"**{line.head}:** {markdown_text(line.text)}" + (f" {links}." if links else ""))
        with st.expander(layout.DETAILS_LABEL, key=f"details_{key}_{run.id}"):
            full = layout.finished_reading(run, view, summary, total, quote=markdown_text)
            if full:
                st.markdown(f"**Reading:** {full}")
            for head, text in layout.full_lines(found):
                st.markdown(f"**{head}:** {markdown_text(text)}")
            if found.next_races:
                links = " · ".join(f"[{markdown_text(r.label)}]({r.link})" for r in found.next_races)
                st.markdown(f"**Next:** Try {links}. {markdown_text(found.next_races[0].why)}")


def show_cards(cards: list[Card], key: str) -> None:
    """Cards as metrics, in one row that CARD_CSS wraps (four a row, two on a phone)."""
    if not cards:
        return
    st.html(CARD_CSS)
    with st.container(key=key):
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
    """Words, result cards, the race chart and the other charts for one run, live or finished: a
    finished race leads with its verdict line, the four lead cards and the race chart, then its
    answers in short lines. What is derived from the snapshot (reading, cards, charts ready for the
    browser) is built once per snapshot however many sessions draw it
    (core.view.run_screen.shared_board). `present`: presenter mode (the verdict and the four cards in
    large type, the race and step charts side by side filling the screen, nothing else). A run whose
    record cannot be drawn is one line saying so (common.one_run)."""
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
    note = watching_note(run)
    if note:
        st.caption(note)  # one core: the open page is part of the measurement
    log = bool(st.session_state.get(f"log_{key}")) and not present  # the toggle below, as last drawn
    built = layout.chart_builders(run, view, summary, present, log_scale=log)
    stamp = layout.chart_stamp(run, view)  # the compile bar's second

    def chart(name):
        return view.derive((name, stamp), lambda: vega_spec(built[name]()))  # converted once per snapshot

    if not built:
        st.caption(layout.WAITING_FOR_STEPS)
        if run.finished and not present:
            show_answers(run, view, summary, total, key)
        return
    lead, more = layout.split_cards(layout.cards(run, view, summary, total))  # once per snapshot for every viewer
    if present:  # the verdict, the four cards, then the race and the step times filling the screen
        show_cards(lead, "result_cards")
        with st.container(key="present_charts"):
            left, right = st.columns(2)
            draw_chart(left, chart("present_cumulative"))
            draw_chart(right, chart("present_steps"))
        return
    # Finished: the verdict, the four cards and the race chart on the first screen (1280x720, a
    # phone), then the answers in short lines; live: the race first, its cards filling in under it.
    if layout.cards_before_chart(run):
        show_cards(lead, "result_cards")
        draw_chart(st, chart("cumulative"))
    else:
        draw_chart(st, chart("cumulative"))
        show_cards(lead, "result_cards")
    if run.finished:
        show_answers(run, view, summary, total, key)
    show_cards(more, "result_cards_more")
    if "lead" in built:  # a lead needs both variants at the same step
        draw_chart(st, chart("lead"))
    if "processes" in built:  # the race's processes, a dot each (core.view.race_charts)
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


def hand_on_downloads(run: Run, key: str) -> None:
    """A finished race handed on: as one Python script that needs only torch, and as a report ready
    to file with PyTorch (the script, versions, the backend ladder's command, and its TORCH_TRACE for
    whoever ran it: a trace names the box's folders). Each is built when its button is pressed."""
    if run.kind != "race" or run.status not in ("done", "failed"):
        return
    left, right = st.columns(2)
    problem = race_script.script_problem(run)
    if problem is None:
        left.download_button(
            "The race as one script (.py)",
            data=lambda: race_script.script_for_run(run, "Compile Lab's download of this race"),
            file_name=f"compile_lab_race_{run.id}.py",
            mime="text/x-python",
            key=f"race_script_{key}_{run.id}",
            on_click="ignore",
            help="Builds the same model and races eager against torch.compile as this race did; needs only torch.",
        )
    else:
        left.caption(f"No script of {run_name(run.id)}: {markdown_text(problem)}")
    if race_script.script_problem(run, scriptable=False) is None:
        whose = run.owner == visitor() or bool(st.session_state.get("admin_unlocked"))
        right.download_button(
            "Report for a PyTorch issue (zip)",
            data=lambda: race_script.report_zip(store().path, run, with_trace=whose),
            file_name=f"compile_lab_race_{run.id}_report.zip",
            mime="application/zip",
            key=f"race_report_{key}_{run.id}",
            on_click="ignore",
            help="report.md laid out as PyTorch's torch.compile issue template asks, the script, and the race's "
            "TORCH_TRACE where it was traced (offered to whoever ran it).",
        )


def _file_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()
