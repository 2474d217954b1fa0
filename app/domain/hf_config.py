"""A Hugging Face `config.json`, already parsed, read into an `Architecture`.

The keys read are those that set a weight's count, as Hugging Face transformers' modelling code of each
`model_type` builds its modules from them; the keys known not to change the weights (token ids, rope
settings, dtype, eps, dropout, the sliding window, the quantization) are accepted and set aside in one
declaration, `INERT`. Any other key, a missing key the count needs, a value of the wrong type or out of
range, or keys that contradict each other are refused, each with a sentence naming the key
(`ConfigRefused.key`): a config the reading does not understand is never counted by a guess.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from app.domain.architecture import Architecture, Mla, Moe

MAX_WIDTH = 1 << 22
"""The widest dimension read (a hidden size, a vocabulary, an intermediate size): 4,194,304, far past any model."""
MAX_LAYERS = 1 << 14
"""The most blocks read: 16,384."""
MAX_EXPERTS = 1 << 16
"""The most experts a block: 65,536."""
MAX_PARAMS = 10**16
"""The most weights a config may derive: the custom count's own limit, 10,000T."""
MAX_TITLE = 120
"""The longest title kept from `_name_or_path`: a name, never a text."""

MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "deepseek_v3", "gpt_oss")
"""The `model_type`s read: the modelling code of each is what the count follows."""

INERT = frozenset(
    {
        # What the file is and how it was written.
        "architectures", "transformers_version", "torch_dtype", "dtype", "auto_map", "use_cache",
        "_attn_implementation_autoset", "model_id",
        # Token ids.
        "bos_token_id", "eos_token_id", "pad_token_id",
        # Positions: rotary settings, which have no weights, and the windows attention looks through.
        "rope_theta", "rope_scaling", "rope_parameters", "rope_interleave", "partial_rotary_factor",
        "sliding_window", "use_sliding_window", "max_window_layers", "layer_types", "initial_context_length",
        "use_mrope",
        # Numbers the training or the forward pass uses: eps, dropout, initialisation, losses, the router's
        # scoring (not its weights), gpt-oss's clamp.
        "rms_norm_eps", "attention_dropout", "initializer_range", "pretraining_tp", "output_router_logits",
        "router_aux_loss_coef", "aux_loss_alpha", "seq_aux", "norm_topk_prob", "routed_scaling_factor",
        "scoring_func", "topk_method", "n_group", "topk_group", "ep_size", "swiglu_limit",
        # Stored weights' format: quantization changes the bytes, never the count.
        "quantization_config",
    }
)  # fmt: skip
"""Keys accepted and set aside: none of them changes how many weights the model has."""

_ACTIVATIONS = frozenset({"silu", "swish", "gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu"})
"""`hidden_act`s of the gated MLPs read: the activation has no weights; each MLP has three matrices whatever it is."""


class ConfigRefused(ValueError):
    """A config.json the reading refuses, with the key at fault and a sentence for a person."""

    def __init__(self, key: str, sentence: str) -> None:
        super().__init__(sentence)
        self.key = key


@dataclass(frozen=True)
class HfModel:
    """A model read from its config.json: the architecture, its title, and what was read."""

    architecture: Architecture
    title: str
    """`_name_or_path` where the config carries one, else its `model_type`."""
    published: int | None
    """The weight count the config states (`num_parameters`), shown beside the one derived; None where none."""
    notes: tuple[str, ...]
    """What a person should know of the reading: DeepSeek's multi-token prediction module not counted."""
    minimal: str
    """The keys read, with their values, as compact JSON sorted by key: a link's `config=` (the inert keys
    left out, so a link stays short; ASCII, so it reads the same in any address)."""

    @property
    def params(self) -> int:
        """The weights derived from the shapes."""
        return self.architecture.params


