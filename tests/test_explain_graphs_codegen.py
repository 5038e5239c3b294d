"""The graph-break and generated-code demos: counts as torch 2.14.1 reports them on a CPU, and
results that survive being stored as JSON and replayed."""

from __future__ import annotations

import json

import pytest
import torch
from support import on_ci_torch

from core.engine.explain import codegen, graphs

# (graphs, counted breaks, break reasons) from torch._dynamo.explain; deterministic for a torch version
EXPECTED_COUNTS = {
    "clean": (1, 0, 0),
    "prints": (2, 1, 1),
    "item": (2, 1, 1),
    "data_dependent": (2, 1, 1),
}
BREAK_LINES = {
    "prints": 'print("halfway there")',
    "item": "scale = x.sum().item()",
    "data_dependent": "if x.sum() > 0:",
}
# fullgraph=True: torch 2.14.1 turns on scalar capture under fullgraph, so `.item()` compiles as one graph
FULLGRAPH_OK = {"clean": True, "prints": False, "item": True, "data_dependent": False}


@pytest.fixture(scope="module")
def graph_result() -> dict:
    return graphs.run({})


@pytest.fixture(scope="module")
def by_name(graph_result) -> dict:
    return {e["name"]: e for e in graph_result["examples"]}


def test_graphs_runs_every_example_by_default(graph_result):
    assert [e["name"] for e in graph_result["examples"]] == list(graphs.EXAMPLES)
    assert graph_result["torch_version"] == torch.__version__


@pytest.mark.parametrize("name", list(EXPECTED_COUNTS))
def test_graph_and_break_counts_are_exactly_what_dynamo_reports(by_name, name):
    explained = by_name[name]["explain"]
    assert (
        explained["graph_count"],
        explained["graph_break_count"],
        len(explained["break_reasons"]),
    ) == EXPECTED_COUNTS[name]


@pytest.mark.parametrize("name", list(BREAK_LINES))
def test_break_reason_points_at_a_line_of_the_examples_own_source(by_name, name):
    entry = by_name[name]
    reason = entry["explain"]["break_reasons"][0]
    assert reason["reason"].strip()
    assert reason["file"] == "graphs.py"
    source_lines = entry["source"].splitlines()
    assert 1 <= reason["source_line"] <= len(source_lines)
    assert source_lines[reason["source_line"] - 1].strip() == reason["code"] == BREAK_LINES[name]


@pytest.mark.parametrize("name", list(BREAK_LINES))
def test_fixed_versions_are_one_graph_without_breaks(by_name, name):
    fixed = by_name[name]["fixed"]
    assert fixed["function"] == f"{name}_fixed"
    assert (fixed["explain"]["graph_count"], fixed["explain"]["graph_break_count"]) == (1, 0)
    assert fixed["explain"]["break_reasons"] == []
    assert fixed["fullgraph"]["ok"] is True and fixed["fullgraph"]["graphs"] == 1
    assert fixed["fullgraph"]["recompiled"] is False  # another input value: the same graph
    assert f"def {name}_fixed" in fixed["source"]


def test_clean_has_no_fixed_counterpart(by_name):
    assert by_name["clean"]["fixed"] is None


@pytest.mark.parametrize("name", list(FULLGRAPH_OK))
def test_fullgraph_reports_an_error_for_examples_that_cannot_be_one_graph(by_name, name):
    strict = by_name[name]["fullgraph"]
    if name == "item" and not strict["ok"]:
        # Older torch (2.6) refuses .item() under fullgraph; newer ones (CI's) compile it as one graph.
        assert not on_ci_torch(), strict
        assert strict["headline"] == "Tensor.item" and "note" not in by_name[name]
        return
    assert strict["ok"] is FULLGRAPH_OK[name]
    if not strict["ok"]:
        assert strict["error_type"] in ("Unsupported", "UserError")  # UserError: torch 2.6's word for data-dependent
        assert strict["headline"]
        assert strict["message"].startswith(strict["headline"]) or strict["headline"] == "Data-dependent branching"


def test_fullgraph_messages_name_the_cause(by_name):
    assert "print" in by_name["prints"]["fullgraph"]["message"]
    assert by_name["data_dependent"]["fullgraph"]["headline"] == "Data-dependent branching"


