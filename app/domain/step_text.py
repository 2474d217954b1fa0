"""What happens in each phase of a step, in words for students.

Written from the same facts the phase holds (its part, its column, its collectives, the recipe
and the number of cards), so the text names what the rings and arrows show. Each phase says what
happens in at most 35 words, short enough to read from the back of a room (`explanation`); what
a student may want next is one "More" away (`detail`).
"""

from __future__ import annotations

from app.domain.communication import Collective
from app.domain.eighths import COLUMNS, Column
from app.domain.recipes import Band, Recipe
from app.domain.sharding import holders
from app.domain.stages import OPTIMIZER_STATE, Stage
from app.domain.step import FIRST_SYNC, Beat, Part, Phase


def cards_text(cards: range) -> str:
    """'GPU 3' or 'GPUs 2–3'."""
    if len(cards) == 1:
        return f"GPU {cards[0]:,}"
    return f"GPUs {cards[0]:,}–{cards[-1]:,}"


def _owners(phase: Phase, column: int) -> str:
    """The cards holding a column's slice: in a hybrid run, those of the first shard group, and so in each."""
    said = cards_text(holders(column, phase.group))
    return f"{said} (and their twins in each shard group)" if phase.group < phase.gpus else said


def _cards(cards: range, verb: str) -> str:
    """'GPU 3 keeps' or 'GPUs 2–3 keep': the owners, and a verb that agrees with them."""
    return f"{cards_text(cards)} {verb}{'s' if len(cards) == 1 else ''}"


def _passes(phase: Phase, columns: tuple[Column, ...]) -> str:
    """How a pass goes layer by layer, where the stage splits weights or gradients."""
    if phase.part not in (Part.FORWARD, Part.BACKWARD) or phase.column is None:
        return ""
    column = columns[phase.column]
    if Band.WEIGHTS in phase.sharded:
        limit = (
            "; the largest layer is unknown here, so the figures count model states only"
            if column.largest_layer is None
            else f", so at most {column.largest_layer:,} weights are assembled at once"
            " and the weights it holds stay level"
        )
        sent = ", reduce-scatters its gradients" if phase.part is Part.BACKWARD else ""
        said = f"Layer by layer: a card gathers one layer, uses it{sent} and discards it before the next{limit}."
        # The picture gives each column to one card; a real run splits every layer across all of them.
        real = "a real run splits each layer across all the cards, each sending its part"
        return f"{said} Here a column is one card's; {real}."
    if Band.GRADIENTS in phase.sharded and phase.part is Part.BACKWARD:
        return (
            "Layer by layer: each layer's gradients are sent as soon as they are computed, so a card never holds "
            "a full set of gradients, only its own slice and the layer in hand."
        )
    return ""


def detail(phase: Phase, columns: tuple[Column, ...]) -> str:
    """The longer explanation of a phase, when it has one: how a pass goes, and what its activations do."""
    said = _passes(phase, columns)
    if phase.extra.activations and phase.beat is not Beat.GATHER:
        kept = (
            "This column's activations stay until its backward pass."
            if phase.part is Part.FORWARD
            else "This column's activations then go."
        )
        said = f"{said} {kept}" if said else kept
    return said