class _Reader:
    """One config's keys, each read at most once and checked as it is; what was read is kept."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.read: dict[str, Any] = {}

    def _take(self, key: str) -> Any:
        value = self.config.get(key)
        if key in self.config:
            self.read[key] = value
        return value

    def whole(self, key: str, default: int | None = None, low: int = 1, high: int = MAX_WIDTH) -> int:
        """A whole number from `low` to `high`; `default` where the key is absent or null."""
        value = self._take(key)
        if value is None:
            if default is None:
                raise ConfigRefused(key, f"The config has no {key}, which the weight count needs.")
            return default
        # JSON's true is Python's True, an int: a switch is not a count.
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigRefused(key, f"{key} must be a whole number, not {_kind(value)}.")
        if not low <= value <= high:
            raise ConfigRefused(key, f"{key} must be from {low:,} to {high:,}; the config has {_said(value)}.")
        return value

    def switch(self, key: str, default: bool = False) -> bool:
        """True or false; `default` where absent."""
        value = self._take(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigRefused(key, f"{key} must be true or false, not {_kind(value)}.")
        return value

    def absent_or(self, key: str, allowed: object) -> None:
        """A key this model type reads only at one value (Qwen2-MoE's sparse step of 1)."""
        value = self._take(key)
        if value is not None and (value != allowed or isinstance(value, bool) is not isinstance(allowed, bool)):
            raise ConfigRefused(key, f"{key} is read only as {json.dumps(allowed)}; the config has {_said(value)}.")

    def text(self, key: str) -> str | None:
        value = self._take(key)
        if value is not None and not isinstance(value, str):
            raise ConfigRefused(key, f"{key} must be a string, not {_kind(value)}.")
        return value


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, float):
        return "a number with a fraction" if math.isfinite(value) else "a number that is not finite"
    return {str: "a string", list: "a list", dict: "an object", int: "a whole number"}.get(type(value), "null")


