"""Under the hood: why compile is faster (or not), each idea with a measurement from this device."""

import streamlit as st

from app_pages.common import demo_section, host_limits, store, visitor, wait_for_device
from core.engine.explain import CODEGEN_FUNCTIONS, DEMOS, FUSION_OP_SETS, PAGE_PARAMS
from core.view import explainers
from core.view.answers import latest_cause
from core.view.safe_text import markdown_text

st.title("Under the hood")
st.caption(
    "torch.compile speeds training up in two ways: it fuses many small operations into one kernel (less "
    "memory traffic) and it captures whole graphs (less per-operation overhead). Each tab measures one idea on "
    "this machine; results are stored, so a revisit shows them at once."
)
wait_for_device()
fusion_tab, overhead_tab, graphs_tab, codegen_tab, caches_tab = st.tabs([d.title for d in DEMOS.values()])
# The cause of the newest finished race here, where each of these two tabs shows the idea it rests on.
yours = latest_cause(store().list_runs(kind="race", status=["done"], limit=20), visitor())


def your_race() -> None:
    if yours:
        st.markdown(f"**{markdown_text(yours[0])}:** {markdown_text(yours[1])}")


with fusion_tab:
    st.markdown(
        "An elementwise op (add, multiply, relu...) does almost no arithmetic per byte: its time is the time to "
        "read the tensor from memory and write it back. Eagerly, a chain of *k* such ops moves the tensor *k* "
        "times. Inductor fuses the chain into one kernel that reads once and writes once, so its time grows far "
        "more slowly with *k*, as long as moving memory, not arithmetic, is what costs. The measurement below "
        "says whether this machine shows it."
    )
    your_race()
    op_set = st.radio("Ops in the chain", list(FUSION_OP_SETS), format_func=FUSION_OP_SETS.get, horizontal=True)
    result = demo_section("fusion", explainers.fusion_page_params(op_set, host_limits()), key=f"fusion_{op_set}")
    if result:
        shows, verdict = explainers.fusion_verdict(result)
        (st.success if shows else st.warning)(verdict)
        k = st.select_slider(
            "Ops in the chain (k)", [row["k"] for row in result["rows"]], value=result["rows"][-1]["k"]
        )
        left, right = st.columns(2)
        left.altair_chart(explainers.fusion_time_chart(result, k), width="stretch")
        right.altair_chart(explainers.fusion_bandwidth_chart(result, k), width="stretch")
        st.markdown(explainers.fusion_sentence(result, k))
        st.caption(explainers.fusion_measurement_note(result))
        st.dataframe(explainers.fusion_rows(result), hide_index=True, width="stretch")

with overhead_tab:
    st.markdown(
        "On tiny tensors the data takes no time at all: what you pay is the cost of launching each operation "
        "(Python, the dispatcher, a kernel launch). Capturing the graph swaps that per-op cost for one fixed cost "
        "per call (checking the guards, calling the generated code through its wrapper): compiled wins once a "
        "call has enough ops to outweigh it. On a GPU, CUDA graphs (`mode='reduce-overhead'`) go further and "
        "replay a whole recorded sequence of kernels with one launch."
    )
    your_race()
    result = demo_section("overhead", PAGE_PARAMS["overhead"], key="overhead")
    if result:
        readings = explainers.overhead_readings(result)
        st.markdown(f"**1. The same chain on {result['tiny']['numel']} floats: cost per op, cost per call**")
        st.dataframe(explainers.overhead_tiny_rows(result), hide_index=True, width="stretch")
        st.markdown(readings.get("tiny", ""))
        st.markdown("**2. A small MLP as the batch grows**")
        st.altair_chart(explainers.overhead_batch_chart(result), width="stretch")
        st.markdown(readings.get("batch", ""))
        st.markdown("**3. CUDA graphs: one launch for the whole sequence**")
        st.markdown(explainers.overhead_cuda_graphs_text(result))

with graphs_tab:
    st.markdown(
        "Dynamo reads your Python bytecode and records the tensor operations into a graph. When it meets something "
        "it cannot put in a graph (a print, a Python number taken out of a tensor, an `if` on a tensor's value) it "
        "**breaks**: it ends the graph, runs that bit in plain Python, and starts another. Each break is a "
        "missed fusion and an extra round trip. `fullgraph=True` turns a break it cannot avoid into an error so "
        "you find it; a break it can avoid, it avoids instead (the `.item()` example below says how)."
    )
    result = demo_section("graphs", PAGE_PARAMS["graphs"], key="graphs")
    if result:
        st.dataframe(explainers.graph_rows(result), hide_index=True, width="stretch")
        for example in result["examples"]:
            with st.expander(f"{example['title']}: {explainers.graph_summary(example)}"):
                st.code(example["source"], language="python", line_numbers=True)
                for text in explainers.break_texts(example):
                    st.markdown(text)
                st.markdown("**Captured graphs** (what the compiler sees)")
                for code in example["explain"].get("graphs", []):
                    st.code(code, language="python")
                st.markdown(explainers.fullgraph_text(example))
                if example.get("fixed"):
                    st.markdown(f"**The fixed version**: {explainers.graph_summary(example['fixed'])}")
                    st.code(example["fixed"]["source"], language="python")

with codegen_tab:
    st.markdown(
        "Inductor lowers the captured graph to loops and writes real code for your device: C++ with vector "
        "intrinsics on a CPU, Triton on an NVIDIA GPU. Several ATen operations become one fused kernel; the "
        "kernel's name lists what it fused."
    )
    choice = st.radio("Function", CODEGEN_FUNCTIONS, horizontal=True, key="codegen_fn")
    result = demo_section("codegen", {**PAGE_PARAMS["codegen"], "function": choice}, key=f"codegen_{choice}")
    if result:
        st.code(result["source"], language="python")
        st.markdown(explainers.codegen_sentence(result))
        kernel = result["generated"].get("first_kernel") or {}
        lang = "cpp" if result["generated"].get("language") == "C++" else "python"
        if kernel:
            st.markdown(f"**The fused region**: `{kernel['name']}` (lines {kernel['start_line']}-{kernel['end_line']})")
            st.code(explainers.numbered_source(kernel["source"], kernel.get("start_line")), language=lang)
        with st.expander("The whole generated module"):
            st.code(result["generated"]["module_source"], language="python", line_numbers=True)

with caches_tab:
    st.markdown(
        "Compiling costs time once per process, unless a cache already holds the result. A **cold** compile (a "
        "fresh Inductor cache directory) is what a new user pays; a **warm** one reuses kernels the cold one "
        "wrote; a **fresh machine** starts with an empty cache but loads the artifacts the cold one saved "
        "(`torch.compiler.save_cache_artifacts`), as a host that ships its cache would. All run here in fresh processes. Then the same function meets new input shapes: with "
        "`dynamic=False` each shape recompiles; by default the second shape makes the size symbolic; "
        "`dynamic=True` compiles once for all."
    )
    result = demo_section("caches", PAGE_PARAMS["caches"], key="caches")
    if result:
        st.altair_chart(explainers.caches_chart(result), width="stretch")
        st.caption(explainers.caches_wall_vs_phases(result) or "")
        st.markdown(explainers.portable_words(result) or "")
        st.dataframe(explainers.cache_phase_rows(result), hide_index=True, width="stretch")
        st.markdown("**Recompilation when shapes change**")
        st.dataframe(explainers.recompile_rows(result), hide_index=True, width="stretch")
        st.caption(explainers.recompile_note(result) or "")
