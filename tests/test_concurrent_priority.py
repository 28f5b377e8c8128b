"""The concurrent engine's waiting queue (kvsched_lab/kv/waiting_queue.py): arrivals over time, vLLM's
fcfs and priority orders, the priority policy's preemption victim, and time to first token in steps."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvsched_lab.kv.concurrent import ConcurrentConfig, ConcurrentEngine
from kvsched_lab.kv.model import TinyDecoder, TinyDecoderConfig
from kvsched_lab.kv.waiting_queue import WaitingQueue

CFG = TinyDecoderConfig(vocab_size=64, dim=32, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=8,
                        ffn_hidden=64, max_positions=256)
MODEL = TinyDecoder(CFG, device="cpu")


def item(index, priority=0, arrival_step=0):
    return SimpleNamespace(index=index, priority=priority, arrival_step=arrival_step)


def engine(num_blocks, policy, max_running=2, max_output_tokens=12):
    return ConcurrentEngine(MODEL, ConcurrentConfig(num_blocks, 4, max_running, max_output_tokens,
                                                    scheduling_policy=policy))


# -- the queue alone ------------------------------------------------------------------------------
def test_fcfs_serves_in_arrival_order_and_puts_a_preempted_request_at_the_front():
    q = WaitingQueue("fcfs")
    a, b, c = item(0, priority=1), item(1, priority=0), item(2, priority=0, arrival_step=3)
    for r in (a, b, c):
        q.add(r, now=0)  # a and b arrive at once, c (arrival step 3) after 3 steps
    q.arrive(2)
    assert list(q) == [a, b] and q.num_not_arrived == 1
    assert q.pop() is a
    q.prepend(a)  # preempted: back at the front, priorities ignored
    q.arrive(3)
    assert list(q) == [a, b, c] and q.num_not_arrived == 0 and len(q) == 3
    assert q.victim([a, b, c]) is c  # the last admitted


def test_priority_serves_smaller_priority_then_earlier_arrival_and_a_preempted_one_takes_its_own_place():
    q = WaitingQueue("priority")
    batch_early, chat_late, chat_early = item(0, 1, 0), item(1, 0, 2), item(2, 0, 1)
    for r in (batch_early, chat_late, chat_early):
        q.add(r, now=10)
    assert [q.pop() for _ in range(3)] == [chat_early, chat_late, batch_early]
    q.add(chat_late, now=10)
    q.prepend(batch_early)  # no front in a priority queue: it goes behind the more urgent one
    assert q.peek() is chat_late
    q.prepend(chat_early)
    assert list(q) == [chat_early, chat_late, batch_early]
    assert q.victim([chat_early, batch_early, chat_late]) is batch_early  # least urgent, not the last


def test_an_empty_queue_says_so_and_a_bad_policy_is_refused():
    q = WaitingQueue("priority")
    assert not q and len(q) == 0
    with pytest.raises(IndexError):
        q.peek()
    with pytest.raises(ValueError, match="scheduling_policy"):
        WaitingQueue("edf")
    with pytest.raises(ValueError, match="scheduling_policy"):
        ConcurrentConfig(8, scheduling_policy="lifo")


# -- the engine -------------------------------------------------------------------------------------
def test_priority_admits_a_later_urgent_request_before_earlier_batch_ones_and_fcfs_does_not():
    # One request runs at a time. Three batch prompts wait from step 0; an urgent one arrives at
    # step 1. FCFS serves it last; priority serves it as soon as the running one finishes.
    ttft = {}
    for policy in ("fcfs", "priority"):
        eng = engine(60, policy, max_running=1, max_output_tokens=3)
        for k in range(3):
            eng.submit([10 + k] * 6, 3, priority=1)
        urgent = eng.submit([5] * 6, 3, priority=0, arrival_step=1)
        report = eng.run()
        ttft[policy] = report.ttft_steps
        assert urgent.first_token_step - urgent.arrival_step == report.ttft_steps[3]
        assert eng.check_outputs()["match"]
    # A request samples its 3 tokens in its first 3 steps and finishes in the third, whose admission
    # phase admits the next one: first tokens at steps 1, 3, 5 and 7, the urgent one's counted from step 1.
    assert ttft["fcfs"] == [1, 3, 5, 7 - 1]
    assert ttft["priority"] == [1, 5, 7, 3 - 1]


def test_the_priority_policy_preempts_the_least_urgent_request_not_the_last_admitted():
    # Two 7-token prompts in 5 blocks: at step 3 both need a third block and one is free. The
    # batch request was admitted first, the urgent one (arriving at step 1) second.
    victims = {}
    for policy in ("fcfs", "priority"):
        eng = engine(5, policy)
        eng.submit([2] * 7, 12, priority=1)
        eng.submit([1] * 7, 12, priority=0, arrival_step=1)
        report = eng.run()
        victims[policy] = report.preempted_requests
        assert report.requests_finished == 2 and eng.check_outputs()["match"]
    assert victims == {"fcfs": [1], "priority": [0]}


def test_a_request_arriving_after_an_idle_gap_counts_its_ttft_from_its_arrival():
    eng = engine(30, "fcfs")
    eng.submit([3] * 5, 2)
    late = eng.submit([4] * 5, 2, arrival_step=10)
    report = eng.run()
    assert late.first_token_step == 11 and report.ttft_steps == [1, 1] and report.steps == 12


@pytest.mark.parametrize("kwargs, error", [
    ({"priority": 1.5}, TypeError), ({"priority": True}, TypeError), ({"arrival_step": "3"}, TypeError),
    ({"arrival_step": 1}, ValueError),  # the engine has already run 2 steps
])
def test_a_rejected_submit_leaves_the_engine_as_it_was(kwargs, error):
    eng = engine(30, "priority")
    eng.submit([1, 2, 3], 6)
    eng.step(), eng.step()
    def state():
        return ([(r.index, list(r.generated), list(r.block_table), r.num_computed_tokens) for r in eng.requests],
                [r.index for r in eng.waiting], eng.waiting.num_not_arrived, [r.index for r in eng.running])

    before = state()
    with pytest.raises(error):
        eng.submit([4, 5], 2, **kwargs)
    assert state() == before
    assert eng.run().requests_finished == 1


# -- notebook 10's classes on real KV blocks (kvsched_lab/kv/serving_run.py) ----------------------------
def classes_workload():
    """Six batch prompts at t=0, then an interactive one every 200 ms: more work than one request at a time can do."""
    from kvsched_lab.sim.serving.tenants import BATCH, INTERACTIVE, Tenant, Workload
    from kvsched_lab.sim.traces import Request

    reqs = [Request(0, 512 * 6, 3, tuple(range(100 * k, 100 * k + 6))) for k in range(6)]
    reqs += [Request(200 * (k + 1), 512 * 3, 3, (7000 + k, 7100 + k, 7200 + k)) for k in range(6)]
    tenants = {"chat": Tenant("chat", INTERACTIVE, 0.5), "docs": Tenant("docs", BATCH, 0.5)}
    return Workload(reqs, ["docs"] * 6 + ["chat"] * 6, tenants)


def test_real_kv_priority_meets_more_interactive_deadlines_and_agrees_with_the_block_id_server():
    from kvsched_lab.kv.serving_run import serve_on_real_kv
    from kvsched_lab.sim.serving.server import PrefillCost, serve

    work = classes_workload()
    got = {}
    for policy in ("fcfs", "priority"):
        config = ConcurrentConfig(200, 4, max_running=1, max_output_tokens=3, max_num_batched_tokens=8,
                                  scheduling_policy=policy)
        res = serve_on_real_kv(work, config, step_s=0.2, model=MODEL)  # deadlines: 10 and 150 steps
        assert res.outputs_match and res.report.requests_finished == 12
        chat, batch = res.by_class["interactive"], res.by_class["batch"]
        assert (chat.requests, batch.requests, chat.deadline_steps, batch.deadline_steps) == (6, 6, 10.0, 150.0)
        assert chat.met == sum(t <= 10 for t in chat.ttft_steps) and len(chat.ttft_steps) == 6
        got[policy] = (chat.slo_attainment, chat.mean_ttft_steps, batch.mean_ttft_steps)
    assert got["priority"][0] > got["fcfs"][0] and got["priority"][1] < got["fcfs"][1]  # interactive gains
    assert got["priority"][2] > got["fcfs"][2]  # and batch waits longer
    blocks = {d: serve(work, 200, PrefillCost(2e-4), workers=1, discipline=d).met_by_tenant["chat"]
              for d in ("fcfs", "priority")}
    assert blocks["priority"] > blocks["fcfs"]  # the block-id server moves the same way


@pytest.mark.parametrize("kwargs, message", [({"step_s": 0}, "step_s"), ({"step_s": 0.1, "load": -1}, "load"),
                                             ({"step_s": True}, "step_s")])
def test_real_kv_run_refuses_bad_arguments(kwargs, message):
    from kvsched_lab.kv.serving_run import serve_on_real_kv

    with pytest.raises(ValueError, match=message):
        serve_on_real_kv(classes_workload(), ConcurrentConfig(200, 4), model=MODEL, **kwargs)


def test_real_kv_run_names_a_request_the_pool_cannot_hold():
    from kvsched_lab.kv.serving_run import serve_on_real_kv

    with pytest.raises(ValueError, match="request 0: .* needs 7 blocks; the pool has 6"):
        serve_on_real_kv(classes_workload(), ConcurrentConfig(6, 4), step_s=0.1, model=MODEL)
