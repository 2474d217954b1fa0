"""Megatron-LM's count of a mixture of experts' weights and optimizer state, transliterated from its source.

`compute_weight_and_optimizer_memory` in megatron/training/theoretical_memory_usage.py (NVIDIA/Megatron-LM
d98e8a6, August 2026), term for term, in exact fractions where Megatron divides in floats: each block's
attention (multi-latent attention's projections and latent norms where it has them), dense MLP, shared and
routed experts, router and norms; the pattern of dense and MoE blocks (`--moe-layer-freq`); then its most
loaded shard, the first pipeline stage, as it writes it: every block spread evenly over the stages (L/pp of
each kind, not the stage's own blocks), the embedding (and, with pp = 1 and untied, the output layer) ÷ tp,
the router and norms whole, the routed experts ÷ (etp × ep); bytes 18 a weight, or 6 + 12/d with the
distributed optimizer, d = dp for the rest and the expert-data-parallel size for the routed experts.

The app's `accounting=megatron` counts a mixture of experts' card with it (`Run.cards`); what Megatron's
formula leaves out of the model (biases on the projections and experts, gpt-oss's sinks, DeepSeek-V3's
router correction bias, a buffer in Megatron) is said in docs/moe.md. A dense model keeps the app's count,
which for pp = 1 is this one to the weight (docs/accounting.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from app.domain.architecture import Architecture
from app.domain.parallel import Cut

VOCAB_DIVISOR = 128
"""Megatron-LM's `--make-vocab-size-divisible-by` default: the vocabulary is padded to a multiple of it × tp."""


@dataclass(frozen=True)
class MegatronShard:
    """Megatron-LM's most loaded model shard: its weights by how they are held, and their bytes."""

    tp_sharded: Fraction
    """`tp_sharded_params_on_most_loaded_shard`: attention, dense MLPs, shared experts, embeddings ÷ tp."""
    replicated: Fraction
    """`replicated_params_on_most_loaded_shard`: norms, routers, shared-expert gates, ÷ pp only."""
    expert_sharded: Fraction
    """`expert_sharded_params_on_most_loaded_shard`: the routed experts ÷ (pp × etp × ep)."""
    nbytes: Fraction
    """`weight_and_optimizer_memory`: the bytes of weights and optimizer state on that shard."""
    data_parallel: int
    """`data_parallel_size`: world ÷ (tp × pp × cp)."""
    expert_data_parallel: int
    """`expert_data_parallel_size`: world ÷ (etp × ep × pp)."""

    @property
    def params(self) -> Fraction:
        """`num_parameters_on_most_loaded_model_shard`."""
        return self.tp_sharded + self.replicated + self.expert_sharded


def padded_vocab(vocab: int, tp: int) -> int:
    """Megatron-LM's `padded_vocab_size`: the vocabulary rounded up to a multiple of 128 × tp."""
    step = VOCAB_DIVISOR * tp
    return -(-vocab // step) * step


def moe_layer_pattern(arch: Architecture) -> tuple[int, ...]:
    """`moe_layer_pattern`: 1 where a block has experts (Megatron's `--moe-layer-freq`, list or integer form)."""
    return tuple(int(arch.has_experts(block)) for block in range(1, arch.layers + 1))


def _attention(arch: Architecture) -> Fraction:
    """`self_attn_term`: multi-latent attention's projections and latent norms, or Q, K, V and O, no biases."""
    h, a = arch.hidden, arch.heads
    norm_size = 2 if arch.layer_norm else 1
    if arch.mla:
        mla = arch.mla
        if mla.q_rank:  # q lora + rope + q norm
            q_term = mla.q_rank * (h + a * (mla.nope + mla.rope) + norm_size)
        else:
            q_term = h * a * (mla.nope + mla.rope)
        return Fraction(
            q_term
            + mla.kv_rank * (h + a * (mla.nope + mla.v_dim) + norm_size)  # kv lora + rope + kv norm
            + h * mla.rope
            + (a * mla.v_dim) * h  # o proj
        )
    ratio = Fraction(arch.head_dim * a, h)  # query_projection_to_hidden_size_ratio
    return 2 * h * h * ((1 + Fraction(arch.kv_heads, a)) * ratio)


def megatron_shard(arch: Architecture, cut: Cut, gpus: int, distributed: bool) -> MegatronShard:
    """Megatron-LM's `compute_weight_and_optimizer_memory` for `arch` cut as `cut` on `gpus` cards.

    `distributed`: `--use-distributed-optimizer` (ZeRO-1's arrangement). No multi-token prediction
    (`mtp_num_layers` None) and no latent MoE (`moe_latent_size` None): the app's models have neither.
    """
    h = arch.hidden
    moe = arch.moe
    gated = Fraction(3, 2) if arch.gated_mlp else Fraction(1)  # gated_linear_multiplier
    norm_size = 2 if arch.layer_norm else 1
    num_experts = moe.experts if moe else 1
    shared_ffn = moe.shared_ffn if moe else 0
    pattern = moe_layer_pattern(arch) if moe else (0,) * arch.layers
    moe_layers = sum(pattern)
    dense_layers = arch.layers - moe_layers
    moe_ffn = moe.expert_ffn if moe else 0

    embedding = h * padded_vocab(arch.vocab, cut.tp)
    final_layernorm = norm_size * h
    attention = _attention(arch)
    dense_mlp = 2 * h * arch.ffn * gated
    shared_expert = 2 * h * shared_ffn * gated
    routed_expert = 2 * h * moe_ffn * num_experts * gated
    layernorm = 2 * h * norm_size
    router = h * num_experts + (num_experts if arch.biases or arch.o_bias else 0) if moe else 0  # add_bias_linear
    shared_gate = h if shared_ffn > 0 and moe and moe.shared_gate else 0

    tp_sharded_block = (attention + dense_mlp) * dense_layers + (attention + shared_expert) * moe_layers
    replicated_block = layernorm * dense_layers + (layernorm + router + shared_gate) * moe_layers + final_layernorm
    expert_block = routed_expert * moe_layers

    pp, tp, ep, etp = cut.pp, cut.tp, cut.ep, cut.expert_tp
    tp_sharded = (tp_sharded_block / pp + embedding) / tp
    replicated = Fraction(replicated_block) / pp
    expert_sharded = expert_block / pp / (etp * ep)
    if not arch.tied_embeddings and pp == 1:
        tp_sharded += Fraction(embedding, tp)

    data_parallel = gpus // (tp * pp * cut.cp)
    expert_data_parallel = gpus // (etp * ep * pp)

    def per_weight(d: int) -> Fraction:
        return 6 + Fraction(12, d) if distributed else Fraction(18)

    nbytes = (tp_sharded + replicated) * per_weight(data_parallel) + expert_sharded * per_weight(expert_data_parallel)
    return MegatronShard(tp_sharded, replicated, expert_sharded, nbytes, data_parallel, expert_data_parallel)
