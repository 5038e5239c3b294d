"""What the doctor checks, as one table: each check's job, how many Inductor graph compiles it
makes, how long it is expected to take on one modern GPU (an H200-class card), and what its
outcome must show beyond "it ran". Fitting the checks into a time budget is here too, and the
`--plan` text, so the plan can be read on any machine (a CPU box included) before anyone pays for
a GPU. Torch-free.

The default plan fits a short GPU window: one cold ResNet-50 amp-bf16 race (the headline, cold as a
user sees it); every other check proves a path, not a speed, so it uses a tiny model and the
box's one warm Inductor/Triton cache. `full` runs everything at full size, cold, with every
demo and max-autotune with CUDA graphs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.engine.explain import DEMOS, PAGE_PARAMS
from core.engine.spec import RunSpec

DEFAULT_BUDGET_S = 240.0
BUNDLE_CHECK = "resnet50 amp-bf16, batch 128"  # exported as a recording the app can replay
OOM_CHECK = "out of memory on purpose"
RECOVERY_LANE = "cuda:0"  # the out-of-memory and the race after it share one GPU: that is the proof
PROBE_EXPECTED_S = 8.0  # a worker's start (torch, a CUDA context) and the device's facts
DEADLINE_FACTOR, MIN_DEADLINE_S = 3.0, 45.0  # a check's own deadline: this times its expected time


@dataclass(frozen=True)
class Check:
    """One line of the doctor's table: a job to run, what it costs, and what its outcome must show."""

    name: str
    kind: str  # "race" | "demo"
    params: dict[str, Any]
    expect_error: str | None = None  # a race that must fail, with this text in its reason
    compiles: int = 0  # Inductor graph compiles it makes (forward and backward count one each)
    expected_s: float = 30.0  # on one H200-class GPU, the worker's start included
    tf32: bool = False  # TF32 must be in force (what Inductor reads)
    cudagraphs: bool = False  # CUDA graphs must be replayed in the profiled steps
    loss_tolerance: float | None = None  # eager's and compiled's final losses agree within this (relative)
    lane: str | None = None  # one GPU lane, not the next idle one
    proves: str = ""  # what passing it shows, for the plan

    @property
    def deadline_s(self) -> float:
        """This check's own time limit (each check its own: a slow one fails alone)."""
        return max(MIN_DEADLINE_S, DEADLINE_FACTOR * self.expected_s)


@dataclass
class Plan:
    """The checks that fit the budget, in order, and those that do not."""

    checks: list[Check]
    over_budget: list[Check] = field(default_factory=list)
    budget_s: float | None = DEFAULT_BUDGET_S

    @property
    def expected_s(self) -> float:
        return PROBE_EXPECTED_S + sum(c.expected_s for c in self.checks)


def _race(
    name: str, compiles: int, expected_s: float, proves: str, check: dict[str, Any] | None = None, **spec: Any
) -> Check:
    base = {"model": "mlp", "batch_size": 64, "epochs": 2, "steps_per_epoch": 6, "device": "cuda"}
    base.update({"profile_steps": 0, "cache": "warm"})
    params = RunSpec(**{**base, **spec}).to_dict()
    return Check(name, "race", params, compiles=compiles, expected_s=expected_s, proves=proves, **(check or {}))


def _full(check: Check, expected_s: float) -> Check:
    """The same check at the old full size: cold cache, batch 256, 2 epochs of 10 steps, profiled."""
    params = {**check.params, "cache": "cold", "profile_steps": 3}
    if params["model"] == "mlp":
        params.update(batch_size=256, steps_per_epoch=max(params["steps_per_epoch"], 10))
    return Check(**{**check.__dict__, "params": params, "expected_s": expected_s})


