"""The run form, showing the run as resolved, and the fields whose value was set aside."""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.accounting import Accounting
from app.domain.activations import Recompute
from app.domain.architecture import PRESETS, ModelName
from app.domain.hardware import CARDS
from app.domain.placement import Device, Offload
from app.domain.recipes import RECIPES, RecipeName, bytes_a_weight
from app.domain.scenario import Inputs, Scenario
from app.domain.stages import Stage
from app.domain.trainable import LoraTargets
from app.domain.units import ByteUnit
from app.web.fields import Group, Kind, given, in_group, read, unfolded


@dataclass(frozen=True)
class Option:
    """One choice in a select or datalist."""

    value: str
    label: str
    selected: bool = False


@dataclass(frozen=True)
class BandField:
    """One band's bytes in the recipe form."""

    name: str
    label: str
    value: str
    """Bytes a weight as the legend says them: '2', or a fraction to three figures, '2.03'."""
    readonly: bool


@dataclass(frozen=True)
class FieldProblem:
    """A form field whose value was set aside: what the person typed, and what it should be."""

    name: str
    typed: str
    message: str
    drawn: str = ""
    """What the picture uses meanwhile, in a sentence: "Drawn with 64 GPUs, as on the screen before."."""


@dataclass(frozen=True)
class DeclaredInput:
    """A field drawn from its declaration alone (`fields.FIELDS`): a whole number, or a yes-or-no choice."""

    name: str
    label: str
    value: str
    placeholder: str = ""
    low: int | None = None
    high: int | None = None
    title: str = ""
    options: tuple[Option, ...] = ()
    """A switch's two choices; empty for a number."""

    @property
    def field_id(self) -> str:
        """The form's id for it."""
        return f"f-{self.name}"


def _entries(group: Group, inputs: Inputs, placeholders: dict[str, str]) -> tuple[DeclaredInput, ...]:
    """The fields of a fold, each as its declaration says, with the value entered (blank: the default)."""
    entries = []
    for field in in_group(group):
        value = read(inputs, field.target)
        if field.kind is Kind.SWITCH:
            options = (Option("1", "On", bool(value)), Option("0", "Off", not value))
            entries.append(DeclaredInput(field.name, field.label, "", title=field.help, options=options))
        else:
            text = "" if value is None else str(value)
            placeholder = placeholders.get(field.name, "")
            entries.append(DeclaredInput(field.name, field.label, text, placeholder, field.low, field.high, field.help))
    return tuple(entries)


@dataclass(frozen=True)
class FormView:
    """The run the person describes, as the form shows it."""

    stage: Stage
    models: tuple[Option, ...]
    params: str
    params_readonly: bool
    gpus: int
    recipes: tuple[Option, ...]
    bands: tuple[BandField, ...]
    bands_readonly: bool
    largest_layer: str
    largest_layer_placeholder: str
    capacity: str
    cards: tuple[Option, ...]
    units: tuple[Option, ...]
    batch: int = 1
    seq: str = ""
    seq_placeholder: str = ""
    recomputes: tuple[Option, ...] = ()
    trainable: str = ""
    lora_rank: str = ""
    lora_targets: tuple[Option, ...] = ()
    offloads: tuple[Option, ...] = ()
    devices: tuple[Option, ...] = ()
    pin_memory: tuple[Option, ...] = ()
    nodes: str = ""
    nodes_placeholder: str = ""
    gpus_per_node: str = ""
    gpus_per_node_placeholder: str = ""
    host_memory: str = ""
    nvme_space: str = ""
    accountings: tuple[Option, ...] = ()
    zero_init: tuple[Option, ...] = ()
    wire: tuple[DeclaredInput, ...] = ()
    """"Across nodes": hybrid sharding, ZeRO++, the links and the card's compute, from their declarations."""
    given: frozenset[str] = frozenset()
    """The run fields given a value other than their default (`fields.given`): their folds are open."""
    problems: tuple[FieldProblem, ...] = ()
    """Fields whose value was set aside; the page shows what was typed there, and why it is wrong."""
    phase: int | None = None
    """The moment of the step shown, kept when the run changes; None at rest."""
    action: str = ""
    """Where the form is sent (the page's or the embed's path); empty: the page."""
    keep: tuple[tuple[str, str], ...] = ()
    """Hidden fields the form sends besides the run: an embed's options."""

    @property
    def unfolded(self) -> frozenset[Group]:
        """The folds shown open: each holding a value given, or one set aside (`fields.unfolded`)."""
        return unfolded(self.given, not self.bands_readonly, (p.name for p in self.problems))

    @property
    def more_open(self) -> bool:
        """Whether "Micro-batch, frozen weights, LoRA, bytes per band and largest layer" is open."""
        return Group.MORE in self.unfolded

    @property
    def host_open(self) -> bool:
        """Whether "Offload, nodes and whose accounting" is open."""
        return Group.HOST in self.unfolded

    @property
    def wire_open(self) -> bool:
        """Whether "Across nodes: hybrid sharding, ZeRO++ and the links" is open."""
        return Group.WIRE in self.unfolded

    def problem(self, name: str) -> FieldProblem | None:
        """The problem with the field `name`, if it has one."""
        # Asked for each of the form's eleven fields, and there is rarely a problem at all.
        return next((p for p in self.problems if p.name == name), None) if self.problems else None


