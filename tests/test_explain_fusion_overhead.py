"""Explainer demos: fusion and memory bandwidth, and per-operation overhead.

Sizes are tiny so the compiled tests take seconds; they check the shape and arithmetic of the
results, never that compiled is faster (timings on a shared machine are noise).
"""

import json
import math

import pytest
import torch
from support import SMALL_FUSION, SMALL_OVERHEAD  # fusion_result and overhead_result: measured once (conftest)

from core.engine.explain import fusion, overhead
from core.engine.explain import params as demo_params


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
        ({"numel": "big"}, "numel"),
        ({"calls_per_sample": 0}, "calls_per_sample"),
        ({"calls_per_sample": "many"}, "calls_per_sample"),
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
    assert f"{demo_params.FUSION_MAX_NUMEL:,}" in message and "'auto'" in message


def test_fusion_defaults_size_past_the_cache_time_many_calls_and_use_the_memory_bound_ops():
    assert fusion.DEFAULTS["numel"] == "auto" and fusion.DEFAULTS["calls_per_sample"] == "auto"
    assert fusion.DEFAULTS["op_set"] == "cheap"
    assert fusion.validate({"numel": "auto", "calls_per_sample": "auto"}) == []
    assert fusion.validate({"numel": 4096, "calls_per_sample": 50}) == []


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


# --- sizing past the cache, samples of many calls (torch-free) -------------------------------


def make_sysfs(root, caches):
    for i, (level, kind, size) in enumerate(caches):
        folder = root / f"index{i}"
        folder.mkdir(parents=True)
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "size").write_text(f"{size}\n")
    return str(root)


