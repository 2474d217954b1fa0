"""Run two small transformer blocks in bf16 on the CPU and record every tensor autograd keeps for backward.

Needs torch (the `[measure]` extra). A GPT-style block (LayerNorm, a 4h GELU MLP, dropout after
attention, after the MLP and on the attention probabilities, the scores materialised: Korthikanti et
al. 2022's block) and a Llama-style block (RMSNorm, SwiGLU, grouped-query attention, rotary, no
dropout, attention by `scaled_dot_product_attention`) each run one forward pass under
`torch.autograd.graph.saved_tensors_hooks`, for each recompute choice: `none`; `selective` (the
attention core, from Q, K and V to the attention over V, under `torch.utils.checkpoint`); `full`
(the whole block checkpointed). The output layer (embedding, final norm, head, fp32 cross-entropy)
of each runs once, with nothing recomputed.

Every saved tensor is counted by its storage: a tensor saved twice, or saved as a view of another,
counts once. Parameters (and views of them, such as a Linear's transposed weight) are saved too but
are not activations: they are listed apart, by name. Each storage is named by the block's forward
(`_Tags.tag`: the tensor it computed, with the term's name in `app.domain.activations`) or, for what
an operator makes and keeps inside itself, by the operator and the field autograd keeps it in (the
softmax's log-sum-exp, LayerNorm's mean). `app.measure.activation_snapshots` sets the result against
the formula.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

BATCH = 2
SEQ = 32
HIDDEN = 64
HEADS = 4
GPT_FFN = 4 * HIDDEN
LLAMA_FFN = 176
LLAMA_KV_HEADS = 2
VOCAB = 320
DROPOUT = 0.1
DTYPE = torch.bfloat16
CHOICES = ("none", "selective", "full")

# What an operator makes and keeps inside itself, named by its backward node, the field it keeps it in and,
# where one node keeps different things, the dtype. Only for what the forward could not name itself.
OPERATOR_NAMES: dict[tuple[str, ...], str] = {
    # torch's CPU rms_norm, a composite of fp32 operations; and the CPU's F.dropout, a multiplication by noise.
    ("PowBackward0", "self"): "RMSNorm's input, in fp32",
    ("RsqrtBackward0", "result"): "RMSNorm's reciprocal RMS",
    ("MulBackward0", "self", "float32"): "RMSNorm's normalised input, in fp32",
    ("MulBackward0", "other", "bfloat16"): "dropout's noise, in bf16",
    ("NativeLayerNormBackward0", "result1"): "LayerNorm's mean",
    ("NativeLayerNormBackward0", "result2"): "LayerNorm's reciprocal standard deviation",
    ("ScaledDotProductFlashAttentionForCpuBackward0", "logsumexp"): "softmax's log-sum-exp",
    ("ScaledDotProductFlashAttentionForCpuBackward0", "output"): "attention's output",
    ("NllLossBackward0", "target"): "loss's targets",
    ("NllLossBackward0", "total_weight"): "loss's total weight",
}


class _Tags:
    """The tensors a forward pass names, kept alive until the count is done so no address is reused."""

    def __init__(self) -> None:
        self.named: list[tuple[str, torch.Tensor]] = []

    def tag(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        self.named.append((name, tensor))
        return tensor

    def name_of(self, storage: int) -> str | None:
        for name, tensor in self.named:
            if tensor.untyped_storage().data_ptr() == storage:
                return name
        return None


class _FusedRMSNorm(torch.autograd.Function):
    """RMSNorm as the fused GPU kernels compute it: keeps the bf16 input and one fp32 1/RMS per token.

    torch's own `rms_norm` on the CPU is a composite of fp32 operations, each keeping its fp32 inputs;
    the measurement records that too (`rmsnorm_composite`).
    """

    @staticmethod
    def forward(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        wide = x.float()
        rstd = torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)
        return (wide * rstd).to(x.dtype) * weight, rstd

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[torch.Tensor, torch.Tensor]) -> None:
        x, weight, _ = inputs
        ctx.save_for_backward(x, weight, output[1])
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor, _rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        x, weight, rstd = ctx.saved_tensors
        wide, g = x.float(), grad.float()
        normed = wide * rstd
        grad_weight = (g * normed).sum(dim=tuple(range(g.dim() - 1))).to(weight.dtype)
        gw = g * weight.float()
        grad_x = rstd * (gw - normed * (gw * normed).mean(-1, keepdim=True))
        return grad_x.to(x.dtype), grad_weight, None


class _RMSNorm(nn.Module):
    def __init__(self, tags: _Tags, *, fused: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(HIDDEN))
        self.tags, self.fused = tags, fused

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.fused:
            return F.rms_norm(x, (HIDDEN,), self.weight, 1e-5)
        out, rstd = _FusedRMSNorm.apply(x, self.weight, 1e-5)  # type: ignore[no-untyped-call]
        self.tags.tag("RMSNorm's reciprocal RMS", rstd)
        assert isinstance(out, torch.Tensor)
        return out


def _heads(x: torch.Tensor, heads: int, *, contiguous: bool = True) -> torch.Tensor:
    """[b, s, heads·d] as [b, heads, s, d]: contiguous, or a view that keeps the [b, s, heads, d] order in memory."""
    b, s, _ = x.shape
    split = x.view(b, s, heads, HIDDEN // HEADS).transpose(1, 2)
    return split.contiguous() if contiguous else split


def _merge(x: torch.Tensor) -> torch.Tensor:
    """[b, a, s, d] as [b, s, a·d]."""
    b, _, s, _ = x.shape
    return x.transpose(1, 2).reshape(b, s, HIDDEN)


class _Block(nn.Module):
    """A transformer block whose forward names the tensors it computes, with recompute as a choice."""

    def __init__(self, tags: _Tags) -> None:
        super().__init__()
        self.tags = tags
        self.selective = False

    def attention_core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.selective:
            out = checkpoint(self.attention_core, q, k, v, use_reentrant=False)
            assert isinstance(out, torch.Tensor)
            return out
        return self.attention_core(q, k, v)


class GPTBlock(_Block):
    """Korthikanti et al. 2022's block: LayerNorm, scores materialised, dropout thrice, GELU MLP of 4h."""

    def __init__(self, tags: _Tags) -> None:
        super().__init__(tags)
        self.norm1, self.norm2 = nn.LayerNorm(HIDDEN), nn.LayerNorm(HIDDEN)
        self.q, self.k, self.v, self.o = (nn.Linear(HIDDEN, HIDDEN) for _ in range(4))
        self.up, self.down = nn.Linear(HIDDEN, GPT_FFN), nn.Linear(GPT_FFN, HIDDEN)

    def _dropout(self, name: str, x: torch.Tensor) -> torch.Tensor:
        # What F.dropout runs on CUDA: a 1-byte mask. On the CPU F.dropout multiplies by a noise tensor of
        # the input's dtype instead (`dropout_cpu` records it).
        out, mask = torch.native_dropout(x, DROPOUT, True)
        self.tags.tag(name, mask)
        return out

    def attention_core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Scores, causal mask, softmax, dropout, attention over V: what selective recomputes."""
        s = q.shape[2]
        # The causal mask made here and added, as a fused scale-mask-softmax applies it: nothing kept.
        causal = torch.full((s, s), float("-inf"), dtype=q.dtype).triu(1)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1 / math.sqrt(q.shape[-1])) + causal
        probs = self.tags.tag("softmax's output", torch.softmax(scores, dim=-1))
        dropped = self.tags.tag("attention dropout's output", self._dropout("attention dropout's mask", probs))
        return torch.matmul(dropped, v)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block, naming each tensor the formula counts."""
        tag = self.tags.tag
        tag("attention norm's input", x)
        y = tag("Q, K and V projections' input", self.norm1(x))
        q = tag("Q", _heads(self.q(y), HEADS))
        k, v = (tag("K and V", _heads(proj(y), HEADS)) for proj in (self.k, self.v))
        o = tag("output projection's input", _merge(self.core(q, k, v)))
        x = tag("MLP norm's input", x + self._dropout("attention's dropout mask", self.o(o)))
        y = tag("MLP's input", self.norm2(x))
        up = tag("GELU's input", self.up(y))
        down = self.down(tag("down projection's input", F.gelu(up)))
        return x + self._dropout("MLP's dropout mask", down)


