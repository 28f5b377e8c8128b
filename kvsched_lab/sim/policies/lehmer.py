"""libCacheSim's random numbers (0.3.5, ``next_rand`` in ``utils/include/mymath.h``), for the policies
whose decisions draw: LeCaR (lecar.py) and CACHEUS (cacheus.py).

``next_rand`` is a 128-bit Lehmer generator: ``state <- state * 0xda942042e4dd58b5 (mod 2**128)``,
returning the state's high 64 bits. The state is one per thread and starts at ``0xdeadbeef``
(the Knuth MMIX step written above it in that file is commented out). A policy keeps its own
state here, so its draws are libCacheSim's when its cache is the first to draw in a fresh thread.
"""
LEHMER_MULTIPLIER = 0xDA942042E4DD58B5
LEHMER_SEED = 0xDEADBEEF  # libCacheSim's per-thread starting state
MASK128 = (1 << 128) - 1


def check_seed(seed: int) -> int:
    """`seed` as a generator state, or a TypeError for anything but an int."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")
    return seed & MASK128