def explanation(phase: Phase, recipe: Recipe, columns: tuple[Column, ...]) -> str:
    """What happens in this phase."""
    part, gpus, sharded = phase.part, phase.gpus, phase.sharded
    if part is Part.START:
        return (
            f"Every card holds its state at rest. The {COLUMNS} columns are the model in eighths, first layer "
            "to last; the forward pass walks across them."
        )
    if part in (Part.FORWARD, Part.BACKWARD) and phase.column is not None:
        return _pass(phase, columns[phase.column])
    if part is Part.GRADIENT_SYNC and phase.pcie:
        return (
            "Each card sends its slice of the summed gradients down to its host over PCIe, the link between "
            "a GPU and its server's CPU, where the optimizer state waits."
        )
    if part is Part.GRADIENT_SYNC:
        return _gradient_sync(phase)
    if part is Part.UPDATE:
        if gpus == 1:
            return "The one card updates every weight."
        if not sharded & set(OPTIMIZER_STATE):
            return f"Every card applies the same update to every weight: {gpus:,} cards repeating one job."
        weights = recipe.spec(Band.WEIGHTS).phrase
        if Band.MASTER in phase.on_host:
            return (
                f"Each card's host updates the card's slice on its CPU, where {recipe.phrase(OPTIMIZER_STATE)} "
                "are kept. The GPU waits: its new weights come up next."
            )
        if recipe.has_master:
            return (
                f"Each card updates only its own slice: {recipe.phrase(OPTIMIZER_STATE)}, then {weights} "
                "of that slice from the new master copy."
            )
        optimizer = recipe.phrase(OPTIMIZER_STATE)
        with_state = f", with {optimizer}" if optimizer != "nothing" else ", with no optimizer state"
        return f"Each card updates only its own slice of {weights}, in place{with_state}."
    if phase.pcie and part is Part.WEIGHT_SYNC:
        then = (
            " An all-gather then sends it to every card: the whole model, everywhere, again." if phase.transfers else ""
        )
        return f"Each card's updated slice of the weights comes back up from its host over PCIe.{then}"
    if phase.transfers and not phase.trains_all:
        return (
            "An all-gather sends each card's updated slice of the weights that train to every card; the frozen "
            "weights did not change, so they are not sent."
        )
    if phase.transfers:
        return (
            "An all-gather sends each card's updated slice of the weights to every card: the whole model, "
            "everywhere, again."
        )
    if gpus == 1:
        return "Nothing to do: the one card has every new weight."
    if phase.stage is Stage.DP:
        return "Nothing to do: every card already computed the same new weights."
    return "Nothing to do: each card keeps only its own slice, which it has just updated."


def _pass(phase: Phase, column: Column) -> str:
    if phase.part is Part.BACKWARD and not phase.reached:
        k, what = column.index, column.label
        return (
            f"The backward pass never reaches column {k} ({what}): nothing in it or before it trains, so autograd "
            "stops at the first layer that trains. The cards gather nothing and compute nothing for it."
        )
    if phase.beat is Beat.GATHER:
        return _gather(phase, column)
    if phase.beat is Beat.DISCARD:
        return _discard(phase, column)
    return _compute(phase, column)


def _gather(phase: Phase, column: Column) -> str:
    """The first beat of a pass column: the layer's slices arrive, where the stage splits the weights."""
    k, what = column.index, column.label
    again = " again" if phase.part is Part.BACKWARD else ""
    if Band.WEIGHTS in phase.sharded:
        frozen = " Frozen weights are gathered too: the forward pass needs them." if phase.frozen else ""
        need = "the forward runs on it" if phase.part is Part.FORWARD else "the gradients need it"
        return (
            f"The cards all-gather column {k}'s weights ({what}){again} from {_owners(phase, k)}, one layer at a "
            f"time: each card assembles a whole layer, as {need}.{frozen}"
        )
    if phase.cut:  # a cut card keeps only its share: its stage's blocks, its tensor slice, its experts
        return (
            f"Nothing to gather for column {k} ({what}): each card's share of its weights is already whole on "
            "the card; only ZeRO-3 gathers weights. Nothing moves."
        )
    keeps = "the card keeps" if phase.gpus == 1 else "every card keeps"
    return f"Nothing to gather for column {k} ({what}): {keeps} all its weights. Nothing moves."


