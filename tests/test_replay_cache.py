"""The replay cache (`kvsched_lab.sim.replay_cache`): same results, honest misses, one computation
per key across processes, never a learner's class, and never a file it cannot check."""
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from kvsched_lab.sim import replay_cache
from kvsched_lab.sim.policies import POLICIES, LRUPolicy
from kvsched_lab.sim.replay import ReplayResult, replay
from kvsched_lab.sim.serving.server import PrefillCost, serve
from kvsched_lab.sim.serving.tenants import BATCH, INTERACTIVE, ServiceClass, Tenant, Workload, assign_tenants
from kvsched_lab.sim.traces import Request, synthetic_trace
from solutions import KVCacheSchedulerSim

ROOT = Path(__file__).resolve().parents[1]
REQUESTS = synthetic_trace(300, seed=3)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    where = tmp_path / "replays"
    monkeypatch.setenv(replay_cache.ENV, str(where))
    return where


def same(a: ReplayResult, b: ReplayResult) -> bool:
    """Equal in every field but the run's own: its wall time and whether it was read back."""
    skip = {"wall_seconds", "from_cache"}
    return {k: v for k, v in a.to_dict().items() if k not in skip} == {k: v for k, v in b.to_dict().items() if k not in skip}


def the_file(folder: Path) -> Path:
    (path,) = folder.glob("*.json")
    return path


