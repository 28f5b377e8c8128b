"""Tests for the tiny decoder: prefill with a cached prefix from the pool must equal a full recompute."""
from __future__ import annotations

import math
import random

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from kvsched_lab.kv.block_pool import KVBlockPool
from kvsched_lab.kv.model import RMSNorm, TinyDecoder, TinyDecoderConfig, apply_rope, rope_tables

FP32_TOL = 1e-4
# fp16 on the GPU: unit roundoff 2^-11 ~ 4.9e-4 and logits up to ~5 after RMSNorm and the
# 1/sqrt(dim)-scaled head. fp16 on the CPU measured 2e-3 (cached vs full) and 5e-3 (vs fp32);
# GPU kernels sum in other orders, so the bound keeps a 4x margin over those.
FP16_TOL = 2e-2

CONFIGS = {
    "mha": TinyDecoderConfig(vocab_size=128, dim=32, num_layers=2, num_heads=4, num_kv_heads=4, head_dim=8,
                             ffn_hidden=64, seed=1),
    "gqa": TinyDecoderConfig(vocab_size=128, dim=48, num_layers=2, num_heads=6, num_kv_heads=2, head_dim=8,
                             ffn_hidden=96, seed=2),
}


def prompt(n: int, seed: int = 0, vocab: int = 128):
    rng = random.Random(seed)
    return [rng.randrange(vocab) for _ in range(n)]


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("num_cached", [0, 1, 4, 8, 13, 27, 36])  # block edges and mid-block splits
def test_prefill_after_cached_prefix_equals_full_recompute(name, num_cached):
    model = TinyDecoder(CONFIGS[name], device="cpu")
    ids = prompt(37)
    full = model.forward(ids)  # (37, vocab)
    pool = model.make_pool(num_blocks=12, block_size=4)
    block_table = [pool.allocator.allocate() for _ in range(10)]
    random.Random(3).shuffle(block_table)  # blocks need not be contiguous or ordered
    if num_cached:
        model.prefill(ids[:num_cached + 1], block_table, num_cached_tokens=0, pool=pool)
    new = model.prefill(ids, block_table, num_cached_tokens=num_cached, pool=pool)
    assert new.shape == (37 - num_cached, 128)
    assert max_diff(new, full[num_cached:]) <= FP32_TOL


def test_chunked_prefill_equals_full_recompute():
    model = TinyDecoder(CONFIGS["gqa"], device="cpu")
    ids = prompt(50, seed=5)
    pool = model.make_pool(13, 4)
    table = list(range(13))
    chunks = [model.prefill(ids[:end], table, start, pool) for start, end in [(0, 7), (7, 21), (21, 50)]]
    assert max_diff(torch.cat(chunks), model.forward(ids)) <= FP32_TOL


def test_prefix_written_by_one_prompt_serves_another():
    model = TinyDecoder(CONFIGS["gqa"], device="cpu")
    shared = prompt(16, seed=1)
    a, b = shared + prompt(9, seed=2), shared + prompt(14, seed=3)
    pool = model.make_pool(20, 8)
    model.prefill(a, [0, 1, 2, 3], 0, pool)
    # b reuses a's first two blocks and writes its own tail into blocks 7 and 9.
    new = model.prefill(b, [0, 1, 7, 9], 16, pool)
    assert max_diff(new, model.forward(b)[16:]) <= FP32_TOL


def test_prefill_writes_k_and_v_into_the_block_table_slots():
    model = TinyDecoder(CONFIGS["mha"], device="cpu")
    pool = model.make_pool(6, 4)
    model.prefill(prompt(6), [4, 1], 0, pool)
    for layer in range(2):
        k, v = pool.k_cache(layer), pool.v_cache(layer)
        assert k[4].abs().sum() > 0 and v[1, :2].abs().sum() > 0  # positions 0-3, 4-5
        assert k[1, 2:].abs().sum() == 0 and k[0].abs().sum() == 0  # untouched slots stay zero


def test_weights_come_from_the_seed():
    cfg = CONFIGS["mha"]
    ids = prompt(9)
    assert torch.equal(TinyDecoder(cfg, device="cpu").forward(ids), TinyDecoder(cfg, device="cpu").forward(ids))
    other = TinyDecoder(TinyDecoderConfig(**{**cfg.__dict__, "seed": 99}), device="cpu")
    assert not torch.allclose(other.forward(ids), TinyDecoder(cfg, device="cpu").forward(ids))


