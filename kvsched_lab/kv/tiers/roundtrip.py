"""`round_trip_check`: a prompt's KV blocks pushed down to the host, then the disk, and served back.

The same prompt is served three times by `TieredPrefixCacheEngine` (LRU in every tier,
exclusive demotion): once with its prefix still on the device, once after other prompts pushed
it to the host, once after they pushed it to the disk. A copy is bit for bit, so:

- the blocks brought back equal the blocks first computed (``torch.equal``);
- the logits of the three serves are identical (``torch.equal``): no tier changes a number;
- each equals a full recompute within the dtype's bound (fp32 on the CPU, fp16 on a GPU).

Used by tests/test_tiers.py (CPU) and by ``python -m kvsched_lab.cli.gpu_check`` (CUDA).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch

from kvsched_lab.kv.device import DeviceLike
from kvsched_lab.kv.model import TinyDecoder, TinyDecoderConfig
from kvsched_lab.kv.tiers.engine import TieredPrefixCacheEngine
from kvsched_lab.kv.tiers.placement import DEVICE, DISK, HOST, TIER_NAMES
from kvsched_lab.kv.tiers.real_replay import LOGIT_BOUNDS
from kvsched_lab.kv.tiers.replay import build_hierarchy
from kvsched_lab.kv.tiers.stores import device_block

BLOCK = 16  # tokens per block
DEVICE_BLOCKS, HOST_BLOCKS, DISK_BLOCKS = 8, 8, 16  # tier capacities: a filler of 8 blocks pushes a tier down


def _tokens(seed: int, n: int, vocab: int) -> List[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def round_trip_check(device: DeviceLike = None, dtype: Optional[torch.dtype] = None) -> Dict[str, Any]:
    """Serve one prompt from the device, the host and the disk; compare blocks and logits (module docstring)."""
    cfg = TinyDecoderConfig(vocab_size=256, dim=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16,
                            ffn_hidden=128, max_positions=512, seed=3)
    model = TinyDecoder(cfg, device=device, dtype=dtype)
    prompt = _tokens(1, 5 * BLOCK + 3, cfg.vocab_size)  # 5 full blocks and a partial tail
    fillers = [_tokens(10 + i, 8 * BLOCK, cfg.vocab_size) for i in range(2)]
    reference = model.forward(prompt).float()
    logits: Dict[str, torch.Tensor] = {}
    hit_tiers: Dict[str, List[int]] = {}
    blocks_equal = True
    for target, num_fillers in ((DEVICE, 0), (HOST, 1), (DISK, 2)):
        hierarchy = build_hierarchy("lru", DEVICE_BLOCKS, HOST_BLOCKS, DISK_BLOCKS, rule="demote")
        engine = TieredPrefixCacheEngine(model, hierarchy, tokens_per_block=BLOCK, max_tokens_per_request=256)
        try:
            first = engine.serve_tokens(prompt)
            keys = list(engine.slots[DEVICE])[:5]  # the prompt's 5 full blocks, cached in order
            computed = [device_block(engine.pool, engine.slots[DEVICE][k]).clone() for k in keys]
            for filler in fillers[:num_fillers]:
                engine.serve_tokens(filler)
            again = engine.serve_tokens(prompt)
            engine.check_consistency()
            back = [device_block(engine.pool, engine.slots[DEVICE][k]) for k in keys]
            blocks_equal &= all(torch.equal(a, b) for a, b in zip(computed, back))
            name = TIER_NAMES[target]
            logits[name], hit_tiers[name] = again.logits.float(), again.hit_tiers
            if first.num_cached_tokens:
                raise AssertionError("the first serve of the prompt found a cached prefix")
        finally:
            engine.close()
    bound = LOGIT_BOUNDS.get(model.dtype, LOGIT_BOUNDS[torch.float16])
    vs_recompute = {name: (value - reference[5 * BLOCK:]).abs().max().item() for name, value in logits.items()}
    identical = all(torch.equal(logits["device"], v) for v in logits.values())
    tiers_right = all(t == [TIER_NAMES.index(name)] * 5 for name, t in hit_tiers.items())
    return {"device": str(model.device), "dtype": str(model.dtype).replace("torch.", ""),
            "hit_tiers": hit_tiers, "blocks_equal": blocks_equal, "logits_identical": identical,
            "max_diff_vs_recompute": vs_recompute, "bound": bound,
            "ok": blocks_equal and identical and tiers_right and max(vs_recompute.values()) <= bound}