def test_unset_caches_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(replay_cache.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert not replay(REQUESTS, "lru", 200).from_cache and not replay(REQUESTS, "lru", 200).from_cache
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("policy, kwargs", [
    ("lru", {}), ("s3fifo", {"per_request": True}), ("belady", {}), ("vllm", {"metric": "vllm-tokens"}),
    ("gdsf", {"metric": "vllm-tokens", "block_tokens": 256, "per_request": True}), ("fifo", {"block_bytes": 3}),
])
def test_a_cached_replay_equals_an_uncached_one(folder, monkeypatch, policy, kwargs):
    first = replay(REQUESTS, policy, 150, **kwargs)
    again = replay(REQUESTS, policy, 150, **kwargs)
    monkeypatch.delenv(replay_cache.ENV)
    plain = replay(REQUESTS, policy, 150, **kwargs)
    assert (first.from_cache, again.from_cache, plain.from_cache) == (False, True, False)
    assert same(first, plain) and same(again, plain)
    assert again.wall_seconds == first.wall_seconds  # the computing run's time, flagged by from_cache
    assert len(list(folder.glob("*.json"))) == 1


def with_request(i: int, **change) -> list:
    """REQUESTS with request `i`'s fields changed."""
    return [dataclasses.replace(r, **change) if k == i else r for k, r in enumerate(REQUESTS)]


ONE_ID_CHANGED = with_request(17, hash_ids=REQUESTS[17].hash_ids[:-1] + (10 ** 12,))
TOKENS = {"metric": "vllm-tokens"}


@pytest.mark.parametrize("base, change", [
    ({}, {"policy": "fifo"}), ({}, {"capacity_blocks": 151}), ({}, {"block_bytes": 2}), ({}, TOKENS),
    (TOKENS, {"block_tokens": 256}), ({}, {"per_request": True}), ({}, {"requests": REQUESTS[:-1]}),
    ({}, {"requests": ONE_ID_CHANGED}), (TOKENS, {"requests": with_request(5, input_length=REQUESTS[5].input_length + 1)}),
    ({}, {"requests": with_request(9, timestamp=10 ** 9)}), ({}, {"requests": with_request(9, output_length=7)}),
], ids=["policy", "capacity", "block_bytes", "metric", "block_tokens", "per_request", "one request fewer", "one id",
        "input_length", "timestamp", "output_length"])
def test_a_changed_argument_or_request_misses(folder, base, change):
    args = {"requests": REQUESTS, "policy": "lru", "capacity_blocks": 150, **base}
    replay(**args)
    changed = {**args, **change}
    assert not replay(**changed).from_cache
    assert len(list(folder.glob("*.json"))) == 2
    assert replay(**changed).from_cache and replay(**args).from_cache  # each under its own key


def test_the_key_follows_every_source_file_of_sim(tmp_path):
    tree = tmp_path / "sim"
    (tree / "policies").mkdir(parents=True)
    (tree / "replay.py").write_text("x = 1\n")
    (tree / "policies" / "lru.py").write_text("y = 2\n")
    digest = replay_cache.source_digest(tree)
    (tree / "policies" / "lru.py").write_text("y = 3\n")
    changed = replay_cache.source_digest(tree)
    (tree / "policies" / "new.py").write_text("")
    added = replay_cache.source_digest(tree)
    assert len({digest, changed, added}) == 3
    assert replay_cache.source_digest() == replay_cache.source_digest(ROOT / "kvsched_lab" / "sim")
    key = {"block_bytes": 1, "metric": "blocks", "block_tokens": 512, "per_request": False}
    assert (replay_cache.replay_key("lru", 10, REQUESTS, sources=digest, **key)
            != replay_cache.replay_key("lru", 10, REQUESTS, sources=changed, **key))


def test_a_learner_class_or_instance_is_never_cached(folder, monkeypatch):
    class Mine(LRUPolicy):
        name = "mine"

    assert not replay(REQUESTS, KVCacheSchedulerSim, 150).from_cache
    assert not replay(REQUESTS, KVCacheSchedulerSim, 150).from_cache
    assert not replay(REQUESTS, Mine, 150).from_cache
    assert not replay(REQUESTS, LRUPolicy(150), 150).from_cache
    monkeypatch.setitem(POLICIES, "lru", Mine)  # a learner's class registered under a library name
    assert not replay(REQUESTS, "lru", 150).from_cache and not replay(REQUESTS, "lru", 150).from_cache
    assert not folder.exists() or list(folder.glob("*.json")) == []


def test_ids_that_are_not_plain_ints_or_strings_are_never_keyed(folder):
    class Key:  # its repr holds an address, which another process may reuse for another key
        pass

    a, b = Key(), Key()
    requests = [Request(0, 1024, 1, (a, b)), Request(1, 1024, 1, (a,))]
    assert replay(requests, "lru", 5).prefix_hits == 1 and not replay(requests, "lru", 5).from_cache
    assert not folder.exists() or list(folder.glob("*.json")) == []


def corrupt(path: Path, how: str) -> None:
    stored = json.loads(path.read_text())
    if how == "garbage":
        path.write_bytes(b"\x00\xffnot json")
    elif how == "truncated":
        path.write_text(path.read_text()[:40])
    elif how == "foreign key":
        stored["key"] = "0" * 64
        path.write_text(json.dumps(stored))
    elif how == "older format":
        stored["format"] = "kvsched-replay-cache/0"
        path.write_text(json.dumps(stored))
    elif how == "more hits":  # a shared folder's file claiming a better policy than it was
        stored["result"]["prefix_hits"] += 1
        path.write_text(json.dumps(stored))
    elif how == "rate":
        stored["result"]["prefix_hit_rate"] = 0.99
        path.write_text(json.dumps(stored))
    elif how == "other trace":
        stored["result"]["requests"] -= 1
        path.write_text(json.dumps(stored))
    elif how == "string count":
        stored["result"]["block_hits"] = str(stored["result"]["block_hits"])
        path.write_text(json.dumps(stored))
    elif how == "per request":
        stored["result"]["hits_per_request"][0] += 1
        path.write_text(json.dumps(stored))
    elif how == "unasked per request":
        stored["result"]["hits_per_request"] = [stored["result"]["prefix_hits"]]
        path.write_text(json.dumps(stored))
    elif how == "extra field":
        stored["result"]["from_cache"] = False
        path.write_text(json.dumps(stored))
    else:
        raise AssertionError(how)


CORRUPTIONS = ["garbage", "truncated", "foreign key", "older format", "more hits", "rate", "other trace",
               "string count", "extra field"]


@pytest.mark.parametrize("how, per_request", [(how, False) for how in CORRUPTIONS + ["unasked per request"]]
                         + [(how, True) for how in CORRUPTIONS + ["per request"]])
def test_a_corrupt_or_foreign_file_is_recomputed_not_trusted(folder, how, per_request):
    first = replay(REQUESTS, "lru", 150, per_request=per_request)
    corrupt(the_file(folder), how)
    again = replay(REQUESTS, "lru", 150, per_request=per_request)
    assert not again.from_cache and same(again, first)
    assert replay(REQUESTS, "lru", 150, per_request=per_request).from_cache  # the recomputed file replaced it


def test_a_file_copied_from_another_key_is_not_trusted(folder):
    replay(REQUESTS, "lru", 150)
    lru_file = the_file(folder)
    replay(REQUESTS, "fifo", 150)
    fifo_file = next(p for p in folder.glob("*.json") if p != lru_file)
    fifo_file.write_bytes(lru_file.read_bytes())  # lru's numbers under fifo's name
    fifo = replay(REQUESTS, "fifo", 150)
    assert not fifo.from_cache and fifo.policy == "fifo"


def test_a_folder_variable_that_names_a_file_fails_clearly(tmp_path, monkeypatch):
    path = tmp_path / "file"
    path.write_text("")
    monkeypatch.setenv(replay_cache.ENV, str(path))
    with pytest.raises(ValueError, match="KVSCHED_REPLAY_CACHE.*not a folder"):
        replay(REQUESTS, "lru", 150)
    assert replay(REQUESTS, KVCacheSchedulerSim, 150).prefix_hits >= 0  # a learner's class never reads it


CHILD = """
import json, sys
from pathlib import Path
from kvsched_lab.sim.replay import replay
from kvsched_lab.sim.traces import synthetic_trace
requests = synthetic_trace(300, seed=3)
Path(sys.argv[1]).write_text("ready")
result = replay(requests, "lru", 150)
print(json.dumps({"from_cache": result.from_cache, "hits": result.prefix_hits}))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="the per-key lock uses fcntl (POSIX)")
def test_two_processes_asking_for_one_key_compute_it_once(folder, tmp_path):
    import fcntl

    folder.mkdir(parents=True)
    key = replay_cache.replay_key("lru", 150, REQUESTS, block_bytes=1, metric="blocks", block_tokens=512,
                                  per_request=False, sources=replay_cache.source_digest())
    env = {**os.environ, replay_cache.ENV: str(folder), "PYTHONPATH": str(ROOT)}
    with open(folder / f"{key}.lock", "a+b") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # a first kernel computing this key
        marks = [tmp_path / f"ready{i}" for i in range(2)]
        children = [subprocess.Popen([sys.executable, "-c", CHILD, str(m)], env=env, stdout=subprocess.PIPE, text=True)
                    for m in marks]
        deadline = time.monotonic() + 60
        while not all(m.exists() for m in marks) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # long enough for a 300-request replay that did not wait
        assert all(m.exists() for m in marks) and all(c.poll() is None for c in children), "nobody waited for the lock"
        fcntl.flock(held.fileno(), fcntl.LOCK_UN)
    outs = [json.loads(c.communicate(timeout=60)[0]) for c in children]
    assert sorted(o["from_cache"] for o in outs) == [False, True]  # one computed, the other read it
    assert outs[0]["hits"] == outs[1]["hits"] == replay(REQUESTS, "lru", 150).prefix_hits


# -- tier_replay (kvsched_lab/kv/tiers/replay_cache.py) ---------------------------------------------

TIER_ARGS = {"policy": "lru", "capacity_blocks": 60, "host_blocks": 120, "disk_blocks": 100, "rule": "demote"}


def same_report(a: dict, b: dict) -> bool:
    skip = {"wall_seconds", "from_cache"}
    return {k: v for k, v in a.items() if k not in skip} == {k: v for k, v in b.items() if k not in skip}


@pytest.mark.parametrize("change", [{}, {"rule": "write_through", "lower_policy": "fifo"},
                                    {"rule": "write_through_selective", "min_hits": 3, "disk_blocks": 0},
                                    {"host_blocks": 0, "disk_blocks": 0, "policy": "s3fifo"}],
                         ids=["demote", "write_through", "selective", "device only"])
def test_a_cached_tier_replay_equals_an_uncached_one(folder, monkeypatch, change):
    from kvsched_lab.kv.tiers import tier_replay

    args = {**TIER_ARGS, **change}
    first, again = tier_replay(REQUESTS, **args), tier_replay(REQUESTS, **args)
    monkeypatch.delenv(replay_cache.ENV)
    plain = tier_replay(REQUESTS, **args)
    assert (first["from_cache"], again["from_cache"], plain["from_cache"]) == (False, True, False)
    assert same_report(first, plain) and same_report(again, plain) and again["wall_seconds"] == first["wall_seconds"]
    assert len(list(folder.glob("*.json"))) == 1


@pytest.mark.parametrize("change", [
    {"policy": "fifo"}, {"capacity_blocks": 61}, {"host_blocks": 121}, {"disk_blocks": 0}, {"rule": "write_back"},
    {"lower_policy": "fifo"}, {"min_hits": 3, "rule": "write_through_selective"}, {"block_bytes": 7},
    {"costs": "half"}, {"requests": ONE_ID_CHANGED}, {"requests": REQUESTS[:-1]},
    {"requests": with_request(9, timestamp=10 ** 9)},
], ids=["policy", "capacity", "host", "disk", "rule", "lower policy", "min_hits", "block_bytes", "costs", "one id",
        "one request fewer", "timestamp"])
def test_a_changed_tier_argument_or_request_misses(folder, change):
    from kvsched_lab.kv.tiers import tier_replay
    from kvsched_lab.kv.tiers.breakeven import model_costs

    base = {"requests": REQUESTS, **TIER_ARGS}
    assert not tier_replay(**base)["from_cache"]
    if change.get("costs") == "half":
        full = model_costs()
        change = {"costs": dataclasses.replace(full, recompute_s=full.recompute_s / 2)}
    changed = {**base, **change}
    assert not tier_replay(**changed)["from_cache"]
    assert tier_replay(**changed)["from_cache"] and tier_replay(**base)["from_cache"]


def test_the_tier_key_follows_every_source_file_of_the_tiers(tmp_path, monkeypatch):
    from kvsched_lab.kv.tiers import replay_cache as tier_cache
    from kvsched_lab.kv.tiers.breakeven import model_costs

    monkeypatch.setenv(replay_cache.ENV, str(tmp_path / "replays"))
    tree = tmp_path / "tiers"
    tree.mkdir()
    (tree / "hierarchy.py").write_text("x = 1\n")
    args = {**TIER_ARGS, "lower_policy": "lru", "min_hits": 2, "block_bytes": 1}
    monkeypatch.setattr(tier_cache, "TIERS_FOLDER", tree)
    before = tier_cache.tier_key(REQUESTS, args, model_costs())
    (tree / "hierarchy.py").write_text("x = 2\n")
    assert before is not None and tier_cache.tier_key(REQUESTS, args, model_costs()) != before
    assert tier_cache.TIERS_FOLDER != replay_cache.SIM_FOLDER


def test_a_tier_replay_of_a_learners_policy_rule_or_costs_is_never_cached(folder, monkeypatch):
    from kvsched_lab.kv.tiers import tier_replay
    from kvsched_lab.kv.tiers.breakeven import model_costs
    from kvsched_lab.kv.tiers.costs import TierCosts
    from kvsched_lab.kv.tiers.placement import make_rule

    class Mine(LRUPolicy):
        name = "mine"

    class MyCosts(TierCosts):
        pass

    full = model_costs()
    my_costs = MyCosts(**{f.name: getattr(full, f.name) for f in dataclasses.fields(TierCosts)})
    for change in ({"policy": Mine}, {"policy": lambda cap: LRUPolicy(cap)}, {"lower_policy": Mine, "rule": "write_through"},
                   {"rule": make_rule("demote")}, {"costs": my_costs}, {"min_hits": True}):
        args = {**TIER_ARGS, **change}
        assert not tier_replay(REQUESTS, **args)["from_cache"] and not tier_replay(REQUESTS, **args)["from_cache"]
    monkeypatch.setitem(POLICIES, "lru", Mine)  # a learner's class under a library name
    inclusive = {**TIER_ARGS, "rule": "write_through"}  # Mine cannot give a block back to an exclusive rule
    assert not tier_replay(REQUESTS, **inclusive)["from_cache"] and not tier_replay(REQUESTS, **inclusive)["from_cache"]
    assert not folder.exists() or list(folder.glob("*.json")) == []


def rewrite(path: Path, how: str, corrupt: Callable[[dict], None]) -> None:
    """Spoil the cache file at `path`: ``garbage`` bytes, a ``foreign key``, or ``corrupt(result, how)``."""
    stored = json.loads(path.read_text())
    if how == "garbage":
        path.write_bytes(b"\x00\xffnot json")
        return
    if how == "foreign key":
        stored["key"] = "0" * 64
    else:
        corrupt(stored["result"], how)
    path.write_text(json.dumps(stored))


def corrupt_report(report: dict, how: str) -> None:
    if how == "device hits":  # more hits in the device, the total and rates left as they were
        report["prefix_hits_by_tier"]["device"] += 1
    elif how == "all consistent but saved time":
        report["modeled_ttft_saved_s"]["total"] *= 2
    elif how == "bytes moved":
        report["bytes_moved"]["device_to_host"] += 1
    elif how == "held over capacity":
        report["blocks_held"]["device"] = TIER_ARGS["capacity_blocks"] + 1
    elif how == "other trace":
        report["requests"] -= 1
    elif how == "unknown move":
        report["blocks_moved"]["disk_to_nowhere"] = 1
    elif how == "string count":
        report["drops"]["host"] = str(report["drops"]["host"])
    elif how == "extra field":
        report["from_cache"] = False
    elif how == "other rule":
        report["write_policy"] = "write_through"
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["garbage", "foreign key", "device hits", "all consistent but saved time",
                                 "bytes moved", "held over capacity", "other trace", "unknown move", "string count",
                                 "extra field", "other rule"])
def test_a_corrupt_or_foreign_tier_file_is_recomputed_not_trusted(folder, how):
    from kvsched_lab.kv.tiers import tier_replay

    first = tier_replay(REQUESTS, **TIER_ARGS)
    rewrite(the_file(folder), how, corrupt_report)
    again = tier_replay(REQUESTS, **TIER_ARGS)
    assert not again["from_cache"] and same_report(again, first)
    assert tier_replay(REQUESTS, **TIER_ARGS)["from_cache"]  # the recomputed file replaced it


# -- serve (kvsched_lab/sim/serving/serve_cache.py) -------------------------------------------------

COST = PrefillCost(per_token_s=1e-3)  # 0.512 s per uncached 512-token block
CACHED_WORKLOAD = assign_tenants(synthetic_trace(300, seed=4), [Tenant("chat", INTERACTIVE, share=0.7, weight=2.0),
                                                                Tenant("docs", BATCH, share=0.3)], seed=0)
CACHED_ARGS = {"workers": 2, "admission": "fit", "load": 2.0}


def same_run(a, b) -> bool:
    return {k: v for k, v in vars(a).items() if k != "from_cache"} == {k: v for k, v in vars(b).items() if k != "from_cache"}


@pytest.mark.parametrize("change", [{}, {"discipline": "priority-preempt", "admission": "predict"},
                                    {"protect_queued": True, "admission": "bypass"}, {"policy": "s3fifo"}])
def test_a_cached_serve_equals_an_uncached_one(folder, monkeypatch, change):
    args = {**CACHED_ARGS, **change}
    first, again = serve(CACHED_WORKLOAD, 200, COST, **args), serve(CACHED_WORKLOAD, 200, COST, **args)
    monkeypatch.delenv(replay_cache.ENV)
    plain = serve(CACHED_WORKLOAD, 200, COST, **args)
    assert (first.from_cache, again.from_cache, plain.from_cache) == (False, True, False)
    assert same_run(first, plain) and same_run(again, plain) and plain.met > 0
    assert len(list(folder.glob("*.json"))) == 1


def other_deadline(workload: Workload) -> Workload:
    chat = workload.tenants["chat"]
    slower = Tenant("chat", ServiceClass("interactive", 0, chat.service.ttft_deadline_s * 2), chat.share, chat.weight)
    return Workload(workload.requests, workload.tenant_of, {**workload.tenants, "chat": slower})


def swapped_tenant(workload: Workload) -> Workload:
    names = list(workload.tenant_of)
    names[7] = "docs" if names[7] == "chat" else "chat"
    return Workload(workload.requests, names, workload.tenants)


def one_id_changed(workload: Workload) -> Workload:
    requests = list(workload.requests)
    r = requests[11]
    requests[11] = Request(r.timestamp, r.input_length, r.output_length, r.hash_ids[:-1] + (10 ** 12,))
    return Workload(requests, workload.tenant_of, workload.tenants)


@pytest.mark.parametrize("change", [
    {"capacity_blocks": 201}, {"workers": 3}, {"discipline": "edf"}, {"admission": "all"}, {"protect_queued": True},
    {"load": 2.5}, {"policy": "fifo"}, {"preempt_threshold": 1, "discipline": "priority-preempt"},
    {"block_tokens": 256}, {"cost": PrefillCost(per_token_s=2e-3)}, {"workload": other_deadline(CACHED_WORKLOAD)},
    {"workload": swapped_tenant(CACHED_WORKLOAD)}, {"workload": one_id_changed(CACHED_WORKLOAD)},
], ids=["capacity", "workers", "discipline", "admission", "protect", "load", "policy", "threshold", "block_tokens",
        "cost", "deadline", "tenant", "one id"])
def test_a_changed_serve_argument_or_workload_misses(folder, change):
    base = {"workload": CACHED_WORKLOAD, "capacity_blocks": 200, "cost": COST, **CACHED_ARGS}
    assert not serve(**base).from_cache
    changed = {**base, **change}
    assert not serve(**changed).from_cache
    assert serve(**changed).from_cache and serve(**base).from_cache


def test_a_learners_admission_workload_or_policy_is_never_cached(folder, monkeypatch):
    class MyWorkload(Workload):
        pass

    class Mine(LRUPolicy):
        name = "mine"

    mine = MyWorkload(CACHED_WORKLOAD.requests, CACHED_WORKLOAD.tenant_of, CACHED_WORKLOAD.tenants)
    for args in ({**CACHED_ARGS, "admission": lambda info: info.blocks <= info.free_blocks},
                 {**CACHED_ARGS, "workload": mine}):
        args.setdefault("workload", CACHED_WORKLOAD)
        assert not serve(capacity_blocks=200, cost=COST, **args).from_cache
        assert not serve(capacity_blocks=200, cost=COST, **args).from_cache
    monkeypatch.setitem(POLICIES, "lru", Mine)  # a learner's class under a library name
    assert not serve(CACHED_WORKLOAD, 200, COST, **CACHED_ARGS).from_cache
    assert not serve(CACHED_WORKLOAD, 200, COST, **CACHED_ARGS).from_cache
    assert not folder.exists() or list(folder.glob("*.json")) == []


def corrupt_run(run: dict, how: str) -> None:
    if how == "more met":  # the count, the attainment and the goodput raised together; the tenants left
        run["met"] += 1
        run["slo_attainment"] = run["met"] / run["requests"]
        run["goodput_rps"] = run["met"] / run["span_s"]
    elif how == "tenant share":
        run["met_by_tenant"]["chat"] = 1.0
    elif how == "refused count":
        run["rejected"] += 1
    elif how == "ttft list":
        run["ttft_s"] = run["ttft_s"][:-1]
    elif how == "span":
        run["span_s"] *= 2
        run["goodput_rps"] = run["met"] / run["span_s"]
    elif how == "hits over refs":
        run["prefix_hits"] = run["block_refs"] + 1
    elif how == "string count":
        run["preemptions"] = str(run["preemptions"])
    elif how == "extra field":
        run["from_cache"] = False
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["garbage", "foreign key", "more met", "tenant share", "refused count", "ttft list",
                                 "span", "hits over refs", "string count", "extra field"])
def test_a_corrupt_or_foreign_serve_file_is_recomputed_not_trusted(folder, how):
    first = serve(CACHED_WORKLOAD, 200, COST, **CACHED_ARGS)
    rewrite(the_file(folder), how, corrupt_run)
    again = serve(CACHED_WORKLOAD, 200, COST, **CACHED_ARGS)
    assert not again.from_cache and same_run(again, first)
    assert serve(CACHED_WORKLOAD, 200, COST, **CACHED_ARGS).from_cache  # the recomputed file replaced it
