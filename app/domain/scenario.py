"""From what a person entered to a run to compute: presets resolved, defaults filled, doubts noted.

The seed's view is the default: the 30B example on 8 GPUs with mixed-precision Adam, in GiB.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property
from typing import Any

from app.domain.accounting import Accounting, Setup
from app.domain.activations import Activations, Recompute, for_one_sequence
from app.domain.architecture import DEFAULT_SEQ, Architecture, ModelName, ModelPreset
from app.domain.eighths import COLUMNS, Column, model_columns
from app.domain.hardware import H100_FABRIC, Fabric
from app.domain.hf_config import HfModel
from app.domain.layers import Layer, model_layers
from app.domain.overheads import DEFAULTS, Overheads
from app.domain.parallel import Cut, cut_refused
from app.domain.placement import Device, Offload, Placement, cluster_of
from app.domain.presets import PRESETS, from_config
from app.domain.recipes import MIXED_ADAM, RECIPES, Band, Recipe, RecipeName, RecipeRule, custom_recipe
from app.domain.report import RunReport, run_report
from app.domain.run import Run
from app.domain.state_bytes import DEFAULT_GPUS
from app.domain.trainable import LoraTargets, adapter_params, parse_trainable, trainable_share
from app.domain.units import ByteUnit

DEFAULT_MODEL = ModelName.SEED_30B
NO_SHAPE = "A weight count alone has no layer shapes: its activations are not counted."


@dataclass(frozen=True)
class Scenario:
    """A resolved run, with the names it was chosen by and anything the person should check."""

    run: Run
    model: ModelName
    model_title: str
    largest_layer_source: str
    units: ByteUnit
    notes: tuple[str, ...] = ()
    architecture: Architecture | None = None
    equal_layers: bool = False
    """Whether the model is drawn as 8 equal layers, one a column (the lesson's example)."""
    seq: int = DEFAULT_SEQ
    """Tokens per sequence: as entered, else the model's training length (`Architecture.default_seq`)."""
    adapters: int = 0
    """LoRA's adapter weights, counted in the run's weights; 0 without LoRA."""
    ruled: tuple[tuple[RecipeRule, Any], ...] = ()
    """The inputs declared with a rule of their own, each with its value (`Inputs.ruled`), as the API echoes them."""
    inputs: Inputs | None = None
    """What was entered, as `resolve` read it: what would make it fit changes one knob of it (`fixes`)."""
    _changed: dict[tuple[tuple[str, Any], ...], Scenario | None] = field(
        default_factory=dict, compare=False, repr=False
    )

    def ruled_value(self, rule: RecipeRule, default: Any) -> Any:
        """The value the input declared with `rule` was given; `default` where it was not."""
        return next((value for given, value in self.ruled if given is rule), default)

    @property
    def recipe(self) -> Recipe:
        """The precision and optimizer recipe."""
        return self.run.recipe

    @cached_property
    def columns(self) -> tuple[Column, ...]:
        """The model in eighths, as the step walks across it."""
        base = self.run.params - self.adapters
        return model_columns(base, self.architecture, self.run.largest_layer, self.equal_layers)

    def changed(self, **knobs: Any) -> Scenario | None:
        """The run entered with `knobs` changed (`Inputs` fields), resolved once a request however often asked.

        What would make it fit (`fixes`) tries the same change under every stage: each is another run, resolved
        once and kept here, as the report keeps a stage's step. None where the change describes no run, or the
        scenario was not resolved from inputs.
        """
        key = tuple(sorted(knobs.items()))
        if key not in self._changed:
            try:
                found = None if self.inputs is None else _resolved(replace(self.inputs, **knobs))
            except ValueError:
                found = None
            run = self.run
            if found is not None and found.run.layers == run.layers:
                # The same layers (another count of cards, another offload): the same moments, worked out once
                # for them all in this run's memo, which is keyed by the layers' identity.
                found = replace(found, run=replace(found.run, layers=run.layers, memo=run.memo))
            self._changed[key] = found
        return self._changed[key]

    @cached_property
    def report(self) -> RunReport:
        """Every figure of the run, worked out once, the first time a route or its builder asks."""
        return run_report(self.run, self.columns)


@dataclass(frozen=True)
class Inputs:
    """What can be entered, as it was entered; None where left blank."""

    model: ModelName | None = None
    params: int | None = None
    gpus: int = DEFAULT_GPUS
    recipe: RecipeName = RecipeName.MIXED_ADAM
    band_bytes: tuple[int | None, int | None, int | None, int | None] = (None, None, None, None)
    largest_layer: int | None = None
    capacity: int | None = None
    units: ByteUnit = ByteUnit.GIB
    batch: int = 1
    seq: int | None = None
    recompute: Recompute = Recompute.NONE
    overheads: Overheads = DEFAULTS
    count_overheads: bool = False
    trainable: str | None = None
    """A count ('1.5B') or a fraction ('0.25', '25%') of the model's weights; None: all of them train."""
    lora_rank: int | None = None
    lora_targets: LoraTargets = LoraTargets.QKVO
    offload: Offload = Offload.NONE
    offload_device: Device | None = None
    """Where `optimizer` and `optimizer+params` offload to; None: the CPU (`nvme` implies NVMe)."""
    pin_memory: bool = True
    nodes: int | None = None
    gpus_per_node: int | None = None
    host_memory: int | None = None
    nvme_space: int | None = None
    accounting: Accounting = Accounting.PAPER
    zero_init: bool = True
    shard: int | None = None
    """Hybrid sharding's shard group; None: every card."""
    hpz: int = 1
    qwz: bool = False
    qgz: bool = False
    nvlink: int = H100_FABRIC.nvlink
    network: int = H100_FABRIC.network
    tflops: int = H100_FABRIC.tflops
    mfu: int = H100_FABRIC.mfu
    tp: int = 1
    sp: bool = False
    pp: int = 1
    vpp: int = 1
    microbatches: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 0
    capacity_factor: Fraction | None = None
    """A mixture of experts' capacity factor (`activations.Shape.capacity_factor`); None: dropless."""
    config: HfModel | None = None
    """A Hugging Face config.json read (`hf_config`): the model, whatever `model` and `params` say."""
    ruled: tuple[tuple[RecipeRule, Any], ...] = ()
    """The inputs declared with a rule of their own (app/web/fields.py `RunField.rule`), each with its
    value: `resolve` applies them, in their order, to the recipe chosen, and the run is of the recipe they make."""


def _model(inputs: Inputs, notes: list[str]) -> tuple[ModelName, str, int, ModelPreset | None]:
    if inputs.config is not None:
        preset = from_config(inputs.config)
        if inputs.model not in (None, ModelName.CUSTOM) or inputs.params not in (None, preset.params):
            notes.append(f"The config.json given describes the model ({preset.title}): the model chosen was set aside.")
        notes.extend(preset.notes)
        return ModelName.CUSTOM, preset.title, preset.params, preset
    name = inputs.model or (ModelName.CUSTOM if inputs.params is not None else DEFAULT_MODEL)
    if name is ModelName.CUSTOM:
        if inputs.params is None:
            fallback = PRESETS[DEFAULT_MODEL]
            notes.append(f"The custom model has {fallback.params:,} weights, the seed's count, until one is given.")
            return name, "Custom model", fallback.params, None
        return name, "Custom model", inputs.params, None
    preset = PRESETS[name]
    if inputs.params is not None and inputs.params != preset.params:
        notes.append(f"{preset.title} has {preset.params:,} weights; the count entered was set aside.")
    return name, preset.title, preset.params, preset


def _recipe(inputs: Inputs, notes: list[str], lora: bool) -> Recipe:
    if inputs.recipe is RecipeName.CUSTOM:
        defaults = [int(MIXED_ADAM.nbytes(band)) for band in Band]  # whole: mixed precision's 2/2/4/8
        weights, gradients, master, moments = (
            given if given is not None else default for given, default in zip(inputs.band_bytes, defaults, strict=True)
        )
        return custom_recipe(weights, gradients, master, moments)
    recipe = RECIPES[inputs.recipe]
    entered = [(band, given) for band, given in zip(Band, inputs.band_bytes, strict=True) if given is not None]
    if any(given != recipe.nbytes(band) for band, given in entered):
        notes.append(f"{recipe.title} sets the bytes of each band; choose a custom recipe to enter your own.")
    # What the recipe's own declaration says of it (fp8's small saving, QLoRA's frozen weights), and of this
    # run: with LoRA's adapters or without them.
    said = " ".join(words for words in (recipe.note, recipe.with_lora if lora else recipe.without_lora) if words)
    if said:
        notes.append(said)
    return recipe


def resolve(inputs: Inputs) -> Scenario:
    """Turn inputs into a run. Raises ValueError, with a sentence for a person, when impossible.

    A request's own run, resolved once; the runs `Scenario.changed` makes of it are resolved by `_resolved`.
    """
    return _resolved(inputs)


def _resolved(inputs: Inputs) -> Scenario:
    """`resolve`'s work: for the request's run and for each run changed from it."""
    notes: list[str] = []
    name, title, params, preset = _model(inputs, notes)
    lora_notes: list[str] = []
    adapters, frozen = _trainable(inputs, params, preset.architecture if preset else None, lora_notes)
    recipe = _recipe(inputs, notes, adapters > 0)
    for rule, value in inputs.ruled:
        recipe = rule(recipe, value)
    notes += lora_notes
    if inputs.largest_layer is not None:
        largest, source = inputs.largest_layer, "as entered"
        if largest > params:
            notes.append(f"The largest layer entered ({largest:,}) is bigger than the whole model ({params:,}).")
            largest = params
            source = "capped at the whole model"
    elif preset is not None and preset.largest_layer is not None:
        largest, source = preset.largest_layer, preset.largest_layer_source
    else:
        largest, source = None, "unknown"
    architecture = preset.architecture if preset is not None else None
    equal = preset is not None and preset.equal_layers == COLUMNS and inputs.largest_layer is None
    seq = inputs.seq or (architecture.default_seq if architecture else DEFAULT_SEQ)
    factor = inputs.capacity_factor
    activations = for_one_sequence(architecture, seq, inputs.recompute, factor) if architecture else None
    cluster = cluster_of(inputs.gpus, inputs.nodes, inputs.gpus_per_node)
    placement = Placement(inputs.offload, inputs.offload_device or Device.CPU, inputs.pin_memory)
    setup = Setup(inputs.accounting, placement, inputs.hpz)
    cut = Cut(inputs.tp, inputs.sp, inputs.pp, inputs.vpp, inputs.microbatches, inputs.cp, inputs.ep, inputs.etp)
    blocks = architecture.layers if architecture else None
    heads = (architecture.heads, architecture.kv_heads) if architecture else None
    experts = (architecture.moe.experts if architecture.moe else 0) if architecture else None
    if refused := cut_refused(cut, inputs.gpus, cluster.gpus_per_node, blocks, heads, experts):
        raise ValueError(refused)
    run = Run(
        params=params + adapters,
        frozen=frozen,
        gpus=inputs.gpus,
        recipe=recipe,
        largest_layer=largest,
        capacity=inputs.capacity,
        layers=_layers(architecture, frozen, adapters, activations, None if source.startswith("derived") else largest),
        activations=activations,
        trainable_share=trainable_share(inputs.trainable) if inputs.trainable is not None and not adapters else None,
        batch=inputs.batch,
        overheads=inputs.overheads,
        count_overheads=inputs.count_overheads,
        setup=setup,
        nodes=cluster.nodes,
        zero_init=inputs.zero_init,
        host_memory=inputs.host_memory,
        nvme_space=inputs.nvme_space,
        shard_size=inputs.shard,
        qwz=inputs.qwz,
        qgz=inputs.qgz,
        seq=seq,
        links=Fabric(inputs.nvlink, inputs.network, inputs.tflops, inputs.mfu),
        cut=cut,
        architecture=architecture,
    )
    return Scenario(
        run, name, title, source, inputs.units, tuple(notes), architecture, equal, seq, adapters, inputs.ruled, inputs
    )


def _layers(
    architecture: Architecture | None,
    frozen: int,
    adapters: int,
    activations: Activations | None,
    entered: int | None,
) -> tuple[Layer, ...]:
    """The model's layers, where its shape is known; a bare count's are the run's own (`Run.model_layers`)."""
    if architecture is None:
        return ()
    blocks = adapters // architecture.layers
    return model_layers(architecture, frozen, blocks, activations, entered)


def _trainable(inputs: Inputs, params: int, architecture: Architecture | None, notes: list[str]) -> tuple[int, int]:
    """LoRA's adapter weights and the model's frozen ones. The query model has checked `trainable`."""
    adapters = 0
    if inputs.lora_rank is not None:
        if architecture is None:
            notes.append(
                "LoRA's adapters are counted from the layers' shapes, which a bare weight count has not: "
                "drawn without LoRA."
            )
        else:
            adapters = adapter_params(architecture, inputs.lora_rank, inputs.lora_targets)
    # LoRA freezes the model and trains its adapters; without it, everything trains.
    trains = parse_trainable(inputs.trainable, params) if inputs.trainable is not None else (0 if adapters else params)
    return adapters, params - trains