def _said(value: object) -> str:
    """A value as the refusal quotes it: short, and only what JSON itself wrote (never the person's markup)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}" if abs(value) < 10**30 else "a number of more than 30 digits"
    return _kind(value)


def read_config(config: object) -> HfModel:
    """The model a Hugging Face config.json describes. Raises ConfigRefused, naming the key, where it cannot.

    `config` is the parsed JSON: an object, whose keys are checked against what `model_type` reads.
    """
    if not isinstance(config, dict):
        raise ConfigRefused("config", "A config.json is a JSON object of keys and values.")
    reader = _Reader(config)
    model_type = reader.text("model_type")
    if model_type is None:
        raise ConfigRefused("model_type", "The config has no model_type, which says how its keys are read.")
    if model_type not in MODEL_TYPES:
        raise ConfigRefused(
            "model_type", f"model_type must be one of {', '.join(MODEL_TYPES)}: the config's is not read here."
        )
    name = reader.text("_name_or_path")
    # A name, shown on a page and printed on a terminal: no control characters (an escape sequence), none too long.
    printable = "".join(c if c.isprintable() else " " for c in (name or "")[:MAX_TITLE])
    title = " ".join(printable.split()) or model_type
    published = reader.whole("num_parameters", 0, low=1, high=MAX_PARAMS) or None
    hidden_act = reader.text("hidden_act")
    if hidden_act is not None and hidden_act not in _ACTIVATIONS:
        raise ConfigRefused("hidden_act", f"hidden_act must be one of {', '.join(sorted(_ACTIVATIONS))}.")
    notes: list[str] = []
    # No family: a config does not say the length the model was trained at (its default sequence is its context).
    architecture = _architecture(reader, model_type, notes)
    unknown = sorted(key for key in config if key not in reader.read and key not in INERT)
    if unknown:
        key = str(unknown[0])[:60]
        raise ConfigRefused(key, f"The key {json.dumps(key)} is not one a {model_type} config is read by.")
    if architecture.params > MAX_PARAMS:
        raise ConfigRefused("config", f"The config describes more than {MAX_PARAMS:,} weights.")
    minimal = json.dumps(reader.read, separators=(",", ":"), sort_keys=True, ensure_ascii=True)
    return HfModel(architecture, title, published, tuple(notes), minimal)


@lru_cache(maxsize=64)
def read_text(text: str) -> HfModel:
    """A config.json's text, parsed then read; malformed JSON is refused like a bad key.

    Kept for the texts last read: a request's query model, its cut's checks and its run each ask for the same one.
    """
    try:
        parsed = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except ConfigRefused:
        raise
    except json.JSONDecodeError as error:
        raise ConfigRefused("config", f"The config is not valid JSON: {error.msg} (line {error.lineno}).") from error
    except ValueError as error:
        # Python refuses to read a whole number of more than 4,300 digits (sys.get_int_max_str_digits).
        raise ConfigRefused(
            "config", "The config holds a number of more than 4,300 digits: no count is that long."
        ) from error
    except RecursionError as error:
        raise ConfigRefused("config", "The config nests too deep to be a config.json.") from error
    return read_config(parsed)


def _no_constant(name: str) -> object:
    raise ConfigRefused("config", f"The config holds {name}, which JSON has not: write numbers.")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # JSON's own reading keeps the last of two equal keys, silently: which one the author meant is unknown.
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ConfigRefused(key, f"The config gives {key} twice: keep one.")
        found[key] = value
    return found


def _architecture(reader: _Reader, model_type: str, notes: list[str]) -> Architecture:
    hidden = reader.whole("hidden_size")
    layers = reader.whole("num_hidden_layers", high=MAX_LAYERS)
    heads = reader.whole("num_attention_heads", high=MAX_WIDTH)
    kv_heads = reader.whole("num_key_value_heads", heads, high=MAX_WIDTH)
    if heads % kv_heads:
        raise ConfigRefused(
            "num_key_value_heads", f"num_key_value_heads ({kv_heads:,}) must divide num_attention_heads ({heads:,})."
        )
    ffn = reader.whole("intermediate_size")
    vocab = reader.whole("vocab_size")
    context = reader.whole("max_position_embeddings", high=1 << 24)
    tied = reader.switch("tie_word_embeddings")
    attention_bias = reader.switch("attention_bias")
    shape: dict[str, Any] = {}
    if model_type == "deepseek_v3":
        shape = _deepseek(reader, hidden, heads, layers, attention_bias, notes)
    else:
        shape["head_width"] = _head_width(reader, hidden, heads)
        if model_type in ("llama", "mistral"):
            mlp_bias = reader.switch("mlp_bias") if model_type == "llama" else False
            if mlp_bias and not attention_bias:
                raise ConfigRefused("mlp_bias", "mlp_bias is read only with attention_bias: both biases, or neither.")
            shape["biases"] = mlp_bias
            shape["qkv_bias"] = shape["o_bias"] = attention_bias
        elif model_type in ("qwen2", "qwen2_moe"):
            # Qwen2's attention has biases on q, k and v, and none on o, whatever the config says.
            shape["qkv_bias"] = True
            shape["moe"] = _qwen2_moe(reader, layers) if model_type == "qwen2_moe" else None
        elif model_type == "mixtral":
            shape["moe"] = _experts(reader, "num_local_experts", ffn)
        elif model_type == "gpt_oss":
            shape.update(qkv_bias=attention_bias, o_bias=attention_bias, sinks=True)
            shape["moe"] = _experts(reader, "num_local_experts", ffn, router_bias=True, expert_bias=True)
            if (same := reader.whole("experts_per_token", shape["moe"].top_k, high=MAX_EXPERTS)) != shape["moe"].top_k:
                raise ConfigRefused(
                    "experts_per_token", f"experts_per_token ({same:,}) contradicts num_experts_per_tok."
                )
        if model_type != "gpt_oss" and model_type not in ("llama", "mistral") and attention_bias:
            raise ConfigRefused("attention_bias", f"attention_bias is not read for {model_type}: it sets its own.")
    try:
        return Architecture(
            layers=layers, hidden=hidden, ffn=ffn, vocab=vocab, heads=heads, kv_heads=kv_heads,
            tied_embeddings=tied, context=context, **shape,
        )  # fmt: skip
    except ValueError as error:
        raise ConfigRefused("num_attention_heads", str(error)) from error


def _head_width(reader: _Reader, hidden: int, heads: int) -> int:
    """`head_dim` where it is set apart from hidden / heads; 0 where it is that (or absent)."""
    width = reader.whole("head_dim", 0, low=1)
    if width == 0:
        if hidden % heads:
            raise ConfigRefused(
                "num_attention_heads",
                f"num_attention_heads ({heads:,}) must divide hidden_size ({hidden:,}), or head_dim be given.",
            )
        return 0
    return 0 if width * heads == hidden else width


def _experts(
    reader: _Reader, key: str, width: int, *, shared: int = 0, router_bias: bool = False, expert_bias: bool = False
) -> Moe:
    experts = reader.whole(key, high=MAX_EXPERTS)
    top_k = reader.whole("num_experts_per_tok", high=MAX_EXPERTS)
    if top_k > experts:
        raise ConfigRefused(
            "num_experts_per_tok", f"num_experts_per_tok ({top_k:,}) is more than the {experts:,} experts ({key})."
        )
    return Moe(experts, top_k, width, shared_ffn=shared, router_bias=router_bias, expert_bias=expert_bias)


def _qwen2_moe(reader: _Reader, layers: int) -> Moe:
    # Qwen2-MoE's block i has experts where (i + 1) % decoder_sparse_step == 0 and i is not in mlp_only_layers;
    # read at a step of 1 and no dense layers, every block has them (Qwen1.5-MoE, Qwen2-57B-A14B).
    reader.absent_or("decoder_sparse_step", 1)
    only = reader._take("mlp_only_layers")
    if only not in (None, []):
        raise ConfigRefused("mlp_only_layers", "mlp_only_layers is read only empty: every block with experts.")
    width = reader.whole("moe_intermediate_size")
    shared = reader.whole("shared_expert_intermediate_size", 0, low=0)
    moe = _experts(reader, "num_experts", width, shared=shared)
    return Moe(moe.experts, moe.top_k, width, shared_ffn=shared, shared_gate=shared > 0)


def _deepseek(
    reader: _Reader, hidden: int, heads: int, layers: int, attention_bias: bool, notes: list[str]
) -> dict[str, Any]:
    if attention_bias:
        raise ConfigRefused("attention_bias", "attention_bias is read only as false for deepseek_v3.")
    q_rank = reader.whole("q_lora_rank", 0, low=0)
    kv_rank = reader.whole("kv_lora_rank")
    nope = reader.whole("qk_nope_head_dim")
    rope = reader.whole("qk_rope_head_dim")
    v_dim = reader.whole("v_head_dim")
    # transformers' DeepseekV3Config sets head_dim to the rotary part; a config that says otherwise contradicts it.
    if (head_dim := reader.whole("head_dim", rope)) != rope:
        raise ConfigRefused("head_dim", f"head_dim ({head_dim:,}) must equal qk_rope_head_dim ({rope:,}).")
    width = reader.whole("moe_intermediate_size")
    shared = reader.whole("n_shared_experts", 0, low=0, high=MAX_EXPERTS) * width
    moe = _experts(reader, "n_routed_experts", width, shared=shared, router_bias=True)
    dense = reader.whole("first_k_dense_replace", 0, low=0, high=MAX_LAYERS)
    if dense >= layers:
        raise ConfigRefused(
            "first_k_dense_replace",
            f"first_k_dense_replace ({dense:,}) leaves no block of the {layers:,} with experts.",
        )
    every = reader.whole("moe_layer_freq", 1, high=MAX_LAYERS)
    mtp = reader.whole("num_nextn_predict_layers", 0, low=0, high=MAX_LAYERS)
    if mtp:
        notes.append(
            f"Its multi-token prediction (num_nextn_predict_layers: {mtp}) is not counted: Hugging Face "
            "transformers does not load it, so a run of the model as it loads does not keep it."
        )
    return {
        "head_width": nope + rope,
        "mla": Mla(q_rank, kv_rank, nope, rope, v_dim),
        "moe": Moe(moe.experts, moe.top_k, width, shared_ffn=shared, router_bias=True, dense_first=dense, every=every),
    }
