"""The model cut across cards: tensor, sequence, pipeline and context parallelism, and the data-parallel rest.

Past ZeRO's limit (the largest layer, assembled, larger than a card) sharding the state is not enough: the
model itself is cut. `Cut` is how: `tp` cards split each layer's matrices (inside a node), `sp` splits the
activations outside them along the sequence on the same cards, `pp` stages each keep a run of the layers,
`vpp` runs a card keeps in interleaved 1F1B, `microbatches` micro-batches fill the pipeline each step, and
`cp` cards split every sequence. What is left, `gpus / (tp × pp × cp)`, is the data-parallel degree, over
which ZeRO's stage shards the state (with `cp`, as Megatron's distributed optimizer does).

Megatron-LM orders its groups tp, cp, dp, pp from the fastest-varying rank (`--order tp-cp-ep-dp-pp`): a
card's rank is `tp_rank + tp × (cp_rank + cp × (dp_rank + dp × pp_rank))`, so a tensor-parallel group is
neighbouring ranks, inside a node.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Cut:
    """How the model is cut across the cards; every degree 1 (the default) is ZeRO's picture alone."""

    tp: int = 1
    """Tensor-parallel degree: each layer's matrices split across this many cards of one node."""
    sp: bool = False
    """Sequence parallelism (with tp > 1): the norms' and dropouts' activations split along the sequence."""
    pp: int = 1
    """Pipeline stages: each keeps ⌊layers / pp⌋ or ⌈layers / pp⌉ of the blocks (`stage_blocks`)."""
    vpp: int = 1
    """Virtual stages per card (interleaved 1F1B): a card keeps `vpp` separate runs of the blocks."""
    microbatches: int = 1
    """Micro-batches per step per data-parallel rank (gradient accumulation; what fills the pipeline)."""
    cp: int = 1
    """Context-parallel degree: each sequence split across this many cards."""
    ep: int = 1
    """Expert-parallel degree: a mixture of experts' routed experts split across this many cards, each keeping
    experts / ep of them whole (Megatron-LM's --expert-model-parallel-size)."""
    etp: int = 0
    """Expert tensor-parallel degree: each routed expert's matrices split across this many cards; 0: tp, as
    Megatron-LM's --expert-tensor-parallel-size defaults to."""

    @property
    def expert_tp(self) -> int:
        """The expert tensor-parallel degree: `etp`, else tp."""
        return self.etp or self.tp

    def edp(self, gpus: int) -> int:
        """The expert-data-parallel degree: a stage's cards, tp × cp × dp, ÷ (ep × etp).

        ZeRO shards the routed experts' state over this group (Megatron-LM's distributed optimizer and
        DeepSpeed-MoE alike), the rest over dp × cp.
        """
        return gpus // self.pp // (self.ep * self.expert_tp)

    @property
    def model_parallel(self) -> int:
        """The cards one copy of the model is cut across: tp × pp × cp."""
        return self.tp * self.pp * self.cp

    @property
    def cuts(self) -> bool:
        """Whether the model is cut at all (any degree above 1)."""
        return self.model_parallel > 1 or self.ep > 1 or self.etp > 1

    def dp(self, gpus: int) -> int:
        """The data-parallel degree on `gpus` cards: what the cut leaves (the cut must divide them)."""
        return gpus // self.model_parallel

    @property
    def bubble(self) -> Fraction:
        """The pipeline bubble's share of the ideal step: (pp − 1) / microbatches, ÷ vpp when interleaved.

        Narayanan et al. 2021 (Megatron-LM at scale), §2.2: 1F1B idles (p − 1) / m of the time; interleaving
        v model chunks per card divides it by v.
        """
        return Fraction(self.pp - 1, self.microbatches * self.vpp)


NO_CUT = Cut()


def stage_blocks(blocks: int, pp: int) -> tuple[int, ...]:
    """The blocks each of `pp` stages keeps (without interleaving): ⌊blocks/pp⌋, one more for the remainder's.

    The extra blocks go to the middle stages first, in order, as the first and last stages also keep the
    embedding and the output layer; past pp − 2 of them, to the first stage. Llama 3 405B's 126 blocks in 16
    stages: 7, 8 × 14, 7 ("we reduce one Transformer layer each from the first and the last stages", Llama 3
    paper §3.3.2). `cut_refused` asks for pp ≤ blocks, so every stage keeps at least one.
    """
    base, extra = divmod(blocks, pp)
    order = [*range(1, pp - 1), 0, pp - 1] if pp > 2 else list(range(pp))
    more = set(order[:extra])
    return tuple(base + (stage in more) for stage in range(pp))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _choose(found: list[int], asked: int) -> str:
    """The valid choices for a sentence: all of a short list; of a long one, the four nearest the value asked."""
    if len(found) > 6:
        found = sorted(sorted(found, key=lambda d: (abs(d - asked), d))[:4])
    words = [f"{d:,}" for d in found]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


MAX_STAGES = 128
"""The most pipeline stages or context-parallel cards the form takes: past any run's (Llama 3.1 405B: pp 16, cp 16),
and a bound on a request's work, which grows with the stages (each a card of its own to count)."""


