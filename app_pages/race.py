"""Race: configure a run, launch it in a background worker, watch it live."""

import streamlit as st

from app_pages.common import (
    board,
    disk_full_text,
    host_limits,
    lanes_readying,
    plan_section,
    session_id,
    show_reference,
    store,
    tick,
    visitor,
    visitor_address,
    wait_for_device,
)
from app_pages.device_races import chosen_pin, compared_ids, device_type_chooser, every_gpu_type_button, show_comparison
from app_pages.model_picker import model_picker
from app_pages.replay_panel import active_replay, replay_picker, show_replay
from app_pages.run_screen.feed import show_live_feed, use_feed
from app_pages.run_screen.show import PHONE_TITLE_CSS, PRESENTER_CSS, hand_on_downloads, show_run
from core.engine.race_estimates import duration_note
from core.engine.spec import Option, SpecError, validate
from core.engine.summary import BUSY
from core.runs import device_history, fleet, queue
from core.runs.limits import HostLimits
from core.runs.store import id_from_text
from core.runs.store.records import unreadable_runs_text
from core.view.race_form import (
    CHOICES,
    CPU_BREAK_EVEN_HELP,
    CPU_BREAK_EVEN_LABEL,
    CPU_BREAK_EVEN_PRESET,
    DEMO_LEAD,
    MORE_SETTINGS,
    STORY,
    default_spec,
    first_screen,
    fit_to_device,
    form_help,
    form_spec,
    link_base,
    link_configures,
    missing_run_text,
    more_settings,
    notes_still_true,
    number_help,
    number_range,
    race_promise,
    row_widths,
    scope_label,
    shared_result_text,
    spec_from_query,
    spec_to_query,
    split_unavailable,
    time_limit_note,
    unavailable_options,
    unavailable_summary,
    within_limits,
)
from core.view.race_form import rows as layout_rows
from core.view.run_screen import layout
from core.view.run_screen.shared_board import VIEWER_REFRESH_S, refresh_s, viewer_refresh_s, yield_to_measurements
from core.view.safe_text import markdown_text

owner = visitor()
caps = fleet.known_caps(store())
readying = lanes_readying(caps)  # a freshly started app's warm servers, still importing torch
limits = host_limits()  # None (said on the page) when the host's configuration is broken


def set_form(values: dict) -> None:
    for name, value in values.items():
        st.session_state[f"form_{name}"] = value


# First render (a widget key: it goes when widget state does, so a reload re-seeds the form): the
# link's configuration over the device's defaults.
if "form_batch_size" not in st.session_state:
    first = within_limits(default_spec(caps), limits)  # a first visit is offered a race this host runs
    asked = id_from_text(st.query_params.get("run", ""))
    linked = store().get_run(asked) if asked is not None else None  # a run's link: the form takes its configuration
    first = link_base(dict(st.query_params), linked, first)
    initial, st.session_state.link_notes = spec_from_query(dict(st.query_params), first, limits)
    set_form(initial.to_dict())
moved, device_notes = fit_to_device(form_spec(st.session_state), caps, limits)  # what this device cannot run
if moved:
    set_form(moved)
    st.session_state.link_notes = [*st.session_state.get("link_notes", []), *device_notes]
for note in notes_still_true(st.session_state.get("link_notes", []), st.session_state):  # until the field changes
    st.warning(markdown_text(note.text))


def set_presenting(on: bool) -> None:
    if on:
        st.query_params["present"] = "1"
    else:
        st.query_params.pop("present", None)


# Presenter mode (?present=1, or the toggle): for a projector, one run in focus in large type.
present = st.query_params.get("present") in ("1", "true")
if present:
    st.html(PRESENTER_CSS)
else:
    st.html(PHONE_TITLE_CSS)
    title_col, present_col = st.columns([4, 1], vertical_alignment="bottom")
    title_col.title("Eager vs torch.compile: the race")
    present_col.button(
        "Presenter mode",
        on_click=set_presenting,
        args=(True,),
        icon=":material/present_to_all:",
        width="stretch",
        key="present_button",
        help="For a projector: configuration and sidebar hidden, one run in focus, the verdict and cards in large "
        "type, the race and step charts filling the screen. The link (?present=1) opens it directly.",
    )


def follow(run_id: int) -> None:
    st.session_state.followed = run_id
    st.query_params["run"] = str(run_id)
    st.query_params.pop("compare", None)  # one run, not the comparison of Race on every GPU type
    st.session_state.link_pending = (str(run_id), True)  # until the browser's own link names it (settle_link)
    st.session_state.race_form = False  # fold the form: the run's charts on the first screen


