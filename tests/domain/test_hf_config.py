"""A Hugging Face config.json read into an architecture.

The stored presets' counts against the published ones, and every refusal naming its key.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.architecture import Architecture, Mla, ModelName, Moe
from app.domain.hf_config import INERT, ConfigRefused, read_config, read_text
from app.domain.presets import PRESETS, STORED, stored_model, stored_text

# Each stored config's derived count against the count its publisher states, with the source.
PUBLISHED = [
    # Hugging Face's model page for mistralai/Mistral-7B-v0.1 ("Model size 7.24B params", the safetensors'
    # count): 7,241,732,096, to the weight.
    (ModelName.MISTRAL_7B, 7_241_732_096),
    # Hugging Face's page for mistralai/Mixtral-8x7B-v0.1, the safetensors' count: 46,702,792,704.
    (ModelName.MIXTRAL_8X7B, 46_702_792_704),
    # DeepSeek-V3's README: "685B ... includes 671B of the Main Model weights and 14B of the Multi-Token
    # Prediction (MTP) Module weights"; the main model to the weight, 671,026,419,200 (the stand-in's,
    # derived by hand in docs/moe.md).
    (ModelName.DEEPSEEK_V3, 671_026_419_200),
    # gpt-oss's model card (arXiv 2508.10925), Table 1: 20.91B total for gpt-oss-20b; 20,914,757,184 to the weight.
    (ModelName.GPT_OSS_20B, 20_914_757_184),
    # Qwen2.5-7B's model card: "Number of Parameters: 7.61B"; 7,615,616,512 to the weight.
    (ModelName.QWEN_2_5_7B, 7_615_616_512),
]


@pytest.mark.parametrize(("name", "published"), PUBLISHED)
def test_each_stored_config_derives_its_published_count(name: ModelName, published: int) -> None:
    assert PRESETS[name].params == published
    assert PRESETS[name].architecture is not None


def test_qwen_2_5_7b_non_embedding_count_is_its_model_cards() -> None:
    # Qwen2.5-7B's model card: "Number of Paramaters (Non-Embedding): 6.53B": the two 152,064 × 3,584 tables off.
    qwen = PRESETS[ModelName.QWEN_2_5_7B].architecture
    assert qwen is not None
    non_embedding = qwen.params - 2 * 152_064 * 3_584
    assert non_embedding == 6_525_621_760
    assert round(non_embedding / 1e9, 2) == 6.53


def test_deepseek_v3_main_model_and_mtp_make_its_685b() -> None:
    # The README: "685B ... 671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP) Module".
    # The MTP module as the checkpoint stores it (layer 61): one more MoE block, 11,507,286,272; its projection
    # of the two 7,168-wide halves, 14,336 × 7,168 = 102,760,448; its three norms, 3 × 7,168 = 21,504; and
    # its own copies of the embedding and the head, 2 × 129,280 × 7,168 = 1,853,358,080: 13,463,426,304.
    deepseek = PRESETS[ModelName.DEEPSEEK_V3].architecture
    assert deepseek is not None
    mtp = deepseek.block_params_of(61) + 14_336 * 7_168 + 3 * 7_168 + 2 * 129_280 * 7_168
    assert mtp == 13_463_426_304
    assert round(deepseek.params / 1e9) == 671
    # 684.49B together: the README's 685B within 0.1% (its 14B rounds the module up).
    assert abs(deepseek.params + mtp - 685e9) / 685e9 < 0.001
    assert "multi-token prediction" in PRESETS[ModelName.DEEPSEEK_V3].notes[0]


def test_active_counts_are_the_published_ones() -> None:
    # Mixtral: "12.9B active" (Mistral's announcement), 12,879,925,248 to the weight; DeepSeek-V3: 37B.
    mixtral, deepseek, oss = (BY_HAND[n] for n in (ModelName.MIXTRAL_8X7B, ModelName.DEEPSEEK_V3,
                                                    ModelName.GPT_OSS_20B))  # fmt: skip
    assert mixtral.active_params == 12_879_925_248
    assert deepseek.active_params == 37_552_297_472
    # gpt-oss's card, Table 1: 3.61B active, the embedding left out (a lookup), the unembedding kept:
    # 4,187,440,704 − 201,088 × 2,880 = 3,608,307,264.
    assert oss.active_params - 201_088 * 2_880 == 3_608_307_264
    assert round(3_608_307_264 / 1e9, 2) == 3.61


# The stand-ins the stored files replace, written by hand from the model cards: reading the files must give
# the same architectures, so every figure of these models is unchanged.
BY_HAND = {
    ModelName.MISTRAL_7B: Architecture(
        layers=32, hidden=4096, ffn=14336, vocab=32000, heads=32, kv_heads=8, tied_embeddings=False,
        context=32768, train_seq=8192, family="Mistral 7B",
    ),
    ModelName.MIXTRAL_8X7B: Architecture(
        layers=32, hidden=4096, ffn=14336, vocab=32000, heads=32, kv_heads=8, tied_embeddings=False,
        context=32768, family="Mixtral", moe=Moe(8, 2, 14336),
    ),
    ModelName.QWEN_2_5_7B: Architecture(
        layers=28, hidden=3584, ffn=18944, vocab=152064, heads=28, kv_heads=4, tied_embeddings=False,
        context=131072, train_seq=4096, family="Qwen2.5", qkv_bias=True,
    ),
    ModelName.DEEPSEEK_V3: Architecture(
        layers=61, hidden=7168, ffn=18432, vocab=129280, heads=128, kv_heads=128, tied_embeddings=False,
        context=163840, train_seq=4096, family="DeepSeek-V3", head_width=192,
        mla=Mla(1536, 512, 128, 64, 128),
        moe=Moe(256, 8, 2048, shared_ffn=2048, router_bias=True, dense_first=3),
    ),
    ModelName.GPT_OSS_20B: Architecture(
        layers=24, hidden=2880, ffn=2880, vocab=201088, heads=64, kv_heads=8, tied_embeddings=False,
        context=131072, family="gpt-oss", head_width=64, qkv_bias=True, o_bias=True, sinks=True,
        moe=Moe(32, 4, 2880, router_bias=True, expert_bias=True),
    ),
}  # fmt: skip


@pytest.mark.parametrize("stored", STORED, ids=lambda s: s.name.value)
def test_each_stored_config_reads_as_the_hand_written_shape(stored: Any) -> None:
    assert stored_model(stored).architecture == BY_HAND[stored.name]


def _mixtral() -> dict[str, Any]:
    return dict(json.loads(stored_text("mixtral-8x7b-v0.1.json")))


def test_a_pasted_config_keeps_its_title_and_the_keys_read() -> None:
    config = {**_mixtral(), "_name_or_path": "mistralai/Mixtral-8x7B-v0.1", "num_parameters": 46_702_792_704}
    model = read_config(config)
    assert (model.title, model.published, model.params) == ("mistralai/Mixtral-8x7B-v0.1", 46_702_792_704,
                                                            46_702_792_704)  # fmt: skip
    # The minimised config drops the inert keys, and reads back to the same model.
    minimal = json.loads(model.minimal)
    assert not set(minimal) & INERT
    assert read_text(model.minimal).architecture == model.architecture
    assert len(model.minimal) < 500


def test_the_title_is_the_model_type_without_a_name() -> None:
    assert read_config(_mixtral()).title == "mixtral"
    assert read_config({**_mixtral(), "_name_or_path": "  "}).title == "mixtral"


def test_a_title_has_no_control_characters_and_is_short() -> None:
    # A name printed on a terminal by `zero-bands table`: an escape sequence in it is written as spaces.
    assert read_config({**_mixtral(), "_name_or_path": "a\x1b[31mb\nc"}).title == "a [31mb c"
    assert len(read_config({**_mixtral(), "_name_or_path": "x" * 1000}).title) == 120


def test_key_value_heads_default_to_the_heads_and_mqa_is_one() -> None:
    dense = {k: v for k, v in _mixtral().items() if k not in ("num_key_value_heads", "num_local_experts",
                                                             "num_experts_per_tok")}  # fmt: skip
    dense["model_type"] = "mistral"
    assert read_config(dense).architecture.kv_heads == 32
    assert read_config({**dense, "num_key_value_heads": 1}).architecture.kv_heads == 1


REFUSED = [
    ({"hidden_size": True}, "hidden_size"),
    ({"hidden_size": 4096.0}, "hidden_size"),
    ({"hidden_size": -1}, "hidden_size"),
    ({"hidden_size": "4096"}, "hidden_size"),
    ({"hidden_size": 10**40}, "hidden_size"),
    ({"num_hidden_layers": 0}, "num_hidden_layers"),
    ({"num_key_value_heads": 5}, "num_key_value_heads"),
    ({"num_attention_heads": 24}, "num_attention_heads"),
    ({"num_experts_per_tok": 9}, "num_experts_per_tok"),
    ({"num_local_experts": None}, "num_local_experts"),
    ({"model_type": "bert"}, "model_type"),
    ({"model_type": None}, "model_type"),
    ({"tie_word_embeddings": 1}, "tie_word_embeddings"),
    ({"hidden_act": "<script>"}, "hidden_act"),
    ({"wholly_unknown": 1}, "wholly_unknown"),
    ({"attention_bias": True}, "attention_bias"),
    ({"vocab_size": None}, "vocab_size"),
]


@pytest.mark.parametrize(("change", "key"), REFUSED)
def test_a_bad_key_is_refused_naming_it(change: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigRefused) as refused:
        read_config({**_mixtral(), **change})
    assert refused.value.key == key
    assert key in str(refused.value)


def test_a_missing_required_key_is_refused() -> None:
    config = {k: v for k, v in _mixtral().items() if k != "intermediate_size"}
    with pytest.raises(ConfigRefused, match="intermediate_size") as refused:
        read_config(config)
    assert refused.value.key == "intermediate_size"


DEEPSEEK_REFUSED = [
    ({"first_k_dense_replace": 61}, "first_k_dense_replace"),
    ({"head_dim": 128}, "head_dim"),
    ({"attention_bias": True}, "attention_bias"),
    ({"num_experts_per_tok": 257}, "num_experts_per_tok"),
]


@pytest.mark.parametrize(("change", "key"), DEEPSEEK_REFUSED)
def test_deepseeks_contradictions_are_refused(change: dict[str, Any], key: str) -> None:
    config = {**json.loads(stored_text("deepseek-v3.json")), **change}
    with pytest.raises(ConfigRefused) as refused:
        read_config(config)
    assert refused.value.key == key


def test_qwen2_moe_reads_its_shared_expert_and_gate() -> None:
    # Qwen1.5-MoE-A2.7B's config.json; its model card: 14.3B weights, of which 2.7B active. By hand: attention
    # 4·2,048² + 3·2,048 (q, k, v biases) = 16,783,360; 60 experts × 3·2,048·1,408 = 519,045,120; the router
    # 60·2,048 = 122,880; the shared expert 3·2,048·5,632 + its gate 2,048 = 34,605,056; two norms 4,096:
    # a block 570,560,512; 24 blocks 13,693,452,288, the two 151,936 × 2,048 tables 622,329,856 and the final
    # norm 2,048: 14,315,784,192.
    config = {
        "model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16,
        "num_key_value_heads": 16, "intermediate_size": 5632, "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4,
        "decoder_sparse_step": 1, "vocab_size": 151936, "max_position_embeddings": 8192,
        "tie_word_embeddings": False, "mlp_only_layers": [], "norm_topk_prob": False,
    }  # fmt: skip
    model = read_config(config)
    assert model.params == 14_315_784_192
    assert round(model.params / 1e9, 1) == 14.3
    with pytest.raises(ConfigRefused, match="decoder_sparse_step"):
        read_config({**config, "decoder_sparse_step": 2})


def test_llama_3_8b_config_reads_as_the_preset() -> None:
    # meta-llama/Meta-Llama-3-8B's config.json, its keys that set a count.
    config = {
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192,
        "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
    }  # fmt: skip
    assert read_config(config).params == PRESETS[ModelName.LLAMA_3_8B].params == 8_030_261_248


@pytest.mark.parametrize(
    "text",
    ["[]", "1", '"x"', "{", "NaN", '{"hidden_size": NaN}', '{"a": Infinity}', "[" * 100_000, "1" * 5000],
)
def test_malformed_text_is_refused(text: str) -> None:
    with pytest.raises(ConfigRefused):
        read_text(text)


@pytest.mark.parametrize(
    ("text", "key", "said"),
    [
        ('{"model_type": "llama", "hidden_size": 4096, "hidden_size": 8}', "hidden_size",
         "The config gives hidden_size twice: keep one."),
        ('{"hidden_size": ' + "1" * 5000 + "}", "config",
         "The config holds a number of more than 4,300 digits: no count is that long."),
        ('{"hidden_size": 4096,}', "config",
         "The config is not valid JSON: Expecting property name enclosed in double quotes (line 1)."),
    ],
    ids=["duplicate key", "5000 digits", "trailing comma"],
)  # fmt: skip
def test_a_refusal_says_what_is_wrong(text: str, key: str, said: str) -> None:
    with pytest.raises(ConfigRefused) as refused:
        read_text(text)
    assert (refused.value.key, str(refused.value)) == (key, said)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=4), max_leaves=12),
       st.sampled_from(["hidden_size", "num_hidden_layers", "num_attention_heads", "num_local_experts",
                        "num_experts_per_tok", "vocab_size", "intermediate_size", "model_type",
                        "max_position_embeddings", "tie_word_embeddings", "num_key_value_heads"]))  # fmt: skip
def test_any_value_at_any_key_is_read_or_refused_never_raises_else(value: Any, key: str) -> None:
    try:
        model = read_config({**_mixtral(), key: value})
    except ConfigRefused as refused:
        named = refused.key
    else:
        named = key  # read: a whole count of weights, never from a float
        assert model.params > 0
        assert not isinstance(value, float)
    assert named
