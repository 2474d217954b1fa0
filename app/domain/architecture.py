"""Transformer architectures: weight counts and the largest layer, derived from the shape.

ZeRO-3 gathers one layer at a time, so the largest single layer (the embedding table or one
transformer block, whichever is bigger) must fit on a card assembled. Counting it needs the
architecture, not only the total.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property


class ModelName(StrEnum):
    """The models a person can pick; CUSTOM means 'enter the weight count'."""

    SEED_30B = "seed-30b"
    ZERO_7_5B = "zero-7.5b"
    LLAMA_3_8B = "llama-3-8b"
    LLAMA_3_70B = "llama-3-70b"
    LLAMA_3_1_405B = "llama-3.1-405b"
    GPT_3_175B = "gpt-3-175b"
    MISTRAL_7B = "mistral-7b"
    MIXTRAL_8X7B = "mixtral-8x7b"
    QWEN_2_5_7B = "qwen2.5-7b"
    DEEPSEEK_V3 = "deepseek-v3"
    GPT_OSS_20B = "gpt-oss-20b"
    CUSTOM = "custom"


DEFAULT_SEQ = 4096
"""The sequence length of a model without a context of its own, or whose training length no one says (a config.json)."""


@dataclass(frozen=True)
class Moe:
    """A mixture of experts in place of some blocks' MLP: a router sends each token to `top_k` of `experts`.

    Hugging Face's keys: `num_local_experts` / `n_routed_experts` / `num_experts`, `num_experts_per_tok`,
    `moe_intermediate_size` (Mixtral and gpt-oss: `intermediate_size`), `n_shared_experts` ×
    `moe_intermediate_size` or `shared_expert_intermediate_size`, `first_k_dense_replace`, `moe_layer_freq`.
    """

    experts: int
    """Routed experts in each mixture-of-experts block: what expert parallelism divides."""
    top_k: int
    """Experts each token is sent to: a token's compute uses these, memory keeps all."""
    expert_ffn: int
    """One routed expert's intermediate width."""
    shared_ffn: int = 0
    """The shared experts' intermediate width, together (DeepSeek-V3: 1 × 2,048): every token uses them."""
    shared_gate: bool = False
    """Qwen2-MoE's sigmoid gate on its shared expert: `hidden` more weights."""
    router_bias: bool = False
    """A bias per expert on the router (gpt-oss), or DeepSeek-V3's `e_score_correction_bias`."""
    expert_bias: bool = False
    """The experts' matrices carry biases (gpt-oss)."""
    dense_first: int = 0
    """The first blocks keep a dense MLP (DeepSeek-V3's `first_k_dense_replace`: 3)."""
    every: int = 1
    """Past those, block i (0-based) has experts where i % every == 0 (`moe_layer_freq`)."""

    def __post_init__(self) -> None:
        if min(self.experts, self.top_k, self.expert_ffn, self.every) < 1 or self.top_k > self.experts:
            raise ValueError("a mixture of experts has at least one expert, and sends a token to at most all of them")


