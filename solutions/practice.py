"""Reference answers to notebook 08's two practice TODOs (outside the chapter's 100 points)."""


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