def gpu_plan(full: bool = False) -> list[Check]:
    """What a GPU box must get right: the short plan by default, everything at full size with `full`."""
    headline = _race(
        BUNDLE_CHECK, 2, 75.0, "the tutorial's model, cold as a new user pays it; its bundle is exported",
        model="resnet50", batch_size=128, precision="amp-bf16", steps_per_epoch=15, cache="cold",
    )  # fmt: skip
    checks = [
        headline,
        _race("race mlp fp32, losses agree", 2, 10.0, "eager and compiled train alike (final losses within 1e-3)",
              {"loss_tolerance": 1e-3}, precision="fp32"),
        _race("race mlp tf32, TF32 in force", 2, 10.0, "TF32 set where Inductor reads it (matmul and cuDNN conv)",
              {"tf32": True}, precision="tf32"),
        _race("race mlp amp-fp16", 2, 10.0, "autocast fp16 with the grad scaler", precision="amp-fp16"),
        _race("race mlp amp-bf16, losses agree", 2, 10.0, "autocast bf16 (final losses within 5%)",
              {"loss_tolerance": 5e-2}, precision="amp-bf16"),
        _race("mode reduce-overhead, CUDA graphs replayed", 2, 12.0, "CUDA graphs recorded and replayed",
              {"cudagraphs": True}, mode="reduce-overhead", precision="amp-bf16", profile_steps=3),
        _race("mode max-autotune-no-cudagraphs", 2, 20.0, "Inductor's autotuned Triton templates",
              mode="max-autotune-no-cudagraphs", steps_per_epoch=4),
        _race("regional compile (gpt blocks)", 2, 15.0, "a repeated block compiled once, in place",
              model="gpt", batch_size=8, compile_scope="regional"),
        _race("alternating schedule", 2, 10.0, "eager and compiled taking turns on one GPU", schedule="alternating"),
        _race("warm-cache race", 2, 10.0, "a compile served from the warm cache the checks above filled",
              precision="fp32"),
    ]  # fmt: skip
    # 65,536 sequences of 4,096 tokens: the embedding alone wants 128 GiB, its sum with the positions as
    # much again, more than any GPU has; the batch itself is only 2 GiB, made in a second or two.
    oom = RunSpec(model="gpt", batch_size=65536, image_size=4096, epochs=1, steps_per_epoch=1, device="cuda")
    checks.append(
        Check(OOM_CHECK, "race", oom.to_dict(), expect_error="out of memory at batch size", expected_s=10.0,
              lane=RECOVERY_LANE, proves="an out-of-memory ends the run with the clear reason")
    )  # fmt: skip
    checks.append(
        _race("a race after the out-of-memory, same GPU", 2, 10.0, "the GPU that ran out of memory recovers",
              {"lane": RECOVERY_LANE}, precision="amp-bf16", epochs=1, steps_per_epoch=5)
    )  # fmt: skip
    if not full:
        return checks
    checks = [c if c.name == BUNDLE_CHECK or c.expect_error else _full(c, 3 * c.expected_s) for c in checks]
    checks.insert(
        7,
        _full(_race("mode max-autotune (with CUDA graphs)", 2, 30.0, "autotuned templates under CUDA graphs",
                    {"cudagraphs": True}, mode="max-autotune", steps_per_epoch=4), 90.0),
    )  # fmt: skip
    checks += [
        Check(f"demo {name}", "demo", {"demo": name, "params": dict(PAGE_PARAMS[name])}, compiles=DEMO_COMPILES.get(name, 2),
              expected_s=DEMO_EXPECTED_S.get(name, 30.0), proves="the Under the hood demo, as the page asks for it")
        for name in DEMOS
    ]  # fmt: skip
    return checks


# The demos at the page's parameters (estimates; caches compiles cold and warm in fresh processes).
DEMO_COMPILES = {"fusion": 2, "overhead": 2, "graphs": 4, "codegen": 1, "caches": 8}
DEMO_EXPECTED_S = {"fusion": 25.0, "overhead": 30.0, "graphs": 20.0, "codegen": 15.0, "caches": 60.0}


def cpu_smoke_plan() -> list[Check]:
    """The same machinery on a CPU at toy sizes: what CI can check of the doctor itself."""
    race = RunSpec(model="mlp", batch_size=8, epochs=1, steps_per_epoch=3, backend="aot_eager", device="cpu")
    return [
        Check("race mlp fp32 (aot_eager)", "race", race.to_dict(), expected_s=20.0, loss_tolerance=1e-3),
        Check("demo graphs", "demo", {"demo": "graphs", "params": {"examples": ["clean", "prints"]}}, expected_s=20.0),
    ]


def fit_budget(checks: list[Check], budget_s: float | None) -> Plan:
    """The longest first part of the checks whose expected times (after the probe's) fit the
    budget (in order: the race after the out-of-memory needs the out-of-memory); the rest will say
    "not run: budget". No budget: all of them."""
    if budget_s is None:
        return Plan(list(checks), [], None)
    plan = Plan([], [], budget_s)
    used = PROBE_EXPECTED_S
    for check in checks:
        if not plan.over_budget and used + check.expected_s <= budget_s:
            plan.checks.append(check)
            used += check.expected_s
        else:
            plan.over_budget.append(check)
    return plan


def plan_text(plan: Plan) -> str:
    """`doctor --plan`: every check, its compiles, expected time and own deadline, and the total."""
    width = max([len(c.name) for c in plan.checks + plan.over_budget] + [12]) + 2
    lines = [f"{'check':<{width}}{'compiles':>9}{'expected':>10}{'deadline':>10}  proves"]
    lines.append(f"{'device probe':<{width}}{0:>9}{PROBE_EXPECTED_S:>9.0f}s{'':>10}  the GPU, its versions and driver")
    for c in plan.checks:
        lines.append(f"{c.name:<{width}}{c.compiles:>9}{c.expected_s:>9.0f}s{c.deadline_s:>9.0f}s  {c.proves}")
    for c in plan.over_budget:
        lines.append(f"{c.name:<{width}}{c.compiles:>9}{c.expected_s:>9.0f}s{'':>10}  not run: budget")
    compiles = sum(c.compiles for c in plan.checks)
    budget = f" of a {plan.budget_s:.0f} s budget" if plan.budget_s is not None else " (no budget: --full)"
    lines.append(
        f"\n{len(plan.checks) + 1} checks, {compiles} Inductor graph compiles, about {plan.expected_s:.0f} s{budget} "
        "on one H200-class GPU (expected times are estimates; each check stops at its own deadline)"
    )
    return "\n".join(lines)
