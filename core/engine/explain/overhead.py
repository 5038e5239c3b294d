"""Overhead: when the data is tiny, what you pay for is each operation, not the data.

(a) The fusion demo's k-op pointwise chain on a 16-element tensor: moving 64 bytes takes
nanoseconds, so a call's time is Python, dispatcher and kernel-launch cost per op. Eager pays it
k times; the compiled chain is one kernel behind one guard check, so it pays a fixed cost.
(b) A small MLP forward at growing batch sizes: doubling the batch barely moves the time while
overhead dominates; only at larger batches does the arithmetic show.
(c) On CUDA, `mode="reduce-overhead"` (CUDA graphs) against the default mode for the tiny chain:
the recorded launch sequence is replayed with one call, removing most launch cost.

Every eager-against-compiled point is `repeats` samples of each, taken alternately (so a busy
stretch of the machine slows both, not the one measured then), and keeps its median with the
lowest and highest sample, and in how many of the pairs compiled was the slower: the page shows
the spread, and its reading counts a point by those pairs and names a cause only where the gap is
clear.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from core.engine import explain
from core.engine.device_state import Stopwatch
from core.engine.explain.fusion import (
    assert_json_ready,
    chain_description,
    device_info,
    median_seconds,
    paired_samples,
    pointwise_chain,
    reset_dynamo,
    sample_seconds,
    spread,
)
from core.engine.explain.params import OVERHEAD_DEFAULTS as DEFAULTS
from core.engine.explain.params import overhead_problems as validate

TITLE = "Overhead"


UNITS = {
    "eager_us": "µs per call",
    "compiled_us": "µs per call",
    "eager_us_per_op": "µs per op",
    "compiled_us_per_op": "µs per op",
    "speedup": "x (eager / compiled)",
    "compiled_slower_pairs": "pairs of samples (of `samples`) in which compiled took longer",
    "eager_us_per_sample": "µs per sample",
    "eager_vs_smallest_batch": "x (time / time at the smallest batch)",
    "eager_gflops": "GFLOP/s",
    "compiled_gflops": "GFLOP/s",
    "flops": "FLOP per call",
    "default_us": "µs per call",
    "reduce_overhead_us": "µs per call",
    "reduce_overhead_speedup": "x (default / reduce-overhead)",
}

CUDA_GRAPHS_UNAVAILABLE = (
    "CUDA graphs need a CUDA device; this run is on {device}. On a GPU, mode='reduce-overhead' records "
    "the chain's kernel launches once and replays the whole recorded sequence with a single launch call, "
    "so the tiny chain's time per call falls from one launch's CPU cost per kernel (several µs each) to "
    "about one replay, well below the default mode."
)


def resolve_params(params: dict) -> dict[str, Any]:
    """`params` over DEFAULTS, raising ValueError with every problem if they are invalid."""
    return explain.resolve_params(params, DEFAULTS, validate)


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """Least-squares slope and intercept of ys over xs; None with fewer than two distinct xs."""
    if len(set(xs)) < 2:
        return None
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
    return slope, mean_y - slope * mean_x


def _timer(p: dict, device: str):
    def per_call_seconds(fn) -> float:
        return median_seconds(fn, device, p["repeats"], p["warmup"], inner=p["calls_per_sample"])

    return per_call_seconds


def paired_us(p: dict, device: str, eager, compiled) -> dict[str, Any]:
    """Eager and compiled timed alternately, `repeats` samples of `calls_per_sample` calls each: per
    variant its median, lowest and highest sample in µs per call, the paired speedup likewise."""
    timed = paired_samples(eager, compiled, device, p["repeats"], p["warmup"], p["calls_per_sample"])
    row: dict[str, Any] = {"samples": p["repeats"]}
    for name in ("eager", "compiled"):
        part = timed[name]
        row.update({f"{name}_us": part["median"] * 1e6, f"{name}_us_low": part["low"] * 1e6,
                    f"{name}_us_high": part["high"] * 1e6})  # fmt: skip
    row.update(speedup=timed["speedup"]["median"], speedup_low=timed["speedup"]["low"])
    row["speedup_high"] = timed["speedup"]["high"]
    # The pairs in which compiled's sample was the longer: what the reading counts a point by, one
    # descheduled sample moving one pair, not a whole range (core.view.explainers.point_verdict).
    row["compiled_slower_pairs"] = sum(c > e for e, c in zip(timed["samples"]["eager"], timed["samples"]["compiled"]))
    return row


def spread_us(p: dict, device: str, fn) -> dict[str, float]:
    """One variant alone: median, lowest and highest of `repeats` samples, µs per call."""
    for _ in range(p["warmup"]):
        fn()
    stopwatch = Stopwatch(device)
    samples = [sample_seconds(fn, stopwatch, p["calls_per_sample"]) for _ in range(p["repeats"])]
    return {key: value * 1e6 for key, value in spread(samples).items()}


def tiny_chains(p: dict, device: str) -> dict[str, Any]:
    """(a) eager vs compiled k-op chains on a tiny tensor, per call and per op."""
    x = torch.randn(p["numel"], device=device)
    rows = []
    for k in p["ks"]:
        chain = pointwise_chain(k)
        reset_dynamo()
        compiled = torch.compile(chain)
        compiled(x)  # compile outside the timed region
        row = {"k": k, **paired_us(p, device, lambda chain=chain: chain(x), lambda compiled=compiled: compiled(x))}
        row.update(eager_us_per_op=row["eager_us"] / k, compiled_us_per_op=row["compiled_us"] / k)
        rows.append(row)
    reset_dynamo()
    fits = {}
    for variant in ("eager", "compiled"):
        fit = linear_fit([r["k"] for r in rows], [r[f"{variant}_us"] for r in rows])
        fits[variant] = None if fit is None else {"us_per_op": fit[0], "us_fixed_per_call": fit[1]}
    return {
        "numel": p["numel"],
        "data_bytes": p["numel"] * 4,
        "ops": chain_description(max(p["ks"])),
        "rows": rows,
        "fit": fits,
        "fit_note": "least-squares line time = us_fixed_per_call + us_per_op * k over the rows",
    }


class TinyMLP(torch.nn.Module):
    """Two Linear layers of `width` with a ReLU between: a forward is three ops."""

    def __init__(self, width: int):
        super().__init__()
        self.fc1 = torch.nn.Linear(width, width)
        self.fc2 = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def batch_sweep(p: dict, device: str) -> dict[str, Any]:
    """(b) MLP forward time per call across batch sizes: flat while overhead-bound."""
    width = p["width"]
    torch.manual_seed(0)
    model = TinyMLP(width).to(device)
    rows = []
    with torch.no_grad():
        for batch in p["batch_sizes"]:
            x = torch.randn(batch, width, device=device)
            flops = 2 * 2 * batch * width * width  # two layers, a multiply and an add per weight
            row: dict[str, Any] = {"batch": batch, "flops": flops, "compiled_us": None, "compiled_gflops": None}
            row["speedup"] = None
            if p["compile_batches"]:
                reset_dynamo()  # one static-shape graph per batch size, no recompile limit
                compiled = torch.compile(model, dynamic=False)
                compiled(x)
                row.update(paired_us(p, device, lambda x=x: model(x), lambda x=x, compiled=compiled: compiled(x)))
                row["compiled_gflops"] = flops / (row["compiled_us"] / 1e6) / 1e9
            else:
                eager = spread_us(p, device, lambda x=x: model(x))
                row.update(samples=p["repeats"], eager_us=eager["median"], eager_us_low=eager["low"])
                row["eager_us_high"] = eager["high"]
            row.update(eager_us_per_sample=row["eager_us"] / batch, eager_gflops=flops / (row["eager_us"] / 1e6) / 1e9)
            rows.append(row)
    reset_dynamo()
    smallest = min(rows, key=lambda r: r["batch"])
    for row in rows:
        row["eager_vs_smallest_batch"] = row["eager_us"] / smallest["eager_us"]
    return {
        "model": f"Linear({width}, {width}) -> ReLU -> Linear({width}, {width}), forward under no_grad",
        "width": width,
        "rows": rows,
        "compile_note": "compiled: mode='default', dynamic=False, compiled afresh for each batch size",
    }


def cuda_graphs(p: dict, device: str) -> dict[str, Any]:
    """(c) reduce-overhead (CUDA graphs) vs default mode for the tiny chains; CUDA only."""
    if torch.device(device).type != "cuda":
        return {"unavailable": CUDA_GRAPHS_UNAVAILABLE.format(device=device)}
    per_call_seconds = _timer(p, device)
    x = torch.randn(p["numel"], device=device)
    rows = []
    for k in p["ks"]:
        chain = pointwise_chain(k)
        times = {"eager_us": per_call_seconds(lambda chain=chain: chain(x)) * 1e6}
        for mode, key in (("default", "default_us"), ("reduce-overhead", "reduce_overhead_us")):
            reset_dynamo()
            compiled = torch.compile(chain, mode=mode)
            for _ in range(3):  # CUDA graph trees warm up, then record, then replay
                compiled(x)
            times[key] = per_call_seconds(lambda compiled=compiled: compiled(x)) * 1e6
        rows.append({"k": k, **times, "reduce_overhead_speedup": times["default_us"] / times["reduce_overhead_us"]})
    reset_dynamo()
    return {
        "numel": p["numel"],
        "rows": rows,
        "explanation": "reduce-overhead replays the recorded kernel launches as one CUDA graph per call.",
    }


def run(params: dict, device: str = "cpu") -> dict:
    """Measure (a) tiny chains, (b) the batch sweep, (c) CUDA graphs where there is a GPU."""
    p = resolve_params(params)
    started = time.perf_counter()
    result = {
        "demo": "overhead",
        "title": TITLE,
        "params": p,
        "device": device_info(device),
        "tiny": tiny_chains(p, device),
        "batch_sweep": batch_sweep(p, device),
        "cuda_graphs": cuda_graphs(p, device),
        "units": UNITS,
        "notes": [
            "Times are medians of repeats samples (lowest and highest kept beside them), each the mean of "
            "calls_per_sample back-to-back calls, eager and compiled samples taken alternately after warmup "
            "calls; the first compiled call (the compile) is never timed.",
            f"{p['numel']} float32 values are {p['numel'] * 4} bytes: moving them takes nanoseconds, so "
            "the tiny chain's time is per-operation overhead (Python, dispatcher, kernel launch), not data.",
        ],
    }
    result["elapsed_s"] = time.perf_counter() - started
    assert_json_ready(result)
    return result