def cut_refused(
    cut: Cut,
    gpus: int,
    per_node: int,
    blocks: int | None = None,
    heads: tuple[int, int] | None = None,
    experts: int | None = None,
) -> str:
    """Why a cut cannot be drawn on this cluster, naming the numbers and the nearest choices; empty if it can.

    `blocks` is the model's transformer blocks where its shape is known: pipeline stages hold whole ones, at
    least one each, and an uneven split (`stage_blocks`) only without interleaving: Megatron-LM's interleaved
    schedule cuts the blocks into pp × vpp equal chunks. `heads` are its attention and key-value heads, where
    known: tensor parallelism splits whole heads of each (Megatron-LM asks both to divide by tp). `experts` are
    its routed experts a block (0: dense; None: not known): expert parallelism keeps whole ones, as many on
    each card, and its group, ep × etp cards, is carved from a stage's tp × cp × dp (Megatron-LM's rule).
    """
    if per_node % cut.tp:
        fits = [d for d in _divisors(per_node) if gpus % d == 0]
        return (
            f"tp={cut.tp:,} does not fit in a node of {per_node:,} GPUs: tensor parallelism all-reduces every "
            f"layer's activations, so its group stays inside a node. Choose one of {_choose(fits, cut.tp)}."
        )
    if heads is not None and (heads[0] % cut.tp or heads[1] % cut.tp):
        fits = [d for d in _divisors(per_node) if gpus % d == 0 and heads[0] % d == 0 and heads[1] % d == 0]
        return (
            f"tp={cut.tp:,} does not divide the model's {heads[0]:,} attention heads and {heads[1]:,} key-value "
            f"heads: tensor parallelism gives each card whole heads. Choose one of {_choose(fits, cut.tp)}."
        )
    if cut.sp and cut.tp == 1:
        return "sp=1 splits the activations across the tensor-parallel group: set tp above 1, or sp=0."
    if gpus % cut.model_parallel:
        rest = gpus // (cut.tp * cut.cp) if gpus % (cut.tp * cut.cp) == 0 else 0
        if rest:
            hint = f" With tp={cut.tp:,} and cp={cut.cp:,}, pp is one of {_choose(_divisors(rest), cut.pp)}."
        else:  # the context-parallel group does not divide what tensor parallelism leaves
            hint = f" With tp={cut.tp:,}, cp is one of {_choose(_divisors(gpus // cut.tp), cut.cp)}."
        return (
            f"tp × pp × cp = {cut.tp:,} × {cut.pp:,} × {cut.cp:,} = {cut.model_parallel:,} does not "
            f"divide gpus={gpus:,}: the cards left for data parallelism must be a whole number.{hint}"
        )
    if cut.vpp > 1 and cut.pp == 1:
        return "vpp (virtual stages per card) interleaves a pipeline: set pp above 1, or vpp=1."
    if blocks is not None and cut.pp > blocks:
        return (
            f"pp={cut.pp:,} stages for the model's {blocks:,} blocks: each stage keeps at least one block. "
            f"Choose pp of at most {blocks:,}."
        )
    if blocks is not None and cut.vpp > 1 and blocks % (cut.pp * cut.vpp):
        fits = [d for d in _divisors(blocks) if blocks % (d * cut.vpp) == 0]
        hint = (
            f"With vpp={cut.vpp:,}, pp is one of {_choose(fits, cut.pp)}."
            if fits
            else f"No pp does with vpp={cut.vpp:,}: vpp is one of {_choose(_divisors(blocks), cut.vpp)}."
        )
        return (
            f"pp × vpp = {cut.pp:,} × {cut.vpp:,} does not divide the model's {blocks:,} blocks: each stage "
            f"keeps a whole number of them. {hint}"
        )
    return _experts_refused(cut, gpus, per_node, experts)


def _experts_refused(cut: Cut, gpus: int, per_node: int, experts: int | None) -> str:
    if cut.ep == 1 and cut.etp in (0, 1):
        return ""
    if experts == 0 or (experts is None and cut.ep > 1):
        return (
            f"ep={cut.ep:,} splits a mixture of experts' routed experts across GPUs, and this model has none: "
            "choose a mixture-of-experts model, or ep=1."
            if cut.ep > 1
            else f"etp={cut.etp:,} splits each routed expert, and this model has none: leave etp blank."
        )
    if experts is not None and experts % cut.ep:
        return (
            f"ep={cut.ep:,} does not divide the model's {experts:,} routed experts: each GPU keeps as many whole "
            f"experts. Choose one of {_choose([d for d in _divisors(experts) if (gpus // cut.pp) % d == 0], cut.ep)}."
        )
    if per_node % cut.expert_tp:
        return (
            f"etp={cut.expert_tp:,} does not fit in a node of {per_node:,} GPUs: it splits each expert's matrices "
            f"as tp does a layer's. Choose one of {_choose(_divisors(per_node), cut.expert_tp)}."
        )
    stage = gpus // cut.pp
    if stage % (cut.ep * cut.expert_tp):
        fits = [d for d in _divisors(stage) if (experts or d) % d == 0 and stage % (d * cut.expert_tp) == 0]
        return (
            f"ep × etp = {cut.ep:,} × {cut.expert_tp:,} does not divide a pipeline stage's {stage:,} GPUs "
            f"(gpus ÷ pp): the experts' groups are carved from them. Choose ep of {_choose(fits or [1], cut.ep)}."
        )
    return ""
