"""A small Mixtral-style mixture of experts, run in torch: the tensors autograd saves against `expert_saved`.

The block is Hugging Face's `MixtralSparseMoeBlock` as transformers writes it (a bf16 router, an fp32 softmax,
top-k, the weights renormalised, each expert over the tokens routed to it, the outputs weighted and added back).
Every saved tensor is counted once by its storage, the weights aside; what the formula leaves out is named.
"""

from __future__ import annotations

from importlib.util import find_spec

import pytest

from app.domain.activations import HALF, Recompute, Shape, expert_saved, kept
from app.domain.architecture import Architecture, Moe

TOKENS, HIDDEN, EXPERTS, TOP_K, WIDTH = 64, 32, 8, 2, 48


def _measured() -> int:
    """Bytes of every tensor the block saves for its backward, by storage, its weights aside."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(0)
    dtype = torch.bfloat16

    class Expert(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = nn.Linear(HIDDEN, WIDTH, bias=False)
            self.w3 = nn.Linear(HIDDEN, WIDTH, bias=False)
            self.w2 = nn.Linear(WIDTH, HIDDEN, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.w2(F.silu(self.w1(x)) * self.w3(x))
            return out

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate = nn.Linear(HIDDEN, EXPERTS, bias=False)
            self.experts = nn.ModuleList(Expert() for _ in range(EXPERTS))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            weights = F.softmax(self.gate(x), dim=1, dtype=torch.float)
            weights, chosen = torch.topk(weights, TOP_K, dim=-1)
            weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
            out = torch.zeros_like(x)
            mask = F.one_hot(chosen, EXPERTS).permute(2, 1, 0)
            for number, expert in enumerate(self.experts):
                which, tokens = torch.where(mask[number])
                routed = expert(x[None, tokens].reshape(-1, HIDDEN)) * weights[tokens, which, None]
                out.index_add_(0, tokens, routed.to(x.dtype))
            return out

    block = Block().to(dtype)
    x = torch.randn(TOKENS, HIDDEN, dtype=dtype, requires_grad=True)
    params = {p.untyped_storage().data_ptr() for p in block.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        block(x)
    return sum(storages.values())


@pytest.mark.slow  # real PyTorch: a second
@pytest.mark.filterwarnings("ignore:Failed to initialize NumPy")  # torch without NumPy, which nothing here uses
def test_a_small_mixtral_blocks_saved_tensors_are_the_formulas_and_the_named_rest() -> None:
    assert find_spec("torch") is not None, "torch is not installed: pip install -e '.[test,measure]'"
    arch = Architecture(1, HIDDEN, WIDTH, 16, 4, 4, False, moe=Moe(EXPERTS, TOP_K, WIDTH))
    assert arch.moe is not None
    sb, k = TOKENS, TOP_K
    formula = kept(expert_saved(arch, arch.moe, Shape(1, TOKENS)), Recompute.NONE)
    # 4sb·e + 2ksb + 2ksbh + 4 × 2ksb·fe + 2ksbh = 2,048 + 256 + 8,192 + 49,152 + 8,192 B.
    assert formula == 67_840
    named = {
        "the block's input, the router's and the dispatch's (the dense terms' MLP's input, 2sbh)": HALF * sb * HIDDEN,
        "top-k's chosen experts, int64 (8ksb)": 8 * k * sb,
        "each expert's token and slot indices, int64, one storage (16ksb)": 16 * k * sb,
        "the renormalisation's fp32 top-k weights (4ksb) and their sum (4sb)": 4 * k * sb + 4 * sb,
        # Megatron's unpermute adds back with scatter_add, whose backward needs the index only: it keeps none.
        "index_add_'s weighted outputs, a second 2ksbh in Hugging Face's loop": HALF * k * sb * HIDDEN,
    }
    assert _measured() == formula + sum(named.values()) == 83_968
