"""Which weights train: all of them, the last part of the model, or LoRA's adapters alone.

A frozen weight keeps only its weights band: no gradient, no master copy, no optimizer moments.
ZeRO still shards what it shards of it, so under ZeRO-3 frozen weights are split across the cards
like any other. A fine-tune that freezes part of the model freezes its first layers, so the frozen
weights are the first ones a forward pass meets and the trainable ones the last.

LoRA (Hu et al. 2021) freezes the whole model and adds, beside each targeted matrix of `d_in × d_out`
weights, two trainable matrices of `d_in × r` and `r × d_out`: r·(d_in + d_out) weights, which train
with all four bands. peft's `all-linear` targets every linear layer of the blocks but not the output
head; the LoRA paper's own choice was Q and V.
"""

from __future__ import annotations

from enum import StrEnum
from fractions import Fraction

from app.domain.architecture import Architecture
from app.domain.units import parse_count

MAX_LORA_RANK = 4096


class LoraTargets(StrEnum):
    """The matrices of each block that get adapters."""

    QV = "qv"
    QKVO = "qkvo"
    ALL_LINEAR = "all-linear"


def adapter_params(arch: Architecture, rank: int, targets: LoraTargets) -> int:
    """The adapters' weights in the whole model: r·(d_in + d_out) for each targeted matrix of each block."""
    if not 1 <= rank <= MAX_LORA_RANK:
        raise ValueError(f"a LoRA rank is between 1 and {MAX_LORA_RANK}")
    h, kv, f = arch.hidden, arch.kv_heads * arch.head_dim, arch.ffn
    q = o = h + h
    k = v = h + kv
    matrices = {LoraTargets.QV: (q, v), LoraTargets.QKVO: (q, k, v, o)}.get(targets)
    if matrices is None:  # all-linear: attention and the MLP's two or three matrices
        matrices = (q, k, v, o, *((h + f,) * (3 if arch.gated_mlp else 2)))
    return arch.layers * rank * sum(matrices)


def trainable_share(text: str) -> Fraction | None:
    """The share of the weights `text` trains, where it is a fraction ('0.25', '25%'); None for a count.

    A plain number from 0 to 1 is a fraction: '1' trains everything. Raises ValueError for a fraction
    outside 0 to 1.
    """
    written = text.strip().replace(",", "")
    percent = written.endswith("%")
    try:
        share = Fraction(written.removesuffix("%")) / (100 if percent else 1)
    except (ValueError, ZeroDivisionError):
        return None
    if not (percent or share <= 1 or share.denominator != 1):
        return None
    if not 0 <= share <= 1:
        raise ValueError("a fraction of the weights is between 0 and 1 (0% and 100%)")
    return share


def parse_trainable(text: str, params: int) -> int:
    """Trainable weights, from a count ('1.5B', '350M') or a fraction of the model ('0.25', '25%').

    A plain number from 0 to 1 is a fraction: '1' trains everything. Raises ValueError, with a
    sentence for a person, for a fraction outside 0 to 1 or a count above the model's weights.
    """
    share = trainable_share(text)
    if share is not None:
        return int(share * params)
    count = parse_count(text.strip().replace(",", ""))
    if count > params:
        raise ValueError(f"the trainable weights ({count:,}) are more than the model's {params:,}")
    return count
