"""Compile Lab: the entry point builds navigation and the sidebar every page shares."""

import streamlit as st

from app_pages.common import identify_visitor, store, tick
from core.runs import jobs
from core.view.queue import gpu_lines, lane_lines

st.set_page_config(page_title="Compile Lab", page_icon="⚡", layout="wide")

page = st.navigation(
    [
        st.Page("app_pages/race.py", title="Race", icon=":material/sports_score:", default=True),
        st.Page("app_pages/sweep.py", title="Sweep", icon=":material/stacked_line_chart:"),
        st.Page("app_pages/runs.py", title="Runs", icon=":material/table_view:"),
        st.Page("app_pages/under_the_hood.py", title="Under the hood", icon=":material/memory:"),
    ]
)


@st.fragment(run_every=2.0)
def sidebar_status() -> None:
    """Device card and queue, refreshed on their own so they stay true while a page sits still."""
    tick()
    caps = jobs.ensure_probe(store())  # a queued job: this process never touches the GPU itself
    probes = store().list_runs(kind="probe", status=["done"], limit=1)
    env = probes[0].summary["environment"] if probes and probes[0].summary else None
    st.subheader("Device")
    if env is None:
        st.info("Probing the device…")
    elif caps is not None and caps.cuda:
        for line in gpu_lines(probes[0].summary):
            st.text(line)
    else:
        st.markdown(f"**CPU only**: {env['cpu_name']}  \n{env['cpu_count']} cores, torch {env['torch']}")
    st.subheader("Queue")
    active = store().list_runs(status=("starting", "running"))
    waiting = store().list_runs(status=("queued",))
    for line in lane_lines(caps, active, waiting):  # one lane per device: the CPU, each GPU
        st.text(line)


with st.sidebar:
    sidebar_status()
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
