"""Sweep: one model, one or two axes, a few values each; every point a race in the queue."""

import streamlit as st

from app_pages.common import (
    disk_full_text,
    host_limits,
    store,
    tick,
    training_run_length,
    visitor,
    visitor_address,
    wait_for_device,
)
from core.engine.models.sources import MODELS
from core.engine.spec import SpecError
from core.runs import fleet, queue, sweeps
from core.runs.store import id_from_text
from core.view import answers
from core.view import sweep as view
from core.view.answers import regional_reference_rows
from core.view.race_form import CHOICES, describe_duration, scope_label
from core.view.safe_text import markdown_text
from core.view.sweep import (
    NO_AXIS,
    axis_choices,
    axis_options,
    base_options,
    default_sweep,
    estimate_sweep_seconds,
    form_sweep,
    reset_axis_values,
    sweep_to_state,
    tidy_axes,
    time_limit_points,
)
from core.view.sweep_charts import BREAK_EVEN_TITLE, chart_specs

owner = visitor()
caps = fleet.known_caps(store())
limits = host_limits()  # None (said on the page) when the host's configuration is broken
if limits is None:
    st.stop()
if "sweep_model" not in st.session_state:
    st.session_state.update(sweep_to_state(default_sweep(caps, limits)))

st.title("Sweep: how the payoff moves")
st.caption("One model, one or two axes: every point is a race of its own, queued one after another.")


def followed_sweep() -> int | None:
    """The sweep in the link, else this tab's latest one."""
    wanted = st.query_params.get("sweep") or st.session_state.get("followed_sweep")
    if wanted is None:
        mine = store().list_sweeps(owner=owner, limit=1)
        return mine[0].id if mine else None
    return id_from_text(wanted)


def choose(field: str, label: str, column, fmt=str) -> None:
    """A selectbox offering only what this device (and host) can run with the rest of the form."""
    options = list(axis_options(field, caps, form_sweep(st.session_state).base, limits)) or list(CHOICES[field])
    if st.session_state.get(f"sweep_{field}") not in options:
        st.session_state[f"sweep_{field}"] = options[0]
    # A None choice (no target) reads as "no selection" to Streamlit: its words are the placeholder then,
    # as on the Race form ("no: the steps asked for", not "Choose an option").
    extra = {"placeholder": fmt(None)} if None in options else {}
    column.selectbox(label, options, key=f"sweep_{field}", format_func=fmt, **extra)


with st.expander("Configure a sweep", expanded=followed_sweep() is None):
    axis_errors = tidy_axes(st.session_state, caps, limits)
    swept = {st.session_state.get("sweep_axis1"), st.session_state.get("sweep_axis2")}
    shown = [o for o in base_options() if o.name not in swept]  # an axis' own field is hidden while swept
    # The first row's first box is twice as wide: the model with its size ("pointwise_mlp (0.14 M
    # params)") does not fit a quarter of the form at 1280x720; four to a row after it.
    first = list(st.columns([2, 1, 1])) if shown else []
    rest = len(shown) - len(first)
    columns = iter(first + [column for _ in range(0, max(rest, 0), 4) for column in st.columns(4)])
    for option in shown:
        if option.name == "model":
            choose("model", option.label, next(columns), fmt=lambda m: f"{m} ({MODELS[m].params / 1e6:.2f} M params)")
        elif option.name == "compile_scope":
            choose(
                option.name, option.label, next(columns), lambda s, m=st.session_state.sweep_model: scope_label(s, m)
            )
        elif option.offered is not None:
            choose(option.name, option.label, next(columns), option.choice_labels.get if option.choice_labels else str)
        else:
            next(columns).number_input(option.label, int(option.min), int(option.max), key=f"sweep_{option.name}")
    for i in (1, 2):
        left, right = st.columns([1, 3])
        options = axis_choices() if i == 1 else [NO_AXIS, *axis_choices(st.session_state.sweep_axis1)]
        left.selectbox(f"Axis {i}", options, key=f"sweep_axis{i}", on_change=reset_axis_values,
                       args=(st.session_state, i, caps, limits))  # fmt: skip
        name = st.session_state[f"sweep_axis{i}"]
        if sweeps.whole_numbers(name):
            right.text_input(f"{sweeps.AXES[name][0].capitalize()}s (comma-separated)", key=f"sweep_text{i}")
        elif name != NO_AXIS:
            allowed = axis_options(name, caps, form_sweep(st.session_state).base, limits)
            right.multiselect(f"{sweeps.AXES[name][0].capitalize()} values", allowed, key=f"sweep_values{i}")
        if i in axis_errors:
            right.error(markdown_text(axis_errors[i]))  # it quotes what the visitor typed
    sweep = form_sweep(st.session_state)
    problems = sweeps.sweep_problems(sweep, caps, limits)
    for problem in problems:
        st.error(markdown_text(f"{problem.field.replace('_', ' ')}: {problem.message}"))
    if caps is None:
        st.info("Finding out which device this machine has (a short probe job)… Launch is ready in a moment.")
        wait_for_device()
    launch_col, hint_col = st.columns([1, 4])
    launched = launch_col.button("Launch sweep", type="primary", disabled=bool(problems) or caps is None)
    if not problems:
        low, high = estimate_sweep_seconds(sweep, caps)
        hint_col.caption(f"{len(sweep.points())} races, one after another: {describe_duration(low, high)} (rough).")
        past_limit = time_limit_points(sweep, caps, limits)
        if past_limit:
            st.warning(markdown_text(past_limit))  # the point labels are the sweep's own values

