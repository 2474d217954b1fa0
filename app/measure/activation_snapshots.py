"""The tensors two small real blocks kept for their backward, read from the snapshot, set against the formula.

`zero-bands measure` runs a GPT-style block (Korthikanti et al. 2022's: LayerNorm, scores kept,
dropout) and a Llama-style block (RMSNorm, grouped-query attention, rotary, SwiGLU, flash-style
attention) in bf16 on the CPU, and records every tensor autograd saves, by storage, for each
recompute choice, and for each model's output layer. This module reads that part of the snapshot
(no torch needed) and compares it, term by term, with `app.domain.activations` evaluated at the
blocks' own dimensions. Every byte of difference is named: a term the formula leaves out is a row
of its own, with the size it must have; what no name covers is `unexplained`, and the tests require
it to be 0. As in `app.measure.snapshots`, the dataclasses are also `/api/measured`'s JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app.domain.activations import HALF, Recompute, Saved, Shape, block_saved, head_saved, per_layer_bytes
from app.domain.architecture import Architecture


@dataclass(frozen=True)
class SavedTensor:
    """One storage autograd kept for the backward: its name, and what it is."""

    name: str
    """The formula's term it is (the forward named it), or what the operator that keeps it calls it."""
    dtype: str
    shape: tuple[int, ...]
    bytes: int
    """Bytes of the storage: a tensor saved twice, or as a view of another, counts once."""
    saved_by: tuple[str, ...]
    """The backward nodes and fields that keep it, as autograd names them."""


@dataclass(frozen=True)
class Recorded:
    """Everything one forward pass left for its backward."""

    tensors: tuple[SavedTensor, ...]
    excluded: tuple[SavedTensor, ...]
    """Parameters (or views of them) autograd saved too: weights, not activations. Named by parameter."""

    @property
    def nbytes(self) -> int:
        """Bytes of the activations kept."""
        return sum(t.bytes for t in self.tensors)


@dataclass(frozen=True)
class MeasuredBlock:
    """One block, measured under each recompute choice, with its model's output layer and a kernel swapped."""

    block: str
    """gpt or llama."""
    ffn: int
    kv_heads: int
    choices: tuple[tuple[Recompute, Recorded], ...]
    head: Recorded
    variant_kernel: str
    """torch's own CPU kernel measured in place of the one the block uses."""
    variant: Recorded

    def choice(self, recompute: Recompute) -> Recorded:
        """What the block kept under one choice."""
        return dict(self.choices)[recompute]


@dataclass(frozen=True)
class ActivationsSnapshot:
    """The activations part of the snapshot."""

    dtype: str
    batch: int
    seq: int
    hidden: int
    heads: int
    vocab: int
    dropout: float
    checkpoint_rng_state_bytes: int
    """The CPU generator's state, which torch.utils.checkpoint keeps beside the saved tensors."""
    blocks: tuple[MeasuredBlock, ...]

    def block(self, name: str) -> MeasuredBlock:
        """One block by name; KeyError if it was not measured."""
        for block in self.blocks:
            if block.block == name:
                return block
        raise KeyError(name)

    def architecture(self, block: MeasuredBlock) -> Architecture:
        """The block's dimensions and flags as an Architecture, for the formula."""
        gpt = block.block == "gpt"
        return Architecture(
            layers=1,
            hidden=self.hidden,
            ffn=block.ffn,
            vocab=self.vocab,
            heads=self.heads,
            kv_heads=block.kv_heads,
            tied_embeddings=gpt,
            gated_mlp=not gpt,
            biases=gpt,
            layer_norm=gpt,
            positions=self.seq if gpt else 0,
            context=self.seq,
            dropout=gpt,
            flash_attention=not gpt,
        )


def _tensor(data: Mapping[str, Any]) -> SavedTensor:
    name = data["name"]
    if name is None:
        raise ValueError(f"an unnamed saved tensor: {data!r}")
    return SavedTensor(
        str(name), str(data["dtype"]), tuple(int(n) for n in data["shape"]), int(data["bytes"]), tuple(data["saved_by"])
    )


