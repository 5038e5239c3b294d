"""What a per-step profile says, in words (torch-free: the race writes it, and the run's page and
the CLI word a stored profile again, so an old profile with a figure now known to be wrong is not
read back as a finding).

The claim "overhead-bound" rests on one figure, the kernel time (core.engine.profiling). It is
drawn only when that figure can carry it: kernels run for less than half the step, and the time
outside them comes to no more per operator than Python and dispatch can cost. A larger remainder
per operator means the profile missed work (as the CPU figure once missed every oneDNN convolution
and matmul), and then the reading says so instead of naming a bound.
"""

from __future__ import annotations

from typing import Any

from core.engine import words

# Kernels for less than this share of the step: the rest of the step sets its pace.
OVERHEAD_SHARE = 0.5
# Python, dispatch, autograd and launch cost a few to a few tens of microseconds per operator on any
# device this app runs on (the Overhead demo measures ~4-30 µs per op on a CPU). A remainder ten
# times past that is work the profile did not see, not overhead.
OVERHEAD_PER_OP_CEILING_S = 100e-6

CPU_COUNTING = "CPU operators' own time (convolutions, matmuls and their backward included; views, wrappers and allocations not) + Inductor C++ kernels"
# The CPU figure before it counted operators that call others: it left out oneDNN convolutions and matmuls.
STALE_CPU_COUNTING = "leaf ATen kernels + Inductor C++ kernels"


def counting_is_stale(part: dict[str, Any] | None) -> bool:
    """A profile recorded with the CPU kernel figure that missed convolutions and matmuls."""
    return bool(part) and part.get("kernel_counting") == STALE_CPU_COUNTING


def profile_reading(eager: dict[str, Any] | None, compiled: dict[str, Any] | None) -> str | None:
    """One sentence comparing the two anatomies: kernels launched, and what bounds each step where
    the kernel figure can say."""
    if not eager or not compiled:
        return None
    sentence = (
        f"Per step, eager launches {eager['kernels_per_step']:.0f} kernels ({eager['operators_per_step']:.0f} "
        f"operators), compiled {compiled['kernels_per_step']:.0f} ({compiled['operators_per_step']:.0f} operators)."
    )
    if counting_is_stale(eager) or counting_is_stale(compiled):
        return sentence + (
            " This profile was recorded when the CPU kernel time left out the operators that call others "
            "(oneDNN convolutions, matmuls and their backward), so it cannot say what bounds a step."
        )
    shares = [_kernel_share(part) for part in (eager, compiled)]
    if all(share is not None and share >= OVERHEAD_SHARE for share in shares):
        # Both kernel-bound: one clause for both. What makes them differ is the cause's to say
        # (core.engine.cause), from the verdict and both variants' times together.
        return sentence + (
            f" Kernels run for most of each step (eager {shares[0]:.0%}, compiled {shares[1]:.0%}): overhead is not "
            "what bounds either."
        )
    for name, part in (("eager", eager), ("compiled", compiled)):
        words = bound_words(name.capitalize(), part)
        if words:
            sentence += " " + words
    return sentence


def _kernel_share(part: dict[str, Any]) -> float | None:
    host, kernels = float(part.get("host_s_per_step") or 0.0), float(part.get("device_s_per_step") or 0.0)
    return min(kernels / host, 1.0) if host > 0 else None


def bound_words(name: str, part: dict[str, Any]) -> str | None:
    """What bounds one variant's step, or why the profile cannot say; None without a host time."""
    host, kernels = float(part.get("host_s_per_step") or 0.0), float(part.get("device_s_per_step") or 0.0)
    if host <= 0:
        return None
    share = min(kernels / host, 1.0)
    rest = max(host - kernels, 0.0)
    per_op = rest / max(float(part.get("operators_per_step") or 0.0), 1.0)
    if share >= OVERHEAD_SHARE:
        return f"{name}'s kernels run for {share:.0%} of its step: the work itself sets its pace, not overhead."
    if per_op > OVERHEAD_PER_OP_CEILING_S:
        return (
            f"{name}'s kernels account for only {share:.0%} of its step, but the other {words.seconds(rest)} come to "
            f"{words.seconds(per_op)} per operator, more than Python and dispatch cost (under {words.seconds(OVERHEAD_PER_OP_CEILING_S)}): "
            "the profile missed work there, so it cannot say what bounds this step."
        )
    return (
        f"{name}'s kernels run for only {share:.0%} of its step: the other {words.seconds(rest)} (about {words.seconds(per_op)} per "
        "operator) is Python, dispatch and launch overhead, so it is overhead-bound."
    )
