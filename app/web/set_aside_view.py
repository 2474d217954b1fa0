"""A bad link said where the reader looks: the values set aside, what would be accepted, what is drawn instead.

A link with `gpus=0` is answered with the run drawn without it; the top of the widget says which
value was set aside, what the form accepts there, and what the picture is of instead, so the default
run is never taken for the one asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.domain.activations import Recompute
from app.domain.bands import Band
from app.domain.quantities import count_label, gpus_label
from app.domain.scenario import Scenario
from app.web.form_view import FieldProblem

MAX_SHOWN = 40
"""A value given is repeated at most this long (as the error messages do)."""

_LABELS = {
    "model": "Model",
    "params": "Weights",
    "gpus": "GPUs",
    "capacity": "Card memory",
    "recipe": "Recipe",
    "units": "Units",
    "largest_layer": "Largest layer",
    "batch": "Micro-batch",
    "seq": "Sequence length",
    "recompute": "Recomputation",
    "trainable": "Trainable weights",
    "lora_rank": "LoRA rank",
    "lora_targets": "LoRA targets",
    "offload": "Offload",
    "offload_device": "Offload to",
    "pin_memory": "Host memory for it",
    "nodes": "Nodes",
    "gpus_per_node": "GPUs per node",
    "host_memory": "CPU RAM per node",
    "nvme_space": "NVMe per node",
    "accounting": "Counted as",
    "zero_init": "Building the model (DeepSpeed)",
}
_BANDS = {f"{band.value}_bytes": band for band in Band}


@dataclass(frozen=True)
class SetAsideField:
    """A field of the run set aside, as the message at the top of the widget names it."""

    label: str
    """The form's label for it: "GPUs"."""
    typed: str
    """What was given, shortened; escaped when rendered."""
    message: str
    """What would be accepted, as a sentence: "Enter a whole number of GPUs between 1 and 4096."."""
    field_id: str
    """The form field's id, to go and correct it."""

    @property
    def said(self) -> str:
        """What is said after the field's label: "“0” is not accepted. Enter a whole number of GPUs…"."""
        return f"“{self.typed}” is not accepted. {self.message}"


@dataclass(frozen=True)
class SetAsideView:
    """What the top of the widget says when values of the run were set aside, and what is drawn instead."""

    fields: tuple[SetAsideField, ...]
    drawn: str
    """What the picture is of: "Drawn without gpus=0: 8 GPUs, the default."."""


def shortened(text: str) -> str:
    """`text`, cut to `MAX_SHOWN` characters with an ellipsis."""
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _label(name: str, scenario: Scenario) -> str:
    band = _BANDS.get(name)
    if band is not None:
        return f"Bytes per weight, {scenario.recipe.spec(band).label.lower()}"
    return _LABELS.get(name, name)


def field_id(name: str) -> str:
    """The run form's id for the field of the parameter `name` (templates/_widget.html run_form)."""
    return "f-layer" if name == "largest_layer" else f"f-{name}"


def _drawn(name: str, scenario: Scenario) -> str | None:
    """The value the picture uses for the field `name`, in words; None where it uses none."""
    run = scenario.run
    band = _BANDS.get(name)
    if band is not None:
        return f"{scenario.recipe.spec(band).nbytes} B"
    if name == "gpus":
        return gpus_label(run.gpus)
    if name == "params":
        return f"{count_label(run.params)} weights"
    if name == "model":
        return scenario.model_title
    if name == "capacity":
        return None if run.capacity is None else scenario.units.show(run.capacity)
    if name == "largest_layer":
        return None if run.largest_layer is None else f"a largest layer of {run.largest_layer:,} weights"
    if name == "recipe":
        return scenario.recipe.title
    if name == "units":
        return scenario.units.value
    if name == "batch":
        return f"a micro-batch of {run.batch:,}"
    if name == "seq":
        return f"sequences of {scenario.seq:,} tokens"
    if name == "recompute":
        chosen = run.activations.recompute if run.activations else Recompute.NONE
        return "no recomputation" if chosen is Recompute.NONE else f"{chosen} recomputation"
    if name == "trainable":
        return f"{run.params - run.frozen:,} trainable weights"
    if name in ("lora_rank", "lora_targets"):
        return f"LoRA's {scenario.adapters:,} adapter weights" if scenario.adapters else "no LoRA"
    placement = run.setup.placement
    if name == "offload":
        return f"offload={placement.offload.value}"
    if name == "offload_device":
        return "offload to NVMe" if placement.target.value == "nvme" else "offload to the CPU"
    if name in ("nodes", "gpus_per_node"):
        return f"{run.nodes:,} {'node' if run.nodes == 1 else 'nodes'} of {gpus_label(run.gpus_per_node)}"
    if name in ("host_memory", "nvme_space"):
        size = getattr(run, name)
        return None if size is None else scenario.units.show(size)
    if name == "accounting":
        return f"the {run.setup.accounting.value} accounting"
    if name == "pin_memory":
        return "pinned host memory" if placement.pin_memory else "pageable host memory"
    if name == "zero_init":
        return "zero.Init" if run.zero_init else "the whole model built first"
    # The overheads' settings: the value drawn is the setting's own.
    return f"{name}={getattr(run.overheads, name, int(run.count_overheads))}"


_NONE = {
    "capacity": "no card memory, so no fit check",
    "largest_layer": "no largest layer",
    "host_memory": "no host memory, so no verdict on it",
    "nvme_space": "no NVMe space, so no verdict on it",
}


def _instead(name: str, scenario: Scenario, from_screen: frozenset[str]) -> str:
    """What the picture uses in place of the field `name`: "64 GPUs, as on the screen before"."""
    drawn = _drawn(name, scenario)
    if drawn is None:
        return _NONE[name]
    return f"{drawn}, {'as on the screen before' if name in from_screen else 'the default'}"


def set_aside_view(problems: tuple[FieldProblem, ...], scenario: Scenario, from_screen: frozenset[str]) -> SetAsideView:
    """The message for `problems`, the fields set aside from the run `scenario` draws.

    `from_screen` are the fields drawn with the value on the screen before, the rest with their default.
    """
    fields = tuple(
        SetAsideField(_label(p.name, scenario), shortened(p.typed), p.message, field_id(p.name)) for p in problems
    )
    given = " and ".join(f"{p.name}={shortened(p.typed)}" for p in problems)
    instead = "; ".join(_instead(p.name, scenario, from_screen) for p in problems)
    return SetAsideView(fields, f"Drawn without {given}: {instead}.")


def with_drawn(
    problems: tuple[FieldProblem, ...], scenario: Scenario, from_screen: frozenset[str]
) -> tuple[FieldProblem, ...]:
    """Each problem with what the picture uses meanwhile, said beside its field.

    So the figures on the screen are never taken for those of the value typed.
    """
    return tuple(replace(p, drawn=f"Drawn with {_instead(p.name, scenario, from_screen)}.") for p in problems)