def settle_link() -> None:
    """Keep ?run=N of a run this tab just followed (Launch, Show it) in the link until the browser
    reports it back. A rerun the browser asked for before it heard of the new link (a fragment's
    timer, a click in the same instant) carries the old query string, and every same-page rerun
    starts from the browser's query string: without this, that rerun's page wrote the link back
    without the run, and a reload showed another run. Once a later rerun arrives with it, the link
    is the browser's again (its Back button included)."""
    pending = st.session_state.get("link_pending")
    if pending is None:
        return
    run_id, fresh = pending
    if "replay" in st.query_params or (not fresh and st.query_params.get("run") == run_id):
        del st.session_state.link_pending  # a replay took the page, or the browser's link has the run
        return
    st.session_state.link_pending = (run_id, False)
    if st.query_params.get("run") != run_id:
        st.query_params["run"] = run_id
        st.query_params.pop("compare", None)  # a stale rerun's comparison link: the run was followed after it


settle_link()


def followed_run():
    """The run this page shows: the one in the link (reload, second tab), else this tab's latest."""
    followed = st.query_params.get("run") or st.session_state.get("followed")
    if followed is None:
        mine = store().list_runs(kind="race", owner=owner, limit=1)
        followed = mine[0].id if mine else None
    run_id = id_from_text(followed)
    if run_id is None:
        return None  # not a run id (a hand-edited link): show the form alone
    run = store().get_run(run_id)
    return run if run is not None and run.kind == "race" else None  # a lookup's error is its asker's alone


def choose(field: str, label: str, column, fmt=str, on_change=None, help_text: str | None = None) -> dict:
    """A selectbox offering only what this device can run; returns the options left out, with why."""
    blocked = unavailable_options(form_spec(st.session_state), field, caps, limits)
    options = [o for o in CHOICES[field] if o not in blocked] or list(CHOICES[field])
    if st.session_state.get(f"form_{field}") not in options:
        st.session_state[f"form_{field}"] = options[0]
    # A None choice (auto) reads as "no selection" to Streamlit: its words are the placeholder then.
    extra = {"placeholder": fmt(None)} if None in options else {}
    column.selectbox(label, options, format_func=fmt, key=f"form_{field}", on_change=on_change, help=help_text, **extra)
    return blocked


def widget(option: Option, column):
    """The option's widget in `column`, as its row in the options table says. Returns the choices
    left out, with why (the model picker: the model's problems; a number or a checkbox: None)."""
    name, help_text = option.name, form_help(option)
    if name == "model":
        return model_picker(column, limits or HostLimits(), help_text)  # a broken host configuration is said above
    if name == "compile_scope":
        scope = lambda s, m=st.session_state.form_model: scope_label(s, m)  # noqa: E731
        return choose(name, option.label, column, fmt=scope, help_text=help_text)
    if option.offered is not None:
        words = option.choice_labels.get if option.choice_labels else str
        return choose(name, option.label, column, fmt=words, help_text=help_text)
    if option.type is bool:
        column.checkbox(option.label, key=f"form_{name}", help=help_text)
    else:  # no bounds in the browser: it would keep the last value in range and say nothing
        low, high, by_host = number_range(name, limits)
        column.number_input(option.label, step=1, key=f"form_{name}", help=number_help(option, low, high, by_host))
    return None


def draw_rows(options: list[Option], blocked: dict) -> None:
    """The options' widgets, row by row as their table rows place them (core.view.race_form)."""
    for row, placed in layout_rows(options).items():
        columns = st.columns(row_widths(row, placed))
        for option in placed:
            blocked[option.name] = widget(option, columns[option.form[1]])


def fold_and_launch(preset: dict | None = None) -> None:
    """Launch (or the preset's button): enqueue the form's race and fold the form away, so the run's
    charts are on the first screen. Runs as the button's callback, before the page redraws. While
    the queue is long, a host may show the same race finished recently instead (shared_results)."""
    if preset:  # the whole demo, not the preset's fields over whatever the form held (amp, another mode...)
        set_form({**default_spec(caps).to_dict(), **preset})
    spec = form_spec(st.session_state)
    if limits is None:
        return  # the broken host configuration is said on the page
    try:
        problems = validate(spec, caps) + (limits.problems(spec) if limits else [])
        if problems:
            raise SpecError(problems)
        pin = chosen_pin(spec, caps)  # the fleet's device type chosen in the form: its host and lane
        offer = device_history.recent_result(store(), spec, caps, limits.reuse_within_s, **pin) if caps else None
        if offer is not None and device_history.reuse_automatically(store(), offer, limits):
            st.session_state.reuse_note = (offer.id, shared_result_text(offer))
            follow(offer.id)
            return
        run_id = queue.enqueue(store(), spec, owner, limits=limits, caps=caps, address=visitor_address(limits), **pin)
    except SpecError as exc:
        st.session_state.launch_error = "; ".join(str(p) for p in exc.problems)
        return
    except queue.JobError as exc:
        st.session_state.launch_error = str(exc)
        return
    except Exception as exc:  # noqa: BLE001 - a full disk is one line; anything else is raised again
        st.session_state.launch_error = disk_full_text(exc)
        return
    follow(run_id)