def test_building_a_model_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    TinyDecoder(CONFIGS["gqa"], device="cpu")
    assert torch.equal(torch.rand(3), expected)


def test_prefill_rejects_bad_calls():
    model = TinyDecoder(CONFIGS["mha"], device="cpu")
    pool = model.make_pool(4, 4)
    ids = prompt(8)
    with pytest.raises(ValueError, match="at least one new token"):
        model.prefill(ids, [0, 1], 8, pool)
    with pytest.raises(ValueError, match="too few"):
        model.prefill(ids, [0], 0, pool)
    with pytest.raises(ValueError, match="0..127"):
        model.forward([0, 128])
    with pytest.raises(ValueError, match="max_positions"):
        TinyDecoder(TinyDecoderConfig(max_positions=8), device="cpu").forward(list(range(9)))
    wrong = TinyDecoder(CONFIGS["gqa"], device="cpu").make_pool(4, 4)
    with pytest.raises(ValueError, match="make_pool"):
        model.prefill(ids, [0, 1], 0, wrong)
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        TinyDecoderConfig(num_heads=4, num_kv_heads=3)


@pytest.mark.parametrize("num_cached", [0, 8, 21])
def test_flops_prefill_matches_torch_flop_counter(num_cached):
    model = TinyDecoder(CONFIGS["gqa"], device="cpu")
    ids = prompt(40)
    pool = model.make_pool(10, 8)
    table = list(range(5))
    model.prefill(ids, table, 0, pool)
    # The counter sees attention only on SDPA's math path; the fused kernels do the same FLOPs.
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model.prefill(ids, table, num_cached, pool)
    assert model.flops_prefill(40 - num_cached, num_cached) == counter.get_total_flops()


def test_flops_prefill_by_hand():
    cfg = TinyDecoderConfig(vocab_size=10, dim=4, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=2,
                            ffn_hidden=6)
    model = TinyDecoder(cfg, device="cpu")
    n, c = 3, 5
    projections = 2 * n * 4 * (4 + 2 + 2) + 2 * n * 4 * 4
    attention = 2 * 2 * 2 * n * (n + c) * 2
    rest = 3 * 2 * n * 4 * 6 + 2 * n * 4 * 10
    assert model.flops_prefill(n, c) == projections + attention + rest
    # Causal only: the 3 new queries see 6, 7 and 8 keys, 21 pairs instead of 3 * 8 = 24.
    assert model.flops_prefill(n, c, causal_only=True) == projections + attention * 21 // 24 + rest
    assert model.flops_prefill(8, 0, causal_only=True) < model.flops_prefill(8, 0)
    # No cached prefix by default: 3 new tokens alone attend to 3 keys each (9 pairs), 6 under the mask.
    no_cache = 2 * 2 * 2 * n * n * 2
    assert model.flops_prefill(n) == projections + no_cache + rest
    assert model.flops_prefill(n, causal_only=True) == projections + no_cache * 6 // 9 + rest
    # A count of FLOPs, returned as the int its signature promises (not an equal float).
    assert all(type(model.flops_prefill(n, c, causal_only=flag)) is int for flag in (False, True))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_fp16_prefill_on_gpu_matches_recompute_and_fp32():
    model = TinyDecoder(CONFIGS["gqa"])  # try_gpu -> cuda, default_dtype -> fp16
    assert model.dtype == torch.float16 and model.device.type == "cuda"
    ids = prompt(200)
    pool = model.make_pool(60, 16)
    table = list(range(13))
    model.prefill(ids, table, 0, pool)
    reference = TinyDecoder(CONFIGS["gqa"], device="cpu").forward(ids)
    full = model.forward(ids)
    for num_cached in (37, 100, 199):
        new = model.prefill(ids, table, num_cached, pool)
        assert max_diff(new, full[num_cached:]) <= FP16_TOL
        assert max_diff(new.cpu(), reference[num_cached:]) <= FP16_TOL