def _recorded(data: Mapping[str, Any]) -> Recorded:
    return Recorded(tuple(_tensor(t) for t in data["tensors"]), tuple(_tensor(t) for t in data["excluded"]))


def parse_activations(data: Mapping[str, Any]) -> ActivationsSnapshot:
    """The activations part from its JSON; KeyError, TypeError or ValueError when it is not one."""
    return ActivationsSnapshot(
        dtype=str(data["dtype"]),
        batch=int(data["batch"]),
        seq=int(data["seq"]),
        hidden=int(data["hidden"]),
        heads=int(data["heads"]),
        vocab=int(data["vocab"]),
        dropout=float(data["dropout"]),
        checkpoint_rng_state_bytes=int(data["checkpoint_rng_state_bytes"]),
        blocks=tuple(
            MeasuredBlock(
                block=str(b["block"]),
                ffn=int(b["ffn"]),
                kv_heads=int(b["kv_heads"]),
                choices=tuple((Recompute(k), _recorded(v)) for k, v in b["choices"].items()),
                head=_recorded(b["head"]),
                variant_kernel=str(b["variant"]["kernel"]),
                variant=_recorded(b["variant"]),
            )
            for b in data["blocks"]
        ),
    )


# The comparison.


@dataclass(frozen=True)
class _Extra:
    """A tensor the formula does not count: the size each one must have, and why it is kept."""

    size: str
    nbytes: Callable[[ActivationsSnapshot], int]
    why: str


