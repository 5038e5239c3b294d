"""Explainer demos: fusion and memory bandwidth, and per-operation overhead.

Sizes are tiny so the compiled tests take seconds; they check the shape and arithmetic of the
results, never that compiled is faster (timings on a shared machine are noise).
"""

import json
import math

import pytest
import torch

from core.engine.explain import fusion, overhead
from core.engine.explain import params as demo_params

SMALL_FUSION = {"ks": [1, 4], "numel": 65536, "repeats": 2, "warmup": 1}
SMALL_OVERHEAD = {"ks": [1, 4], "batch_sizes": [1, 8], "repeats": 2, "warmup": 2, "calls_per_sample": 5}


def numbers(value):
    """Every number inside a JSON-like value (bools excluded)."""
    if isinstance(value, dict):
        for item in value.values():
            yield from numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from numbers(item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield value


@pytest.fixture(scope="module")
def fusion_result():
    return fusion.run(SMALL_FUSION, device="cpu")


@pytest.fixture(scope="module")
def overhead_result():
    return overhead.run(SMALL_OVERHEAD, device="cpu")


# --- parameters ---------------------------------------------------------------------------


@pytest.mark.parametrize("module", [fusion, overhead])
def test_defaults_are_valid_and_json_serializable(module):
    assert module.validate(module.DEFAULTS) == []
    assert module.validate({}) == []
    json.dumps(module.DEFAULTS)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"ks": [0, 4]}, "ks"),
        ({"ks": [1, 65]}, "ks"),
        ({"ks": []}, "ks"),
        ({"ks": [2, 2]}, "ks"),
        ({"ks": "1,2"}, "ks"),
        ({"numel": 10**12}, "numel"),
        ({"numel": 0}, "numel"),
        ({"numel": True}, "numel"),
        ({"repeats": 0}, "repeats"),
        ({"warmup": -1}, "warmup"),
        ({"op_set": "exotic"}, "op_set"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_fusion_validate_names_the_bad_field(params, field):
    errors = fusion.validate(params)
    assert len(errors) == 1
    assert errors[0].startswith(f"{field}:")


def test_fusion_validate_states_the_allowed_range():
    (message,) = fusion.validate({"numel": 10**12})
    assert f"{demo_params.FUSION_MAX_NUMEL:,}" in message and "1" in message


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"ks": [0]}, "ks"),
        ({"numel": 1_000_000}, "numel"),
        ({"batch_sizes": [1, 100_000]}, "batch_sizes"),
        ({"width": 0}, "width"),
        ({"compile_batches": "yes"}, "compile_batches"),
        ({"calls_per_sample": 0}, "calls_per_sample"),
        ({"mode": "reduce-overhead"}, "mode"),
    ],
)
def test_overhead_validate_names_the_bad_field(params, field):
    errors = overhead.validate(params)
    assert len(errors) == 1
    assert errors[0].startswith(f"{field}:")


@pytest.mark.parametrize("module", [fusion, overhead])
def test_run_refuses_invalid_params_before_measuring(module):
    with pytest.raises(ValueError, match="ks:"):
        module.run({"ks": [0]})


# --- pure pieces (no compile) -------------------------------------------------------------


def test_pointwise_chain_applies_the_listed_ops_in_order():
    x = torch.randn(32)
    expected = torch.relu(torch.sin(x * 1.0001 + 0.5))
    torch.testing.assert_close(fusion.pointwise_chain(4)(x), expected)
    assert fusion.chain_description(6) == ["x * 1.0001", "x + 0.5", "sin(x)", "relu(x)", "sigmoid(x)", "x * 1.0001"]


def test_cheap_op_set_avoids_transcendental_ops():
    x = torch.randn(32)
    expected = torch.abs(torch.relu(x * 1.0001 + 0.5) - 0.25)
    torch.testing.assert_close(fusion.pointwise_chain(5, "cheap")(x), expected)
    assert not any("sin" in op or "sigmoid" in op for op in fusion.chain_description(10, "cheap"))


def test_eager_kernel_count_is_one_per_op():
    x = torch.randn(1024)
    for k in (1, 3, 7):
        count, names = fusion.count_kernels(lambda k=k: fusion.pointwise_chain(k)(x), "cpu", compiled=False)
        assert count == k
        assert all(name.startswith("aten::") for name in names)


def test_copy_reference_reports_bytes_and_bandwidth():
    ref = fusion.measure_copy(4096, "cpu", repeats=3, warmup=1)
    assert ref["bytes"] == 2 * 4096 * 4
    assert ref["copy_ms"] > 0 and math.isfinite(ref["copy_gbps"]) and ref["copy_gbps"] > 0


def test_linear_fit_recovers_a_line_and_needs_two_points():
    slope, intercept = overhead.linear_fit([1, 2, 4], [3.0, 5.0, 9.0])
    assert slope == pytest.approx(2.0) and intercept == pytest.approx(1.0)
    assert overhead.linear_fit([4, 4], [1.0, 2.0]) is None


def test_cuda_graphs_are_unavailable_on_cpu_with_a_reason():
    part = overhead.cuda_graphs(overhead.resolve_params({}), "cpu")
    assert set(part) == {"unavailable"}
    assert "CUDA" in part["unavailable"] and "reduce-overhead" in part["unavailable"]


