"""Each phase's words, whole, as a student reads them beside the grid, one row per way a phase can go.

The text is the page's, so it is checked as it reads; what it must agree with (the rings, the transfers, the
35 words) is checked in tests/domain/test_step.py. The seed's 30B run: columns are eighths of a bare count.
"""

from __future__ import annotations

import pytest

from app.domain.accounting import Setup
from app.domain.architecture import ModelName
from app.domain.eighths import Column, model_columns
from app.domain.placement import Offload, Placement
from app.domain.recipes import RECIPES, RecipeName, custom_recipe
from app.domain.scenario import Inputs, resolve
from app.domain.sizing import Run
from app.domain.stages import Stage
from app.domain.step import step
from app.domain.step_text import cards_text, detail, explanation

COLUMNS = model_columns(30 * 10**9, None, None)
LAYERED = model_columns(30 * 10**9, None, 3_750_000_000)
RUNS = {
    "8 cards": Run(),
    "1 card": Run(gpus=1),
    "3 cards": Run(gpus=3),
    "fp32 Adam": Run(recipe=RECIPES[RecipeName.FP32_ADAM]),
    "no optimizer state": Run(recipe=custom_recipe(2, 2, 0, 0)),
    "offloaded": Run(setup=Setup(placement=Placement(Offload.OPTIMIZER_PARAMS))),
    "half frozen": Run(frozen=15 * 10**9),
    # Column 4 holds weights 15e9 to 18.75e9: frozen up to 17e9, past its middle, so frozen with a few that train.
    "mostly frozen": Run(frozen=17 * 10**9),
    "1 card offloaded": Run(gpus=1, setup=Setup(placement=Placement(Offload.OPTIMIZER))),
}

# (run, stage, phase, what the phase says)
EXPLANATIONS = [
    (
        "8 cards",
        Stage.DP,
        0,
        "Every card holds its state at rest. The 8 columns are the model in eighths, first layer to last; the "
        "forward pass walks across them.",
    ),
    (
        "8 cards",
        Stage.DP,
        2,
        "Each card runs column 0 (the model's first eighth) on its own batch with its own copy of the weights. "
        "Nothing moves.",
    ),
    (
        "8 cards",
        Stage.DP,
        26,
        "Each card computes column 7's gradients (the model's last eighth) into its own full gradient buffer. "
        "Nothing moves yet.",
    ),
    (
        "8 cards",
        Stage.DP,
        49,
        "All-reduce, first half: a reduce-scatter leaves each card the summed gradients of its own slice.",
    ),
    ("8 cards", Stage.DP, 50, "All-reduce, second half: an all-gather gives every card every summed gradient."),
    ("8 cards", Stage.DP, 51, "Every card applies the same update to every weight: 8 cards repeating one job."),
    ("8 cards", Stage.DP, 52, "Nothing to do: every card already computed the same new weights."),
    ("8 cards", Stage.ZERO1, 49, "A reduce-scatter gives each card the summed gradients of the slice it updates."),
    ("8 cards", Stage.ZERO1, 50, "Nothing more to do: each card has the summed gradients it needs."),
    (
        "8 cards",
        Stage.ZERO1,
        51,
        "Each card updates only its own slice: the fp32 master copy and Adam's two fp32 moments, then the bf16 "
        "weights of that slice from the new master copy.",
    ),
    (
        "8 cards",
        Stage.ZERO1,
        52,
        "An all-gather sends each card's updated slice of the weights to every card: the whole model, everywhere, "
        "again.",
    ),
    (
        "8 cards",
        Stage.ZERO2,
        27,
        "Each card reduce-scatters column 7's gradients (the model's last eighth): GPU 7 keeps the sums; each "
        "card drops what it sent. Its figure falls.",
    ),
    (
        "8 cards",
        Stage.ZERO2,
        49,
        "Nothing to do: each layer's gradients were reduce-scattered during the backward pass.",
    ),
    (
        "8 cards",
        Stage.ZERO2,
        50,
        "Nothing more to do: each card already holds the summed gradients of its own slice, and no others.",
    ),
    (
        "8 cards",
        Stage.ZERO3,
        1,
        "The cards all-gather column 0's weights (the model's first eighth) from GPU 0, one layer at a time: "
        "each card assembles a whole layer, as the forward runs on it.",
    ),
    (
        "8 cards",
        Stage.ZERO3,
        26,
        "Each card computes column 7's gradients (the model's last eighth) with the assembled layer: the "
        "whole layer's, held only until the discard sends them to their owners.",
    ),
    ("8 cards", Stage.ZERO3, 52, "Nothing to do: each card keeps only its own slice, which it has just updated."),
    # Three cards: column 2 is split between GPUs 0 and 1, and a pair of owners keep, not keeps.
    (
        "3 cards",
        Stage.ZERO2,
        42,
        "Each card reduce-scatters column 2's gradients (the model's third eighth): GPUs 0–1 keep the sums; "
        "each card drops what it sent. Its figure falls.",
    ),
    (
        "3 cards",
        Stage.ZERO3,
        9,
        "Each card drops the assembled weights of column 2 (the model's third eighth): only its own slice "
        "stays. Its figure falls.",
    ),
    (
        "3 cards",
        Stage.ZERO3,
        42,
        "Each card reduce-scatters column 2's gradients (the model's third eighth): GPUs 0–1 keep the sums; "
        "each card drops what it sent, then drops the assembled weights. Its figure falls.",
    ),
    (
        "1 card",
        Stage.DP,
        2,
        "The card runs column 0 (the model's first eighth) on its batch. Nothing moves: there is no other card.",
    ),
    (
        "1 card",
        Stage.DP,
        26,
        "The card computes column 7's gradients (the model's last eighth) into its gradient buffer. Nothing moves.",
    ),
    ("1 card", Stage.DP, 49, "Nothing to do: one card has nobody to sum its gradients with."),
    ("1 card", Stage.DP, 51, "The one card updates every weight."),
    ("1 card", Stage.DP, 52, "Nothing to do: the one card has every new weight."),
    (
        "fp32 Adam",
        Stage.ZERO1,
        51,
        "Each card updates only its own slice of the fp32 weights, in place, with Adam's two fp32 moments.",
    ),
    (
        "no optimizer state",
        Stage.ZERO1,
        51,
        "Each card updates only its own slice of the weights (2 B), in place, with no optimizer state.",
    ),
    (
        "offloaded",
        Stage.ZERO1,
        50,
        "Each card sends its slice of the summed gradients down to its host over PCIe, the link between a GPU "
        "and its server's CPU, where the optimizer state waits.",
    ),
    (
        "offloaded",
        Stage.ZERO1,
        51,
        "Each card's host updates the card's slice on its CPU, where the fp32 master copy and Adam's two fp32 "
        "moments are kept. The GPU waits: its new weights come up next.",
    ),
    (
        "offloaded",
        Stage.ZERO1,
        52,
        "Each card's updated slice of the weights comes back up from its host over PCIe. An all-gather then "
        "sends it to every card: the whole model, everywhere, again.",
    ),
    # Half frozen (the seed's 30B, the first 15e9 weights): the backward stops at column 4, the first that
    # trains; 17e9 frozen: column 4, [15e9, 18.75e9), trains its last 1.75e9 weights.
    (
        "half frozen",
        Stage.DP,
        38,
        "The backward pass never reaches column 3 (the model's fourth eighth): nothing in it or before it "
        "trains, so autograd stops at the first layer that trains. The cards gather nothing and compute "
        "nothing for it.",
    ),
    (
        "half frozen",
        Stage.ZERO3,
        47,
        "The backward pass never reaches column 0 (the model's first eighth): nothing in it or before it "
        "trains, so autograd stops at the first layer that trains. The cards gather nothing and compute "
        "nothing for it.",
    ),
    (
        "mostly frozen",
        Stage.ZERO2,
        35,
        "Column 4 (the model's fifth eighth) is partly frozen: 1,750,000,000 of its 3,750,000,000 weights "
        "train. The cards finish the backward pass on it, computing gradients only for those. The backward "
        "pass stops here, at the first layer that trains.",
    ),
    # One card: the weights come up from the host, and no other card needs them.
    (
        "1 card offloaded",
        Stage.ZERO1,
        52,
        "Each card's updated slice of the weights comes back up from its host over PCIe.",
    ),
]


