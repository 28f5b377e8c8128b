"""KV-cache sizes of real models, from their published config.json files.

One token's KV cache holds a key and a value vector per layer and per KV head:
``2 * num_layers * num_kv_heads * head_dim * dtype_bytes`` bytes. Grouped-query attention
(fewer KV heads than query heads) is why Llama-3-8B needs 128 KiB a token, not 512 KiB.
These figures turn the scheduler's byte capacities into GPU memory a learner can picture.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Union


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes of K and V one token leaves in the cache, over all layers."""
    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes


@dataclass(frozen=True)
class ModelKVSpec:
    """The shapes of a model that decide its KV-cache size."""

    name: str
    num_layers: int  # config.json num_hidden_layers
    num_kv_heads: int  # config.json num_key_value_heads
    head_dim: int  # config.json hidden_size / num_attention_heads
    dtype_bytes: int  # config.json torch_dtype (bfloat16 -> 2)

    @property
    def kv_bytes_per_token(self) -> int:
        return kv_bytes_per_token(self.num_layers, self.num_kv_heads, self.head_dim, self.dtype_bytes)

    def kv_bytes_per_block(self, block_size: int) -> int:
        """Bytes of one KV block of `block_size` tokens (vLLM's default block_size is 16)."""
        if block_size <= 0:
            raise ValueError(f"block_size must be > 0 tokens, got {block_size}")
        return self.kv_bytes_per_token * block_size


# Figures from each model's config.json on its Hugging Face hub page; all ship in bfloat16.
MODEL_KV_SPECS: Mapping[str, ModelKVSpec] = MappingProxyType({
    # meta-llama/Meta-Llama-3-8B: num_hidden_layers 32, num_key_value_heads 8,
    # hidden_size 4096 / num_attention_heads 32 = 128 -> 128 KiB per token.
    "Llama-3-8B": ModelKVSpec("Llama-3-8B", num_layers=32, num_kv_heads=8, head_dim=128, dtype_bytes=2),
    # meta-llama/Meta-Llama-3-70B: num_hidden_layers 80, num_key_value_heads 8,
    # hidden_size 8192 / num_attention_heads 64 = 128 -> 320 KiB per token.
    "Llama-3-70B": ModelKVSpec("Llama-3-70B", num_layers=80, num_kv_heads=8, head_dim=128, dtype_bytes=2),
    # Qwen/Qwen2.5-7B: num_hidden_layers 28, num_key_value_heads 4,
    # hidden_size 3584 / num_attention_heads 28 = 128 -> 56 KiB per token.
    "Qwen2.5-7B": ModelKVSpec("Qwen2.5-7B", num_layers=28, num_kv_heads=4, head_dim=128, dtype_bytes=2),
    # Qwen/Qwen2.5-0.5B: num_hidden_layers 24, num_key_value_heads 2,
    # hidden_size 896 / num_attention_heads 14 = 64 -> 12 KiB per token.
    "Qwen2.5-0.5B": ModelKVSpec("Qwen2.5-0.5B", num_layers=24, num_kv_heads=2, head_dim=64, dtype_bytes=2),
    # mistralai/Mistral-7B-v0.1: num_hidden_layers 32, num_key_value_heads 8,
    # hidden_size 4096 / num_attention_heads 32 = 128 -> 128 KiB per token.
    "Mistral-7B-v0.1": ModelKVSpec("Mistral-7B-v0.1", num_layers=32, num_kv_heads=8, head_dim=128, dtype_bytes=2),
})


def get_spec(model: Union[str, ModelKVSpec]) -> ModelKVSpec:
    """The spec for a model name in `MODEL_KV_SPECS` (or a spec passed through)."""
    if isinstance(model, ModelKVSpec):
        return model
    try:
        return MODEL_KV_SPECS[model]
    except KeyError:
        raise KeyError(f"no KV spec for {model!r}; known models: {', '.join(MODEL_KV_SPECS)}") from None


def model_kv_bytes_per_token(model: Union[str, ModelKVSpec]) -> int:
    """KV bytes per token of a named model, e.g. ``model_kv_bytes_per_token("Llama-3-8B") == 131072``."""
    return get_spec(model).kv_bytes_per_token


def model_kv_bytes_per_block(model: Union[str, ModelKVSpec], block_size: int) -> int:
    """KV bytes per `block_size`-token block of a named model (Mooncake's blocks are 512 tokens)."""
    return get_spec(model).kv_bytes_per_block(block_size)