if not present:  # presenter mode: one run in focus, no configuration
    if "race_form" not in st.session_state:
        st.session_state.race_form = followed_run() is None or link_configures(dict(st.query_params))
    if st.session_state.race_form:  # the promise, over the form; a run shown leads with its verdict instead
        st.caption("Same model, same weights, same batches. Only torch.compile differs.")
    with st.expander("Configure a race", key="race_form", on_change="rerun"):
        st.markdown(STORY)
        on_cpu = not (caps and caps.cuda)
        if on_cpu:  # the story first: the demo shows compile paying off; the default race may not
            with st.container(horizontal=True, vertical_alignment="center"):
                st.markdown(DEMO_LEAD)
                st.button(
                    CPU_BREAK_EVEN_LABEL,
                    type="primary",
                    on_click=fold_and_launch,
                    args=(CPU_BREAK_EVEN_PRESET,),
                    disabled=caps is None or readying or limits is None,
                    help=CPU_BREAK_EVEN_HELP,
                    key="demo",
                )
        blocked = {}
        draw_rows(first_screen(), blocked)
        launch_area = st.container()  # drawn once every field is known, above More settings
        with st.expander(MORE_SETTINGS):
            draw_rows(more_settings(), blocked)
            more_note = st.empty()
    model_problems = blocked.pop("model")
    first_blocked, more_blocked = split_unavailable({name: why for name, why in blocked.items() if why is not None})
    if unavailable_summary(more_blocked):
        more_note.caption(unavailable_summary(more_blocked))
    with launch_area:
        spec = form_spec(st.session_state)
        kept = {k: st.query_params[k] for k in ("run", "replay", "speed", "present", "compare") if k in st.query_params}
        # The form's fields and what is shown; a replay's link names only the replay, so it never
        # reads as another model's configuration (the form's stay in the form).
        form_fields = {} if "replay" in kept else spec_to_query(spec)
        st.query_params.from_dict({**form_fields, **kept})
        not_here = unavailable_summary(first_blocked)
        if not_here:
            st.caption(not_here)

        problems = model_problems + [
            p for p in validate(spec, caps) + (limits.problems(spec) if limits else []) if p not in model_problems
        ]
        for problem in problems:
            st.error(f"{problem.field.replace('_', ' ')}: {markdown_text(problem.message)}")  # can quote a typed name
        if caps is None:
            st.info("Finding out which device this machine has (a short probe job)… Launch is ready in a moment.")
            wait_for_device()
        elif readying:
            st.info(
                "Getting the race process ready (torch imported once, in the background)… Launch is ready in a moment."
            )
            wait_for_device()
        pin = device_type_chooser(spec, caps)  # in a fleet with GPUs: which type ({} any, or no fleet)
        offer = None  # the same race, finished recently on this device: shown at once instead of measured again
        if limits is not None and caps is not None and not problems:
            offer = device_history.recent_result(store(), spec, caps, limits.reuse_within_s, **pin)
        if offer is not None:
            st.info(f"{markdown_text(shared_result_text(offer))}: show it, or measure again with Launch.")
            st.button("Show it", key="show_shared", on_click=follow, args=(offer.id,))
        estimate = device_history.race_estimate(store(), spec, caps, **pin)
        st.markdown(race_promise(spec, caps, estimate))
        if time_limit_note(estimate, limits):
            st.warning(time_limit_note(estimate, limits))
        if duration_note(spec):
            st.caption(duration_note(spec))
        blocked_launch = bool(problems) or caps is None or readying or limits is None
        st.button(
            "Launch",
            type="secondary" if on_cpu else "primary",
            disabled=blocked_launch,
            on_click=fold_and_launch,
            key="launch",
        )
        every_gpu_type_button(owner, limits, disabled=blocked_launch)

if "launch_error" in st.session_state:
    st.error(st.session_state.pop("launch_error"))  # this app's own words, values from the checked form

run = followed_run()
polling = run is not None and not run.finished
if run is None and "run" in st.query_params:  # a link to a run this page cannot show: say so
    asked = id_from_text(st.query_params["run"])
    if asked in store().unreadable_runs:  # its row is on a damaged page of the store's file
        st.warning(markdown_text(unreadable_runs_text({asked}, store().path)))
    else:
        st.warning(markdown_text(missing_run_text(st.query_params["run"], asked)))