# --- fusion, measured ----------------------------------------------------------------------


@pytest.mark.slow
def test_fusion_result_has_a_row_per_k_with_positive_finite_numbers(fusion_result):
    r = fusion_result
    for key in ("demo", "title", "params", "device", "ops", "reference", "rows", "kernel_counting", "notes", "units"):
        assert key in r, key
    assert [row["k"] for row in r["rows"]] == SMALL_FUSION["ks"]
    assert r["device"]["type"] == "cpu"
    positive = ("eager_ms", "compiled_ms", "speedup", "eager_gbps", "compiled_gbps", "eager_gflops", "compiled_gflops")
    for row in r["rows"]:
        assert all(row[key] > 0 for key in positive), row
        assert row["eager_page_faults"] >= 0 and row["compiled_page_faults"] >= 0
    assert all(math.isfinite(n) for n in numbers(r["rows"]))
    assert all(math.isfinite(n) and n > 0 for n in numbers(r["reference"]))
    json.dumps(r, allow_nan=False)


@pytest.mark.slow
def test_fusion_bytes_and_rates_follow_the_formulas(fusion_result):
    n = SMALL_FUSION["numel"]
    assert fusion_result["reference"]["bytes"] == 2 * n * 4
    for row in fusion_result["rows"]:
        k = row["k"]
        assert row["eager_bytes"] == 2 * k * n * 4
        assert row["compiled_bytes"] == 2 * n * 4
        assert row["eager_gbps"] == pytest.approx(row["eager_bytes"] / (row["eager_ms"] / 1e3) / 1e9)
        assert row["compiled_gflops"] == pytest.approx(k * n / (row["compiled_ms"] / 1e3) / 1e9)
        assert row["speedup"] == pytest.approx(row["eager_ms"] / row["compiled_ms"])


@pytest.mark.slow
def test_fusion_eager_runs_a_kernel_per_op_and_compiled_a_few(fusion_result):
    rows = fusion_result["rows"]
    assert [row["eager_kernels"] for row in rows] == [row["k"] for row in rows]
    for row in rows:
        assert row["compiled_kernels"] is not None, row["compiled_kernel_names"]
        assert 1 <= row["compiled_kernels"] <= 2
        assert all("cpp_fused" in name for name in row["compiled_kernel_names"])


# --- overhead, measured --------------------------------------------------------------------


@pytest.mark.slow
def test_overhead_tiny_chain_rows_report_per_call_and_per_op_time(overhead_result):
    tiny = overhead_result["tiny"]
    assert tiny["numel"] == 16 and tiny["data_bytes"] == 64
    assert [row["k"] for row in tiny["rows"]] == SMALL_OVERHEAD["ks"]
    for row in tiny["rows"]:
        assert row["eager_us_per_op"] == pytest.approx(row["eager_us"] / row["k"])
        assert row["compiled_us_per_op"] == pytest.approx(row["compiled_us"] / row["k"])
    assert all(math.isfinite(n) and n > 0 for n in numbers(tiny["rows"]))
    assert set(tiny["fit"]) == {"eager", "compiled"}
    assert all(math.isfinite(n) for n in numbers(tiny["fit"]))


@pytest.mark.slow
def test_overhead_batch_sweep_has_eager_and_compiled_times_per_batch(overhead_result):
    rows = overhead_result["batch_sweep"]["rows"]
    assert [row["batch"] for row in rows] == SMALL_OVERHEAD["batch_sizes"]
    for row in rows:
        assert row["flops"] == 4 * row["batch"] * 64 * 64
        assert row["compiled_us"] is not None and row["speedup"] is not None
    assert rows[0]["eager_vs_smallest_batch"] == pytest.approx(1.0)
    assert all(math.isfinite(n) and n > 0 for n in numbers(rows))


@pytest.mark.slow
def test_overhead_result_is_json_and_says_cuda_graphs_are_unavailable_here(overhead_result):
    json.dumps(overhead_result, allow_nan=False)
    assert "unavailable" in overhead_result["cuda_graphs"]
    assert overhead_result["device"]["type"] == "cpu"


def test_overhead_batch_sweep_can_skip_compiling():
    p = overhead.resolve_params({"batch_sizes": [1, 4], "compile_batches": False, "repeats": 2, "warmup": 1})
    sweep = overhead.batch_sweep(p, "cpu")
    assert [row["compiled_us"] for row in sweep["rows"]] == [None, None]
    assert all(row["eager_us"] > 0 for row in sweep["rows"])


# --- on a GPU ------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_both_demos_run_on_cuda_and_cuda_graphs_are_measured():
    fused = fusion.run(SMALL_FUSION, device="cuda")
    assert [row["eager_kernels"] for row in fused["rows"]] == SMALL_FUSION["ks"]
    assert all(row["compiled_kernels"] is not None and row["compiled_kernels"] <= 2 for row in fused["rows"])
    assert fused["device"]["name"]
    over = overhead.run(SMALL_OVERHEAD, device="cuda")
    graphs = over["cuda_graphs"]
    assert "unavailable" not in graphs
    assert all(row["reduce_overhead_us"] > 0 for row in graphs["rows"])
    json.dumps(fused, allow_nan=False)
    json.dumps(over, allow_nan=False)
