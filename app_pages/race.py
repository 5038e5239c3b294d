"""Race: configure a run, launch it in a background worker, watch it live."""

import streamlit as st

from app_pages.common import run_view, show_reference, show_run, store, tick, visitor, wait_for_device
from app_pages.model_picker import model_picker
from core.engine.spec import SpecError, validate
from core.runs import jobs
from core.runs.limits import load_host_limits
from core.view.race_form import (
    CHOICES,
    CPU_BREAK_EVEN_PRESET,
    default_spec,
    describe_duration,
    duration_note,
    estimate_seconds,
    form_spec,
    spec_from_query,
    spec_to_query,
    unavailable_options,
)

owner = visitor()
caps = jobs.known_caps(store())
limits = load_host_limits()
NUMBERS = {
    "batch_size": ("Batch size", 1, 65536),
    "epochs": ("Epochs", 1, 1000),
    "steps_per_epoch": ("Steps per epoch", 1, 100000),
}


def set_form(values: dict) -> None:
    for name, value in values.items():
        st.session_state[f"form_{name}"] = value


if (
    "form_batch_size" not in st.session_state
):  # first render (a widget key: it goes when widget state does): the link over the defaults
    initial, notes = spec_from_query(dict(st.query_params), default_spec(caps))
    set_form(initial.to_dict())
    for note in notes:
        st.warning(note)

st.title("Eager vs torch.compile: the race")
st.caption("Same model, same weights, same batches. Only torch.compile differs.")


def followed_run():
    """The run this page shows: the one in the link (reload, second tab), else this tab's latest."""
    followed = st.query_params.get("run") or st.session_state.get("followed")
    if followed is None:
        mine = store().list_runs(kind="race", owner=owner, limit=1)
        followed = mine[0].id if mine else None
    if not (followed and str(followed).isdigit() and int(followed) < 2**63):
        return None  # not a run id (a hand-edited link): show the form alone
    return store().get_run(int(followed))


def choose(field: str, label: str, column, fmt=str, on_change=None) -> None:
    """A selectbox offering only what this device can run; the rest is named with the reason."""
    blocked = unavailable_options(form_spec(st.session_state), field, caps, limits)
    options = [o for o in CHOICES[field] if o not in blocked] or list(CHOICES[field])
    if st.session_state.get(f"form_{field}") not in options:
        st.session_state[f"form_{field}"] = options[0]
    column.selectbox(label, options, format_func=fmt, key=f"form_{field}", on_change=on_change)
    if blocked:
        column.caption("Not here: " + "; ".join(why.split(";")[0] for why in blocked.values()))


with st.expander("Configure a race", expanded=followed_run() is None):
    a, b, c, d = st.columns(4)
    model_problems = model_picker(a, limits)
    choose("precision", "Precision", b)
    choose("mode", "Compile mode", c)
    choose("backend", "Backend", d)
    columns = st.columns(5)
    for column, (name, (label, low, high)) in zip(columns, NUMBERS.items()):
        column.number_input(label, low, high, key=f"form_{name}")
    choose("data", "Data", columns[3])
    choose("cache", "Inductor cache", columns[4])
    spec = form_spec(st.session_state)
    st.query_params.from_dict(
        {**spec_to_query(spec), **({"run": st.query_params["run"]} if "run" in st.query_params else {})}
    )

    problems = model_problems + [p for p in validate(spec, caps) + limits.problems(spec) if p not in model_problems]
    for problem in problems:
        st.error(f"{problem.field.replace('_', ' ')}: {problem.message}")
    if caps is None:
        st.info("Finding out which device this machine has (a short probe job)… Launch is ready in a moment.")
        wait_for_device()
    launch_col, hint_col, preset_col = st.columns([1, 3, 1])
    launched = launch_col.button("Launch", type="primary", disabled=bool(problems) or caps is None, width="stretch")
    hint_col.caption(f"Estimated duration: {describe_duration(*estimate_seconds(spec, caps))} (rough).")
    if duration_note(spec):
        hint_col.caption(duration_note(spec))
    if not (caps and caps.cuda):
        preset_col.button(
            "CPU break-even preset",
            on_click=set_form,
            args=(CPU_BREAK_EVEN_PRESET,),
            help="pointwise_mlp, 3 x 500 steps: on 2 CPU cores compile pays for itself around step 1,000 (about 4 min).",
        )

if launched:
    try:
        run_id = jobs.enqueue(store(), spec, owner, limits=limits, caps=caps)
        st.session_state.followed = run_id
        st.query_params["run"] = str(run_id)
    except SpecError as exc:
        st.error("; ".join(str(p) for p in exc.problems))
    except jobs.JobError as exc:
        st.error(str(exc))

run = followed_run()
polling = run is not None and not run.finished


@st.fragment(run_every=1.0 if polling else None)
def live(run_id: int) -> None:
    tick()
    run = store().get_run(run_id)
    if run is None:
        st.info(f"Run {run_id} no longer exists.")
        return
    if polling and run.finished:
        st.rerun()  # stop polling: redraw the page once with the final result
    top, cancel_col = st.columns([5, 1])
    top.progress(min(max(run.progress, 0.0), 1.0), text=f"Run #{run.id}: {jobs.describe(store(), run)}")
    me = visitor()  # read here: the tab's identity can arrive after the page first ran
    if not run.finished and run.owner == me and cancel_col.button("Cancel", key=f"cancel_{run.id}"):
        jobs.cancel(store(), run.id, me)
        st.rerun()
    show_run(run, run_view(run), key="live")
    if run.finished:
        show_reference()


if run is not None:
    live(run.id)
else:
    st.info("Choose a configuration and press Launch. The race runs in a background worker; this page follows it live.")
    show_reference()
