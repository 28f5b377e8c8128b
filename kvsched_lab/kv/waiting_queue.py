"""`WaitingQueue`: the concurrent engine's requests that have not arrived yet or wait to be admitted.

vLLM v1 keeps its waiting requests in a ``RequestQueue`` (``vllm/v1/core/sched/request_queue.py``),
chosen by ``--scheduling-policy``:

- ``fcfs``: ``FCFSRequestQueue``, a deque. A new request joins the back; a preempted one goes back
  to the **front** (``prepend_request`` is ``appendleft``).
- ``priority``: ``PriorityRequestQueue``, a heap ordered by ``(priority, arrival_time)``: the
  smaller priority first, then the earlier arrival. A preempted request re-enters the heap at its
  own key: "there is no concept of prepending to the front".

The scheduler only peeks at and pops the head. The same policy picks the preemption victim in
vLLM's scheduler (``scheduler.py``): the last admitted running request under ``fcfs``
(``self.running.pop()``), ``max(self.running, key=lambda r: (r.priority, r.arrival_time))`` under
``priority``, the least urgent and latest; `victim_key` is that key.

A request also has an ``arrival_step``: it is held aside until the engine has run that many steps,
so a run can have requests arrive over time and measure each one's time to first token in steps.
"""
from __future__ import annotations

import heapq
from collections import deque
from typing import Any, Deque, Iterator, List, Tuple

SCHEDULING_POLICIES = ("fcfs", "priority")


def check_policy(policy: str) -> None:
    """ValueError unless `policy` is one of `SCHEDULING_POLICIES`."""
    if policy not in SCHEDULING_POLICIES:
        raise ValueError(f"scheduling_policy must be one of {', '.join(SCHEDULING_POLICIES)}, got {policy!r}")


def check_arrival(priority: int, arrival_step: int, now: int) -> None:
    """TypeError unless both are ints; ValueError for an arrival step before `now` (steps already run)."""
    for name, value in (("priority", priority), ("arrival_step", arrival_step)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
    if arrival_step < now:
        raise ValueError(f"arrival_step={arrival_step} is in the past: the engine has run {now} steps")


def victim_key(request: Any) -> Tuple[int, int, int]:
    """vLLM's order of a request under ``priority``: smaller is more urgent (index breaks exact ties)."""
    return (request.priority, request.arrival_step, request.index)


class WaitingQueue:
    """Requests not yet arrived (by ``arrival_step``) and requests waiting for admission (by the policy).

    Each request needs ``index`` (unique), ``priority`` and ``arrival_step`` (ints)."""

    def __init__(self, policy: str = "fcfs") -> None:
        check_policy(policy)
        self.policy = policy
        self._future: List[Tuple[int, int, Any]] = []  # heap of (arrival_step, index, request): not arrived
        self._fifo: Deque[Any] = deque()  # fcfs: head on the left
        self._heap: List[Tuple[Tuple[int, int, int], Any]] = []  # priority: heap of (victim_key, request)

    def add(self, request: Any, now: int) -> None:
        """A submitted request: it waits at once if its ``arrival_step`` is `now` (steps run), else later."""
        heapq.heappush(self._future, (request.arrival_step, request.index, request))
        self.arrive(now)

    def arrive(self, now: int) -> None:
        """Move every request whose ``arrival_step`` is at most `now` into the queue, in arrival order."""
        while self._future and self._future[0][0] <= now:
            self._push(heapq.heappop(self._future)[2], front=False)

    def prepend(self, request: Any) -> None:
        """A preempted request: back at the front (fcfs) or at its own key (priority), as in vLLM."""
        self._push(request, front=True)

    def peek(self) -> Any:
        """The request admission considers next; IndexError when none waits."""
        if not self:
            raise IndexError("no request is waiting")
        return self._fifo[0] if self.policy == "fcfs" else self._heap[0][1]

    def pop(self) -> Any:
        """Remove and return the head (`peek`)."""
        head = self.peek()
        if self.policy == "fcfs":
            self._fifo.popleft()
        else:
            heapq.heappop(self._heap)
        return head

    def victim(self, running: List[Any]) -> Any:
        """The running request (admission order) to preempt when a step is short of blocks."""
        return running[-1] if self.policy == "fcfs" else max(running, key=victim_key)

    @property
    def num_not_arrived(self) -> int:
        """Requests submitted whose arrival step has not come yet."""
        return len(self._future)

    def _push(self, request: Any, *, front: bool) -> None:
        if self.policy == "priority":
            heapq.heappush(self._heap, (victim_key(request), request))
        elif front:
            self._fifo.appendleft(request)
        else:
            self._fifo.append(request)

    def __len__(self) -> int:
        return len(self._fifo) + len(self._heap)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[Any]:
        """The waiting requests in the order they would be popped (not-arrived ones excluded)."""
        if self.policy == "fcfs":
            return iter(list(self._fifo))
        return iter([request for _key, request in sorted(self._heap, key=lambda entry: entry[0])])
