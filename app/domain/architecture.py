"""Transformer architectures: weight counts and the largest layer, derived from the shape.

ZeRO-3 gathers one layer at a time, so the largest single layer (the embedding table or one
transformer block, whichever is bigger) must fit on a card assembled. Counting it needs the
architecture, not only the total.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ModelName(StrEnum):
    """The models a person can pick; CUSTOM means 'enter the weight count'."""

    SEED_30B = "seed-30b"
    ZERO_7_5B = "zero-7.5b"
    LLAMA_3_8B = "llama-3-8b"
    LLAMA_3_70B = "llama-3-70b"
    LLAMA_3_1_405B = "llama-3.1-405b"
    GPT_3_175B = "gpt-3-175b"
    CUSTOM = "custom"


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer's shape."""

    layers: int
    hidden: int
    ffn: int
    vocab: int
    heads: int
    kv_heads: int
    tied_embeddings: bool
    gated_mlp: bool = True
    """Llama's SwiGLU has three FFN matrices; GPT's MLP has two."""
    biases: bool = False
    layer_norm: bool = False
    """LayerNorm has a weight and a bias per channel; RMSNorm only a weight."""
    positions: int = 0
    """Learned position embeddings (GPT-3 has 2048); 0 for rotary."""
    context: int = 4096
    """The longest sequence it reads: its context window."""
    train_seq: int = 0
    """The sequence length a run of it trains at unless told: the length it was pre-trained at, which a
    person sizing a run would choose; 0: its context. Llama 3.1 was pre-trained at 8,192 tokens and its
    context extended to 131,072 only in a last, short stage (Llama Team 2024, "The Llama 3 Herd of Models",
    section 3.4), so a run of it defaults to 8,192, not to the whole context."""
    family: str = ""
    """The family the default sequence is said to come from: "Llama 3's training length"."""
    dropout: bool = False
    """Dropout after attention and MLP (GPT-3 trained with it; Llama without): each keeps a 1-byte mask."""
    flash_attention: bool = True
    """Attention computed in tiles, keeping no s × s scores (Llama's usual kernels); False: the
    scores kept in memory, as Korthikanti et al. 2022 count them for GPT-3."""

    def __post_init__(self) -> None:
        if min(self.layers, self.hidden, self.ffn, self.vocab, self.heads, self.kv_heads) < 1:
            raise ValueError("every dimension of an architecture is at least 1")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError("heads must divide hidden, and kv_heads must divide heads")

    @property
    def default_seq(self) -> int:
        """The tokens of a sequence when none are given: its training length, else its context."""
        return self.train_seq or self.context

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    @property
    def norm_params(self) -> int:
        """Weights of one normalisation layer."""
        return self.hidden * (2 if self.layer_norm else 1)

    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections of one block (K and V shrink with grouped-query attention)."""
        kv = self.kv_heads * self.head_dim
        matrices = self.hidden * self.hidden * 2 + self.hidden * kv * 2
        bias = (self.hidden * 2 + kv * 2) if self.biases else 0
        return matrices + bias

    @property
    def mlp_params(self) -> int:
        """The feed-forward network of one block."""
        matrices = (3 if self.gated_mlp else 2) * self.hidden * self.ffn
        bias = ((2 if self.gated_mlp else 1) * self.ffn + self.hidden) if self.biases else 0
        return matrices + bias

    @property
    def block_params(self) -> int:
        """One transformer block: attention, MLP and its two norms."""
        return self.attention_params + self.mlp_params + 2 * self.norm_params

    @property
    def embedding_params(self) -> int:
        """The token embedding table (also the output head when tied)."""
        return self.vocab * self.hidden

    @property
    def params(self) -> int:
        """Every weight of the model."""
        heads = 1 if self.tied_embeddings else 2
        return (
            self.layers * self.block_params
            + heads * self.embedding_params
            + self.positions * self.hidden
            + self.norm_params  # the final norm
        )

    @property
    def largest_layer(self) -> int:
        """The most weights ZeRO-3 gathers at once: the embedding table or one block."""
        return max(self.embedding_params, self.block_params)

    @property
    def block_module(self) -> int:
        """A block's largest module by its own weights: one MLP matrix, or the query projection.

        Modules as Hugging Face's Llama and GPT-2-style models have them: q, k, v and o projections,
        the MLP's matrices, each an `nn.Linear` with its bias, and the norms.
        """
        bias = 1 if self.biases else 0
        return max(self.hidden * self.ffn + bias * self.ffn, self.hidden * self.hidden + bias * self.hidden)

    @property
    def largest_module(self) -> int:
        """The model's largest module by its own weights: DeepSpeed's "largest layer".

        DeepSpeed's estimators take `max(sum(p.numel() for p in m.parameters(recurse=False)) for m in
        model.modules())`: an embedding table or one matrix, never a whole block.
        """
        return max(self.embedding_params, self.positions * self.hidden, self.block_module)


@dataclass(frozen=True)
class ModelPreset:
    """A named model: a published architecture, or a bare weight count from a text."""

    name: ModelName
    title: str
    params: int
    architecture: Architecture | None = None
    source: str = ""
    equal_layers: int | None = None
    """A count drawn as this many layers of equal size, as the lesson's picture draws its model."""

    @property
    def largest_layer(self) -> int | None:
        """Derived from the architecture, or from equal layers; unknown for a bare count."""
        if self.architecture:
            return self.architecture.largest_layer
        return -(-self.params // self.equal_layers) if self.equal_layers else None

    @property
    def largest_layer_source(self) -> str:
        """Where the largest layer comes from, in words."""
        if self.architecture:
            return "derived from the architecture"
        return f"one of its {self.equal_layers} equal layers" if self.equal_layers else "unknown"


def _preset(name: ModelName, title: str, architecture: Architecture, source: str) -> ModelPreset:
    return ModelPreset(name, title, architecture.params, architecture, source)


LLAMA_3_8B = Architecture(
    layers=32,
    hidden=4096,
    ffn=14336,
    vocab=128256,
    heads=32,
    kv_heads=8,
    tied_embeddings=False,
    context=8192,
    family="Llama 3",
)
LLAMA_3_70B = Architecture(
    layers=80,
    hidden=8192,
    ffn=28672,
    vocab=128256,
    heads=64,
    kv_heads=8,
    tied_embeddings=False,
    context=8192,
    family="Llama 3",
)
LLAMA_3_1_405B = Architecture(
    layers=126,
    hidden=16384,
    ffn=53248,
    vocab=128256,
    heads=128,
    kv_heads=8,
    tied_embeddings=False,
    context=131072,
    train_seq=8192,
    family="Llama 3.1",
)
GPT_3_175B = Architecture(
    layers=96,
    hidden=12288,
    ffn=49152,
    vocab=50257,
    heads=96,
    kv_heads=96,
    tied_embeddings=True,
    gated_mlp=False,
    biases=True,
    layer_norm=True,
    positions=2048,
    context=2048,
    family="GPT-3",
    dropout=True,
    flash_attention=False,
)

PRESETS: dict[ModelName, ModelPreset] = {
    preset.name: preset
    for preset in (
        # The lesson's own picture: eight weights standing for eight layers, each an eighth of the
        # model, so ZeRO-3 gathers one of them at a time.
        ModelPreset(
            ModelName.SEED_30B,
            "30B weights in 8 equal layers",
            30 * 10**9,
            source="the ZeRO lesson's example",
            equal_layers=8,
        ),
        ModelPreset(
            ModelName.ZERO_7_5B, "7.5B (the ZeRO paper's Figure 1)", 7_500_000_000, source="Rajbhandari et al. 2019"
        ),
        _preset(ModelName.LLAMA_3_8B, "Llama 3 8B", LLAMA_3_8B, "Meta Llama 3 model card"),
        _preset(ModelName.LLAMA_3_70B, "Llama 3 70B", LLAMA_3_70B, "Meta Llama 3 model card"),
        _preset(ModelName.LLAMA_3_1_405B, "Llama 3.1 405B", LLAMA_3_1_405B, "Meta Llama 3.1 model card"),
        _preset(ModelName.GPT_3_175B, "GPT-3 175B", GPT_3_175B, "Brown et al. 2020"),
    )
}
