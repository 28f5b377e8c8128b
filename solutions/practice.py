"""Reference answers to the practice TODOs of notebooks 08, 09 and 10 (outside the chapter's 100 points)."""


def free_queue_after(free_queue, request_blocks):
    # The finished request's blocks go to the back, deepest first: evicted before their parents.
    tail_first = list(request_blocks)[::-1]
    return list(free_queue) + tail_first


def radix_victim(parent, last_access, locked):
    has_child = set(parent.values())
    leaves = [b for b in parent if b not in has_child and b not in locked]
    if not leaves:
        return None
    return min(leaves, key=last_access.__getitem__)


def place_evicted(block):
    # Host memory for reused blocks that load faster than they recompute; the disk for the rest, if it wins.
    if block.hits >= 2 and block.load_s[1] < block.recompute_s:
        return "host"
    if block.num_tiers == 3 and block.load_s[2] < block.recompute_s:
        return "disk"
    return "drop"


def admit(info):
    # The chapter's rule first (it cannot fit), then Mooncake's early rejection (it would be late).
    if info.blocks > info.free_blocks:
        return False
    return info.wait_s + info.prefill_s <= info.deadline_s