if launched:
    try:
        address = visitor_address(limits)
        sweep_id = sweeps.enqueue_sweep(store(), sweep, owner, limits=limits, caps=caps, address=address)
        st.session_state.followed_sweep = sweep_id
        st.query_params["sweep"] = str(sweep_id)
    except SpecError as exc:
        st.error(markdown_text("; ".join(str(p) for p in exc.problems)))
    except queue.JobError as exc:
        st.error(markdown_text(exc))
    except Exception as exc:  # noqa: BLE001 - a full disk is one line; anything else is raised again
        st.error(disk_full_text(exc))


def gone_text(sweep_id: int) -> str:
    if store().get_sweep(sweep_id) is None:
        return f"Sweep {sweep_id} does not exist: it may have been deleted."
    return f"Sweep {sweep_id} has no points left: they were deleted."


def open_stored() -> None:
    if st.session_state.sweep_open is not None:
        st.session_state.followed_sweep = st.session_state.sweep_open
        st.query_params["sweep"] = str(st.session_state.sweep_open)


stored = {row.id: view.sweep_title(row.id, row.params) for row in store().list_sweeps(limit=50)}
if stored:
    st.selectbox("Open a stored sweep", [None, *stored], format_func=lambda i: stored.get(i, "-"), key="sweep_open",
                 on_change=open_stored)  # fmt: skip
followed = followed_sweep()
found = sweeps.stored_sweep(store(), followed) if followed is not None else None
polling = found is not None and sweeps.sweep_running(found[1])


@st.fragment(run_every=1.0 if polling else None)
def live(sweep_id: int) -> None:
    tick()
    row = store().get_sweep(sweep_id)  # read once: the sweep may be deleted while it is followed
    found = sweeps.stored_sweep(store(), sweep_id) if row is not None else None
    if found is None or not found[1]:
        if polling:
            st.rerun()  # stop polling: the page redraws without this sweep
        st.info(gone_text(sweep_id))
        return
    sweep, runs = found
    if polling and not sweeps.sweep_running(runs):
        st.rerun()  # stop polling: redraw once with every point final
    running = sweeps.sweep_running(runs)
    top, cancel_col = st.columns([5, 1]) if running else (st.container(), None)  # the whole width once finished
    state = view.sweep_state(store(), runs, shown=markdown_text)
    top.progress(min(sweeps.sweep_progress(runs), 1.0), text=f"Sweep #{sweep_id}: {state}")
    me = visitor()
    if cancel_col is not None and row.owner == me:
        if cancel_col.button("Cancel sweep", key=f"cancel_sweep_{sweep_id}"):
            try:
                sweeps.cancel_sweep(store(), sweep_id, me)
            except queue.JobError as exc:  # deleted meanwhile
                st.error(markdown_text(exc))
                return
            st.rerun()
    frame = view.sweep_frame(sweep, runs, store())
    widths = {name: st.column_config.TextColumn(width=width) for name, width in view.POINT_COLUMN_WIDTHS.items()}
    st.dataframe(view.points_table(frame), hide_index=True, width="stretch", column_config=widths)
    for reading in view.regime_readings(sweep, frame):
        st.markdown(f"**Regime:** {reading}")
    for reading in view.ladder_readings(sweep, runs):  # it quotes torch's errors: text, never markdown
        st.markdown(f"**Backend ladder:** {markdown_text(reading)}")
    nxt = answers.sweep_next(view.measured_points(frame), runs) if not sweeps.sweep_running(runs) else None
    if nxt is not None:  # why its best point reads so, and what to try next here, with the link that launches it
        if nxt.why:
            st.markdown(f"**Why ({markdown_text(nxt.point)}):** {markdown_text(nxt.why)}")
        link = f" Try [{markdown_text(nxt.race.label)}]({nxt.race.link})." if nxt.race else ""
        st.markdown(f"**Next:** {markdown_text(nxt.text)}{link}")
    note = view.break_even_note(frame)
    for column, spec in zip(st.columns(2) * 2, chart_specs(sweep, frame)):
        if spec is None:  # no point has a break-even to draw: its place says why instead of an empty chart
            column.markdown(f"**{BREAK_EVEN_TITLE}**")
            column.caption(note or "")
            note = None
        else:
            column.vega_lite_chart(spec=spec, width="stretch")
    st.caption(note or "")
    comparison = view.scope_comparison(sweep, frame)
    if comparison:
        st.markdown("**Whole vs regional compile, side by side**")
        st.dataframe(comparison, hide_index=True, width="stretch")
    if sweeps.sweep_finished(runs) and frame["measured"].any():
        st.subheader("Plan your training")
        st.caption("Each measured point over your run's length: compile included, with the interval of its race.")
        st.dataframe(view.plan_rows(frame, runs, training_run_length(f"sweep_{sweep_id}")), hide_index=True)


if found is not None:
    live(followed)
elif followed is not None and store().get_sweep(followed) is not None:
    st.error(f"Sweep {followed} cannot be read: its stored definition is damaged.")
elif followed is not None:
    st.info(gone_text(followed))
else:
    st.info("Choose the axes and press Launch sweep. Each point runs as a race in a background worker.")
st.markdown("**Whole vs regional compile, published figures for scale**")
st.dataframe(regional_reference_rows(), hide_index=True, width="stretch")
