"""The Race page's fleet parts: the device-type chooser ("NVIDIA H100 80GB HBM3: 2 free, 1 busy"),
Race on every GPU type, and the comparison of those races side by side. Shown only where the store
has live agents with GPU lanes: on one box without agents the page is as it was. UI only; the
pinning is core.runs.fleet_races, the comparison core.view.device_comparison."""

from __future__ import annotations

import time
from collections.abc import Callable

import pandas as pd
import streamlit as st

from app_pages.common import disk_full_text, run_view, store, tick, visitor_address
from core.engine.spec import DeviceCaps, RunSpec, SpecError, resolve_device
from core.runs import fleet, queue
from core.runs.fleet_races import enqueue_on_every_gpu_type, pin_to_type
from core.runs.limits import HostLimits
from core.view import race_charts
from core.view.answers import TUTORIAL_SOURCE
from core.view.device_comparison import (
    COLUMNS,
    COMPARE_PARAM,
    compare_value,
    comparison,
    comparison_rows,
    ids_from_text,
)
from core.view.host_tables import device_type_counts, device_type_label, labelled_type
from core.view.race_form import form_spec
from core.view.safe_text import markdown_text

CHOOSER_KEY = "fleet_device_type"
ANY_GPU = ""  # the chooser's first choice: whichever GPU is free first (a None choice reads as none chosen)
ANY_GPU_LABEL = "any free GPU (the first box with one idle takes it)"
COMPARE_REFRESH_S = 3.0  # the comparison's refresh while its races run (its charts are the races')
CHOOSER_HELP = (
    "The fleet's GPU types, counted over the boxes whose agents are live: the race runs on a GPU of the type "
    "you choose (an idle one first), and its estimate and any same-race result shown are for that type."
)
EVERY_TYPE_HELP = (
    "The same race once on each GPU type of the fleet (one GPU of each, an idle one first), then the races "
    "side by side: compile time, steady speedup with its interval, break-even, and published figures for scale."
)


def gpu_type_counts() -> dict[str, tuple[int, int]]:
    """The fleet's live GPU types: {device name: (free, busy)}; empty without agents with GPUs."""
    busy = store().list_runs(status=("starting", "running"))
    return device_type_counts(fleet.hosts(store()), busy, time.time(), gpus_only=True)


def _on_gpu(spec: RunSpec, caps: DeviceCaps | None) -> bool:
    return resolve_device(spec.device, caps or DeviceCaps()) == "cuda"


def chosen_pin(spec: RunSpec, caps: DeviceCaps | None, strict: bool = True) -> dict[str, str]:
    """Where the chosen device type's race goes ({"host", "lane"} for queue.enqueue, shared results
    and estimates), {} for any GPU. `strict`: a type gone from the fleet raises JobError (at Launch)
    instead of reading as any GPU (for the estimate shown)."""
    name = st.session_state.get(CHOOSER_KEY) or ANY_GPU
    if name == ANY_GPU or not _on_gpu(spec, caps):
        return {}
    try:
        return pin_to_type(store(), name)
    except queue.JobError as exc:
        if strict:
            raise queue.JobError(markdown_text(exc)) from None  # a device's name, from its agent
        return {}


def device_type_chooser(spec: RunSpec, caps: DeviceCaps | None) -> dict[str, str]:
    """The fleet's GPU types with their free and busy counts, where a GPU race could run on several;
    returns the chosen type's pin ({}: any GPU, or no fleet with GPUs)."""
    counts = gpu_type_counts()
    if not counts or not _on_gpu(spec, caps):
        return {}
    options = [ANY_GPU, *counts]
    chosen = st.session_state.get(CHOOSER_KEY)
    if chosen not in options:
        # A choice's words change with its counts ("1 free" -> "0 free") and the browser's choice then
        # comes back as its old words: the type they name. A type whose agents stopped: any GPU again.
        st.session_state[CHOOSER_KEY] = labelled_type(chosen, counts) or ANY_GPU

    def words(name: str) -> str:
        return ANY_GPU_LABEL if name == ANY_GPU else device_type_label(name, *counts[name])

    st.selectbox("Device type across the fleet", options, format_func=words, key=CHOOSER_KEY, help=CHOOSER_HELP)
    return chosen_pin(spec, caps, strict=False)


def launch_on_every_gpu_type(owner: str, limits: HostLimits) -> None:
    """Race on every GPU type's callback: queue the form's race once per GPU type and open their
    comparison (?compare=12,13,14), the form folded away."""
    try:
        runs = enqueue_on_every_gpu_type(
            store(), form_spec(st.session_state), owner, limits, address=visitor_address(limits)
        )
    except SpecError as exc:
        st.session_state.launch_error = markdown_text("; ".join(str(p) for p in exc.problems))
        return
    except queue.JobError as exc:
        st.session_state.launch_error = markdown_text(exc)
        return
    except Exception as exc:  # noqa: BLE001 - a full disk is one line; anything else is raised again
        st.session_state.launch_error = disk_full_text(exc)
        return
    st.query_params.pop("run", None)
    st.query_params[COMPARE_PARAM] = compare_value(list(runs.values()))
    st.session_state.race_form = False


def every_gpu_type_button(owner: str, limits: HostLimits | None, disabled: bool) -> None:
    """Race on every GPU type, where the fleet has live GPU lanes."""
    counts = gpu_type_counts()
    if counts and limits is not None:
        st.button(
            f"Race on every GPU type ({len(counts)})",
            on_click=launch_on_every_gpu_type,
            args=(owner, limits),
            disabled=disabled,
            help=EVERY_TYPE_HELP,
            key="every_gpu_type",
        )


def compared_ids() -> list[int]:
    """The group of races the link names (?compare=12,13,14); empty: no comparison."""
    return ids_from_text(st.query_params.get(COMPARE_PARAM))


def show_comparison(ids: list[int], open_run: Callable[[int], None]) -> None:
    """The races side by side, refreshed while any still runs; `open_run` follows one of them (its
    button outside the refreshing part: a click there would rerun only that part, not the page)."""
    first = comparison(store(), ids)
    live = not first.finished

    @st.fragment(run_every=COMPARE_REFRESH_S if live else None)
    def draw() -> None:
        tick()
        group = comparison(store(), ids)
        if live and group.finished:
            st.rerun()  # stop refreshing: the final figures, drawn once
        st.subheader("The same race on every GPU type")
        for note in group.notes:
            st.warning(markdown_text(note))
        if not group.runs:
            return
        st.dataframe(pd.DataFrame(comparison_rows(group), columns=list(COLUMNS)), hide_index=True, width="stretch")
        st.caption(
            "Break-even is projected only from a speedup whose interval lies above 1. Published figures are for "
            f"scale (their own hardware and torch), never a prediction: {markdown_text(TUTORIAL_SOURCE)}."
        )
        frames = [run_view(run).frames()[0].assign(run=group.label(run)) for run in group.runs]
        steps = pd.concat([f for f in frames if not f.empty] or frames, ignore_index=True)
        if steps.empty:
            st.info("The charts appear once the races start measuring.")
            return
        st.caption("Colour tells the devices apart, the line style the variant: solid eager, dashed compiled.")
        left, right = st.columns(2)
        left.altair_chart(race_charts.overlay_cumulative_chart(steps), width="stretch")
        right.altair_chart(race_charts.overlay_step_chart(steps), width="stretch")

    draw()
    with st.container(horizontal=True):
        for run in first.runs:
            st.button(f"Open run {run.id}", key=f"open_compared_{run.id}", on_click=open_run, args=(run.id,))
