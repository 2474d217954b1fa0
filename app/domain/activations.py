"""Activations: what a micro-batch leaves on a card for the backward pass, term by term.

The bytes follow Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", section 4, with tensor parallelism t = 1: a block keeps sbh(34 + 5as/h) bytes without
recomputation, 34sbh when only the attention scores are recomputed ("selective"), and its 2sbh input
when the whole block is ("full"). Their count is for GPT-3 (LayerNorm, a 4h GELU MLP, dropout, the
s × s scores kept); the terms below are theirs, written for any width so the same sum covers
Llama's grouped-query attention, SwiGLU, RMSNorm and no dropout. docs/activations.md derives each
term, and `zero-bands measure` checks them against the tensors autograd saves.

s is the sequence length, b the micro-batch, h the width, a the heads, kv the width of K and V,
f the MLP's inner width and v the vocabulary. Activations are bf16 (2 bytes); a dropout mask is
1 byte; the softmax's log-sum-exp and the loss's log-probabilities are fp32 (4 bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.domain.architecture import Architecture

HALF = 2
"""Bytes of a bf16 or fp16 activation."""
MASK = 1
"""Bytes of one element of a dropout mask."""
FULL = 4
"""Bytes of an fp32 element."""
MAX_SEQ = 1 << 20
"""The longest sequence the form takes: a million tokens, past any model's context."""


class Recompute(StrEnum):
    """What a block recomputes in the backward pass instead of keeping."""

    NONE = "none"
    """Keep everything the backward needs."""
    SELECTIVE = "selective"
    """Recompute the core attention (the s × s terms, or a tiled kernel's log-sum-exp), keep the rest:
    Korthikanti's selective."""
    FULL = "full"
    """Keep each block's input only, and run the block again in the backward."""


@dataclass(frozen=True)
class Shape:
    """The micro-batch one card works on."""

    batch: int
    """Sequences per micro-batch, per GPU."""
    seq: int
    """Tokens per sequence."""
    recompute: Recompute = Recompute.NONE

    def __post_init__(self) -> None:
        if self.batch < 0 or self.seq < 1:
            raise ValueError("a micro-batch has 0 or more sequences of at least 1 token")

    @property
    def tokens(self) -> int:
        """Tokens per micro-batch: s × b."""
        return self.batch * self.seq


@dataclass(frozen=True)
class Saved:
    """One tensor (or kind of tensor) a block keeps for its backward."""

    name: str
    formula: str
    """Its size as the paper writes it, e.g. '2sbh'."""
    nbytes: int
    recomputed_by: frozenset[Recompute] = frozenset({Recompute.FULL})
    """The choices under which it is recomputed rather than kept."""
    split: bool = False
    """Inside the tensor-parallel region (Korthikanti's 24sbh + 5as²b): each of t cards keeps 1/t of it.
    Outside it (the norms', the first projections' inputs, the dropout masks: the 10sbh), every card of the
    group keeps it whole unless sequence parallelism splits it along the sequence."""


def block_saved(arch: Architecture, shape: Shape) -> tuple[Saved, ...]:
    """Every tensor one transformer block keeps for its backward, with no recomputation."""
    sb, h, f = shape.tokens, arch.hidden, arch.ffn
    kv = arch.kv_heads * arch.head_dim
    scores = arch.heads * shape.seq * shape.seq * shape.batch  # a·s²·b: one score per head, query and key
    both = frozenset({Recompute.SELECTIVE, Recompute.FULL})
    saved = [
        Saved("attention norm's input", "2sbh", HALF * sb * h),
        Saved("Q, K and V projections' input", "2sbh", HALF * sb * h),
        Saved("Q", "2sbh", HALF * sb * h, split=True),
        Saved("K and V", "4sb·kv", 2 * HALF * sb * kv, split=True),
    ]
    if arch.flash_attention:
        # Tiled attention keeps no scores: the backward recomputes them from Q, K, V, the output and
        # one fp32 log-sum-exp per head and token. Selective recomputation runs the kernel again, as
        # Megatron's checkpointing of the core attention does, so it keeps not even that.
        saved.append(Saved("softmax's log-sum-exp", "4asb", FULL * arch.heads * sb, both, split=True))
    else:
        saved.append(Saved("softmax's output", "2as²b", HALF * scores, both, split=True))
        if arch.dropout:
            saved.append(Saved("attention dropout's mask", "as²b", MASK * scores, both, split=True))
            saved.append(Saved("attention dropout's output", "2as²b", HALF * scores, both, split=True))
    saved.append(Saved("output projection's input", "2sbh", HALF * sb * h, split=True))
    if arch.dropout:
        saved.append(Saved("attention's dropout mask", "sbh", MASK * sb * h))
    saved += [Saved("MLP norm's input", "2sbh", HALF * sb * h), Saved("MLP's input", "2sbh", HALF * sb * h)]
    if arch.gated_mlp:
        saved += [
            Saved("gate's output (SiLU's input)", "2sbf", HALF * sb * f, split=True),
            Saved("SiLU's output", "2sbf", HALF * sb * f, split=True),
            Saved("up projection's output", "2sbf", HALF * sb * f, split=True),
        ]
    else:
        saved.append(Saved("GELU's input", "2sbf", HALF * sb * f, split=True))
    saved.append(Saved("down projection's input", "2sbf", HALF * sb * f, split=True))
    if arch.dropout:
        saved.append(Saved("MLP's dropout mask", "sbh", MASK * sb * h))
    return tuple(saved)