class LlamaBlock(_Block):
    """Llama's block: RMSNorm, grouped-query attention with rotary, SDPA, SwiGLU, no dropout, no biases."""

    def __init__(self, tags: _Tags, *, fused_norm: bool = True) -> None:
        super().__init__(tags)
        self.norm1, self.norm2 = _RMSNorm(tags, fused=fused_norm), _RMSNorm(tags, fused=fused_norm)
        kv = LLAMA_KV_HEADS * (HIDDEN // HEADS)
        self.q, self.o = nn.Linear(HIDDEN, HIDDEN, bias=False), nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.k, self.v = nn.Linear(HIDDEN, kv, bias=False), nn.Linear(HIDDEN, kv, bias=False)
        self.gate, self.up = nn.Linear(HIDDEN, LLAMA_FFN, bias=False), nn.Linear(HIDDEN, LLAMA_FFN, bias=False)
        self.down = nn.Linear(LLAMA_FFN, HIDDEN, bias=False)
        dim = HIDDEN // HEADS
        inverse = 1 / 10000 ** (torch.arange(0, dim, 2).float() / dim)
        angles = torch.outer(torch.arange(SEQ).float(), inverse)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def _rotary(self, x: torch.Tensor) -> torch.Tensor:
        first, second = x.chunk(2, dim=-1)
        cos, sin = self.cos, self.sin
        assert isinstance(cos, torch.Tensor)
        assert isinstance(sin, torch.Tensor)
        self.tags.tag("rotary's cos", cos)
        self.tags.tag("rotary's sin", sin)
        return x * cos + torch.cat([-second, first], dim=-1) * sin

    def attention_core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Flash-style attention: the CPU's fused kernel, grouped-query heads handled inside it."""
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        assert isinstance(out, torch.Tensor)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block, naming each tensor the formula counts."""
        tag = self.tags.tag
        tag("attention norm's input", x)
        y = tag("Q, K and V projections' input", self.norm1(x))
        # Views, as Llama's code takes them: Q stays in [b, s, a, d] order, and so does SDPA's output, so the
        # output projection's input is a view of the output SDPA keeps (contiguous Q would cost a copy).
        q = tag("Q", self._rotary(_heads(self.q(y), HEADS, contiguous=False)))
        k = tag("K and V", self._rotary(_heads(self.k(y), LLAMA_KV_HEADS, contiguous=False)))
        v = tag("K and V", _heads(self.v(y), LLAMA_KV_HEADS, contiguous=False))
        o = tag("output projection's input", _merge(self.core(q, k, v)))
        x = tag("MLP norm's input", x + self.o(o))
        y = tag("MLP's input", self.norm2(x))
        gate = tag("gate's output (SiLU's input)", self.gate(y))
        silu = tag("SiLU's output", F.silu(gate))
        up = tag("up projection's output", self.up(y))
        out: torch.Tensor = x + self.down(tag("down projection's input", silu * up))
        return out


class GPTHead(nn.Module):
    """GPT's embedding (tokens and learned positions, tied to the head), its dropout, final LayerNorm and loss."""

    def __init__(self, tags: _Tags) -> None:
        super().__init__()
        self.tags = tags
        self.tokens, self.positions = nn.Embedding(VOCAB, HIDDEN), nn.Embedding(SEQ, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN)

    def forward(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Embedding to loss, naming each tensor the formula counts."""
        tag = self.tags.tag
        positions = tag("position embedding's indices", torch.arange(ids.shape[1]))
        x = self.tokens(tag("token embedding's indices", ids)) + self.positions(positions)
        x, mask = torch.native_dropout(x, DROPOUT, True)
        tag("embedding dropout's mask", mask)
        y = tag("output head's input", self.norm(tag("final norm's input", x)))
        return _loss(tag, F.linear(y, self.tokens.weight), targets)


class LlamaHead(nn.Module):
    """Llama's embedding, final RMSNorm, untied head and loss."""

    def __init__(self, tags: _Tags) -> None:
        super().__init__()
        self.tags = tags
        self.tokens = nn.Embedding(VOCAB, HIDDEN)
        self.norm = _RMSNorm(tags)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Embedding to loss, naming each tensor the formula counts."""
        tag = self.tags.tag
        x = self.tokens(tag("token embedding's indices", ids))
        y = tag("output head's input", self.norm(tag("final norm's input", x)))
        return _loss(tag, self.head(y), targets)


def _loss(
    tag: Callable[[str, torch.Tensor], torch.Tensor], logits: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """fp32 cross-entropy: the log-softmax in fp32, as the logits' 4sbv counts it."""
    logprobs = tag("logits, as fp32 log-probabilities", torch.log_softmax(logits.float(), dim=-1))
    return F.nll_loss(logprobs.view(-1, VOCAB), targets.view(-1))


def _operators(root: torch.Tensor) -> dict[int, list[str]]:
    """Storage address -> the backward nodes and fields that keep it, walking the graph from `root`."""
    found: dict[int, list[str]] = {}
    seen: set[int] = set()
    todo = [root.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        kind = type(node).__name__
        fields = [name for name in dir(node) if name.startswith("_saved_")]
        values: list[tuple[str, object]] = [(name[len("_saved_") :], getattr(node, name)) for name in fields]
        if not fields and hasattr(node, "saved_tensors"):  # a custom Function's backward node
            values = [(f"saved_tensors[{i}]", t) for i, t in enumerate(node.saved_tensors)]
        for field, value in values:
            for tensor in value if isinstance(value, tuple | list) else (value,):
                if isinstance(tensor, torch.Tensor):
                    found.setdefault(tensor.untyped_storage().data_ptr(), []).append(f"{kind}.{field}")
        todo += [after for after, _ in node.next_functions]
    return found


def _record(run: Callable[[], torch.Tensor], module: nn.Module, tags: _Tags) -> dict[str, Any]:
    """Every tensor saved while `run` runs, by storage: activations named, parameters apart."""
    saved: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = run()
    operators = _operators(out)
    params = {p.untyped_storage().data_ptr(): name for name, p in module.named_parameters()}
    tensors: dict[int, dict[str, Any]] = {}
    excluded: dict[int, dict[str, Any]] = {}
    for tensor in saved:
        storage = tensor.untyped_storage()
        address = storage.data_ptr()
        dtype = str(tensor.dtype).removeprefix("torch.")
        saved_by = sorted(set(operators.get(address, [])))
        entry: dict[str, Any] = {
            "dtype": dtype,
            "shape": list(tensor.shape),
            "bytes": storage.nbytes(),
            "saved_by": saved_by,
        }
        if address in params:
            excluded.setdefault(address, {"name": params[address], **entry})
            continue
        if address in tensors:
            continue  # the same storage saved again, or a view of it: counted once
        name = tags.name_of(address)
        keys = [tuple(op.split(".", 1)) for op in saved_by]
        keys += [(*key, dtype) for key in keys]  # the narrower names last
        name = name or next((OPERATOR_NAMES[key] for key in keys if key in OPERATOR_NAMES), None)
        tensors[address] = {"name": name, **entry}
    # The block trains: its backward runs on what was kept.
    out.float().sum().backward()  # type: ignore[no-untyped-call]
    tags.named.clear()
    return {"tensors": list(tensors.values()), "excluded": list(excluded.values())}


def _block_run(block: _Block, choice: str) -> Callable[[], torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, SEQ, HIDDEN, generator=generator).to(DTYPE).requires_grad_()
    block.selective = choice == "selective"

    def run() -> torch.Tensor:
        if choice == "full":
            out = checkpoint(block, x, use_reentrant=False)
            assert isinstance(out, torch.Tensor)
            return out
        out = block(x)
        assert isinstance(out, torch.Tensor)
        return out

    return run


def _choices(make: Callable[[_Tags], _Block]) -> Iterator[tuple[str, dict[str, Any]]]:
    for choice in CHOICES:
        tags = _Tags()
        torch.manual_seed(0)
        block = make(tags).to(DTYPE).train()
        yield choice, _record(_block_run(block, choice), block, tags)


def _head(make: Callable[[_Tags], nn.Module]) -> dict[str, Any]:
    tags = _Tags()
    torch.manual_seed(0)
    head = make(tags).to(DTYPE).train()
    generator = torch.Generator().manual_seed(2)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
    return _record(lambda: head(ids, targets), head, tags)


def _variant(make: Callable[[_Tags], _Block]) -> dict[str, Any]:
    """One block under `none` with one of torch's CPU kernels swapped in, to say what it keeps instead."""
    tags = _Tags()
    torch.manual_seed(0)
    block = make(tags).to(DTYPE).train()
    return _record(_block_run(block, "none"), block, tags)


class _CPUDropoutGPT(GPTBlock):
    """The GPT block with F.dropout, which on the CPU keeps a noise tensor of the input's dtype."""

    def _dropout(self, name: str, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, DROPOUT, training=True)


def measure_activations() -> dict[str, Any]:
    """Both blocks under each choice, both output layers, and torch's CPU kernels that keep more."""
    torch.manual_seed(0)
    checkpoint_rng = torch.get_rng_state().numel()
    return {
        "dtype": str(DTYPE).removeprefix("torch."),
        "batch": BATCH,
        "seq": SEQ,
        "hidden": HIDDEN,
        "heads": HEADS,
        "vocab": VOCAB,
        "dropout": DROPOUT,
        "checkpoint_rng_state_bytes": checkpoint_rng,
        "blocks": [
            {
                "block": "gpt",
                "ffn": GPT_FFN,
                "kv_heads": HEADS,
                "choices": dict(_choices(GPTBlock)),
                "head": _head(GPTHead),
                "variant": {"kernel": "F.dropout", **_variant(_CPUDropoutGPT)},
            },
            {
                "block": "llama",
                "ffn": LLAMA_FFN,
                "kv_heads": LLAMA_KV_HEADS,
                "choices": dict(_choices(LlamaBlock)),
                "head": _head(LlamaHead),
                "variant": {
                    "kernel": "torch.nn.functional.rms_norm",
                    **_variant(lambda tags: LlamaBlock(tags, fused_norm=False)),
                },
            },
        ],
    }
