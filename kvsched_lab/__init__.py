"""kvsched-lab: KV-cache scheduling with real KV blocks, for the course notebooks."""
from kvsched_lab.events import EventLog, iter_events
from kvsched_lab.invariants import check_invariants

__all__ = ["EventLog", "check_invariants", "iter_events"]
