"""Shared by the policy tests: a learner-style policy and the replay protocol one touch at a time."""
from kvsched_lab.sim.policies import Policy


class MostRecent(Policy):
    """MRU written the way a learner would with the base class's hooks (a plain list, O(n))."""

    def __init__(self, capacity_bytes, **kwargs):
        super().__init__(capacity_bytes, **kwargs)
        self.order = []

    def on_hit(self, key):
        self.order.remove(key)
        self.order.append(key)

    def on_insert(self, key, size):
        self.order.append(key)

    def victim(self):
        return self.order[-1]

    def on_evict(self, key, size):
        self.order.remove(key)


def replay_by_touch(policy, lists, bytes_):
    """The replay protocol (`kvsched_lab.sim.replay`) step by step: count the cached leading run, announce the request,
    then touch each block with its place in it, as replays and the engine do; returns prefix hits
    per request."""
    out = []
    for ids in lists:
        n = 0
        while n < len(ids) and ids[n] in policy.entries:
            n += 1
        out.append(n)
        policy.begin_request(ids)
        for depth, key in enumerate(ids, 1):
            policy.touch_in_request(key, bytes_, depth, depth == len(ids))
    return out