@pytest.mark.parametrize(("run", "stage", "index", "said"), EXPLANATIONS)
def test_each_phase_says_what_happens(run: str, stage: Stage, index: int, said: str) -> None:
    chosen = RUNS[run]
    assert explanation(step(stage, chosen, COLUMNS)[index], chosen.recipe, COLUMNS) == said


LAYER_BY_LAYER = (
    "Layer by layer: a card gathers one layer, uses it{sent} and discards it before the next{limit}. Here a "
    "column is one card's; a real run splits each layer across all the cards, each sending its part."
)
UNKNOWN = "; the largest layer is unknown here, so the figures count model states only"
KNOWN = ", so at most 3,750,000,000 weights are assembled at once and the weights it holds stay level"

# (stage, phase, columns, the longer explanation); none for a phase that has nothing more to say.
DETAILS = [
    (Stage.ZERO3, 2, COLUMNS, LAYER_BY_LAYER.format(sent="", limit=UNKNOWN)),
    (Stage.ZERO3, 26, COLUMNS, LAYER_BY_LAYER.format(sent=", reduce-scatters its gradients", limit=UNKNOWN)),
    (Stage.ZERO3, 2, LAYERED, LAYER_BY_LAYER.format(sent="", limit=KNOWN)),
    (
        Stage.ZERO2,
        26,
        COLUMNS,
        "Layer by layer: each layer's gradients are sent as soon as they are computed, so a card never holds a "
        "full set of gradients, only its own slice and the layer in hand.",
    ),
    (Stage.ZERO2, 2, COLUMNS, ""),
    (Stage.ZERO1, 26, COLUMNS, ""),
    (Stage.ZERO3, 51, COLUMNS, ""),
]


@pytest.mark.parametrize(("stage", "index", "columns", "said"), DETAILS)
def test_the_longer_explanation_of_a_pass(stage: Stage, index: int, columns: tuple[Column, ...], said: str) -> None:
    assert detail(step(stage, Run(), COLUMNS)[index], columns) == said


def test_a_columns_activations_stay_until_its_backward() -> None:
    scenario = resolve(Inputs(model=ModelName.LLAMA_3_8B, gpus=8, batch=1))
    zero2 = step(Stage.ZERO2, scenario.run, scenario.columns)
    assert detail(zero2[2], scenario.columns) == "This column's activations stay until its backward pass."
    assert detail(zero2[26], scenario.columns) == (
        "Layer by layer: each layer's gradients are sent as soon as they are computed, so a card never holds a "
        "full set of gradients, only its own slice and the layer in hand. This column's activations then go."
    )
    assert detail(step(Stage.DP, scenario.run, scenario.columns)[26], scenario.columns) == (
        "This column's activations then go."
    )


@pytest.mark.parametrize(
    ("cards", "said"), [(range(3, 4), "GPU 3"), (range(2, 4), "GPUs 2–3"), (range(1000, 1025), "GPUs 1,000–1,024")]
)
def test_cards_text(cards: range, said: str) -> None:
    assert cards_text(cards) == said