def refresh_every(run, me: str, counts: dict | None) -> float:
    """How often this tab's live view refreshes: every second for the run's owner; for a viewer the
    same, until the audience is large enough that the server would fall behind
    (core.view.run_screen.shared_board.viewer_refresh_s: 50 viewers, every 1.5 s). While steps are
    timed and drawn, every 3 s at the most for everyone (core.view.run_screen.shared_board: watching costs
    the race); `counts`: the steps the view has of each variant."""
    timed = refresh_s(run, counts)
    if run.owner == me:
        return max(VIEWER_REFRESH_S, timed)
    return max(viewer_refresh_s(board().audience(run.id), st.session_state.get("live_every")), timed)


def drawn_counts(run_id: int) -> dict | None:
    snap = board().snapshot(run_id)  # the shared one
    return snap.counts() if snap is not None else None


every = refresh_every(run, owner, drawn_counts(run.id)) if polling else VIEWER_REFRESH_S
st.session_state.live_every = every


@st.fragment(run_every=every if polling else None)
def live(run_id: int) -> None:
    tick()
    me = visitor()  # read here: the browser's identity can arrive after the page first ran
    snap = board().snapshot(run_id, follower=session_id())  # shared by every viewer of this run in this process
    if snap is not None and snap.run.owner == me:
        snap = board().snapshot(run_id, fresh=True)  # the owner's view reads the store every refresh
    if snap is None:
        st.info(f"Run {run_id} no longer exists.")
        return
    run = snap.run
    if polling and run.finished:
        st.rerun()  # stop polling: redraw the page once with the final result
    if polling and refresh_every(run, me, snap.counts()) != every:
        st.rerun()  # the audience or the race's phase moved past a step: redraw the page at the new interval
    if polling:
        yield_to_measurements()  # the rest of this refresh (the owner's too) runs after the race being measured
    note = st.session_state.get("reuse_note")
    if note and note[0] == run.id:
        st.info(f"The queue is long, so this host shows the same race: {markdown_text(note[1])}.")
    # Beside a Cancel button while it runs; the whole width once finished (nothing to cancel).
    top, cancel_col = (st.container(), None) if run.finished else st.columns([5, 1])
    text = snap.derive("progress_text", lambda: layout.progress_line(snap, markdown_text))
    top.progress(layout.progress_fraction(run), text=text)
    if cancel_col is not None and run.owner == me and cancel_col.button("Cancel", key=f"cancel_{run.id}"):
        queue.cancel(store(), run.id, me)
        st.rerun()
    show_run(run, snap, key="live", present=present)
    if present:
        return
    if run.finished and run.owner == me and (run.summary or {}).get("verdict") == BUSY:
        st.button(  # the reading said the machine was busy: the same race again, on a quieter moment
            "Run it again",
            key=f"again_{run.id}",
            on_click=fold_and_launch,
            args=(dict(run.params or {}),),
            help="The same race again: this one ran while other work had its cores, so it gave no verdict.",
        )
    hand_on_downloads(run, key="race")  # a finished race as one script, and as a report for PyTorch
    if run.status == "done":
        plan_section(run, key="race")
    if run.finished:
        show_reference()


def cancel_run_button(run_id: int) -> None:
    """Cancel, for the run's owner following it through the feed (a click reruns the page)."""
    if st.button("Cancel", key=f"cancel_{run_id}"):
        queue.cancel(store(), run_id, visitor())
        st.rerun()


# Replay a recorded run: under the form on the first screen; under a run shown (its verdict, cards
# and race chart come first).
replay_slot = st.container()
replaying = active_replay()
if replaying is not None:
    show_replay(replaying, present)
elif compared_ids():  # Race on every GPU type's races, side by side (?compare=12,13,14)
    show_comparison(compared_ids(), open_run=follow)
elif run is not None and polling and use_feed():
    if run.owner == owner:  # the owner's Cancel, drawn once: the live view below is the browser's
        cancel_run_button(run.id)
    show_live_feed(run.id, present)  # the browser draws the shared document (core.view.run_screen.feed)
elif run is not None:
    live(run.id)
elif not present:
    show_reference()
else:
    st.info("Presenter mode: open a run (?run=ID) or a replay (?replay=file:NAME) to show it here.")
if not present:
    shown = replaying is not None or bool(compared_ids()) or run is not None
    with st.container() if shown else replay_slot, st.expander("Replay a recorded run", expanded=False):
        replay_picker()
if present:
    st.button("Leave presenter mode", on_click=set_presenting, args=(False,), key="leave_present")