def reference_logits(model: TinyDecoder, ids) -> torch.Tensor:
    """The model's forward pass written out head by head: query head h reads KV head h // group
    (group = num_heads // num_kv_heads), named explicitly, with a plain softmax and causal mask."""
    cfg = model.config
    T, nh, nkv, hs = len(ids), cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    group = nh // nkv
    cos, sin = model.rope_cos[:T], model.rope_sin[:T]
    causal = torch.ones(T, T).tril().bool()  # (T, T): query i sees keys 0..i
    x = model.embed(torch.tensor(ids))  # (T, dim)
    for layer in model.layers:
        h = layer.attn_norm(x)
        q = apply_rope(layer.wq(h).view(T, nh, hs), cos, sin)
        k = apply_rope(layer.wk(h).view(T, nkv, hs), cos, sin)
        v = layer.wv(h).view(T, nkv, hs)
        heads = []
        for head in range(nh):
            kv_head = head // group
            scores = q[:, head] @ k[:, kv_head].T / hs ** 0.5  # (T, T)
            weights = scores.masked_fill(~causal, float("-inf")).softmax(-1)
            heads.append(weights @ v[:, kv_head])  # (T, hs)
        x = x + layer.wo(torch.cat(heads, dim=-1))
        h = layer.mlp_norm(x)
        x = x + layer.w_down(torch.nn.functional.silu(layer.w_gate(h)) * layer.w_up(h))
    return model.lm_head(model.final_norm(x))


@pytest.mark.parametrize("name", list(CONFIGS))
@torch.inference_mode()
def test_attention_heads_read_their_own_kv_head(name):
    """forward and prefill share one attention path; this checks it against an independent one."""
    model = TinyDecoder(CONFIGS[name], device="cpu")
    ids = prompt(21, seed=4)
    want = reference_logits(model, ids)
    assert max_diff(model.forward(ids), want) <= FP32_TOL
    pool = model.make_pool(6, 4)
    model.prefill(ids[:9], list(range(6)), 0, pool)
    assert max_diff(model.prefill(ids, list(range(6)), 8, pool), want[8:]) <= FP32_TOL


def test_changing_one_kv_head_changes_only_the_query_heads_of_its_group():
    """Perturb KV head j's value weights in the last layer: exactly query heads j*g..j*g+g-1 change."""
    cfg = CONFIGS["gqa"]  # 6 query heads, 2 KV heads: groups of 3
    nh, nkv, hs = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    group = nh // nkv
    ids = prompt(12, seed=6)

    def last_attention_output(model):
        captured = {}
        hook = model.layers[-1].wo.register_forward_pre_hook(lambda mod, args: captured.setdefault("x", args[0]))
        model.forward(ids)
        hook.remove()
        return captured["x"].view(len(ids), nh, hs)  # (T, nh, hs): each query head's attention output

    base = TinyDecoder(cfg, device="cpu")
    before = last_attention_output(base)
    for kv_head in range(nkv):
        model = TinyDecoder(cfg, device="cpu")
        with torch.no_grad():
            model.layers[-1].wv.weight[kv_head * hs:(kv_head + 1) * hs] += 1.0
        after = last_attention_output(model)
        changed = [h for h in range(nh) if max_diff(after[:, h], before[:, h]) > 1e-3]
        assert changed == list(range(kv_head * group, (kv_head + 1) * group)), (kv_head, changed)


def test_rope_tables_by_hand():
    cos, sin = rope_tables(head_dim=8, max_positions=6, theta=100.0)
    assert cos.shape == sin.shape == (6, 4) and cos.dtype == torch.float32
    for pos in (0, 1, 5):
        for i in range(4):
            angle = pos * 100.0 ** (-2 * i / 8)
            assert cos[pos, i].item() == pytest.approx(math.cos(angle), abs=1e-6)
            assert sin[pos, i].item() == pytest.approx(math.sin(angle), abs=1e-6)


def test_rope_tables_stay_exact_at_far_positions():
    # Angles are computed in fp64 and only then rounded: at position 4000 an fp32 angle would be
    # off by ~1e-4 rad. Checked against math.cos/sin in double precision.
    cos, sin = rope_tables(head_dim=8, max_positions=4096, theta=10000.0)
    for i in range(4):
        angle = 4000 * 10000.0 ** (-2 * i / 8)
        assert cos[4000, i].item() == pytest.approx(math.cos(angle), abs=2e-6)
        assert sin[4000, i].item() == pytest.approx(math.sin(angle), abs=2e-6)