def _discard(phase: Phase, column: Column) -> str:
    """The last beat of a pass column: the assembled copy dropped; in the backward, the gradients sent."""
    k, what, sharded = column.index, column.label, phase.sharded
    owners = holders(k, phase.group)
    dropped = "drops the assembled weights" if Band.WEIGHTS in sharded else ""
    if phase.part is Part.BACKWARD and phase.transfers:
        then = f", then {dropped}" if dropped else ""
        return (
            f"Each card reduce-scatters column {k}'s gradients ({what}): {_cards(owners, 'keep')} the sums; "
            f"each card drops what it sent{then}. Its figure falls."
        )
    if dropped:
        kept = " Its activations stay for the backward pass." if phase.extra.activations else ""
        return f"Each card {dropped} of column {k} ({what}): only its own slice stays. Its figure falls.{kept}"
    if phase.part is Part.BACKWARD and phase.column_trains[0] and phase.gpus > 1:
        return (
            f"Nothing is sent yet: column {k}'s gradients ({what}) stay in each card's full gradient buffer until "
            "the synchronisation after the backward pass."
        )
    return f"Nothing to drop after column {k} ({what}): the weights are the card's own. Nothing moves."


def _compute(phase: Phase, column: Column) -> str:
    """The middle beat of a pass column: the layer computes."""
    k, what, sharded = column.index, column.label, phase.sharded
    if phase.part is Part.FORWARD:
        if Band.WEIGHTS in sharded:
            return f"Each card runs the assembled column {k} ({what}) on its own batch, layer by layer. Nothing moves."
        if phase.gpus == 1:
            return f"The card runs column {k} ({what}) on its batch. Nothing moves: there is no other card."
        return f"Each card runs column {k} ({what}) on its own batch with its own copy of the weights. Nothing moves."
    trains, weights = phase.column_trains
    stops = " The backward pass stops here, at the first layer that trains." if phase.stops_here else ""
    if trains < weights:  # a frozen column, or one where only some weights train (a boundary, LoRA's adapters)
        onwards = (
            "pass the backward through it to the layers before"
            if k and not phase.stops_here
            else "finish the backward pass on it"
        )
        if trains:
            return (
                f"Column {k} ({what}) is partly frozen: {trains:,} of its {weights:,} weights train. The cards "
                f"{onwards}, computing gradients only for those.{stops}"
            )
        if phase.trained:  # a layer it shares with the next column trains from that column on
            return (
                f"Column {k} ({what}) is frozen, but its last layer, which it shares with column {k + 1}, trains "
                f"in part: the cards {onwards}, computing gradients for that "
                f"layer's {phase.trained:,} weights that train.{stops}"
            )
        return f"Column {k} ({what}) is frozen: the cards {onwards}, but compute no gradients for its weights."
    if sharded & {Band.WEIGHTS, Band.GRADIENTS}:
        used = " with the assembled layer" if Band.WEIGHTS in sharded else ""
        return (
            f"Each card computes column {k}'s gradients ({what}){used}: the whole layer's, held only until "
            "the discard sends them to their owners."
        )
    if phase.gpus == 1:
        return f"The card computes column {k}'s gradients ({what}) into its gradient buffer. Nothing moves."
    return f"Each card computes column {k}'s gradients ({what}) into its own full gradient buffer. Nothing moves yet."


def _gradient_sync(phase: Phase) -> str:
    if phase.gpus == 1:
        return "Nothing to do: one card has nobody to sum its gradients with."
    if any(t.collective is Collective.ALL_REDUCE for t in phase.transfers):
        return (
            "Hybrid sharding: each shard group has summed its own gradients. The cards that keep the same slice, "
            "one in each group, now all-reduce it, mostly between nodes: every copy of the slice gets the whole sum."
        )
    if Band.GRADIENTS in phase.sharded:
        if phase.index == FIRST_SYNC:
            return "Nothing to do: each layer's gradients were reduce-scattered during the backward pass."
        return "Nothing more to do: each card already holds the summed gradients of its own slice, and no others."
    moving = {t.collective for t in phase.transfers}
    if phase.stage is Stage.DP:
        if Collective.REDUCE_SCATTER in moving:
            return "All-reduce, first half: a reduce-scatter leaves each card the summed gradients of its own slice."
        return "All-reduce, second half: an all-gather gives every card every summed gradient."
    if Collective.REDUCE_SCATTER in moving:
        return "A reduce-scatter gives each card the summed gradients of the slice it updates."
    return "Nothing more to do: each card has the summed gradients it needs."
