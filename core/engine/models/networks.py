"""The zoo's networks themselves (torch code), and `build_model`. Only processes that train import
this module; the rows in core.engine.models.zoo describe the models without importing torch, so the
app's server stays light, and each row names its builder here. The dependency runs one way: this
module reads the rows, the rows never import it."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from core.engine.models.zoo import NUM_CLASSES, VOCAB_SIZE, get_model_info


class SmallCNN(nn.Module):
    """Two conv blocks and a linear head: the classic 'first CNN'."""

    def __init__(self, size: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(64 * (size // 4) ** 2, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


class PointwiseBlock(nn.Module):
    """Two residual gated-activation layers (GELU x sigmoid, tanh) after LayerNorms, only one
    with a matmul: many elementwise ops per matmul, the memory traffic operator fusion removes."""

    def __init__(self, width: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.norm2 = nn.LayerNorm(width)
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + torch.tanh(F.gelu(h) * torch.sigmoid(1.5 * h)) * 0.5
        h = self.linear(self.norm2(x))
        return x + torch.tanh(F.gelu(h) * torch.sigmoid(h)) * 0.5


class PointwiseMLP(nn.Module):
    """Residual MLP of pointwise-heavy blocks: the zoo's model that compile speeds up on CPU."""

    def __init__(self, width: int, depth: int = 2):
        super().__init__()
        self.blocks = nn.Sequential(*[PointwiseBlock(width) for _ in range(depth)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(x)))


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class GPTBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A small GPT-style causal language model (nanoGPT's shape) using fused SDPA attention."""

    def __init__(self, max_len: int, dim: int = 128, heads: int = 4, layers: int = 2):
        super().__init__()
        self.tok = nn.Embedding(VOCAB_SIZE, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.blocks = nn.Sequential(*[GPTBlock(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, VOCAB_SIZE, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.blocks(self.tok(idx) + self.pos(pos))
        return self.head(self.ln(x))


def _torchvision(name: str, sized: bool = False) -> Callable[[int], nn.Module]:
    """A builder of torchvision's `name` with a 10-class head; `sized`: the model fixes its image
    size at construction (ViT's position embeddings)."""

    def build(size: int) -> nn.Module:
        import torchvision.models as tvm

        extra = {"image_size": size} if sized else {}
        return getattr(tvm, name)(weights=None, num_classes=NUM_CLASSES, **extra)

    return build


def mlp(size: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(size, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, NUM_CLASSES)
    )


resnet18 = _torchvision("resnet18")
resnet50 = _torchvision("resnet50")
mobilenet_v3_small = _torchvision("mobilenet_v3_small")
convnext_tiny = _torchvision("convnext_tiny")
vit_b_16 = _torchvision("vit_b_16", sized=True)


def build_model(name: str, size: int | None = None) -> nn.Module:
    """Build a randomly initialised model for the given input size (default: the model's)."""
    info = get_model_info(name)
    builder = globals()[info.builder]  # the row names its builder in this module
    return builder(size if size is not None else info.default_size)


def parameter_count(name: str, size: int | None = None) -> int:
    """Parameters of a model built on the meta device (no memory, no init cost)."""
    with torch.device("meta"):
        model = build_model(name, size)
    return sum(p.numel() for p in model.parameters())
