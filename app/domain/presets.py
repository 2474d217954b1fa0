"""The models a person can pick: the lesson's counts, the hand-written shapes, and stored config.json files.

The mixture-of-experts models and Mistral 7B are their Hugging Face config.json files, stored in
`app/domain/models/` and read by `hf_config.read_config` as a pasted one is; what a config does not say
(the sequence length the model was pre-trained at, its family's name) is declared beside each file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from importlib.resources import files

from app.domain.architecture import (
    DEFAULT_SEQ,
    GPT_3_175B,
    LLAMA_3_1_405B,
    LLAMA_3_8B,
    LLAMA_3_70B,
    Architecture,
    ModelName,
    ModelPreset,
)
from app.domain.hf_config import HfModel, read_config


@dataclass(frozen=True)
class Stored:
    """A preset stored as its Hub config.json, and what the file does not say."""

    name: ModelName
    file: str
    """Its file in app/domain/models/: the Hub's config.json, unchanged."""
    title: str
    source: str
    """The Hub repository the file is copied from."""
    family: str
    train_seq: int = 0
    """The sequence length it was pre-trained at, where published; 0: its context."""


STORED = (
    # Mistral 7B's paper trains at 8,192 tokens (its window 4,096); Qwen2.5's report pre-trains at 4,096 before
    # extending the context; DeepSeek-V3's report at 4,096 before its YaRN stages (arXiv 2412.19437, 4.3).
    Stored(ModelName.MISTRAL_7B, "mistral-7b-v0.1.json", "Mistral 7B", "mistralai/Mistral-7B-v0.1", "Mistral 7B", 8192),
    Stored(ModelName.MIXTRAL_8X7B, "mixtral-8x7b-v0.1.json", "Mixtral 8x7B", "mistralai/Mixtral-8x7B-v0.1", "Mixtral"),
    Stored(ModelName.QWEN_2_5_7B, "qwen2.5-7b.json", "Qwen2.5 7B", "Qwen/Qwen2.5-7B", "Qwen2.5", 4096),
    Stored(ModelName.DEEPSEEK_V3, "deepseek-v3.json", "DeepSeek-V3", "deepseek-ai/DeepSeek-V3", "DeepSeek-V3", 4096),
    Stored(ModelName.GPT_OSS_20B, "gpt-oss-20b.json", "gpt-oss-20b", "openai/gpt-oss-20b", "gpt-oss"),
)  # fmt: skip


def stored_text(file: str) -> str:
    """A stored config.json's text, from the installed package."""
    return files("app.domain").joinpath("models", file).read_text(encoding="utf-8")


def stored_model(stored: Stored) -> HfModel:
    """A stored preset read as a pasted config is, then given what the file does not say."""
    model = read_config(json.loads(stored_text(stored.file)))
    return replace(model, architecture=replace(model.architecture, family=stored.family, train_seq=stored.train_seq))


_READ = {s.name: stored_model(s) for s in STORED}
MISTRAL_7B: Architecture = _READ[ModelName.MISTRAL_7B].architecture
MIXTRAL_8X7B: Architecture = _READ[ModelName.MIXTRAL_8X7B].architecture
QWEN_2_5_7B: Architecture = _READ[ModelName.QWEN_2_5_7B].architecture
DEEPSEEK_V3: Architecture = _READ[ModelName.DEEPSEEK_V3].architecture
GPT_OSS_20B: Architecture = _READ[ModelName.GPT_OSS_20B].architecture


def _preset(name: ModelName, title: str, architecture: Architecture, source: str) -> ModelPreset:
    return ModelPreset(name, title, architecture.params, architecture, source)


def from_config(model: HfModel) -> ModelPreset:
    """A pasted or uploaded config as the model of a run: a custom model whose shape is known."""
    # A config says its context (DeepSeek-V3's 163,840), not the length it was trained at: sized at its context
    # its activations would be terabytes. Like a model without a context, 4,096 tokens until seq is set.
    arch = replace(model.architecture, train_seq=min(model.architecture.context, DEFAULT_SEQ))
    said = (
        f"A config.json does not say the length the model was trained at: {arch.train_seq:,} tokens a sequence "
        f"(its context is {arch.context:,}) until seq is set."
    )
    return ModelPreset(
        ModelName.CUSTOM, model.title, arch.params, arch, "its config.json", published=model.published,
        notes=(*model.notes, said),
    )  # fmt: skip


PRESETS: dict[ModelName, ModelPreset] = {
    preset.name: preset
    for preset in (
        # The lesson's own picture: eight weights standing for eight layers, each an eighth of the
        # model, so ZeRO-3 gathers one of them at a time.
        ModelPreset(
            ModelName.SEED_30B,
            "30B weights in 8 equal layers",
            30 * 10**9,
            source="the ZeRO lesson's example",
            equal_layers=8,
        ),
        ModelPreset(
            ModelName.ZERO_7_5B, "7.5B (the ZeRO paper's Figure 1)", 7_500_000_000, source="Rajbhandari et al. 2019"
        ),
        _preset(ModelName.LLAMA_3_8B, "Llama 3 8B", LLAMA_3_8B, "Meta Llama 3 model card"),
        _preset(ModelName.LLAMA_3_70B, "Llama 3 70B", LLAMA_3_70B, "Meta Llama 3 model card"),
        _preset(ModelName.LLAMA_3_1_405B, "Llama 3.1 405B", LLAMA_3_1_405B, "Meta Llama 3.1 model card"),
        _preset(ModelName.GPT_3_175B, "GPT-3 175B", GPT_3_175B, "Brown et al. 2020"),
        *(
            replace(_preset(s.name, s.title, _READ[s.name].architecture, f"{s.source} config.json"),
                    notes=_READ[s.name].notes)
            for s in STORED
        ),
    )
}  # fmt: skip