def test_a_break_that_fullgraph_accepts_carries_a_note_that_says_why(by_name):
    """The intro says fullgraph=True turns a break into an error; the .item() case compiles under it.
    The note says why, from what torch did: capture_scalar_outputs is on under fullgraph (off by
    default: the break), the number stays symbolic, and a new value does not recompile."""
    item = by_name["item"]
    if item["fullgraph"]["ok"] or on_ci_torch():  # on CI's torch it must be one graph, with the note
        assert item["fullgraph"]["graphs"] == 1 and item["fullgraph"]["recompiled"] is False
        assert not torch._dynamo.config.capture_scalar_outputs  # off by default: why the default mode breaks
        assert (
            "Unsupported Tensor.item() call with capture_scalar_outputs=False"
            in item["explain"]["break_reasons"][0]["reason"]
        )
        note = item["note"]
        assert note.startswith("So there is no break for fullgraph=True to refuse")
        assert "turns on capture_scalar_outputs when asked for a full graph" in note
        assert "ran without a recompile" in note
    assert "note" not in by_name["prints"]


def test_the_avoided_break_note_says_only_what_torch_did():
    explained = {"break_reasons": [{"reason": "some other break"}]}
    note = graphs.avoided_break_note(explained, {"ok": True, "graphs": 1, "ops": 3, "recompiled": True})
    assert "captured this function as one graph instead of breaking" in note
    assert "capture_scalar_outputs" not in note and "without a recompile" not in note


def test_captured_graphs_are_readable_code(by_name):
    for entry in by_name.values():
        for variant in (entry, entry["fixed"]):
            if variant is None:
                continue
            codes = variant["explain"]["graphs"]
            assert len(codes) == variant["explain"]["graph_count"]
            assert all(code.startswith("def forward") for code in codes)


def test_the_graph_after_item_bakes_the_number_in_as_a_constant(by_name):
    # linspace(-1, 2, 8) sums to 4.0; the second graph multiplies by that constant
    assert "* 4.0" in by_name["item"]["explain"]["graphs"][1]


def test_a_print_in_the_example_is_captured_not_lost(by_name):
    assert by_name["prints"]["explain"]["printed"] == "halfway there\n"


def test_graph_results_round_trip_through_json(graph_result):
    assert json.loads(json.dumps(graph_result)) == graph_result


def test_graphs_runs_only_the_chosen_examples():
    result = graphs.run({"examples": ["prints"]})
    assert [e["name"] for e in result["examples"]] == ["prints"]


def test_graphs_validate_accepts_defaults_and_subsets():
    assert graphs.validate({}) == []
    assert graphs.validate({"examples": ["item", "clean"]}) == []


@pytest.mark.parametrize(
    "params",
    [{"examples": ["nope"]}, {"examples": []}, {"examples": "clean"}, {"examples": ["clean", "clean"]}],
)
def test_graphs_validate_rejects_bad_examples_naming_the_allowed_ones(params):
    problems = graphs.validate(params)
    assert len(problems) == 1
    assert problems[0].startswith("examples:")
    assert "clean, prints, item, data_dependent" in problems[0]


def test_graphs_validate_rejects_unknown_parameters():
    assert graphs.validate({"colour": "red"}) == ["unknown parameter 'colour'; known: examples"]


def test_missing_explain_api_gives_an_unavailable_message(monkeypatch):
    import torch._dynamo

    monkeypatch.delattr(torch._dynamo, "explain")
    result = graphs.run({"examples": ["prints"]})
    explained = result["examples"][0]["explain"]
    assert "torch._dynamo.explain is missing" in explained["unavailable"]
    assert torch.__version__ in explained["unavailable"]
    assert result["examples"][0]["fullgraph"]["ok"] is False  # the rest still renders
    json.dumps(result)


def test_explain_raising_attribute_error_gives_an_unavailable_message(monkeypatch):
    import torch._dynamo

    def broken_explain(fn):
        raise AttributeError("module 'torch._dynamo' has no attribute 'explain'")

    monkeypatch.setattr(torch._dynamo, "explain", broken_explain)
    explained = graphs.run({"examples": ["clean"]})["examples"][0]["explain"]
    assert "unavailable" in explained and "torch._dynamo.explain" in explained["unavailable"]


# --- codegen: pure helpers (no compile) -----------------------------------------------------------

TRITON_MODULE = """import torch
from torch._inductor.runtime import triton_helpers, triton_heuristics

triton_poi_fused_add_gelu_0 = async_compile.triton('triton_poi_fused_add_gelu_0', '''
import triton
@triton.jit
def triton_poi_fused_add_gelu_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    x0 = xindex
''', device_str='cuda')

def call(args):
    triton_poi_fused_add_gelu_0.run(buf0, arg0_1, 4096, grid=grid(4096))
"""


def test_language_is_detected_from_the_generated_source():
    assert codegen.detect_language(TRITON_MODULE) == "Triton"
    assert codegen.detect_language("cpp_fused_add_0 = async_compile.cpp_pybinding([], r'''extern \"C\" ...") == "C++"
    assert codegen.detect_language("print('hello')") == "unknown"


