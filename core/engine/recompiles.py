"""Recompiles in the story: each recompile of a race, the guard that failed (in full), what it cost,
and what would avoid it.

A recompile happens when a guard torch.compile put on its graph fails for a new input: a tensor of
another size (the last, shorter batch; a new sequence length), another dtype or layout, a Python
value the graph baked in. The race records one compile event per compile with torch's own words for
the failed guard ("recompile: tensor 'x' size mismatch at index 0. expected 48, actual 24",
core.engine.compile_stats.compile_note) at the step that paid for it; this reads them back, prices
each from that step against a steady compiled step, and says what avoids that kind of guard.
Torch-free: the pages and the CLI word a stored race.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from statistics import median
from typing import Any

from core.engine import words
from core.engine.summary import Summary

RECOMPILE = "recompile"
SIZE_GUARD = re.compile(r"size mismatch at index (\d+)")
# The tensor a guard names, as torch spells it: 'x', "L['x']", or a module's own state reached
# through it, "self._modules['bn1']._buffers['running_var']" (older torch: "L['self'].bn1.running_var").
GUARDED_TENSOR = re.compile(r"tensor '(.+)' (?:size|stride|dtype|requires_grad|device|dispatch key set) mismatch")
STATE_STEP = re.compile(r"_(?:modules|parameters|buffers)\['([^']+)'\]|\.([A-Za-z]\w*)")
EXPECTED = re.compile(r"expected (\S+?),? actual (\S+)")
# What changed when a size guard failed (the recommendation reads these, not the words).
INPUT_SIZE = "input size"  # an input tensor arrived with another size: a batch, a sequence length
STATE_SIZE = "parameter or buffer size"  # the module's own weights or buffers differ: another block
BLOCK_SIZE = "another block's width"  # a regional race's first call: a block of another width
# How many different guards a reading names before it counts the rest.
NAMED = 3


@dataclass(frozen=True)
class Recompile:
    """One recompile: where it happened, the guard that failed (torch's words, whole), and what the
    step that paid for it cost beyond a steady compiled step (None where the step is not known)."""

    epoch: int | None
    step: int | None
    phase: str
    guard: str
    cost_s: float | None
    # A regional race's recompile in the very call that compiled first: every block saw the same
    # batch, so a size that failed there is another block's width, whichever tensor the guard names.
    across_blocks: bool = False

    @property
    def cause(self) -> str | None:
        """What changed, for a size guard (INPUT_SIZE, STATE_SIZE or BLOCK_SIZE); None for others."""
        found = size_cause(self.guard)
        return BLOCK_SIZE if found == INPUT_SIZE and self.across_blocks else found

    def to_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "step": self.step,
            "phase": self.phase,
            "guard": self.guard,
            "cost_s": self.cost_s,
            "across_blocks": self.across_blocks,
        }


def guard_of(note: str) -> str:
    """The failed guard in a compile event's note, whole ('' for a torch that does not say)."""
    text = note[len(RECOMPILE) :].lstrip()
    return text[1:].strip() if text.startswith(":") else ""


def guarded_tensor(guard: str) -> str | None:
    """The tensor a failed guard names, as torch spells it; None where it names none."""
    found = GUARDED_TENSOR.search(guard)
    return found.group(1) if found else None


def state_name(tensor: str) -> str | None:
    """'bn1.running_var' for a parameter or buffer reached through a module ("self._modules['bn1']
    ._buffers['running_var']"); None for an input tensor ('x', "L['x']", "L['args'][0]")."""
    if not any(key in tensor for key in ("_parameters[", "_buffers[", "_modules[")) and "." not in tensor:
        return None
    steps = [a or b for a, b in STATE_STEP.findall(tensor)]
    return ".".join(steps) or tensor


def size_cause(guard: str) -> str | None:
    """What a failed size guard says changed: an input's size (INPUT_SIZE), or a parameter's or
    buffer's (STATE_SIZE: blocks that share compiled code but not widths); None for other guards."""
    if not SIZE_GUARD.search(guard):
        return None
    tensor = guarded_tensor(guard)
    return STATE_SIZE if tensor and state_name(tensor) else INPUT_SIZE


def recompiles_of(summary: Summary | dict[str, Any] | None, params: dict[str, Any] | None = None) -> list[Recompile]:
    """The compiled variant's recompiles, in order, each priced from the step that paid for it (and,
    for a regional race, `params` saying so, whether it came in the call that compiled first)."""
    s = Summary.of(summary)
    compiled = [e for e in s.compile_events or [] if isinstance(e, dict) and e.get("variant") == "compiled"]
    events = [e for e in compiled if str(e.get("note") or "").startswith(RECOMPILE)]
    train_steps = [e["step"] for e in compiled if e.get("phase", "train") == "train" and isinstance(e.get("step"), int)]
    first = min(train_steps) if train_steps and (params or {}).get("compile_scope") == "regional" else None
    times = [float(t) for t in s.compiled_step_times_s or [] if isinstance(t, int | float)]
    steady = s.compiled_median_step_s
    steady = float(steady) if isinstance(steady, int | float) else (median(times) if times else None)
    out, priced = [], set()
    for e in events:
        step = e.get("step") if isinstance(e.get("step"), int) else None
        cost = None
        # One step pays once however many graphs it recompiled (forward and backward are two events).
        if e.get("phase", "train") == "train" and step and 0 < step <= len(times) and steady is not None:
            cost = 0.0 if step in priced else max(times[step - 1] - steady, 0.0)
            priced.add(step)
        phase = str(e.get("phase") or "train")
        across = first is not None and phase == "train" and step == first
        out.append(Recompile(e.get("epoch"), step, phase, guard_of(str(e["note"])), cost, across))
    return out


def avoid_words(guard: str, params: dict[str, Any] | None = None, across_blocks: bool = False) -> str:
    """What would avoid a recompile on this guard, in a sentence (`across_blocks`: it failed in a
    regional race's first call, where only the blocks' widths differ)."""
    params = params or {}
    size = SIZE_GUARD.search(guard)
    if size and (across_blocks or size_cause(guard) == STATE_SIZE):
        return _state_words(guard, params)
    if size:
        index = int(size.group(1))
        what = "batch size" if index == 0 else f"size of dimension {index}"
        asked = " (this race asked for dynamic=False: one graph per shape)" if params.get("dynamic") is False else ""
        pad = (
            "pad the short last batch to the full size or drop it (drop_last=True)"
            if index == 0
            else "pad inputs to a few fixed lengths (buckets)"
        )
        return (
            f"A new {what} failed the guard{asked}: compile with dynamic=True, or mark the dimension dynamic before the "
            f"first call (torch._dynamo.mark_dynamic(x, {index})), so one graph serves every size; or {pad} so the "
            "shape never changes."
        )
    if "stride mismatch" in guard:
        return (
            "A tensor arrived with another memory layout: make the input contiguous (x.contiguous()) before the call."
        )
    if "dtype mismatch" in guard:
        return "A tensor arrived with another dtype: cast inputs to one dtype before the call."
    if "requires_grad mismatch" in guard:
        return "A tensor's requires_grad changed between calls: keep it the same for every call."
    if "training" in guard:
        return "The model switched between train() and eval(): each mode compiles its own graph once; that is expected."
    return (
        "A Python value the graph depends on changed: keep it fixed between calls, or pass it as a tensor so the "
        "graph does not bake it in."
    )


def _state_words(guard: str, params: dict[str, Any]) -> str:
    """A parameter or buffer of another size, or a block's input of another width: not a batch, so
    nothing about the data helps."""
    tensor = guarded_tensor(guard) or ""
    state = state_name(tensor)
    name = f"the module's own {state}" if state else f"the block's input {tensor}" if tensor else "a tensor"
    sizes = EXPECTED.search(guard)
    was = f" (size {sizes.group(2)} where the compiled code expected {sizes.group(1)})" if sizes else ""
    if params.get("compile_scope") == "regional":
        return (
            f"{name[0].upper()}{name[1:]}{was} differs in size between the repeated blocks, which share one "
            "compiled region: each block of another width compiles a graph of its own. The batch kept its size, "
            "so dynamic shapes or padding would not help; compile the whole model, or compile regionally only a "
            "model whose repeated blocks are all alike."
        )
    return (
        f"{name[0].upper()}{name[1:]}{was} changed size between calls: the inputs kept theirs, so dynamic shapes "
        "or padding would not help; keep the model's parameters and buffers the same size between calls."
    )


def recompile_words(summary: Summary | dict[str, Any] | None, params: dict[str, Any] | None = None) -> str | None:
    """The recompiles in words for the reading: how many and what they cost, each different guard
    in full with the steps it failed at, and what would avoid it; None for a race without any."""
    found = recompiles_of(summary, params)
    if not found:
        return None
    by_guard: dict[str, list[Recompile]] = {}
    for r in found:
        by_guard.setdefault(r.guard, []).append(r)
    times = "once" if len(found) == 1 else f"{len(found)} times"
    named = list(by_guard.items())[:NAMED]
    clauses = []
    for guard, group in named:
        said = f"the guard that failed was {guard}" if guard else "this torch does not record which guard failed"
        clauses.append(f"{_where(group)}{_cost(group, len(by_guard) > 1 or len(group) > 1)}, {said}")
    sentence = f"Compiled recompiled {times}{_cost(found, True) if len(by_guard) > 1 else ''}: " + "; ".join(clauses)
    if len(by_guard) > NAMED:
        rest = sum(len(g) for _, g in list(by_guard.items())[NAMED:])
        sentence += f"; {rest} more on {len(by_guard) - NAMED} other guards (listed with the compiles)"
    avoid = dict.fromkeys(avoid_words(guard, params, all(r.across_blocks for r in group)) for guard, group in named)
    return sentence.rstrip(".") + ". " + " ".join(avoid)


def _cost(group: list[Recompile], in_all: bool) -> str:
    costs = [r.cost_s for r in group if r.cost_s is not None]
    if not costs:
        return ""
    return f" (about {words.seconds(sum(costs))}{' in all' if in_all and len(group) > 1 else ''})"


def _where(group: list[Recompile]) -> str:
    steps = list(dict.fromkeys(r.step for r in group if r.step is not None))  # a step that recompiled often, once
    if not steps:
        return f"{len(group)} time{'s' if len(group) > 1 else ''}"
    shown = ", ".join(words.number(s) for s in steps[:4]) + (f" and {len(steps) - 4} more" if len(steps) > 4 else "")
    return f"at step{'s' if len(steps) > 1 else ''} {shown}"
