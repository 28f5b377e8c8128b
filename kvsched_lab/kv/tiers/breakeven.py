"""When moving a KV block beats recomputing it: bytes per token against FLOPs per token, and a link's speed.

Moving `n` tokens' KV over a link of ``B`` bytes/s takes ``n * kv_bytes_per_token / B``;
recomputing them takes ``n * flops_per_token / F``, with ``F`` the FLOP/s the GPU reaches in
prefill. Moving wins when ``B > kv_bytes_per_token * F / flops_per_token``: the break-even
bandwidth. Big models spend many FLOPs per byte of KV (grouped-query attention keeps the KV
small), so even a slow link wins for them; the course's tiny model is the opposite.

Every hardware figure is a vendor's peak (cited next to it); ``PREFILL_EFFICIENCY`` is an
assumption, stated: the share of peak FLOP/s a long prefill reaches. The tiny model's row is
measured instead (measure.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Union

from kvsched_lab.kv.model_configs import ModelKVSpec, get_spec
from kvsched_lab.kv.tiers.costs import TierCosts

MOONCAKE_BLOCK_TOKENS = 512  # tokens per Mooncake block id (the traces' unit)
PREFILL_EFFICIENCY = 0.5  # assumed share of peak FLOP/s a long prefill reaches; an assumption, not a measurement
CONTEXT_TOKENS = 4096  # attention FLOPs are counted for a token that attends to this many keys
# The table's default counts generously for recompute: every token attends to CONTEXT_TOKENS keys
# (in a causal prefill of that many tokens the mean is half) and every token pays the lm_head
# (a prefill needs the logits of its last token only). `breakeven_table(context_tokens=
# CONTEXT_TOKENS // 2, lm_head_every_token=False)` counts it the other way: notebook 09 shows both.


@dataclass(frozen=True)
class ModelComputeSpec:
    """What a model's forward pass costs per token (config.json fields, next to the KV spec)."""

    name: str
    hidden_size: int  # config.json hidden_size
    intermediate_size: int  # config.json intermediate_size (the SwiGLU width)
    num_heads: int  # config.json num_attention_heads
    vocab_size: int  # config.json vocab_size (the lm_head's width)

    def flops_per_token(self, context_tokens: int = CONTEXT_TOKENS, lm_head_every_token: bool = True) -> int:
        """Matmul FLOPs of one token's forward pass (2 per multiply-add) attending to `context_tokens` keys
        (with the lm_head's, unless `lm_head_every_token` is False: a prefill's one row of logits is left out)."""
        kv = get_spec(self.name)
        h, q_dim, kv_dim = self.hidden_size, self.num_heads * kv.head_dim, kv.num_kv_heads * kv.head_dim
        projections = 2 * h * (2 * q_dim + 2 * kv_dim)  # wq, wo (q_dim wide), wk, wv (kv_dim wide)
        mlp = 2 * 3 * h * self.intermediate_size  # gate, up, down
        attention = 2 * 2 * q_dim * context_tokens  # QK^T and AV against every key
        return kv.num_layers * (projections + mlp + attention) + 2 * h * self.vocab_size * lm_head_every_token


# config.json of each model on its Hugging Face page (the KV figures are in model_configs.py).
MODEL_COMPUTE: Mapping[str, ModelComputeSpec] = MappingProxyType({
    "Llama-3-8B": ModelComputeSpec("Llama-3-8B", hidden_size=4096, intermediate_size=14336, num_heads=32,
                                   vocab_size=128256),
    "Llama-3-70B": ModelComputeSpec("Llama-3-70B", hidden_size=8192, intermediate_size=28672, num_heads=64,
                                    vocab_size=128256),
    "Qwen2.5-7B": ModelComputeSpec("Qwen2.5-7B", hidden_size=3584, intermediate_size=18944, num_heads=28,
                                   vocab_size=152064),
    "Qwen2.5-0.5B": ModelComputeSpec("Qwen2.5-0.5B", hidden_size=896, intermediate_size=4864, num_heads=14,
                                     vocab_size=151936),
})

