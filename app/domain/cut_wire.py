"""The model cut's own traffic by link: tensor, pipeline and context parallelism's bytes, their time and the bubble.

ZeRO's collectives move the model's state (`wire`); cutting the model moves its activations. Per card and
per step, with a = b · (s / cp) · h activations of one micro-batch in bf16 (2 B each), L / pp blocks on
a card and m micro-batches (docs/wire.md works the sums):

- **tensor parallelism**: 2 all-reduces of a a block in the forward (after attention and after the MLP)
  and 2 in the backward (Shoeybi et al. 2019 §3; Korthikanti et al. 2022 §4.2.2), a third pair with full
  recomputation (the forward again). A ring all-reduce over t cards sends 2 (t − 1)/t · a a card; with
  sequence parallelism each is an all-gather and a reduce-scatter, (t − 1)/t · a each: the same bytes.
  The group is neighbouring ranks inside a node (`parallel.cut_refused`), so all of it is inside.
  The embedding's and the output layer's collectives (one b · s · h each, on the first and the last stage)
  and the vocabulary-parallel cross entropy's three b · s fp32 all-reduces are left out.
- **pipeline parallelism**: each micro-batch's activation a forward to the next stage and its gradient a
  backward to the one before; with sequence parallelism each card of the tensor-parallel group sends its
  a / t (Megatron-core sends the tensor as it is on the card: `get_tensor_shapes`). Interleaved, a card's
  vpp chunks each send. A stage boundary crosses nodes or not by the rank order (below).
- **context parallelism** (ring attention, Transformer Engine's P2P): each card passes its K and V block,
  b · (s / cp) · kv / t wide each (kv = kv_heads × head_dim, split across the tensor-parallel group), to
  the next card of the ring cp − 1 times a block in the forward; in the backward K and V go round again with
  their gradients dK and dV (TE's buffer holds both). Full recomputation adds the forward's again.
- **expert parallelism** (Megatron's alltoall token dispatcher): in each mixture-of-experts block a card sends
  each of its tokens' k copies, b · (s / cp) / t · k · h (÷ t with sequence parallelism, each card of the
  tensor-parallel group its share) in bf16, to the cards of its expert-parallel group that hold the chosen
  experts (the dispatch) and gets the experts' outputs back (the combine): 2 all-to-alls in the forward, 2
  in the backward (their gradients), 2 more with full recomputation. With even routing an all-to-all over
  ep cards sends (ep − 1)/ep of the buffer, 1/ep to each other card, inside the node or between nodes as
  that card is. With a capacity factor the buffer is the padded e × capacity rows.

Megatron's rank order (`--order tp-cp-ep-dp-pp`): rank = tp_rank + tp · (cp_rank + cp · (dp_rank + dp ·
pp_rank)), nodes filled in rank order; its experts' own order (`expert_decoder_rank_generator`: tp=etp,
ep, dp=edp) numbers a stage's ranks etp_rank + etp · (ep_rank + ep · edp_rank), so an expert-parallel
group is ep ranks etp apart. So the next pipeline stage is gpus / pp ranks on, and the next card
of a context-parallel ring tp ranks on; whether either is in another node follows from gpus_per_node. The
card shown is the most loaded one: the one whose cut traffic takes longest on its links.

The bubble: 1F1B idles (pp − 1)/m of the ideal step, ÷ vpp interleaved (`Cut.bubble`), added to the step.
A bare weight count has no b · s · h: its traffic is not counted, and `CutWire.known` says so.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass
from enum import StrEnum
from fractions import Fraction
from functools import lru_cache
from math import ceil

from app.domain.activations import Recompute, dispatched_rows
from app.domain.architecture import Architecture
from app.domain.parallel import Cut, stage_blocks
from app.domain.run import Run
from app.domain.wire import compute_seconds

ACTIVATION_BYTES = 2
"""Bytes an activation (or its gradient) takes on the wire: bf16, Megatron's `--bf16` training."""
TP_FORWARD_COLLECTIVES = 2
"""All-reduces a block's forward runs with tensor parallelism: after attention, after the MLP (the g operator)."""
TP_BACKWARD_COLLECTIVES = 2
"""And its backward: the f operators' all-reduces of the input gradients."""
EP_FORWARD_ALL_TO_ALLS = 2
"""All-to-alls a mixture-of-experts block's forward runs with expert parallelism: the dispatch and the combine."""
EP_BACKWARD_ALL_TO_ALLS = 2
"""And its backward: the combine's gradient back to the experts, the dispatch's back to the tokens' cards."""


