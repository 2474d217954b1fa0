"""The step's columns: the model cut into eighths by weight, in the order a forward pass meets them.

At rest the grid's columns are the cards' slices of the weights. During a step they are the model
itself, first layer to last, so the forward pass can walk across them; with 8 cards each column is
exactly one card's slice, so the two pictures coincide. Each column says which layers it holds and
the most weights a card assembles at once while working on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from app.domain.architecture import Architecture

COLUMNS = 8


@dataclass(frozen=True)
class Piece:
    """One layer of the model as a forward pass meets it."""

    name: str
    params: int
    block: int | None = None
    """The transformer block's number, 1-based; None for the embedding, norm and head."""


@dataclass(frozen=True)
class Column:
    """One eighth of the model."""

    index: int
    label: str
    """What it stands for, e.g. 'layers 41–50 of 80'."""
    largest_layer: int | None
    """The most weights assembled at once while working on it; None when unknown."""


def pieces(architecture: Architecture) -> tuple[Piece, ...]:
    """Every layer of a transformer in forward order, with its weights."""
    first: list[Piece] = [Piece("embedding", architecture.embedding_params)]
    if architecture.positions:
        first.append(Piece("position embedding", architecture.positions * architecture.hidden))
    blocks = [Piece(f"layer {n}", architecture.block_params_of(n), n) for n in range(1, architecture.layers + 1)]
    last = [Piece("final norm", architecture.norm_params)]
    if not architecture.tied_embeddings:
        last.append(Piece("output head", architecture.embedding_params))
    return (*first, *blocks, *last)


def _within(parts: tuple[Piece, ...], start: Fraction, end: Fraction) -> list[Piece]:
    """The pieces that have weights in [start, end), positions counted in weights."""
    found: list[Piece] = []
    position = 0
    for piece in parts:
        if position < end and position + piece.params > start:
            found.append(piece)
        position += piece.params
    return found


def _label(found: list[Piece], layers: int) -> str:
    blocks = [piece.block for piece in found if piece.block is not None]
    words = []
    if any(piece.name == "embedding" for piece in found):
        words.append("the embedding")
    if blocks:
        span = f"{blocks[0]}" if blocks[0] == blocks[-1] else f"{blocks[0]}–{blocks[-1]}"
        words.append(f"{'layer' if len(blocks) == 1 else 'layers'} {span} of {layers}")
    if any(piece.name == "output head" for piece in found):
        words.append("the output head")
    if not words:
        words.append("the final norm")
    return " and ".join(words) if len(words) < 3 else f"{words[0]}, {words[1]} and {words[2]}"


_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "last")


def model_columns(
    params: int, architecture: Architecture | None, largest_layer: int | None, equal_layers: bool = False
) -> tuple[Column, ...]:
    """The model's eighths.

    With an architecture, each eighth names its layers and its own largest layer (the embedding
    sits in the first, the output head in the last). A largest layer entered by hand, or a bare
    weight count, gives every eighth the same largest layer: the one the run states, or unknown.
    A model of 8 `equal_layers` has one layer a column, as the lesson draws it.
    """
    derived = architecture is not None and largest_layer == architecture.largest_layer
    parts = pieces(architecture) if architecture is not None else ()
    result = []
    for index in range(COLUMNS):
        start, end = Fraction(params * index, COLUMNS), Fraction(params * (index + 1), COLUMNS)
        if architecture is not None:
            found = _within(parts, start, end)
            label = _label(found, architecture.layers)
            largest = max(piece.params for piece in found) if derived else largest_layer
        else:
            label = f"layer {index + 1} of {COLUMNS}" if equal_layers else f"the model's {_ORDINALS[index]} eighth"
            largest = largest_layer
        result.append(Column(index, label, largest))
    return tuple(result)
