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

A mixture-of-experts block (`Architecture.moe`) keeps its attention's as a dense block does and, in place
of the MLP's, the router's fp32 probabilities (e per token), the k dispatched copies of each token, each
chosen expert's SwiGLU at its width fe, the shared experts' at theirs (fs) and the combine's inputs
(`expert_saved`; docs/moe.md works them out and a measurement checks them).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from math import ceil

from app.domain.architecture import Architecture, Moe

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
    capacity_factor: Fraction | None = None
    """A mixture of experts' capacity factor: each expert's input padded to ⌈factor × k·sb / e⌉ rows
    (Megatron-LM's --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity); None: dropless."""

    def __post_init__(self) -> None:
        if self.batch < 0 or self.seq < 1:
            raise ValueError("a micro-batch has 0 or more sequences of at least 1 token")
        if self.capacity_factor is not None and self.capacity_factor <= 0:
            raise ValueError("a capacity factor is more than 0")

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


def block_saved(arch: Architecture, shape: Shape, experts: bool = False) -> tuple[Saved, ...]:
    """Every tensor one transformer block keeps for its backward, with no recomputation.

    With `experts` (the model's mixture-of-experts blocks: `Architecture.has_experts`), the mixture of
    experts' tensors (`expert_saved`) in place of the dense MLP's.
    """
    sb, h = shape.tokens, arch.hidden
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
    if experts and arch.moe is not None:
        saved += expert_saved(arch, arch.moe, shape)
    else:
        saved += _mlp_saved(arch, "", "sb", sb, "f", arch.ffn)
    if arch.dropout:
        saved.append(Saved("MLP's dropout mask", "sbh", MASK * sb * h))
    return tuple(saved)


def _mlp_saved(arch: Architecture, whose: str, rows_said: str, rows: int, width_said: str, width: int) -> list[Saved]:
    """A feed-forward network's inner tensors over `rows` tokens of `width`: SwiGLU's four, or GELU's two.

    `whose` names the network ("" for the dense MLP, "experts' " or "shared experts' "); the formulas read
    2·rows·width, "2sbf" for the dense MLP.
    """
    size, said = HALF * rows * width, f"2{rows_said}{width_said}"
    if arch.gated_mlp:
        saved = [
            Saved(f"{whose}gate's output (SiLU's input)", said, size, split=True),
            Saved(f"{whose}SiLU's output", said, size, split=True),
            Saved(f"{whose}up projection's output", said, size, split=True),
        ]
    else:
        saved = [Saved(f"{whose}GELU's input", said, size, split=True)]
    return [*saved, Saved(f"{whose}down projection's input", said, size, split=True)]


def dispatched_rows(moe: Moe, tokens: int, capacity_factor: Fraction | None) -> int:
    """The rows the experts take, all together: k per token dropless, else e experts × their capacity.

    Megatron-LM's `get_capacity(num_tokens=tokens × topk, num_experts, capacity_factor)`:
    ⌈tokens × k / e × factor⌉ per expert, each expert's input padded to it (--moe-pad-expert-input-to-capacity).
    """
    if capacity_factor is None:
        return moe.top_k * tokens
    return moe.experts * ceil(Fraction(tokens * moe.top_k, moe.experts) * capacity_factor)


def expert_saved(arch: Architecture, moe: Moe, shape: Shape) -> tuple[Saved, ...]:
    """What a mixture of experts keeps in place of the dense MLP's tensors (its input is the block's "MLP's input").

    As Megatron-LM's MoE layer (`TopKRouter`, the token dispatcher's permute, `GroupedMLP`, unpermute) and
    Hugging Face's `MixtralSparseMoeBlock` keep them: the router's probabilities, a softmax taken in fp32
    (Mixtral: `F.softmax(router_logits, dim=1, dtype=torch.float)`; Megatron: `torch.softmax(..., dtype=
    torch.float32)`), e per token; the chosen experts' weights, one a dispatched copy, the combine's
    multiplier; the dispatched tokens, a permuted copy of k rows a token (the experts' first projections'
    weight gradients need it); each expert's SwiGLU over its rows as the dense MLP's at width fe; the experts'
    outputs, which the combine multiplies by the weights (the weights' gradient needs them); the shared
    experts' SwiGLU over every token at their width fs (and Qwen2-MoE's sigmoid gate, its output and the
    shared output it multiplies). With a capacity factor the k·sb rows become e × ⌈factor × k·sb / e⌉.
    """
    sb, h, k = shape.tokens, arch.hidden, moe.top_k
    rows = dispatched_rows(moe, sb, shape.capacity_factor)
    rows_said = "ksb" if shape.capacity_factor is None else "e·c"
    saved = [
        Saved("router's probabilities (fp32 softmax over the experts)", "4sb·e", FULL * sb * moe.experts),
        Saved("chosen experts' weights (the combine's multipliers)", "2ksb", HALF * k * sb),
        Saved("dispatched tokens (the permuted copy)", f"2{rows_said}h", HALF * rows * h),
        *_mlp_saved(arch, "experts' ", rows_said, rows, "·fe", moe.expert_ffn),
        Saved("experts' outputs (the combine's input)", f"2{rows_said}h", HALF * rows * h),
    ]
    if moe.shared_ffn:
        saved += _mlp_saved(arch, "shared experts' ", "sb", sb, "·fs", moe.shared_ffn)
        if moe.shared_gate:
            saved += [
                Saved("shared expert gate's sigmoid output", "2sb", HALF * sb),
                Saved("shared experts' output (the gate's other factor)", "2sbh", HALF * sb * h),
            ]
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