def test_rope_rotates_pairs_and_scores_depend_on_distance_only():
    cos, sin = rope_tables(head_dim=4, max_positions=32, theta=10000.0)
    # Rotate-half pairs dims (0, 2) and (1, 3): position 1 turns (1, 0, 0, 0) by angle 1 radian.
    x = torch.tensor([[[1.0, 0.0, 0.0, 0.0]]])  # (T=1, h=1, hs=4)
    out = apply_rope(x, cos[1:2], sin[1:2])[0, 0]
    assert out.tolist() == pytest.approx([math.cos(1.0), 0.0, math.sin(1.0), 0.0], abs=1e-6)
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 1, 4, generator=gen), torch.randn(1, 1, 4, generator=gen)

    def score(m, n):
        return (apply_rope(q, cos[m:m + 1], sin[m:m + 1]) * apply_rope(k, cos[n:n + 1], sin[n:n + 1])).sum().item()

    assert score(7, 3) == pytest.approx(score(20, 16), abs=1e-5) == pytest.approx(score(4, 0), abs=1e-5)
    assert score(7, 3) != pytest.approx(score(7, 4), abs=1e-3)
    assert torch.allclose(apply_rope(q, cos[0:1], sin[0:1]), q)  # position 0: no turn
    # Rotated in fp32, returned in the input's dtype (an fp16 model's K must match its fp16 pool).
    turned = apply_rope(x.to(torch.bfloat16), cos[1:2], sin[1:2])
    assert turned.dtype == torch.bfloat16
    assert turned[0, 0].float().tolist() == pytest.approx([math.cos(1.0), 0.0, math.sin(1.0), 0.0], abs=1e-2)


def test_rms_norm_by_hand():
    norm = RMSNorm(4, eps=1e-5)
    x = torch.tensor([[3.0, -3.0, 3.0, -3.0], [0.0, 0.0, 0.0, 0.0]])
    out = norm(x)
    assert out[0].tolist() == pytest.approx([1.0, -1.0, 1.0, -1.0], abs=1e-5)  # rms 3 -> 1
    assert out[1].tolist() == [0.0, 0.0, 0.0, 0.0]  # eps keeps zeros finite
    assert RMSNorm(4, eps=1.0)(torch.ones(1, 4))[0].tolist() == pytest.approx([2 ** -0.5] * 4)
    norm.weight.data = torch.tensor([1.0, 2.0, 0.5, 0.0])
    assert norm(x)[0].tolist() == pytest.approx([1.0, -2.0, 0.5, 0.0], abs=1e-5)
    half = norm(x.half())
    assert half.dtype == torch.float16
    # Any leading shape: each vector along the last dim is normalised on its own (here rms 1, 2, 4, 8).
    stacked = torch.tensor([[[1.0, -1.0], [2.0, 2.0]], [[-4.0, 4.0], [8.0, -8.0]]])  # (2, 2, 2)
    assert RMSNorm(2, eps=0.0)(stacked).flatten().tolist() == pytest.approx([1.0, -1.0, 1.0, 1.0, -1.0, 1.0, 1.0, -1.0])


