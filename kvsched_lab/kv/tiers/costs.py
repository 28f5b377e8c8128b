"""`TierCosts`: seconds per block for each move between tiers and for recomputing the block.

The hierarchy and the replays only read these numbers; where they come from is up to the
caller: measured on this machine for the tiny model (measure.py, ``kvsched bench``), or
computed for a real model from its KV bytes and FLOPs per token and a link's bandwidth
(breakeven.py). The modeled time to first token a cached block saves is its recompute time
minus the time to bring it to the device from the tier it was found in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Tuple

from kvsched_lab.kv.tiers.placement import DEVICE, DISK, HOST, TIER_NAMES

def move_name(src: int, dst: int) -> str:
    return f"{TIER_NAMES[src]}_to_{TIER_NAMES[dst]}"


@dataclass(frozen=True)
class TierCosts:
    """Seconds per block; a move not measured directly is the sum of the hops it takes."""

    recompute_s: float  # prefill time of one block's tokens (its share of a long prefill)
    device_to_host_s: float  # copy one block from the device pool to the host pool
    host_to_device_s: float  # and back
    host_to_disk_s: float  # host pool to the disk file
    disk_to_host_s: float  # and back
    block_bytes: int  # bytes of one block (what each copy moves)

    def __post_init__(self) -> None:
        for name in ("recompute_s", "device_to_host_s", "host_to_device_s", "host_to_disk_s", "disk_to_host_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number of seconds >= 0, got {value!r}")

    def move_s(self, src: int, dst: int) -> float:
        """Seconds to move one block from tier `src` to tier `dst` (through the host for device <-> disk)."""
        hop = {(DEVICE, HOST): self.device_to_host_s, (HOST, DEVICE): self.host_to_device_s,
               (HOST, DISK): self.host_to_disk_s, (DISK, HOST): self.disk_to_host_s}
        if (src, dst) in hop:
            return hop[src, dst]
        if (src, dst) == (DEVICE, DISK):
            return self.device_to_host_s + self.host_to_disk_s
        if (src, dst) == (DISK, DEVICE):
            return self.disk_to_host_s + self.host_to_device_s
        raise ValueError(f"no move from tier {src} to tier {dst}")

    def load_s(self, num_tiers: int) -> Tuple[float, ...]:
        """Seconds to bring one block to the device from each tier (0.0 for the device itself)."""
        return tuple(0.0 if t == DEVICE else self.move_s(t, DEVICE) for t in range(num_tiers))

    def saved_s(self, tier: int, num_tiers: int = 3) -> float:
        """Modeled prefill seconds a block found in `tier` saves: recompute minus loading it (may be < 0)."""
        return self.recompute_s - self.load_s(num_tiers)[tier]


def modeled_ttft_saved_s(prefix_hits: Mapping[str, int], costs: TierCosts) -> Dict[str, float]:
    """Per tier and in all: seconds of prefill the prefix hits save, at `costs` per block."""
    out = {name: count * costs.saved_s(TIER_NAMES.index(name)) for name, count in prefix_hits.items()}
    out["total"] = sum(out.values())
    return out
