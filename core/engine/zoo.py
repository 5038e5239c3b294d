"""Model registry: every model a race can train, with the input it takes.

Pure metadata (no torch import), so validation and the app can list models, sizes and
parameter counts without loading PyTorch. The networks themselves live in core.engine.models, which
imports this registry (never the other way round). Models get random weights: nothing is downloaded.
"""

from __future__ import annotations

from dataclasses import dataclass

NUM_CLASSES = 10  # CIFAR-10-sized heads everywhere: the tutorial's setup
VOCAB_SIZE = 512  # token models predict the next token from this vocabulary
FEATURES = 512  # the MLP takes this many input features
POINTWISE_WIDTH = 256  # narrow and wide-batched: elementwise work outweighs the matmuls


@dataclass(frozen=True)
class ModelInfo:
    """What the rest of the app needs to know about a model without building it."""

    name: str
    input_kind: str  # "image" (3xSxS), "tokens" (sequence of S ids), "vector" (S features)
    default_size: int
    min_size: int
    size_multiple: int
    default_batch_size: int
    params: int  # at the default input size; tests check it against the built model
    description: str

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
        ModelInfo("mlp", "vector", FEATURES, FEATURES, 1, 256, 1_585_162, "3-layer ReLU MLP"),
        ModelInfo("small_cnn", "image", 32, 8, 4, 128, 60_554, "2 conv blocks + linear head"),
        ModelInfo(
            "pointwise_mlp",
            "vector",
            POINTWISE_WIDTH,
            POINTWISE_WIDTH,
            1,
            4096,
            136_714,
            "residual MLP, LayerNorm + GELU*sigmoid + tanh: fusion-friendly, faster compiled on CPU",
        ),
        ModelInfo("resnet18", "image", 32, 32, 1, 64, 11_181_642, "torchvision ResNet-18"),
        ModelInfo("resnet50", "image", 224, 32, 1, 128, 23_528_522, "torchvision ResNet-50, the tutorial's model"),
        ModelInfo("mobilenet_v3_small", "image", 224, 32, 1, 128, 1_528_106, "torchvision, depthwise convs"),
        ModelInfo("convnext_tiny", "image", 224, 32, 1, 64, 27_827_818, "torchvision ConvNeXt-T"),
        ModelInfo(
            "vit_b_16", "image", 224, 32, 16, 64, 85_806_346, "torchvision ViT-B/16 (size: multiple of the 16 px patch)"
        ),
        ModelInfo("gpt", "tokens", 128, 8, 1, 32, 544_256, "2-layer causal transformer, scaled_dot_product_attention"),
    ]
}


def get_model_info(name: str) -> ModelInfo:
    """Look up a model; raises KeyError naming the allowed models."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; allowed: {', '.join(MODELS)}") from None
