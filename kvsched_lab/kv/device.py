"""Device and dtype choice for the real-KV part of the course: GPU when there is one, CPU otherwise.

Every notebook cell calls `try_gpu()` instead of hard-coding ``"cuda"``, so the same cell
runs on Colab's GPU and on a laptop (d2l's `try_gpu` idea).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional, Union

import torch

DeviceLike = Union[str, torch.device, None]


def try_gpu(device: DeviceLike = None) -> torch.device:
    """The device to use: `device` if given, else the first CUDA GPU if there is one, else the CPU."""
    if device is not None:
        return torch.device(device)
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def default_dtype(device: DeviceLike = None) -> torch.dtype:
    """fp16 on CUDA, fp32 elsewhere.

    fp16 rather than bf16 on the GPU: Colab's free T4 (sm_75) has no native bf16, and
    fp16's 10-bit mantissa keeps the cached-vs-recomputed logits closer than bf16's 7 bits;
    the tiny random model's activations stay far below fp16's 65504 limit. On the CPU,
    half-precision matmuls are slow or emulated, and fp32 lets tests ask for 1e-4 agreement.
    """
    return torch.float16 if try_gpu(device).type == "cuda" else torch.float32


@contextmanager
def intra_op_threads(threads: Optional[int], device: DeviceLike = None) -> Iterator[None]:
    """Run the block with torch's intra-op threads set to `threads` on the CPU, then restore them.

    None, or a GPU device, leaves torch's setting alone. The tiny model's matrices are 64 wide:
    handing a slice of each to another thread costs more than the slice, and on a busy machine
    the threads' spin-waits stall every op (a 20-token forward on a loaded 2-core machine: 15 ms
    on one thread, 570 ms on two). Switching costs about 3 us, nothing beside a forward.
    """
    if threads is None or try_gpu(device).type != "cpu" or torch.get_num_threads() == threads:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
