"""Tests for the block allocator, the KV block pool, device/dtype choice and the real-model KV sizes."""
from __future__ import annotations

from collections import deque

import pytest
import torch

from kvsched_lab.kv.block_pool import BlockAllocator, KVBlockPool
from kvsched_lab.kv.device import default_dtype, try_gpu
from kvsched_lab.kv.model_configs import (MODEL_KV_SPECS, kv_bytes_per_token, model_kv_bytes_per_block,
                                       model_kv_bytes_per_token)


def state(alloc: BlockAllocator):
    return list(alloc.free_block_ids), set(alloc.used_block_ids)


def test_allocate_hands_out_each_id_once_then_frees():
    alloc = BlockAllocator(5)
    ids = [alloc.allocate() for _ in range(5)]
    assert sorted(ids) == [0, 1, 2, 3, 4]
    assert (alloc.num_free_blocks, alloc.num_used_blocks) == (0, 5)
    alloc.free(ids[2])
    assert (alloc.num_free_blocks, alloc.num_used_blocks) == (1, 4)
    assert not alloc.is_used(ids[2])
    assert alloc.allocate() == ids[2]


def test_freed_block_goes_to_the_back():
    alloc = BlockAllocator(3)
    first = alloc.allocate()
    alloc.free(first)
    assert [alloc.allocate() for _ in range(3)] == [1, 2, 0]