class Parallel(StrEnum):
    """The kind of cut a line of traffic is for."""

    TP = "tp"
    PP = "pp"
    CP = "cp"
    EP = "ep"


@dataclass(frozen=True)
class CutLink:
    """One kind of the cut's traffic in a step, and the bytes the most loaded card sends for it on each link."""

    kind: Parallel
    description: str
    algorithm: str
    count: int
    """How many such collectives or sends the card takes part in a step."""
    buffer: int
    """The bytes of one: the whole tensor a collective assembles or reduces, or the tensor one send carries."""
    inside: int
    """Bytes the card sends for them over the link inside its node in a step."""
    between: int
    """Bytes it sends between nodes in a step."""


@dataclass(frozen=True)
class CutWire:
    """The cut's traffic of the most loaded card, its time on the wire, the compute and the bubble."""

    links: tuple[CutLink, ...] = ()
    known: bool = True
    """False where the model's shape (b · s · h) is unknown, a bare weight count: then no traffic is counted."""
    bubble: Fraction = Fraction(0)
    """The pipeline bubble's share of the ideal step (`Cut.bubble`)."""
    inside_seconds: Fraction = Fraction(0)
    between_seconds: Fraction = Fraction(0)
    compute: Fraction | None = None
    """One card's compute in a step with the cut: 6 × weights × tokens × m / (tp × pp × cp) at the peak × MFU."""

    @property
    def inside_bytes(self) -> int:
        """Bytes the card sends inside its node for the cut in a step."""
        return sum(link.inside for link in self.links)

    @property
    def between_bytes(self) -> int:
        """Bytes it sends between nodes for the cut in a step."""
        return sum(link.between for link in self.links)

    @property
    def wire(self) -> Fraction:
        """Seconds of the cut's traffic, both links one after the other."""
        return self.inside_seconds + self.between_seconds

    @property
    def bubble_seconds(self) -> Fraction | None:
        """Seconds the pipeline idles a step: the bubble's share of the compute; None without compute."""
        return None if self.compute is None else self.bubble * self.compute

    @property
    def step(self) -> Fraction | None:
        """The step: compute, the bubble and the cut's traffic, none of it hidden (an upper bound).

        None without compute. Tensor parallelism's all-reduces sit between a block's matrix multiplies, on the
        critical path; the pipeline's and the ring's sends are counted as not overlapped either.
        """
        if self.compute is None or self.bubble_seconds is None:
            return None
        return self.compute + self.bubble_seconds + self.wire


NO_CUT_WIRE = CutWire()
"""No cut: nothing moves for it, no bubble."""


@dataclass(frozen=True)
class CutPlace:
    """One card's place in the cut: its sends' neighbours, in its node or not."""

    forward_sends: int
    """Pipeline sends a micro-batch forward, to the next stage: its vpp chunks, the very last one's aside."""
    backward_sends: int
    """And backward, to the stage before: its vpp chunks, the very first one's aside."""
    forward_crosses: bool
    backward_crosses: bool
    ring_crosses: bool
    """Whether the next card of its context-parallel ring is in another node."""
    stage: int = 0
    """Its pipeline stage, 0-based: which blocks it runs (the mixture-of-experts ones all-to-all)."""
    ep_inside: int = 0
    """The other cards of its expert-parallel group in its node."""
    ep_between: int = 0
    """And in other nodes."""