def test_model_validation_messages_in_full():
    with pytest.raises(ValueError) as info:
        TinyDecoderConfig(num_heads=4, num_kv_heads=3)
    assert str(info.value) == ("num_heads=4 must be a multiple of num_kv_heads=3 "
                               "(each KV head serves num_heads // num_kv_heads query heads)")
    with pytest.raises(ValueError) as info:
        TinyDecoderConfig(head_dim=7)
    assert str(info.value) == "head_dim must be even for RoPE, got 7"
    model = TinyDecoder(CONFIGS["mha"], device="cpu")
    pool = model.make_pool(4, 4)
    assert (pool.num_layers, pool.num_kv_heads, pool.head_dim, pool.block_size, pool.num_blocks) == (2, 4, 8, 4, 4)
    assert model.kv_bytes_per_token == 2 * 2 * 4 * 8 * 4 == pool.bytes_per_token
    cases = [
        (lambda: model.prefill(prompt(8), [0, 1], 8, pool),
         "num_cached_tokens must be in 0..7 (at least one new token), got 8"),
        (lambda: model.prefill(prompt(8), [0, 1], -1, pool),
         "num_cached_tokens must be in 0..7 (at least one new token), got -1"),
        (lambda: model.prefill(prompt(9), [0, 1], 0, pool), "block_table has 2 blocks of 4 tokens, too few for 9 tokens"),
        (lambda: model.forward([-1, 3]), "token ids must be in 0..127"),
        (lambda: model.forward([3, 128]), "token ids must be in 0..127"),
        (lambda: model.prefill(prompt(8), [0, 1], 0, KVBlockPool(4, 4, 2, 4, 8, device="cpu", dtype=torch.float16)),
         "pool is torch.float16 on cpu, model is torch.float32 on cpu"),
        (lambda: model.prefill(prompt(8), [0, 1], 0, KVBlockPool(4, 4, 2, 2, 8, device="cpu")),
         "pool shapes (layers, kv heads, head_dim) do not match the model's; use model.make_pool()"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == message
    short = TinyDecoder(TinyDecoderConfig(max_positions=8), device="cpu")
    with pytest.raises(ValueError) as info:
        short.forward(list(range(9)))
    assert str(info.value) == ("9 tokens exceed max_positions=8; "
                               "build the model with a larger TinyDecoderConfig.max_positions")
    assert short.forward(list(range(8))).shape == (8, 512)  # exactly max_positions is fine
    assert model.forward([0, 127]).shape == (2, 128)  # both ends of the vocabulary


def test_weights_have_the_documented_scales():
    model = TinyDecoder(TinyDecoderConfig(dim=256, ffn_hidden=512, vocab_size=1024), device="cpu")
    assert model.embed.weight.std().item() == pytest.approx(1.0, rel=0.05)  # N(0, 1)
    layer = model.layers[0]
    assert layer.wq.weight.std().item() == pytest.approx(256 ** -0.5, rel=0.05)  # N(0, 1/fan_in)
    assert layer.w_down.weight.std().item() == pytest.approx(512 ** -0.5, rel=0.05)
    assert torch.equal(layer.attn_norm.weight, torch.ones(256)) and torch.equal(model.final_norm.weight, torch.ones(256))
    assert not any(p.requires_grad for p in model.parameters()) and not model.training


def test_make_pool_follows_the_models_device_and_dtype():
    cfg = TinyDecoderConfig(vocab_size=16, dim=8, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=4,
                            ffn_hidden=8, max_positions=32)
    # fp64 is no device's default dtype: a pool built without the model's dtype would be fp32.
    model = TinyDecoder(cfg, device="cpu", dtype=torch.float64)
    pool = model.make_pool(3, 4)
    assert pool.dtype == torch.float64 and pool.num_blocks == 3 and pool.block_size == 4
    ids = [1, 2, 3, 4, 5]
    assert torch.allclose(model.prefill(ids, [2, 0], 0, pool), model.forward(ids))
    # "meta" is no default device either (a CPU machine's default is the CPU).
    meta = TinyDecoder(cfg, device="meta")
    assert meta.make_pool(2, 4).device == torch.device("meta")
    assert {p.device for p in meta.parameters()} == {torch.device("meta")}
    assert {p.dtype for p in model.parameters()} == {torch.float64}


def test_a_cpu_forward_runs_on_the_configured_threads_and_restores_torchs_setting(monkeypatch):
    """Before: a forward ran on all of torch's intra-op threads; a 20-token forward of this model took
    570 ms on two threads against 15 ms on one on a loaded 2-core machine (`intra_op_threads`)."""
    seen = []
    real = TinyDecoder._layers

    def spy(self, *args):
        seen.append(torch.get_num_threads())
        return real(self, *args)

    monkeypatch.setattr(TinyDecoder, "_layers", spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        ids = prompt(9)
        one = TinyDecoder(CONFIGS["gqa"], device="cpu")
        pool = one.make_pool(4, 4)
        logits = one.forward(ids)
        one.prefill(ids, [0, 1, 2], 0, pool)
        assert seen == [1, 1] and torch.get_num_threads() == 2  # restored after each call
        torch_own = TinyDecoder(TinyDecoderConfig(**{**CONFIGS["gqa"].__dict__, "cpu_threads": None}), device="cpu")
        assert torch.allclose(torch_own.forward(ids), logits, atol=1e-5) and seen[-1] == 2
    finally:
        torch.set_num_threads(before)
    for bad in (0, True, 1.5):
        with pytest.raises(ValueError, match="cpu_threads must be None or an int >= 1"):
            TinyDecoderConfig(cpu_threads=bad)
