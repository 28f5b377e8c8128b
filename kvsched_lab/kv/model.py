"""A tiny decoder-only transformer (Llama-shaped) that reads and writes its KV cache in `KVBlockPool` blocks.

RMSNorm, rotary position embeddings, grouped-query attention and a SwiGLU MLP, with random
weights drawn from a fixed seed: nothing is downloaded, and the same seed gives the same
model on every machine. It exists to make prefix caching real: `prefill` computes only the
tokens after a cached prefix and must give the same logits as a full `forward`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from kvsched_lab.kv.block_pool import KVBlockPool
from kvsched_lab.kv.device import DeviceLike, default_dtype, intra_op_threads, try_gpu
from kvsched_lab.kv.model_configs import kv_bytes_per_token


@dataclass(frozen=True)
class TinyDecoderConfig:
    """Shapes of the tiny model; defaults are small enough for a CPU test."""

    vocab_size: int = 512  # token ids are 0..vocab_size-1
    dim: int = 64  # residual stream width (hidden_size)
    num_layers: int = 2  # decoder blocks, each with its own KV cache
    num_heads: int = 4  # query heads
    num_kv_heads: int = 2  # key/value heads; fewer than num_heads is grouped-query attention
    head_dim: int = 16  # width of one head; q is num_heads*head_dim wide, k and v num_kv_heads*head_dim
    ffn_hidden: int = 128  # SwiGLU inner width
    rope_theta: float = 10000.0  # RoPE base: frequencies theta^(-2i/head_dim)
    max_positions: int = 4096  # longest prompt; the RoPE table is precomputed this long
    norm_eps: float = 1e-5  # RMSNorm epsilon
    seed: int = 0  # weights come from torch.Generator().manual_seed(seed)
    # torch intra-op threads while a forward runs on the CPU (None: torch's own setting); one,
    # since these matrices are too small to split (kvsched_lab/kv/device.py, `intra_op_threads`)
    cpu_threads: Optional[int] = 1

    def __post_init__(self) -> None:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads={self.num_heads} must be a multiple of num_kv_heads={self.num_kv_heads} "
                "(each KV head serves num_heads // num_kv_heads query heads)"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if self.cpu_threads is not None and (isinstance(self.cpu_threads, bool) or not isinstance(self.cpu_threads, int)
                                             or self.cpu_threads < 1):
            raise ValueError(f"cpu_threads must be None or an int >= 1, got {self.cpu_threads!r}")


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in fp32: squares of fp16 activations lose precision fast.
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * self.weight.float()).to(x.dtype)


def rope_tables(head_dim: int, max_positions: int, theta: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables ``(max_positions, head_dim // 2)`` in fp32."""
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (hs/2,)
    angles = torch.arange(max_positions, dtype=torch.float64)[:, None] * inv_freq[None, :]  # (P, hs/2)
    return angles.cos().float(), angles.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x (T, h, hs)`` by per-position angles ``cos, sin (T, hs/2)`` (rotate-half convention)."""
    x32 = x.float()
    x1, x2 = x32.chunk(2, dim=-1)  # (T, h, hs/2) each
    c, s = cos[:, None, :], sin[:, None, :]  # (T, 1, hs/2)
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: TinyDecoderConfig) -> None:
        super().__init__()
        q_dim, kv_dim = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        self.attn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.wq = nn.Linear(cfg.dim, q_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, kv_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, kv_dim, bias=False)
        self.wo = nn.Linear(q_dim, cfg.dim, bias=False)
        self.mlp_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.w_gate = nn.Linear(cfg.dim, cfg.ffn_hidden, bias=False)
        self.w_up = nn.Linear(cfg.dim, cfg.ffn_hidden, bias=False)
        self.w_down = nn.Linear(cfg.ffn_hidden, cfg.dim, bias=False)


# (layer index, new keys (T, nkv, hs), new values (T, nkv, hs)) -> keys and values of every
# position the new tokens attend to, (S, nkv, hs) each.
KVSource = Callable[[int, torch.Tensor, torch.Tensor], Tuple[torch.Tensor, torch.Tensor]]


class TinyDecoder(nn.Module):
    """The tiny model. `forward` recomputes everything; `prefill` reuses a cached prefix from a pool."""

    def __init__(self, config: TinyDecoderConfig = TinyDecoderConfig(), *,
                 device: DeviceLike = None, dtype: Optional[torch.dtype] = None) -> None:
        super().__init__()
        self.config = cfg = config
        # nn.Linear's default init draws from torch's global RNG; fork it so building a model
        # leaves the learner's random stream untouched (the weights are overwritten below).
        with torch.random.fork_rng(devices=[]):
            self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)
            self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers))
            self.final_norm = RMSNorm(cfg.dim, cfg.norm_eps)
            self.lm_head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        # Draw every weight on the CPU in fp32 from one generator, in a fixed order, then move:
        # the same seed gives the same model on any device.
        gen = torch.Generator().manual_seed(cfg.seed)
        for name, param in self.named_parameters():
            param.requires_grad_(False)
            if name.endswith("norm.weight"):
                continue  # RMSNorm gains stay 1
            # Embeddings ~ N(0, 1); linear weights ~ N(0, 1/fan_in) keep activations O(1).
            std = 1.0 if param is self.embed.weight else param.shape[1] ** -0.5
            param.copy_(torch.randn(param.shape, generator=gen) * std)
        self.device = try_gpu(device)
        self.dtype = dtype if dtype is not None else default_dtype(self.device)
        self.to(device=self.device, dtype=self.dtype)
        # Plain attributes, not buffers, so the tables stay fp32 whatever the weights' dtype.
        cos, sin = rope_tables(cfg.head_dim, cfg.max_positions, cfg.rope_theta)
        self.rope_cos, self.rope_sin = cos.to(self.device), sin.to(self.device)  # (P, hs/2) each
        self.eval()

    @property
    def kv_bytes_per_token(self) -> int:
        """KV bytes one token takes in a pool of this model's dtype."""
        cfg = self.config
        return kv_bytes_per_token(cfg.num_layers, cfg.num_kv_heads, cfg.head_dim, self.dtype.itemsize)

    def make_pool(self, num_blocks: int, block_size: int) -> KVBlockPool:
        """A `KVBlockPool` with this model's KV shapes, device and dtype."""
        cfg = self.config
        return KVBlockPool(num_blocks, block_size, cfg.num_layers, cfg.num_kv_heads, cfg.head_dim,
                           device=self.device, dtype=self.dtype)

    def _as_ids(self, token_ids: Sequence[int]) -> torch.Tensor:
        ids = torch.as_tensor(token_ids, dtype=torch.long, device=self.device).reshape(-1)
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.config.vocab_size):
            raise ValueError(f"token ids must be in 0..{self.config.vocab_size - 1}")
        if ids.numel() > self.config.max_positions:
            raise ValueError(
                f"{ids.numel()} tokens exceed max_positions={self.config.max_positions}; "
                "build the model with a larger TinyDecoderConfig.max_positions"
            )
        return ids

    def _run(self, new_ids: torch.Tensor, start_pos: int, kv_source: KVSource) -> torch.Tensor:
        """Logits ``(T, vocab)`` for `new_ids` at positions start_pos.., attending through `kv_source`."""
        with intra_op_threads(self.config.cpu_threads, self.device):
            return self._layers(new_ids, start_pos, kv_source)

    def _layers(self, new_ids: torch.Tensor, start_pos: int, kv_source: KVSource) -> torch.Tensor:
        cfg = self.config
        T, nh, nkv, hs = new_ids.numel(), cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        positions = torch.arange(start_pos, start_pos + T, device=self.device)
        cos, sin = self.rope_cos[positions], self.rope_sin[positions]  # (T, hs/2)
        # Query i (position start_pos+i) sees keys 0..start_pos+i: causal, offset by the cached prefix.
        # SDPA's is_causal aligns the mask top-left, which is wrong when there are more keys than queries.
        num_keys = start_pos + T
        mask = torch.arange(num_keys, device=self.device)[None, :] <= positions[:, None]  # (T, S)
        x = self.embed(new_ids)  # (T, dim)
        for i, layer in enumerate(self.layers):
            h = layer.attn_norm(x)
            q = apply_rope(layer.wq(h).view(T, nh, hs), cos, sin)  # (T, nh, hs)
            k = apply_rope(layer.wk(h).view(T, nkv, hs), cos, sin)  # (T, nkv, hs)
            v = layer.wv(h).view(T, nkv, hs)  # (T, nkv, hs)
            k_all, v_all = kv_source(i, k, v)  # (S, nkv, hs) each, S = start_pos + T
            # GQA: KV head j serves query heads j*g .. j*g+g-1.
            group = nh // nkv
            k_all = k_all.repeat_interleave(group, dim=1)  # (S, nh, hs)
            v_all = v_all.repeat_interleave(group, dim=1)  # (S, nh, hs)
            # 4-D (batch 1) inputs: with 3-D ones SDPA silently takes its unfused "math" path, which
            # materializes the (nh, T, S) scores and runs ~10 elementwise passes over them; the fused
            # flash kernel (CPU and CUDA) is ~4x faster at 2k tokens, and its time tracks the FLOPs.
            attn = F.scaled_dot_product_attention(
                q.transpose(0, 1)[None], k_all.transpose(0, 1)[None], v_all.transpose(0, 1)[None], attn_mask=mask
            )[0]  # (nh, T, hs)
            x = x + layer.wo(attn.transpose(0, 1).reshape(T, nh * hs))  # (T, dim)
            h = layer.mlp_norm(x)
            x = x + layer.w_down(F.silu(layer.w_gate(h)) * layer.w_up(h))  # (T, dim)
        return self.lm_head(self.final_norm(x))  # (T, vocab)

    @torch.inference_mode()
    def forward(self, token_ids: Sequence[int]) -> torch.Tensor:
        """Full recompute without any cache: logits ``(T, vocab)`` for every position."""
        ids = self._as_ids(token_ids)
        return self._run(ids, 0, lambda i, k, v: (k, v))

    @torch.inference_mode()
    def prefill(self, token_ids: Sequence[int], block_table: Sequence[int], num_cached_tokens: int,
                pool: KVBlockPool) -> torch.Tensor:
        """Logits ``(T - num_cached_tokens, vocab)`` of the new tokens of a prompt.

        `token_ids` is the whole prompt (T tokens). Positions ``0..num_cached_tokens-1`` must
        already be in the pool; only the rest are computed. Their K/V are written to slot
        ``block_table[pos // block_size] * block_size + pos % block_size`` and attention reads
        cached and new K/V back from the pool, the way a paged-attention kernel does.
        """
        ids = self._as_ids(token_ids)
        T, bs = ids.numel(), pool.block_size
        if not 0 <= num_cached_tokens < T:
            raise ValueError(
                f"num_cached_tokens must be in 0..{T - 1} (at least one new token), got {num_cached_tokens}"
            )
        if len(block_table) * bs < T:
            raise ValueError(f"block_table has {len(block_table)} blocks of {bs} tokens, too few for {T} tokens")
        if pool.dtype != self.dtype or pool.device != self.device:
            raise ValueError(f"pool is {pool.dtype} on {pool.device}, model is {self.dtype} on {self.device}")
        cfg = self.config
        if (pool.num_layers, pool.num_kv_heads, pool.head_dim) != (cfg.num_layers, cfg.num_kv_heads, cfg.head_dim):
            raise ValueError("pool shapes (layers, kv heads, head_dim) do not match the model's; use model.make_pool()")
        table = torch.as_tensor(list(block_table), dtype=torch.long, device=self.device)
        pos = torch.arange(T, device=self.device)
        slots = table[pos // bs] * bs + pos % bs  # (T,) pool slot of every prompt position
        new_slots = slots[num_cached_tokens:]  # (T_new,)

        def pool_kv(i: int, k: torch.Tensor, v: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
            k_slots, v_slots = pool.slot_views(i)  # (num_slots, nkv, hs)
            k_slots[new_slots] = k
            v_slots[new_slots] = v
            return k_slots[slots], v_slots[slots]  # (T, nkv, hs): cached prefix + new tokens

        return self._run(ids[num_cached_tokens:], num_cached_tokens, pool_kv)

    def flops_prefill(self, num_new_tokens: int, num_cached_tokens: int = 0, *, causal_only: bool = False) -> int:
        """Matmul FLOPs of `prefill` for `num_new_tokens` after `num_cached_tokens` cached ones.

        Each (m x k) @ (k x n) matmul counts 2*m*n*k. By default attention is counted as this
        model computes it: every new query against all S = cached + new keys (QK^T and AV,
        masked entries included), so the FLOPs scale exactly with the number of new tokens.
        ``causal_only=True`` counts only the query-key pairs the causal mask keeps, what a
        kernel that skips masked tiles does: a cached prefix then saves less attention than
        its share of tokens, since new queries still read every cached key.
        Norms, RoPE, softmax and SiLU are left out (O(T*dim), not O(T*dim^2)).
        """
        cfg = self.config
        n, c = num_new_tokens, num_cached_tokens
        # Query i (0-based among the new ones) sees c + i + 1 keys under the causal mask.
        query_key_pairs = n * c + n * (n + 1) // 2 if causal_only else n * (c + n)
        q_dim, kv_dim = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        projections = 2 * n * cfg.dim * (q_dim + 2 * kv_dim) + 2 * n * q_dim * cfg.dim  # wq, wk, wv, wo
        attention = 2 * (2 * cfg.num_heads * query_key_pairs * cfg.head_dim)  # QK^T and AV
        mlp = 3 * 2 * n * cfg.dim * cfg.ffn_hidden  # gate, up, down
        lm_head = 2 * n * cfg.dim * cfg.vocab_size
        return cfg.num_layers * (projections + attention + mlp) + lm_head