def form_view(scenario: Scenario, stage: Stage, inputs: Inputs, phase: int | None = None) -> FormView:
    """The form, showing the run as resolved."""
    run = scenario.run
    custom_recipe = scenario.recipe.name == RecipeName.CUSTOM
    models = (
        *(Option(p.name, p.title, p.name == scenario.model) for p in PRESETS.values()),
        Option(ModelName.CUSTOM, "Another model: enter its weights", scenario.model is ModelName.CUSTOM),
    )
    recipes = (
        *(Option(r.name, f"{r.title} ({r.sizes} B)", r is scenario.recipe) for r in RECIPES.values()),
        Option(RecipeName.CUSTOM, "Custom bytes per band", custom_recipe),
    )
    return FormView(
        stage=stage,
        models=models,
        params=str(run.params),
        params_readonly=scenario.model is not ModelName.CUSTOM,
        gpus=run.gpus,
        recipes=recipes,
        bands=tuple(
            BandField(f"{spec.band}_bytes", spec.label, bytes_a_weight(spec.nbytes), not custom_recipe)
            for spec in scenario.recipe.specs
        ),
        bands_readonly=not custom_recipe,
        largest_layer="" if inputs.largest_layer is None else str(inputs.largest_layer),
        largest_layer_placeholder="derived" if scenario.run.largest_layer is not None else "unknown",
        capacity="" if run.capacity is None else _capacity_text(run.capacity),
        cards=tuple(Option(card.entry, f"{card.name}, {card.gib} GiB") for card in CARDS),
        units=tuple(Option(unit.value, unit.value, unit is scenario.units) for unit in ByteUnit),
        batch=run.batch,
        seq="" if inputs.seq is None else str(inputs.seq),
        seq_placeholder=f"{scenario.seq:,}",
        recomputes=tuple(Option(r.value, _RECOMPUTE_LABELS[r], r is inputs.recompute) for r in Recompute),
        trainable=inputs.trainable or "",
        lora_rank="" if inputs.lora_rank is None else str(inputs.lora_rank),
        lora_targets=tuple(Option(t.value, _TARGET_LABELS[t], t is inputs.lora_targets) for t in LoraTargets),
        offloads=tuple(Option(o.value, _OFFLOAD_LABELS[o], o is inputs.offload) for o in Offload),
        devices=tuple(Option(d.value, _DEVICE_LABELS[d], d is run.setup.placement.target) for d in Device),
        pin_memory=_yes_no(inputs.pin_memory, "Pinned (page-locked)", "Pageable"),
        nodes="" if inputs.nodes is None else str(inputs.nodes),
        nodes_placeholder=str(run.nodes),
        gpus_per_node="" if inputs.gpus_per_node is None else str(inputs.gpus_per_node),
        gpus_per_node_placeholder=str(run.gpus_per_node),
        host_memory="" if run.host_memory is None else _capacity_text(run.host_memory),
        nvme_space="" if run.nvme_space is None else _capacity_text(run.nvme_space),
        accountings=tuple(Option(a.value, a.label, a is inputs.accounting) for a in Accounting),
        zero_init=_yes_no(inputs.zero_init, "zero.Init: in slices", "Whole, then split"),
        wire=_entries(Group.WIRE, inputs, {"shard": str(run.shards)}),
        given=given(inputs),
        phase=phase,
    )


def _yes_no(value: bool, yes: str, no: str) -> tuple[Option, ...]:
    return (Option("1", yes, value), Option("0", no, not value))


_OFFLOAD_LABELS = {
    Offload.NONE: "Nothing: all on the card",
    Offload.OPTIMIZER: "Optimizer state (ZeRO-Offload)",
    Offload.OPTIMIZER_PARAMS: "Optimizer and weights (ZeRO-3)",
    Offload.NVME: "Both, to NVMe (ZeRO-Infinity)",
}
_DEVICE_LABELS = {Device.CPU: "CPU RAM", Device.NVME: "NVMe (ZeRO-3)"}
_TARGET_LABELS = {
    LoraTargets.QV: "Q and V (the LoRA paper's)",
    LoraTargets.QKVO: "Q, K, V and O",
    LoraTargets.ALL_LINEAR: "Every linear layer of the blocks",
}

_RECOMPUTE_LABELS = {
    Recompute.NONE: "None: keep every activation",
    Recompute.SELECTIVE: "Selective: recompute the attention core",
    Recompute.FULL: "Full: keep each layer's input only",
}


def _capacity_text(capacity: int) -> str:
    for unit, suffix in ((2**30, "GiB"), (10**9, "GB")):
        if capacity % unit == 0:
            return f"{capacity // unit}{suffix}"
    return str(capacity)