def test_the_last_level_cache_is_read_from_sysfs(tmp_path):
    root = make_sysfs(
        tmp_path / "cache",
        [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"), (3, "Unified", "307200K")],
    )
    llc = fusion.cpu_last_level_cache(root)
    assert llc == {"bytes": 300 * 2**20, "level": 3, "source": f"L3 of cpu0, from {root}"}
    assert fusion.cpu_last_level_cache(str(tmp_path / "missing")) is None
    assert fusion.parse_cache_size("32M") == 32 * 2**20 and fusion.parse_cache_size("lots") is None


def test_the_working_set_is_several_times_the_cache_within_limits():
    numel = fusion.auto_numel(32 * 2**20)
    assert 2 * numel * 4 == pytest.approx(fusion.WORKING_SET_MULTIPLE * 32 * 2**20, rel=1e-6)
    assert fusion.memory_level(2 * numel * 4, 32 * 2**20) == fusion.MAIN_MEMORY
    assert fusion.auto_numel(None) == fusion.MIN_AUTO_NUMEL
    assert fusion.auto_numel(2**40) == fusion.MAX_AUTO_NUMEL
    assert fusion.auto_numel(300 * 2**20, memory_bytes=2**30) == 2**30 // (fusion.MEMORY_SHARE * 4)


def test_a_figure_is_labelled_with_the_level_it_measures():
    llc = 300 * 2**20
    assert fusion.memory_level(32 * 2**20, llc) == fusion.CACHE  # the old 16 MiB tensors: cache
    assert fusion.memory_level(450 * 2**20, llc) == fusion.PARTLY_CACHE
    assert fusion.memory_level(900 * 2**20, llc) == fusion.MAIN_MEMORY
    assert fusion.memory_level(900 * 2**20, None) == fusion.UNKNOWN


def test_a_sample_of_a_fast_call_is_many_calls_long():
    assert fusion.calls_per_sample(10e-6) == 2000  # a ~10 µs fused GPU kernel: 20 ms per sample
    assert fusion.calls_per_sample(0.25) == 1
    assert fusion.calls_per_sample(1e-9) == fusion.MAX_CALLS_PER_SAMPLE
    assert fusion.calls_per_sample(0.0) == fusion.MAX_CALLS_PER_SAMPLE


def test_paired_samples_alternate_eager_and_compiled_with_many_calls_each():
    log = []
    result = fusion.paired_samples(lambda: log.append("e"), lambda: log.append("c"), "cpu", 4, 1, 3)
    assert "".join(log) == "ec" + "eeeccc" * 4  # warm-up, then 4 repeats alternating, 3 calls a sample
    assert result["calls_per_sample"] == {"eager": 3, "compiled": 3}
    assert len(result["samples"]["eager"]) == len(result["samples"]["compiled"]) == 4
    for name in ("eager", "compiled", "speedup"):
        assert result[name]["low"] <= result[name]["median"] <= result[name]["high"]


def test_paired_samples_size_auto_samples_from_a_timed_warm_up_call(monkeypatch):
    timed = []

    def calls_for(one_call_s):
        timed.append(one_call_s)
        return 5 if len(timed) == 1 else 7

    monkeypatch.setattr(fusion, "calls_per_sample", calls_for)
    log = []
    result = fusion.paired_samples(lambda: log.append("e"), lambda: log.append("c"), "cpu", 2, 0, "auto")
    assert len(timed) == 2 and all(t > 0 for t in timed)  # one timed call of each variant, even without warm-up
    assert result["calls_per_sample"] == {"eager": 5, "compiled": 7}
    assert "".join(log) == "ec" + ("e" * 5 + "c" * 7) * 2


def test_resolve_numel_keeps_a_given_size_and_sizes_auto_from_the_cache():
    assert fusion.resolve_numel(4096, {"bytes": 2**20}, None) == 4096
    assert fusion.resolve_numel("auto", {"bytes": 64 * 2**20}, None) == fusion.auto_numel(64 * 2**20)


def test_the_hosts_working_set_limit_caps_auto_and_a_given_size_and_is_validated():
    big_cache = {"bytes": 480 * 2**20}
    assert fusion.resolve_numel("auto", big_cache, None) == fusion.MAX_AUTO_NUMEL  # 1 GiB of input plus output
    assert fusion.resolve_numel("auto", big_cache, None, max_working_set=256 * 2**20) == 32 * 2**20
    assert fusion.resolve_numel(4096, big_cache, None, max_working_set=8 * 2**10) == 1024
    assert fusion.resolve_numel(4096, big_cache, None, max_working_set=2**30) == 4096  # under it: as asked
    assert fusion.validate({"max_working_set": None}) == []
    assert fusion.validate({"max_working_set": 256 * 2**20}) == []
    (problem,) = fusion.validate({"max_working_set": 100})
    assert problem.startswith("max_working_set: must be an integer from 8,192 to 1,073,741,824")


# --- pure pieces (no compile) -------------------------------------------------------------


def test_pointwise_chain_applies_the_listed_ops_in_order():
    x = torch.randn(32)
    expected = torch.relu(torch.sin(x * 1.0001 + 0.5))
    torch.testing.assert_close(fusion.pointwise_chain(4, "mixed")(x), expected)
    assert fusion.chain_description(6, "mixed") == [
        "x * 1.0001",
        "x + 0.5",
        "sin(x)",
        "relu(x)",
        "sigmoid(x)",
        "x * 1.0001",
    ]


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


def test_copy_reference_reports_bytes_bandwidth_and_its_spread():
    ref = fusion.measure_copy(4096, "cpu", repeats=3, warmup=1, calls=4)
    assert ref["bytes"] == 2 * 4096 * 4 and ref["calls_per_sample"] == 4
    assert ref["copy_ms"] > 0 and math.isfinite(ref["copy_gbps"]) and ref["copy_gbps"] > 0
    assert ref["copy_gbps_low"] <= ref["copy_gbps"] <= ref["copy_gbps_high"]


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
def test_fusion_rows_carry_the_spread_of_paired_repeats_and_the_level_measured(fusion_result):
    r = fusion_result
    assert r["numel"] == SMALL_FUSION["numel"] and r["working_set_bytes"] == 2 * SMALL_FUSION["numel"] * 4
    assert r["reference"]["memory_level"] == r["memory_level"]
    for row in r["rows"]:
        assert len(row["eager_samples_ms"]) == len(row["compiled_samples_ms"]) == SMALL_FUSION["repeats"]
        assert row["eager_calls_per_sample"] == row["compiled_calls_per_sample"] == 2
        assert row["eager_ms_low"] <= row["eager_ms"] <= row["eager_ms_high"]
        assert row["compiled_ms_low"] <= row["compiled_ms"] <= row["compiled_ms_high"]
        assert row["speedup_low"] <= row["speedup_high"]


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
def test_every_overhead_point_keeps_the_spread_of_its_repeats(overhead_result):
    rows = overhead_result["tiny"]["rows"] + overhead_result["batch_sweep"]["rows"]
    for row in rows:
        assert row["samples"] == SMALL_OVERHEAD["repeats"] > 1
        for variant in ("eager", "compiled"):
            assert row[f"{variant}_us_low"] <= row[f"{variant}_us"] <= row[f"{variant}_us_high"], row
        assert row["speedup_low"] <= row["speedup"] <= row["speedup_high"]
        assert 0 <= row["compiled_slower_pairs"] <= row["samples"]


def test_a_point_counts_the_pairs_in_which_compiled_was_the_slower():
    import time

    from core.engine.explain import overhead

    p = {"repeats": 5, "warmup": 0, "calls_per_sample": 1}
    row = overhead.paired_us(p, "cpu", lambda: None, lambda: time.sleep(0.002))
    assert row["samples"] == 5 and row["compiled_slower_pairs"] == 5
    row = overhead.paired_us(p, "cpu", lambda: time.sleep(0.002), lambda: None)
    assert row["compiled_slower_pairs"] == 0


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
    for row in sweep["rows"]:  # two real samples per point, and their range
        assert row["samples"] == 2 and row["eager_us_low"] <= row["eager_us"] <= row["eager_us_high"]


def test_paired_points_alternate_real_calls_and_keep_each_variants_range():
    x = torch.randn(64, 64)
    p = overhead.resolve_params({"repeats": 3, "warmup": 1, "calls_per_sample": 2})
    row = overhead.paired_us(p, "cpu", lambda: x @ x, lambda: (x @ x).relu())
    assert row["samples"] == 3
    for variant in ("eager", "compiled"):
        assert 0 < row[f"{variant}_us_low"] <= row[f"{variant}_us"] <= row[f"{variant}_us_high"]
    assert row["speedup_low"] <= row["speedup"] <= row["speedup_high"]


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


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_fusion_on_a_gpu_measures_main_memory_past_l2_with_many_calls_per_sample():
    fused = fusion.run({"ks": [1, 8], "repeats": 3, "warmup": 1}, device="cuda")  # numel and calls: auto
    assert fused["cache"]["source"].endswith("L2_cache_size") and fused["cache"]["bytes"] > 0
    assert fused["working_set_bytes"] >= 2 * fused["cache"]["bytes"]
    assert fused["memory_level"] == fusion.MAIN_MEMORY
    assert all(row["compiled_calls_per_sample"] > 1 for row in fused["rows"])  # one launch would dominate