def head_saved(arch: Architecture, shape: Shape) -> tuple[Saved, ...]:
    """What the rest of the model keeps: Korthikanti's input dropout and output layer (section 4.3).

    Never recomputed: checkpointing covers the blocks. In forward order: the embedding's, the final
    norm's and the output head's (`embedding_saved`, `final_norm_saved`, `output_saved`).
    """
    return (*embedding_saved(arch, shape), *final_norm_saved(arch, shape), *output_saved(arch, shape))


def embedding_saved(arch: Architecture, shape: Shape) -> tuple[Saved, ...]:
    """What the embedding keeps: its dropout's mask, where the model has dropout."""
    return (Saved("embedding dropout's mask", "sbh", MASK * shape.tokens * arch.hidden, frozenset()),) * arch.dropout


def final_norm_saved(arch: Architecture, shape: Shape) -> tuple[Saved, ...]:
    """What the final norm keeps: its input."""
    return (Saved("final norm's input", "2sbh", HALF * shape.tokens * arch.hidden, frozenset()),)


def output_saved(arch: Architecture, shape: Shape) -> tuple[Saved, ...]:
    """What the output head keeps: its input and the loss's log-probabilities."""
    return (
        Saved("output head's input", "2sbh", HALF * shape.tokens * arch.hidden, frozenset()),
        Saved("logits, as fp32 log-probabilities", "4sbv", logits_bytes(arch, shape), frozenset(), split=True),
    )


def logits_bytes(arch: Architecture, shape: Shape) -> int:
    """The loss's fp32 log-probabilities: one per vocabulary entry, token and sequence (4sbv)."""
    return FULL * arch.vocab * shape.tokens


def kept(saved: tuple[Saved, ...], recompute: Recompute) -> int:
    """Bytes of the tensors kept under a recomputation choice."""
    return sum(s.nbytes for s in saved if recompute not in s.recomputed_by)


def per_layer_bytes(arch: Architecture, shape: Shape) -> int:
    """What one block keeps for its backward: Korthikanti's per-layer figure.

    Under `full` that is the block's input, 2sbh; the block's working set, recomputed in the
    backward, is `working_bytes`.
    """
    if shape.recompute is Recompute.FULL:
        return HALF * shape.tokens * arch.hidden
    return kept(block_saved(arch, shape), shape.recompute)


def split_bytes(saved: tuple[Saved, ...], recompute: Recompute) -> int:
    """Of the tensors kept under a recomputation choice, the bytes inside the tensor-parallel region."""
    return sum(s.nbytes for s in saved if recompute not in s.recomputed_by and s.split)


def per_layer_split_bytes(arch: Architecture, shape: Shape) -> int:
    """Of what one block keeps (`per_layer_bytes`), the bytes tensor parallelism splits.

    None under `full`: the block's kept input is outside the region.
    """
    if shape.recompute is Recompute.FULL:
        return 0
    return split_bytes(block_saved(arch, shape), shape.recompute)


def working_split_bytes(arch: Architecture, shape: Shape) -> int:
    """Of the block's recomputed working set (`working_bytes`), the bytes tensor parallelism splits."""
    if shape.recompute is Recompute.FULL:
        return split_bytes(block_saved(arch, shape), Recompute.NONE)
    return 0


def working_bytes(arch: Architecture, shape: Shape) -> int:
    """What the block in hand holds beyond what the blocks keep: under `full`, its whole set, recomputed.

    Less its input, which the block keeps already (`per_layer_bytes`): the recomputation starts from it.
    """
    if shape.recompute is Recompute.FULL:
        return kept(block_saved(arch, shape), Recompute.NONE) - per_layer_bytes(arch, shape)
    return 0


def head_bytes(arch: Architecture, shape: Shape) -> int:
    """What the embedding's dropout and the output layer keep, the logits included."""
    return kept(head_saved(arch, shape), shape.recompute)


@dataclass(frozen=True)
class Activations:
    """What one sequence of a micro-batch leaves on a card: the figures a run scales by its batch."""

    seq: int
    recompute: Recompute
    per_layer: int
    """What one block keeps for its backward (`per_layer_bytes`)."""
    logits: int
    """The loss's fp32 log-probabilities (`logits_bytes`)."""
    per_layer_split: int = 0
    """Of `per_layer`, the bytes inside the tensor-parallel region (`per_layer_split_bytes`)."""
    architecture: Architecture | None = None
    """The shape they come from: Megatron-LM's own activation formula counts from it (`loaded.megatron_activations`)."""


def for_one_sequence(arch: Architecture, seq: int, recompute: Recompute) -> Activations:
    """A model's activations for one sequence of `seq` tokens: every figure is linear in the batch.

    What each layer keeps, and when, is the layers' (`layers.model_layers`).
    """
    shape = Shape(1, seq, recompute)
    return Activations(
        seq,
        recompute,
        per_layer_bytes(arch, shape),
        logits_bytes(arch, shape),
        per_layer_split_bytes(arch, shape),
        arch,
    )
