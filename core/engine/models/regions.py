"""Compile scope: the whole model, or each of its repeated blocks ("regional compilation").

PyTorch's regional compilation recipe compiles the block that a model repeats (a transformer
layer, a residual block) in place, instead of the whole model. Dynamo treats a block's parameters
as inputs, so blocks of the same shape and settings share one compiled graph: the compile is paid
once per distinct block, not once per layer (blocks that differ, such as convnext_tiny's, each
compile on their own: `allow_a_graph_per_block`), while the steady step stays close to whole-model compile
(Hugging Face accelerate's benchmark: Llama-3.2-1B 10.7 s -> 1.95 s at similar speed). What runs
between the blocks (embeddings, stem, head) stays eager.

The nested scope compiles the whole model but marks each repeated block as a nested compile region
(torch.compiler.nested_compile_region, where torch has it): Dynamo traces the block once and reuses what it
compiled for every block that matches, inside one graph of the whole model, so what runs between the
blocks is compiled too.

Which block a model repeats is a column of its zoo row (core.engine.models.zoo); this module is
torch-free, so validation and the app can say which models have blocks; only `repeated_blocks`,
`compile_regions` and `mark_nested_regions` touch a built model (and import torch).
"""

from __future__ import annotations

from typing import Any

from core.engine.models.zoo import MODELS

COMPILE_SCOPES = ("whole", "regional", "nested")
# The scopes that need the model's repeated block: compiled on its own (regional), or marked as a nested compile
# region inside the whole model's compile (nested: torch.compiler.nested_compile_region, traced once and reused).
BLOCK_SCOPES = ("regional", "nested")

# model -> (the class of its repeated block, what a person calls it), from the zoo's rows. Found by
# class name, so this module imports neither torch nor torchvision.
REGIONAL_BLOCKS: dict[str, tuple[str, str]] = {
    m.name: (m.block, m.block_name or m.block) for m in MODELS.values() if m.block is not None
}


def region_problem(model: str) -> str | None:
    """Why `model` cannot be compiled regionally (it repeats no block), or None if it can."""
    if model in REGIONAL_BLOCKS:
        return None
    able = ", ".join(REGIONAL_BLOCKS)
    return f"{model} repeats no block to compile on its own; use 'whole' (regional works for: {able})"


def region_description(model: str) -> str:
    """'each transformer block': what regional compile compiles for this model ('' if nothing)."""
    block = REGIONAL_BLOCKS.get(model)
    return f"each {block[1]}" if block else ""


def blocks_share_shapes(model: str) -> bool:
    """Whether one compiled block serves every repeated block of `model` (the zoo's `block_kinds`
    is 1): only then does regional compile pay its compile once instead of once per kind."""
    info = MODELS.get(model)
    return info is not None and info.block is not None and info.block_kinds == 1


def block_kind(block: Any) -> tuple:
    """What Dynamo tells one block from another by: its submodules' types and plain settings, its
    parameters' and buffers' shapes. Blocks of one kind share a compiled graph."""
    parts: list[Any] = []
    for name, module in block.named_modules():
        settings = sorted(
            (k, v)
            for k, v in vars(module).items()
            if not k.startswith("_") and k != "training" and isinstance(v, int | float | str | bool | tuple)
        )
        parts.append((name, type(module).__name__, tuple(settings)))
    parts += [(n, tuple(t.shape)) for n, t in block.named_parameters()]
    parts += [(n, tuple(t.shape)) for n, t in block.named_buffers()]
    return tuple(parts)


def repeated_blocks(model: Any, name: str) -> list[Any]:
    """The blocks of a built model that regional compile compiles, outermost first (a block
    inside another block is not a region of its own)."""
    if name not in REGIONAL_BLOCKS:
        raise ValueError(region_problem(name))
    cls = REGIONAL_BLOCKS[name][0]
    blocks: list[Any] = []
    inside: set[int] = set()
    for module in model.modules():  # parents come before their children
        if id(module) in inside:
            continue
        if type(module).__name__ == cls:
            blocks.append(module)
            inside.update(id(m) for m in module.modules())
    if len(blocks) < 2:
        raise ValueError(f"{name}: found {len(blocks)} {cls} block(s), expected a repeated block")
    return blocks


def compile_regions(model: Any, name: str, **compile_kwargs: Any) -> int:
    """Compile each repeated block in place (`nn.Module.compile`, torch.compile's options);
    returns how many blocks now run compiled. The model object itself stays the same."""
    blocks = repeated_blocks(model, name)
    allow_a_graph_per_block(len(blocks))
    for block in blocks:
        block.compile(**compile_kwargs)
    return len(blocks)


def mark_nested_regions(model: Any, name: str) -> int:
    """Mark each repeated block's forward as a nested compile region (torch.compiler.nested_compile_region,
    on this instance only), so that compiling the whole model traces the block once and stamps out the
    same code for every block that matches it; returns how many blocks were marked. Outside a compile
    the mark does nothing: the eager variant is unchanged."""
    import types

    import torch

    blocks = repeated_blocks(model, name)
    for block in blocks:  # a bound method takes no mark: wrap the class's function and bind it to this block
        block.forward = types.MethodType(torch.compiler.nested_compile_region(type(block).forward), block)
    return len(blocks)


def allow_a_graph_per_block(blocks: int) -> int:
    """Raise Dynamo's recompile limit (for this process: a worker runs one race) so that every
    block may compile a graph of its own, in training and in evaluation; returns the limit now set.

    All blocks share one `forward` code object, and Dynamo keeps at most `recompile_limit` (8)
    compiled entries per code object: past it, the frame silently runs eager. Blocks that differ
    in what Dynamo guards on each need an entry: convnext_tiny's 18 blocks each have their own
    drop-path rate, mobilenet_v3_small's 11 blocks their own channel sizes. Without this, 10 of
    convnext_tiny's blocks would run eager while the race called them compiled."""
    import torch._dynamo.config as config

    # torch 2.7 renamed cache_size_limit to recompile_limit (the old name stays as an alias).
    setting = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    wanted = 2 * (blocks + 1)  # the training flag is guarded on too: evaluation compiles its own
    if getattr(config, setting) < wanted:
        setattr(config, setting, wanted)
    return getattr(config, setting)