@dataclass(frozen=True)
class Mla:
    """DeepSeek's multi-head latent attention: queries and keys/values through low-rank projections.

    Hugging Face's `q_lora_rank` (0: no query compression), `kv_lora_rank`, `qk_nope_head_dim`,
    `qk_rope_head_dim`, `v_head_dim`.
    """

    q_rank: int
    kv_rank: int
    nope: int
    rope: int
    v_dim: int

    def params(self, hidden: int, heads: int) -> int:
        """Its projections and the two latent norms (DeepSeek-V3's `DeepseekV3Attention`)."""
        qk = heads * (self.nope + self.rope)
        query = hidden * self.q_rank + self.q_rank + self.q_rank * qk if self.q_rank else hidden * qk
        latent = hidden * (self.kv_rank + self.rope) + self.kv_rank  # the shared latent, its rope key, its norm
        keys_values = latent + self.kv_rank * heads * (self.nope + self.v_dim)
        return query + keys_values + heads * self.v_dim * hidden


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
    head_width: int = 0
    """A head's width where the config sets it apart from hidden / heads (`head_dim`: gpt-oss 64 × 64 heads
    on a hidden size of 2,880); 0: hidden / heads."""
    qkv_bias: bool = False
    """Biases on the query, key and value projections only (Qwen2)."""
    o_bias: bool = False
    """A bias on the output projection too (`attention_bias`: gpt-oss; with `qkv_bias`)."""
    sinks: bool = False
    """gpt-oss's attention sinks: one learned logit per head."""
    moe: Moe | None = None
    """The mixture of experts in place of the MLP; None: every block dense."""
    mla: Mla | None = None
    """DeepSeek's latent attention in place of the four projections; None: Q, K, V and O."""

    def __post_init__(self) -> None:
        if min(self.layers, self.hidden, self.ffn, self.vocab, self.heads, self.kv_heads) < 1:
            raise ValueError("every dimension of an architecture is at least 1")
        if (not self.head_width and self.hidden % self.heads) or self.heads % self.kv_heads:
            raise ValueError("heads must divide hidden, and kv_heads must divide heads")

    @property
    def default_seq(self) -> int:
        """The tokens of a sequence when none are given: its training length, else its context."""
        return self.train_seq or self.context

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.head_width or self.hidden // self.heads

    @property
    def norm_params(self) -> int:
        """Weights of one normalisation layer."""
        return self.hidden * (2 if self.layer_norm else 1)

    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections of one block (K and V shrink with grouped-query attention)."""
        if self.mla:
            return self.mla.params(self.hidden, self.heads)
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        matrices = self.hidden * q * 2 + self.hidden * kv * 2
        bias = (q + kv * 2 if self.biases or self.qkv_bias else 0) + (self.hidden if self.biases or self.o_bias else 0)
        return matrices + bias + (self.heads if self.sinks else 0)

    def _mlp(self, width: int, biases: bool) -> int:
        matrices = (3 if self.gated_mlp else 2) * self.hidden * width
        return matrices + (((2 if self.gated_mlp else 1) * width + self.hidden) if biases else 0)

    @property
    def mlp_params(self) -> int:
        """The dense feed-forward network of one block."""
        return self._mlp(self.ffn, self.biases)

    @property
    def expert_params(self) -> int:
        """One routed expert's weights; 0 for a dense model."""
        return self._mlp(self.moe.expert_ffn, self.moe.expert_bias) if self.moe else 0

    @property
    def routed_params(self) -> int:
        """A mixture-of-experts block's routed experts, all of them: what expert parallelism divides."""
        return self.moe.experts * self.expert_params if self.moe else 0

    @property
    def router_params(self) -> int:
        """A mixture-of-experts block's router: hidden × experts, and a bias per expert where it has one."""
        return self.moe.experts * (self.hidden + self.moe.router_bias) if self.moe else 0

    @property
    def shared_params(self) -> int:
        """A mixture-of-experts block's shared experts (every token uses them), and Qwen2-MoE's gate on them."""
        if not self.moe or not self.moe.shared_ffn:
            return 0
        return self._mlp(self.moe.shared_ffn, False) + (self.hidden if self.moe.shared_gate else 0)

    def has_experts(self, block: int) -> bool:
        """Whether block `block` (1-based) has a mixture of experts in place of its dense MLP."""
        index = block - 1
        return self.moe is not None and index >= self.moe.dense_first and index % self.moe.every == 0

    def block_params_of(self, block: int) -> int:
        """Block `block`'s weights (1-based): attention, its MLP or mixture of experts, and its two norms."""
        experts = self.router_params + self.shared_params + self.routed_params
        mlp = experts if self.has_experts(block) else self.mlp_params
        return self.attention_params + mlp + 2 * self.norm_params

    @cached_property
    def blocks(self) -> tuple[int, ...]:
        """Every block's weights, first to last."""
        return tuple(self.block_params_of(n) for n in range(1, self.layers + 1))

    @property
    def expert_blocks(self) -> int:
        """The blocks with a mixture of experts."""
        return sum(self.has_experts(n) for n in range(1, self.layers + 1))

    @property
    def block_params(self) -> int:
        """The largest transformer block: attention, MLP (or its experts, all of them) and its two norms.

        Every block of a dense model is this size; a mixture of experts' first dense blocks are smaller.
        """
        return max(self.blocks)

    @property
    def embedding_params(self) -> int:
        """The token embedding table (also the output head when tied)."""
        return self.vocab * self.hidden

    @property
    def params(self) -> int:
        """Every weight of the model."""
        heads = 1 if self.tied_embeddings else 2
        return (
            sum(self.blocks)
            + heads * self.embedding_params
            + self.positions * self.hidden
            + self.norm_params  # the final norm
        )

    @property
    def active_params(self) -> int:
        """The weights one token's step uses: every weight but the routed experts the router did not choose.

        Mistral's count for Mixtral 8x7B (12.9B of 46.7B) and DeepSeek-V3's (37B of 671B) count the
        embedding too; gpt-oss's model card leaves it out (3.61B), as a lookup multiplies nothing.
        """
        unused = (self.moe.experts - self.moe.top_k) * self.expert_params if self.moe else 0
        return self.params - self.expert_blocks * unused

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
        return max(self.outside_module, self.expert_module)

    @property
    def expert_module(self) -> int:
        """One routed expert's largest matrix with its bias; 0 for a dense model. A cut card's is ÷ etp, not tp."""
        return self.hidden * self.moe.expert_ffn + self.moe.expert_bias * self.moe.expert_ffn if self.moe else 0

    @property
    def outside_module(self) -> int:
        """A block's largest module outside the routed experts: a dense or shared MLP matrix, the query, the router."""
        bias = 1 if self.biases else 0
        dense = self.expert_blocks < self.layers
        mlp = self.hidden * self.ffn + bias * self.ffn if dense else 0
        shared = self.hidden * self.moe.shared_ffn if self.moe else 0
        query = self.hidden * self.heads * self.head_dim + bias * self.heads * self.head_dim
        return max(mlp, shared, query, self.router_params)

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
    published: int | None = None
    """The weight count the model's config.json states (`num_parameters`), shown beside the one derived."""
    notes: tuple[str, ...] = ()
    """What its reading says a person should know (a module left out of the count)."""

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