# Peak bandwidths, bytes/s, one direction.
LINKS: Mapping[str, float] = MappingProxyType({
    # PCIe 4.0 x16: 16 GT/s x 16 lanes, 128b/130b coding = 31.5 GB/s each way (PCI-SIG).
    "PCIe 4.0 x16": 31.5e9,
    # PCIe 5.0 x16: 32 GT/s x 16 lanes = 63 GB/s each way (PCI-SIG).
    "PCIe 5.0 x16": 63.0e9,
    # A PCIe 4.0 NVMe SSD's sequential read, e.g. Samsung 990 PRO: up to 7,450 MB/s (its data sheet).
    "NVMe SSD (PCIe 4.0)": 7.45e9,
    # 10 Gigabit Ethernet (IEEE 802.3ae): 10 Gbit/s line rate = 1.25 GB/s: a remote store over a plain network.
    "10 GbE": 1.25e9,
    # 100 Gigabit Ethernet or RDMA (InfiniBand EDR is also 100 Gbit/s): 12.5 GB/s, the links Mooncake's store targets.
    "100 GbE / RDMA": 12.5e9,
    # H100 SXM5 HBM3: 3.35 TB/s (NVIDIA H100 data sheet): a copy inside GPU memory.
    "HBM3 (H100 SXM)": 3.35e12,
})

# Peak dense BF16 tensor FLOP/s (no sparsity).
GPUS: Mapping[str, float] = MappingProxyType({
    "H100 SXM": 989e12,  # NVIDIA H100 data sheet: 1,979 TFLOPS BF16 with sparsity, half without
    "A100 SXM": 312e12,  # NVIDIA A100 data sheet: 312 TFLOPS BF16 dense
})


def breakeven_bandwidth(model: Union[str, ModelKVSpec], gpu_flops: float, *,
                        efficiency: float = PREFILL_EFFICIENCY, context_tokens: int = CONTEXT_TOKENS) -> float:
    """Bytes/s above which moving a block's KV beats recomputing it on a GPU of `gpu_flops` peak."""
    name = get_spec(model).name
    return get_spec(name).kv_bytes_per_token * gpu_flops * efficiency / MODEL_COMPUTE[name].flops_per_token(context_tokens)


def model_costs(model: str = "Llama-3-8B", gpu: str = "H100 SXM", host_link: str = "PCIe 4.0 x16",
                disk_link: str = "NVMe SSD (PCIe 4.0)", *, block_tokens: int = MOONCAKE_BLOCK_TOKENS,
                efficiency: float = PREFILL_EFFICIENCY, context_tokens: int = CONTEXT_TOKENS) -> TierCosts:
    """Modeled `TierCosts` of one `block_tokens`-token block of `model` (peak link speeds, both ways alike)."""
    for table, key in ((GPUS, gpu), (LINKS, host_link), (LINKS, disk_link)):
        if key not in table:
            raise ValueError(f"unknown {'GPU' if table is GPUS else 'link'} {key!r}; known: {', '.join(table)}")
    spec = get_spec(model)
    block_bytes = spec.kv_bytes_per_block(block_tokens)
    recompute = block_tokens * MODEL_COMPUTE[spec.name].flops_per_token(context_tokens) / (GPUS[gpu] * efficiency)
    pcie, disk = block_bytes / LINKS[host_link], block_bytes / LINKS[disk_link]
    return TierCosts(recompute_s=recompute, device_to_host_s=pcie, host_to_device_s=pcie,
                     host_to_disk_s=disk, disk_to_host_s=disk, block_bytes=block_bytes)


def breakeven_table(gpu: str = "H100 SXM", *, efficiency: float = PREFILL_EFFICIENCY,
                    context_tokens: int = CONTEXT_TOKENS, lm_head_every_token: bool = True) -> List[Dict[str, Any]]:
    """One row per model: KV bytes and FLOPs per token, the break-even bandwidth, and per link
    the ratio recompute time / move time (above 1: moving wins)."""
    rows = []
    for name, compute in MODEL_COMPUTE.items():
        kv_bytes = get_spec(name).kv_bytes_per_token
        flops = compute.flops_per_token(context_tokens, lm_head_every_token)
        recompute_s_per_token = flops / (GPUS[gpu] * efficiency)
        rows.append({
            "model": name, "kv_bytes_per_token": kv_bytes, "flops_per_token": flops,
            "breakeven_bytes_per_s": kv_bytes / recompute_s_per_token,
            "recompute_over_move": {link: recompute_s_per_token / (kv_bytes / bw) for link, bw in LINKS.items()},
        })
    return rows
