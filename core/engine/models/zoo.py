"""The zoo: every built-in model a race can train, one keyword row each.

A row is all the app knows about a model without building it: its builder, its input and
defaults, its repeated block (regional compile, core.engine.models.regions), rough CPU figures
for the duration estimate (core.engine.race_estimates) and whether the caches demo offers it. Pure
metadata (no torch import), so validation and the app can list models, sizes and parameter counts
without loading PyTorch; the builders live in core.engine.models.networks, which reads these rows
(never the other way round). Models get random weights: nothing is downloaded.

Adding a model is one row here plus its builder in networks.
"""

from __future__ import annotations

from dataclasses import dataclass

NUM_CLASSES = 10  # CIFAR-10-sized heads everywhere: the tutorial's setup
VOCAB_SIZE = 512  # token models predict the next token from this vocabulary
FEATURES = 512  # the MLP takes this many input features
POINTWISE_WIDTH = 256  # narrow and wide-batched: elementwise work outweighs the matmuls


@dataclass(frozen=True)
class ModelInfo:
    """What the rest of the app needs to know about a zoo model without building it."""

    name: str
    input_kind: str  # "image" (3xSxS), "tokens" (sequence of S ids), "vector" (S features)
    default_size: int
    min_size: int
    size_multiple: int
    default_batch_size: int
    params: int  # at the default input size; tests check it against the built model
    description: str
    builder: str  # a callable in core.engine.models.networks taking the input size
    # Regional compile: the class name of the block the model repeats, and what a person calls it.
    block: str | None = None
    block_name: str | None = None
    # How many different blocks its repeated blocks come in (parameter and buffer shapes, settings
    # such as a drop-path rate): 1 where one compiled block serves them all, what regional compile
    # saves on; more where each kind compiles its own graph (tests check it against the built model).
    block_kinds: int | None = None
    # Rough steady step (s) at the default batch and size, and cold compile (s), on a 2-core x86
    # CPU: measured for the small models; None where no figure was measured. "About how long" only.
    cpu_step_s: float | None = None
    cpu_compile_s: float | None = None
    # What one training sample keeps for its backward pass at the default size, in fp32 bytes: every
    # tensor autograd saves in a forward and loss, counted at two batch sizes (docs/benchmarks.md).
    # The memory guard's floor (core.engine.race_memory); None: not known, never refused.
    activation_bytes: int | None = None
    caches_demo: bool = False  # quick enough to compile for the caches demo (explain.caches)

    @property
    def size_meaning(self) -> str:
        return {
            "image": "image side in pixels",
            "tokens": "sequence length in tokens",
            "vector": "number of input features",
        }[self.input_kind]

    def size_problem(self, size: int) -> str | None:
        """Why this model cannot take `size` as its input size, or None if it can."""
        if self.input_kind == "vector" and size != self.default_size:
            return f"{self.name} takes exactly {self.default_size} input features (got {size})"
        if size < self.min_size:
            return f"{self.name} needs an input size of at least {self.min_size} ({self.size_meaning}; got {size})"
        if size % self.size_multiple:
            return (
                f"{self.name} needs an input size that is a multiple of {self.size_multiple} "
                f"({self.size_meaning}; got {size})"
            )
        return None