class _LinearScanSpy(deque):
    """A free list that counts the operations that walk it (`x in q`, iteration, `remove`, `index`)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.scans = 0

    def __contains__(self, item):
        self.scans += 1
        return super().__contains__(item)

    def __iter__(self):
        self.scans += 1
        return super().__iter__()

    def remove(self, value):
        self.scans += 1
        return super().remove(value)

    def index(self, *args):
        self.scans += 1
        return super().index(*args)


def test_allocate_and_free_never_walk_the_free_list():
    # O(1) per call: on a million-block pool, nothing may scan the free list (a timing-free check;
    # the allocator's speed itself is a benchmark's business, not a test's).
    alloc = BlockAllocator(1_000_000)
    alloc.free_block_ids = spy = _LinearScanSpy(alloc.free_block_ids)
    spy.scans = 0
    for _ in range(1000):
        alloc.free(alloc.allocate())
    held = [alloc.allocate() for _ in range(10)]
    for block_id in held:
        alloc.free(block_id)
    assert spy.scans == 0
    assert (alloc.num_free_blocks, alloc.num_used_blocks) == (1_000_000, 0)


def test_double_free_is_rejected_and_changes_nothing():
    alloc = BlockAllocator(4)
    a = alloc.allocate()
    alloc.allocate()
    alloc.free(a)
    before = state(alloc)
    with pytest.raises(ValueError, match="double free"):
        alloc.free(a)
    assert state(alloc) == before


@pytest.mark.parametrize("bad", [-1, 4, 100, True, "1", 1.0])
def test_foreign_id_is_rejected_and_changes_nothing(bad):
    alloc = BlockAllocator(4)
    alloc.allocate()
    before = state(alloc)
    with pytest.raises(ValueError, match="does not belong"):
        alloc.free(bad)
    assert state(alloc) == before


def test_exhausted_pool_raises_and_changes_nothing():
    alloc = BlockAllocator(2)
    alloc.allocate(), alloc.allocate()
    before = state(alloc)
    with pytest.raises(RuntimeError, match="exhausted"):
        alloc.allocate()
    assert state(alloc) == before


@pytest.mark.parametrize("bad", [0, -3, 2.0, True])
def test_allocator_size_must_be_positive_int(bad):
    with pytest.raises(ValueError):
        BlockAllocator(bad)


def test_pool_shape_dtype_device_on_cpu():
    pool = KVBlockPool(6, 4, num_layers=3, num_kv_heads=2, head_dim=8, device="cpu")
    assert pool.kv.shape == (3, 2, 6, 4, 2, 8)
    assert pool.kv.dtype == torch.float32 and pool.kv.device.type == "cpu"
    assert pool.layer(1).shape == (2, 6, 4, 2, 8)
    assert pool.k_cache(2).shape == pool.v_cache(2).shape == (6, 4, 2, 8)
    assert pool.bytes_per_token == kv_bytes_per_token(3, 2, 8, 4) == 2 * 3 * 2 * 8 * 4
    assert pool.bytes_per_block == 4 * pool.bytes_per_token
    assert pool.num_blocks == 6 and pool.block_size == 4
    assert pool.allocator.num_free_blocks == 6


def test_explicit_dtype_wins():
    pool = KVBlockPool(2, 4, 1, 1, 4, device="cpu", dtype=torch.float16)
    assert pool.kv.dtype == torch.float16
    assert pool.bytes_per_token == 2 * 1 * 1 * 4 * 2


def test_layer_views_share_the_one_tensor():
    pool = KVBlockPool(3, 2, 2, 1, 4, device="cpu")
    pool.k_cache(1)[2, 1] = 7.0
    pool.v_cache(0)[0, 0] = -1.0
    assert pool.kv[1, 0, 2, 1].eq(7.0).all() and pool.layer(0)[1, 0, 0].eq(-1.0).all()
    k_slots, _ = pool.slot_views(1)
    assert k_slots[2 * 2 + 1].eq(7.0).all()  # slot = block * block_size + offset
    assert pool.kv.data_ptr() == pool.k_cache(0).data_ptr()


def test_try_gpu_and_default_dtype():
    assert try_gpu("cpu") == torch.device("cpu")
    assert default_dtype("cpu") == torch.float32
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert try_gpu().type == expected


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_pool_on_gpu_is_fp16():
    assert default_dtype("cuda") == torch.float16
    pool = KVBlockPool(4, 16, 2, 2, 8)
    assert pool.kv.device.type == "cuda" and pool.kv.dtype == torch.float16
    assert pool.bytes_per_block == 2 * 2 * 2 * 8 * 2 * 16


@pytest.mark.parametrize("name, per_token", [
    ("Llama-3-8B", 128 * 1024),
    ("Llama-3-70B", 320 * 1024),
    ("Qwen2.5-7B", 56 * 1024),
    ("Qwen2.5-0.5B", 12 * 1024),
    ("Mistral-7B-v0.1", 128 * 1024),
])
def test_real_model_kv_sizes(name, per_token):
    assert model_kv_bytes_per_token(name) == per_token
    assert model_kv_bytes_per_block(name, 16) == 16 * per_token


def test_model_spec_table_is_read_only_and_names_are_checked():
    assert model_kv_bytes_per_block("Llama-3-8B", 512) == 64 * 2**20  # one Mooncake block: 64 MiB
    with pytest.raises(TypeError):
        MODEL_KV_SPECS["x"] = MODEL_KV_SPECS["Llama-3-8B"]  # type: ignore[index]
    with pytest.raises(KeyError, match="known models"):
        model_kv_bytes_per_token("GPT-5")
    with pytest.raises(ValueError):
        model_kv_bytes_per_block("Llama-3-8B", 0)


def test_error_messages_say_what_is_wrong_and_what_to_do():
    """The whole text, not a fragment: a learner reads these, so a garbled hint is a bug."""
    alloc = BlockAllocator(4)
    with pytest.raises(ValueError) as info:
        alloc.free(4)
    assert str(info.value) == ("block id 4 does not belong to this pool (valid ids are 0..3); "
                               "pass an id returned by allocate()")
    with pytest.raises(ValueError) as info:
        alloc.free(2)
    assert str(info.value) == "block 2 is already free (double free); free each allocated block exactly once"
    with pytest.raises(ValueError) as info:
        BlockAllocator(0)
    assert str(info.value) == "num_blocks must be an int > 0, got 0"
    full = BlockAllocator(1)
    full.allocate()
    with pytest.raises(RuntimeError) as info:
        full.allocate()
    assert str(info.value) == ("KV block pool exhausted: all 1 blocks are in use; free finished requests' blocks, "
                               "evict cached blocks, or build a larger pool")
    assert repr(full) == "BlockAllocator(num_blocks=1, used=1)"


@pytest.mark.parametrize("field", ["block_size", "num_layers", "num_kv_heads", "head_dim"])
@pytest.mark.parametrize("bad", [0, -1, 2.0, True])
def test_pool_rejects_each_bad_shape_by_name(field, bad):
    shape = {"block_size": 4, "num_layers": 1, "num_kv_heads": 1, "head_dim": 4}
    with pytest.raises(ValueError) as info:
        KVBlockPool(2, **{**shape, field: bad}, device="cpu")
    assert str(info.value) == f"{field} must be an int > 0, got {bad!r}"


def test_pool_honours_the_device_it_is_given():
    # "meta" tensors have shapes but no storage: a device choice testable on any machine.
    pool = KVBlockPool(2, 4, 1, 1, 4, device="meta")
    assert pool.device == torch.device("meta") and pool.kv.device.type == "meta"
    assert pool.dtype == torch.float32 and pool.num_slots == 8
    assert repr(pool) == ("KVBlockPool(num_blocks=2, block_size=4, layers=1, kv_heads=1, head_dim=4, "
                          "torch.float32, meta, 0.0 MiB, used=0)")
    pool = KVBlockPool(64, 16, 2, 4, 64, device="cpu", dtype=torch.float16)
    pool.allocator.allocate()
    # K and V, 2 layers, 4 heads of 64 in fp16: 2048 B a token, 32 KiB a block, 64 blocks = 2 MiB.
    assert repr(pool).endswith("torch.float16, cpu, 2.0 MiB, used=1)")