EXTRAS: dict[str, _Extra] = {
    "LayerNorm's mean": _Extra(
        "2sb",
        lambda a: HALF * a.batch * a.seq,
        "LayerNorm keeps each token's mean for its backward: bf16 here, since the CPU kernel returns it in the "
        "input's dtype (CUDA's is fp32, 4sb). Korthikanti et al. do not count it",
    ),
    "LayerNorm's reciprocal standard deviation": _Extra(
        "2sb",
        lambda a: HALF * a.batch * a.seq,
        "LayerNorm keeps each token's 1/σ beside the mean, bf16 on the CPU (fp32 on CUDA); not counted either",
    ),
    "RMSNorm's reciprocal RMS": _Extra(
        "4sb",
        lambda a: 4 * a.batch * a.seq,
        "RMSNorm keeps each token's 1/RMS in fp32 for its backward, as the fused GPU kernels do; the formula "
        "counts only its input",
    ),
    "rotary's cos": _Extra(
        "2s·(h/a)",
        lambda a: HALF * a.seq * (a.hidden // a.heads),
        "rotary multiplies Q and K by a bf16 table of cosines, a row per position and a column per head "
        "dimension, and the multiplication keeps it. One table for the model, shared by every block, and the "
        "same for every micro-batch",
    ),
    "rotary's sin": _Extra(
        "2s·(h/a)",
        lambda a: HALF * a.seq * (a.hidden // a.heads),
        "and the table of sines, the same size, kept by the other multiplication",
    ),
    "token embedding's indices": _Extra(
        "8sb",
        lambda a: 8 * a.batch * a.seq,
        "the embedding keeps the token ids (int64) to send each row of its gradient to its token",
    ),
    "position embedding's indices": _Extra(
        "8s",
        lambda a: 8 * a.seq,
        "GPT's learned positions keep their ids 0 … s − 1 (int64), one set for every sequence",
    ),
    "loss's targets": _Extra(
        "8sb",
        lambda a: 8 * a.batch * a.seq,
        "the cross-entropy keeps the target ids (int64) to know which log-probability each token's gradient hits",
    ),
    "loss's total weight": _Extra("4", lambda a: 4, "and one fp32 number, the count it divides the sum by"),
}
"""What the blocks and output layers keep that the formula leaves out."""

FULL_NAME = "attention norm's input"
"""Under full recomputation the block keeps its input alone, which is its attention norm's input."""


@dataclass(frozen=True)
class TermRow:
    """One term: the formula's bytes against the measured, and every byte of difference named."""

    name: str
    formula: str
    """Its size as the paper writes it, e.g. '2sbh', or the size of a tensor the formula leaves out."""
    formula_bytes: int
    """0 for a tensor the formula leaves out."""
    measured_bytes: int
    tensors: int
    """Storages measured under this name."""
    difference: int
    """Measured minus formula."""
    named: int
    """The part of the difference the reason accounts for: all of it, when the explanation is complete."""
    reason: str
    """Why they differ, with the bytes; empty when they agree."""


@dataclass(frozen=True)
class TermTable:
    """One block (or output layer) under one recompute choice, term by term."""

    block: str
    part: str
    """block or output layer."""
    recompute: Recompute
    rows: tuple[TermRow, ...]
    formula_bytes: int
    measured_bytes: int
    excluded: str
    """The parameters autograd saved too, named, and their bytes: not activations."""
    excluded_bytes: int
    note: str
    """What checkpointing keeps beside the saved tensors; empty when nothing is checkpointed."""

    @property
    def unexplained(self) -> int:
        """Bytes of difference no reason names, term by term: 0 when the explanation is complete."""
        return sum(abs(row.difference - row.named) for row in self.rows)


@dataclass(frozen=True)
class KernelNote:
    """A block measured again with one of torch's own CPU kernels, against the block measured above."""

    block: str
    kernel: str
    measured_bytes: int
    difference: int
    """Its bytes minus the block's under `none`."""
    text: str


@dataclass(frozen=True)
class ActivationsComparison:
    """Both blocks and their output layers, formula against measurement, and torch's CPU kernels that keep more."""

    dtype: str
    batch: int
    seq: int
    hidden: int
    heads: int
    vocab: int
    tables: tuple[TermTable, ...]
    kernels: tuple[KernelNote, ...]


def _by_name(recorded: Recorded) -> dict[str, list[SavedTensor]]:
    found: dict[str, list[SavedTensor]] = {}
    for tensor in recorded.tensors:
        found.setdefault(tensor.name, []).append(tensor)
    return found


def _extra_row(name: str, tensors: list[SavedTensor], snap: ActivationsSnapshot) -> TermRow:
    measured = sum(t.bytes for t in tensors)
    extra = EXTRAS.get(name)
    if extra is None:
        return TermRow(name, "", 0, measured, len(tensors), measured, 0, "")
    each = extra.nbytes(snap)
    count = f"{len(tensors)} × {extra.size}" if len(tensors) > 1 else extra.size
    reason = f"Not in the formula: {extra.why}. {count} = {len(tensors) * each:,} B."
    return TermRow(name, count, 0, measured, len(tensors), measured, len(tensors) * each, reason)


def _term_row(term: Saved, tensors: list[SavedTensor], recompute: Recompute) -> TermRow:
    measured = sum(t.bytes for t in tensors)
    difference = measured - term.nbytes
    return TermRow(term.name, term.formula, term.nbytes, measured, len(tensors), difference, 0, "")


def _excluded(recorded: Recorded) -> tuple[str, int]:
    nbytes = sum(t.bytes for t in recorded.excluded)
    if not recorded.excluded:
        return "No parameter is saved: the checkpoint keeps the block's input alone.", 0
    names = ", ".join(t.name for t in recorded.excluded)
    return f"Not counted: the parameters autograd keeps too ({names}), {nbytes:,} B: weights, not activations.", nbytes


def compare_table(
    snap: ActivationsSnapshot, block: MeasuredBlock, recorded: Recorded, recompute: Recompute, *, head: bool = False
) -> TermTable:
    """One block (or, with `head`, its output layer) under one choice against the formula, term by term."""
    arch = snap.architecture(block)
    shape = Shape(snap.batch, snap.seq, recompute)
    if head:
        terms: tuple[Saved, ...] = head_saved(arch, shape)
    elif recompute is Recompute.FULL:
        terms = (Saved(FULL_NAME, "2sbh", per_layer_bytes(arch, shape)),)
    else:
        terms = tuple(s for s in block_saved(arch, shape) if recompute not in s.recomputed_by)
    measured = _by_name(recorded)
    rows = [_term_row(term, measured.pop(term.name, []), recompute) for term in terms]
    rows += [_extra_row(name, tensors, snap) for name, tensors in measured.items()]
    excluded, excluded_bytes = _excluded(recorded)
    rng = snap.checkpoint_rng_state_bytes
    note = (
        f"Beside the saved tensors, each checkpoint keeps a copy of the CPU random-number generator's state, "
        f"{rng:,} B, to replay dropout the same way when it recomputes (preserve_rng_state, the default). "
        "Saved-tensor hooks do not see it, and it is not counted here."
        if recompute is not Recompute.NONE and not head
        else ""
    )
    return TermTable(
        block=block.block,
        part="output layer" if head else "block",
        recompute=recompute,
        rows=tuple(rows),
        formula_bytes=sum(term.nbytes for term in terms),
        measured_bytes=recorded.nbytes,
        excluded=excluded,
        excluded_bytes=excluded_bytes,
        note=note,
    )


def _kernel_note(block: MeasuredBlock) -> KernelNote:
    base, variant = _by_name(block.choice(Recompute.NONE)), _by_name(block.variant)
    difference = block.variant.nbytes - block.choice(Recompute.NONE).nbytes

    def said(found: dict[str, list[SavedTensor]], names: list[str]) -> str:
        return "; ".join(
            f"{n} ({len(found[n])} × {found[n][0].dtype}, {sum(t.bytes for t in found[n]):,} B)" for n in names
        )

    gone = [n for n in base if n not in variant]
    new = [n for n in variant if n not in base]
    changed = [n for n in base if n in variant and sum(t.bytes for t in base[n]) != sum(t.bytes for t in variant[n])]
    why = {
        "F.dropout": "On the CPU, F.dropout multiplies by a noise tensor of the input's dtype, 2 B an element, "
        "where native_dropout (what F.dropout runs on CUDA, and the block above) keeps a 1-byte bool mask.",
        "torch.nn.functional.rms_norm": "On the CPU, rms_norm is a composite of fp32 operations: each norm keeps "
        "its input widened to fp32 (4sbh), its 1/RMS (4sb) and the normalised input in fp32 (4sbh, for the "
        "weight's gradient), where the fused kernel above keeps the bf16 input (2sbh) and the 1/RMS.",
    }[block.variant_kernel]
    text = (
        f"With {block.variant_kernel} in its place the block keeps {block.variant.nbytes:,} B under none, "
        f"{difference:+,} B. {why} It keeps {said(variant, new)}"
        + (f", instead of {said(base, gone)}" if gone else "")
        + (f"; and changes {said(variant, changed)}" if changed else "")
        + "."
    )
    return KernelNote(block.block, block.variant_kernel, block.variant.nbytes, difference, text)


def compare_activations(snap: ActivationsSnapshot) -> ActivationsComparison:
    """Every block under every choice, and every output layer, against the formula."""
    tables = []
    for block in snap.blocks:
        tables += [compare_table(snap, block, recorded, recompute) for recompute, recorded in block.choices]
        tables.append(compare_table(snap, block, block.head, Recompute.NONE, head=True))
    return ActivationsComparison(
        dtype=snap.dtype,
        batch=snap.batch,
        seq=snap.seq,
        hidden=snap.hidden,
        heads=snap.heads,
        vocab=snap.vocab,
        tables=tuple(tables),
        kernels=tuple(_kernel_note(block) for block in snap.blocks),
    )