# Minimum image sizes: 32 px is the smallest input for which every stride-2 stage of these
# networks still has a feature map to halve (CIFAR-10's native size); smaller inputs collapse
# to 1x1 early and, for BatchNorm models, fail at small batch sizes.
MODELS: dict[str, ModelInfo] = {
    info.name: info
    for info in [
        ModelInfo(
            name="mlp",
            input_kind="vector",
            default_size=FEATURES,
            min_size=FEATURES,
            size_multiple=1,
            default_batch_size=256,
            params=1_585_162,
            description="3-layer ReLU MLP",
            builder="mlp",
            cpu_step_s=0.05,
            cpu_compile_s=20,
            caches_demo=True,
            activation_bytes=10 * 1024,
        ),
        ModelInfo(
            name="small_cnn",
            input_kind="image",
            default_size=32,
            min_size=8,
            size_multiple=4,
            default_batch_size=128,
            params=60_554,
            description="2 conv blocks + linear head",
            builder="SmallCNN",
            cpu_step_s=0.15,
            cpu_compile_s=20,
            caches_demo=True,
            activation_bytes=540 * 1024,
        ),
        ModelInfo(
            name="pointwise_mlp",
            input_kind="vector",
            default_size=POINTWISE_WIDTH,
            min_size=POINTWISE_WIDTH,
            size_multiple=1,
            default_batch_size=4096,
            params=136_714,
            description="residual MLP, LayerNorm + GELU*sigmoid + tanh: pointwise ops Inductor fuses",
            builder="PointwiseMLP",
            block="PointwiseBlock",
            block_name="pointwise block",
            block_kinds=1,
            cpu_step_s=0.045,
            cpu_compile_s=10,
            caches_demo=True,
            activation_bytes=24 * 1024,
        ),
        ModelInfo(
            name="resnet18",
            input_kind="image",
            default_size=32,
            min_size=32,
            size_multiple=1,
            default_batch_size=64,
            params=11_181_642,
            description="torchvision ResNet-18",
            builder="resnet18",
            block="BasicBlock",
            block_name="residual block",
            block_kinds=7,
            cpu_step_s=0.25,
            cpu_compile_s=35,
            caches_demo=True,
            activation_bytes=444 * 1024,
        ),
        ModelInfo(
            name="resnet50",
            input_kind="image",
            default_size=224,
            min_size=32,
            size_multiple=1,
            default_batch_size=128,
            params=23_528_522,
            description="torchvision ResNet-50, the tutorial's model",
            builder="resnet50",
            block="Bottleneck",
            block_name="residual (bottleneck) block",
            block_kinds=8,
            activation_bytes=83_896 * 1024,
        ),
        ModelInfo(
            name="mobilenet_v3_small",
            input_kind="image",
            default_size=224,
            min_size=32,
            size_multiple=1,
            default_batch_size=128,
            params=1_528_106,
            description="torchvision, depthwise convs",
            builder="mobilenet_v3_small",
            block="InvertedResidual",
            block_name="inverted-residual block",
            block_kinds=9,
            activation_bytes=15_790 * 1024,
        ),
        ModelInfo(
            name="convnext_tiny",
            input_kind="image",
            default_size=224,
            min_size=32,
            size_multiple=1,
            default_batch_size=64,
            params=27_827_818,
            description="torchvision ConvNeXt-T",
            builder="convnext_tiny",
            block="CNBlock",
            block_name="ConvNeXt block",
            block_kinds=18,
            activation_bytes=106_597 * 1024,
        ),
        ModelInfo(
            name="vit_b_16",
            input_kind="image",
            default_size=224,
            min_size=32,
            size_multiple=16,
            default_batch_size=64,
            params=85_806_346,
            description="torchvision ViT-B/16 (size: multiple of the 16 px patch)",
            builder="vit_b_16",
            block="EncoderBlock",
            block_name="transformer encoder block",
            block_kinds=1,
            activation_bytes=115_391 * 1024,
        ),
        ModelInfo(
            name="gpt",
            input_kind="tokens",
            default_size=128,
            min_size=8,
            size_multiple=1,
            default_batch_size=32,
            params=544_256,
            description="2-layer causal transformer, scaled_dot_product_attention",
            builder="TinyGPT",
            block="GPTBlock",
            block_name="transformer block",
            block_kinds=1,
            cpu_step_s=0.1,
            cpu_compile_s=28,
            caches_demo=True,
            activation_bytes=2_443 * 1024,
        ),
    ]
}


def get_model_info(name: str) -> ModelInfo:
    """Look up a model; raises KeyError naming the allowed models."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; allowed: {', '.join(MODELS)}") from None
