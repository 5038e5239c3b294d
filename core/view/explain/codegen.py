"""The code-generation explainer's presentation: how many ATen ops became how many kernels, and the
fused kernel's source with the line numbers it has in its module."""

from __future__ import annotations

from typing import Any


def codegen_sentence(result: dict[str, Any]) -> str:
    g = result.get("generated", {})
    if "unavailable" in g:
        return f"Not available here: {g['unavailable']}"
    eager, decomposed = result.get("eager_ops", {}), result.get("decomposed_ops", {})
    return (
        f"Eager runs **{eager.get('count')}** ATen op(s) ({', '.join(eager.get('ops', []))}), "
        f"**{decomposed.get('count')}** after Inductor's decompositions; Inductor wrote "
        f"**{g.get('kernel_count')}** {g.get('language')} kernel(s): {', '.join(f'`{k}`' for k in g.get('kernel_names', []))}."
    )


def numbered_source(source: str, first_line: int | None) -> str:
    """An excerpt with the line numbers it has in its module (st.code numbers from 1)."""
    lines = source.splitlines()
    if not first_line:
        return source
    width = len(str(first_line + len(lines) - 1))
    return "\n".join(f"{first_line + i:>{width}}  {line}" for i, line in enumerate(lines))