@lru_cache(maxsize=64)
def cards(cut: Cut, gpus: int, per_node: int) -> tuple[CutPlace, ...]:
    """Every distinct place a card has in the cut, by Megatron's rank order (worked out once per layout)."""
    stride = gpus // cut.pp  # the ranks of one pipeline stage: tp × cp × dp
    etp = cut.expert_tp
    found = set()
    for rank in range(gpus):
        stage, within = divmod(rank, stride)
        cp_rank = within // cut.tp % cut.cp
        ring_next = within + cut.tp * ((cp_rank + 1) % cut.cp - cp_rank)
        node = rank // per_node
        forward = (stage + 1) % cut.pp * stride + within
        backward = (stage - 1) % cut.pp * stride + within
        ep_rank = within // etp % cut.ep
        group = (rank + etp * (other - ep_rank) for other in range(cut.ep) if other != ep_rank)
        peers_inside = sum(peer // per_node == node for peer in group)
        found.add(
            CutPlace(
                forward_sends=cut.vpp - (stage == cut.pp - 1) if cut.pp > 1 else 0,
                backward_sends=cut.vpp - (stage == 0) if cut.pp > 1 else 0,
                forward_crosses=forward // per_node != node,
                backward_crosses=backward // per_node != node,
                ring_crosses=(stage * stride + ring_next) // per_node != node,
                stage=stage,
                ep_inside=peers_inside,
                ep_between=cut.ep - 1 - peers_inside,
            )
        )
    return tuple(sorted(found, key=astuple))


def cut_wire(run: Run) -> CutWire:
    """The cut's traffic of `run`'s most loaded card, its time, the compute and the bubble."""
    cut = run.cut
    if not cut.cuts:
        return NO_CUT_WIRE
    compute = compute_seconds(run)
    architecture = run.architecture
    if architecture is None:
        return CutWire(known=False, bubble=cut.bubble, compute=compute)
    loaded = max(
        (_links(run, architecture, card) for card in cards(cut, run.gpus, run.gpus_per_node)),
        key=lambda links: _seconds(run, links),
    )
    inside, between = _seconds_by_link(run, loaded)
    return CutWire(loaded, True, cut.bubble, inside, between, compute)


def _seconds_by_link(run: Run, links: tuple[CutLink, ...]) -> tuple[Fraction, Fraction]:
    hardware = run.links
    inside = Fraction(sum(link.inside for link in links), hardware.nvlink_bytes_per_s)
    between = Fraction(sum(link.between for link in links), hardware.network_bytes_per_s)
    return inside, between


def _seconds(run: Run, links: tuple[CutLink, ...]) -> Fraction:
    return sum(_seconds_by_link(run, links), start=Fraction(0))


def _links(run: Run, arch: Architecture, card: CutPlace) -> tuple[CutLink, ...]:
    """One card's cut traffic in a step, each kind a line."""
    cut = run.cut
    blocks, m, t = arch.layers // cut.pp, cut.microbatches, cut.tp
    batches = f"{m:,} micro-batch" + ("es" if m > 1 else "")
    full = run.activations is not None and run.activations.recompute is Recompute.FULL
    passes = 3 if full else 2  # the forward, the backward, and the forward again when recomputed
    tokens = Fraction(run.batch * run.seq, cut.cp)
    activation = tokens * arch.hidden * ACTIVATION_BYTES
    found = []
    if t > 1:
        per_block = (passes - 1) * TP_FORWARD_COLLECTIVES + TP_BACKWARD_COLLECTIVES
        count = per_block * blocks * m
        sent = count * 2 * Fraction(t - 1, t) * activation  # a ring all-reduce, or an all-gather and a reduce-scatter
        if cut.sp:
            said = (
                f"tensor parallelism with sequence parallelism: an all-gather and a reduce-scatter of the "
                f"activations for each of {per_block} all-reduces a block, × {blocks} blocks × {batches}"
            )
            algorithm = f"ring all-gather and reduce-scatter over {t} cards: (t−1)/t of the buffer each, t = {t}"
        else:
            said = (
                f"tensor parallelism's all-reduces of the activations: {per_block} a block (2 forward, 2 backward"
                + (", 2 recomputed" if full else "")
                + f") × {blocks} blocks × {batches}"
            )
            algorithm = f"ring all-reduce over {t} cards inside the node: 2(t−1)/t of the buffer a card, t = {t}"
        found.append(CutLink(Parallel.TP, said, algorithm, count, ceil(activation), ceil(sent), 0))
    if cut.pp > 1:
        piece = activation / t if cut.sp else activation
        sends = {True: 0, False: 0}
        sends[card.forward_crosses] += card.forward_sends * m
        sends[card.backward_crosses] += card.backward_sends * m
        said = (
            "the pipeline's sends: each micro-batch's activation to the next stage, its gradient back to the stage "
            f"before ({card.forward_sends} forward and {card.backward_sends} backward a micro-batch × {m})"
        )
        algorithm = "point to point" + (f", each card of the tensor-parallel group its 1/{t}" if cut.sp else "")
        count = sum(sends.values())
        found.append(
            CutLink(
                Parallel.PP, said, algorithm, count, ceil(piece), ceil(sends[False] * piece), ceil(sends[True] * piece)
            )
        )
    if cut.cp > 1:
        block = 2 * tokens * Fraction(arch.kv_heads * arch.head_dim, t) * ACTIVATION_BYTES  # K and V, this card's
        count = (cut.cp - 1) * blocks * m * passes
        # K and V forward; K, V, dK and dV backward (two blocks' worth); the forward's again when recomputed.
        sent = (cut.cp - 1) * blocks * m * (passes + 1) * block
        said = (
            f"context parallelism's ring: each card passes its K and V block to the next, cp − 1 = {cut.cp - 1} "
            f"times a block forward, with dK and dV backward, × {blocks} blocks × {batches}"
        )
        algorithm = f"ring of {cut.cp} cards, point to point: K and V {ceil(block):,} B a pass"
        inside, between = (0, ceil(sent)) if card.ring_crosses else (ceil(sent), 0)
        found.append(CutLink(Parallel.CP, said, algorithm, count, ceil(block), inside, between))
    if cut.ep > 1 and arch.moe is not None:
        found.append(_all_to_alls(run, arch, card, passes))
    return tuple(found)


def _all_to_alls(run: Run, arch: Architecture, card: CutPlace, passes: int) -> CutLink:
    """Expert parallelism's dispatch and combine: the card's tokens' k copies to the experts' cards and back."""
    cut, moe = run.cut, arch.moe
    assert moe is not None
    # The stage's own blocks, as without interleaving: vpp chunks hold as many, give or take a dense first block.
    sizes = stage_blocks(arch.layers, cut.pp)
    first = sum(sizes[: card.stage])
    blocks = sum(arch.has_experts(n) for n in range(first + 1, first + sizes[card.stage] + 1))
    m = cut.microbatches
    per_block = (passes - 1) * EP_FORWARD_ALL_TO_ALLS + EP_BACKWARD_ALL_TO_ALLS
    count = per_block * blocks * m
    # The card's own tokens: its share of the sequence (÷ cp), and ÷ t where sequence parallelism splits them.
    tokens = Fraction(run.batch * run.seq, cut.cp * (cut.tp if cut.sp else 1))
    factor = run.activations.capacity_factor if run.activations else None
    rows = dispatched_rows(moe, ceil(tokens), factor)
    buffer = rows * arch.hidden * ACTIVATION_BYTES
    to_each = count * Fraction(buffer, cut.ep)  # even routing: 1/ep of the buffer to each card of the group
    said = (
        f"expert parallelism's all-to-alls: each token's {moe.top_k} copies dispatched to the experts' cards and "
        f"combined back, {per_block} a mixture-of-experts block (2 forward, 2 backward"
        + (", 2 recomputed" if passes == 3 else "")
        + f") × {blocks} such blocks × {m:,} micro-batch"
        + ("es" if m > 1 else "")
    )
    where = f"{card.ep_inside} in the node" + (f", {card.ep_between} in other nodes" if card.ep_between else "")
    algorithm = f"all-to-all over {cut.ep} cards ({where}): (ep−1)/ep of the buffer a card, 1/ep to each, ep = {cut.ep}"
    return CutLink(
        Parallel.EP, said, algorithm, count, buffer, ceil(to_each * card.ep_inside), ceil(to_each * card.ep_between)
    )