def upcast_saved(arch: Architecture, shape: Shape) -> Saved:
    """The logits upcast to fp32 for the loss: a term of its own, beside the log-probabilities `output_saved` keeps.

    The output head computes the logits in bf16 (2sbv); the loss takes them in fp32, Hugging Face's
    `logits = logits.float()` before `cross_entropy` (`ForCausalLMLoss`), Megatron-LM's fused vocab-parallel
    cross entropy `vocab_parallel_logits.float()` (4sbv, ÷ t). Autograd keeps the softmax's fp32 output, not
    this copy (the cast's backward needs nothing), so it is not kept for the backward: it is alive while the
    loss is computed, beside the log-probabilities, and at 128K–202K words it is as large. Not in the kept
    figures (`kept`, the moments), which count what the backward keeps, as Korthikanti's 4sbv does.
    """
    return Saved("logits upcast to fp32 (the loss's input)", "4sbv", logits_bytes(arch, shape), frozenset(), split=True)


def logits_bytes(arch: Architecture, shape: Shape) -> int:
    """The loss's fp32 log-probabilities: one per vocabulary entry, token and sequence (4sbv)."""
    return FULL * arch.vocab * shape.tokens


def kept(saved: tuple[Saved, ...], recompute: Recompute) -> int:
    """Bytes of the tensors kept under a recomputation choice."""
    return sum(s.nbytes for s in saved if recompute not in s.recomputed_by)


def _heaviest(arch: Architecture, shape: Shape, experts: bool | None) -> bool:
    """The kind of block a figure is for: `experts` as given, else the kind that keeps the most (dense: dense)."""
    if experts is not None:
        return experts
    if arch.moe is None or not arch.expert_blocks:
        return False
    if arch.expert_blocks == arch.layers:
        return True
    return kept(block_saved(arch, shape, True), Recompute.NONE) > kept(block_saved(arch, shape), Recompute.NONE)


def per_layer_bytes(arch: Architecture, shape: Shape, experts: bool | None = None) -> int:
    """What one block keeps for its backward: Korthikanti's per-layer figure.

    Under `full` that is the block's input, 2sbh; the block's working set, recomputed in the
    backward, is `working_bytes`. `experts`: a mixture-of-experts block (True) or a dense one (False);
    None: the kind of block that keeps the most.
    """
    if shape.recompute is Recompute.FULL:
        return HALF * shape.tokens * arch.hidden
    return kept(block_saved(arch, shape, _heaviest(arch, shape, experts)), shape.recompute)


def split_bytes(saved: tuple[Saved, ...], recompute: Recompute) -> int:
    """Of the tensors kept under a recomputation choice, the bytes inside the tensor-parallel region."""
    return sum(s.nbytes for s in saved if recompute not in s.recomputed_by and s.split)


def per_layer_split_bytes(arch: Architecture, shape: Shape, experts: bool | None = None) -> int:
    """Of what one block keeps (`per_layer_bytes`), the bytes tensor parallelism splits.

    None under `full`: the block's kept input is outside the region.
    """
    if shape.recompute is Recompute.FULL:
        return 0
    return split_bytes(block_saved(arch, shape, _heaviest(arch, shape, experts)), shape.recompute)


def working_split_bytes(arch: Architecture, shape: Shape, experts: bool | None = None) -> int:
    """Of the block's recomputed working set (`working_bytes`), the bytes tensor parallelism splits."""
    if shape.recompute is Recompute.FULL:
        return split_bytes(block_saved(arch, shape, _heaviest(arch, shape, experts)), Recompute.NONE)
    return 0


def working_bytes(arch: Architecture, shape: Shape, experts: bool | None = None) -> int:
    """What the block in hand holds beyond what the blocks keep: under `full`, its whole set, recomputed.

    Less its input, which the block keeps already (`per_layer_bytes`): the recomputation starts from it.
    """
    if shape.recompute is Recompute.FULL:
        whole = kept(block_saved(arch, shape, _heaviest(arch, shape, experts)), Recompute.NONE)
        return whole - per_layer_bytes(arch, shape, experts)
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
    capacity_factor: Fraction | None = None
    """A mixture of experts' capacity factor (`Shape.capacity_factor`); None: dropless."""

    @property
    def shape(self) -> Shape:
        """One sequence's micro-batch, as the terms take it."""
        return Shape(1, self.seq, self.recompute, self.capacity_factor)


def for_one_sequence(
    arch: Architecture, seq: int, recompute: Recompute, capacity_factor: Fraction | None = None
) -> Activations:
    """A model's activations for one sequence of `seq` tokens: every figure is linear in the batch.

    What each layer keeps, and when, is the layers' (`layers.model_layers`). `per_layer` is the block that
    keeps the most; with a capacity factor each sequence's experts are padded to their own capacity, as
    a micro-batch of one sequence is (a larger one rounds up once, a few rows less).
    """
    shape = Shape(1, seq, recompute, capacity_factor)
    return Activations(
        seq,
        recompute,
        per_layer_bytes(arch, shape),
        logits_bytes(arch, shape),
        per_layer_split_bytes(arch, shape),
        arch,
        capacity_factor,
    )