def test_kernel_names_and_region_come_from_the_kernel_definition():
    assert codegen.kernel_names(TRITON_MODULE) == ["triton_poi_fused_add_gelu_0"]  # not triton_helpers
    region = codegen.kernel_region(TRITON_MODULE, "triton_poi_fused_add_gelu_0")
    assert (region["start_line"], region["end_line"]) == (4, 9)
    assert region["source"].startswith("triton_poi_fused_add_gelu_0 = async_compile.triton(")
    assert region["source"].endswith("''', device_str='cuda')")


def test_long_modules_are_truncated_with_a_note():
    text = "\n".join(f"line {i}" for i in range(500))
    shown, note = codegen.truncate_lines(text, 400)
    assert len(shown.splitlines()) == 401 and "100 more lines" in shown.splitlines()[-1]
    assert "400 of 500" in note
    assert codegen.truncate_lines("short", 400) == ("short", None)


def test_codegen_validate_accepts_defaults():
    assert codegen.validate({}) == []
    assert codegen.validate({"function": "softmax", "size": 16}) == []


def test_codegen_validate_rejects_unknown_functions_naming_the_allowed_ones():
    (problem,) = codegen.validate({"function": "matmul"})
    assert problem.startswith("function:") and "gelu_chain, layernorm_relu, softmax" in problem


@pytest.mark.parametrize("size", [0, 15, 65537, -4, 3.5, "4096", True, None])
def test_codegen_validate_rejects_bad_sizes(size):
    (problem,) = codegen.validate({"size": size})
    assert problem.startswith("size:") and "16 to 65536" in problem


def test_missing_run_and_get_code_gives_an_unavailable_message(monkeypatch):
    import torch._inductor.utils

    monkeypatch.delattr(torch._inductor.utils, "run_and_get_code")
    result = codegen.run({"function": "softmax", "size": 64})
    assert "run_and_get_code is missing" in result["generated"]["unavailable"]
    assert torch.__version__ in result["generated"]["unavailable"]
    assert result["eager_ops"]["count"] == 1
    assert result["fewer_kernels_than_ops"] is None
    json.dumps(result)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message for a machine without CUDA")
def test_asking_for_cuda_without_a_gpu_is_unavailable_not_a_crash():
    result = codegen.run({"function": "softmax"}, device="cuda")
    assert "sees no CUDA GPU" in result["generated"]["unavailable"]


def test_eager_ops_are_counted_as_eager_calls_them():
    x = torch.randn(8, 64)
    assert codegen.aten_ops(codegen.gelu_chain, x, decompose=False)["ops"] == [
        "aten.sigmoid.default",
        "aten.mul.Tensor",
        "aten.gelu.default",
        "aten.add.Tensor",
    ]
    assert codegen.aten_ops(codegen.softmax, x, decompose=True)["count"] == 5  # amax, sub, exp, sum, div


# --- codegen: real Inductor compiles (gelu_result: measured once, in conftest) ---------------------


@pytest.mark.slow
def test_gelu_chain_fuses_four_eager_ops_into_one_cpp_kernel(gelu_result):
    generated = gelu_result["generated"]
    assert generated["language"] == "C++"
    assert generated["kernel_names"] == ["cpp_fused_add_gelu_mul_sigmoid_0"]
    assert gelu_result["eager_ops"]["count"] == 4
    assert generated["kernel_count"] < gelu_result["eager_ops"]["count"]
    assert gelu_result["fewer_kernels_than_ops"] is True


@pytest.mark.slow
def test_gelu_chain_kernel_source_is_extracted_and_inside_the_module(gelu_result):
    generated = gelu_result["generated"]
    kernel = generated["first_kernel"]
    assert kernel["name"] in kernel["source"] and 'extern "C"' in kernel["source"]
    module_lines = generated["module_source"].splitlines()
    assert "\n".join(module_lines[kernel["start_line"] - 1 : kernel["end_line"]]) == kernel["source"]
    assert generated["max_abs_diff_vs_eager"] < 1e-4
    assert "def gelu_chain" in gelu_result["source"]


@pytest.mark.slow
def test_codegen_result_round_trips_through_json(gelu_result):
    assert json.loads(json.dumps(gelu_result)) == gelu_result


@pytest.mark.slow
@pytest.mark.parametrize("function", ["layernorm_relu", "softmax"])
def test_every_function_compiles_to_a_fused_cpp_kernel(function):
    result = codegen.run({"function": function, "size": 256}, device="cpu")
    generated = result["generated"]
    assert generated["language"] == "C++"
    assert generated["kernel_count"] >= 1
    assert all(name.startswith("cpp_fused_") for name in generated["kernel_names"])
    assert generated["first_kernel"]["name"] in generated["first_kernel"]["source"]
    assert result["input_shape"] == [8, 256]
