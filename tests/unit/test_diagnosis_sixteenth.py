"""The sixteenth held-out batch's misses (bench/diagnosis/SIXTEENTH_BATCH_A.md, _B.md): each scored run's own record,
with the cause and fix the lab must now give first, and the same record changed where the finding must not fire."""

from dataclasses import replace

import pytest

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_fourteenth import with_log
from tests.unit.test_diagnosis_held_out import assert_told
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("sixteenth_token_memmap_windows", "share-rounded-up",
     ["`per_rank = math.ceil(meta['n_tokens'] / world_size)` (token_memmap_windows.py:38)", "the last rank, 3"],
     ["end = min(start + per_rank, total)", "np.array_split"]),
    ("sixteenth_val_stream_resampled", "loop-over-endless-stream",
     ["loop at val_stream_resampled.py:67", "ShardStream.__iter__ never ends", "line 49"],
     ["itertools.islice(loader, steps)"]),
    ("sixteenth_val_stream_resampled_rerun", "loop-over-endless-stream",  # its worker seen in __iter__: producing
     ["ShardStream.__iter__ never ends"], ["itertools.islice(loader, steps)"]),
    ("sixteenth_metrics_unflushed_readback", "read-before-flushed",
     ["read rank0.jsonl at 0 bytes", "`self.fh = open(METRICS / f'rank{rank}.jsonl', 'a')`"],
     ["self.fh.flush()", "buffering=1"]),
    ("sixteenth_loader_timeout_no_workers", "loader-timeout-without-workers",
     ["num_workers=workers at loader_timeout_no_workers.py:45"], ["timeout=120 if num_workers > 0 else 0"]),
    ("sixteenth_resume_consumed_samples", "global-count-skips-own-indices",
     ["`state['consumed_samples'] += len(idx) * world`", "`indices[self.start_index:]`, line 46"],
     ["resume_from(state['consumed_samples'] // world_size)"]),
]


def test_an_exact_share_a_flushed_file_and_a_finite_stream_are_not_these_causes():
    exact = with_source(sample("sixteenth_token_memmap_windows"), "math.ceil(meta[\"n_tokens\"] / world_size)",
                        "meta[\"n_tokens\"] // world_size")
    assert "share-rounded-up" not in causes(exact)
    flushed = with_source(sample("sixteenth_metrics_unflushed_readback"), "    dist.barrier()  # every rank",
                          "    log.fh.flush()\n    dist.barrier()  # every rank")
    assert "read-before-flushed" not in causes(flushed)
    finite = with_source(sample("sixteenth_val_stream_resampled"), "shards = iter(lambda: rng.choice(self.shards), None)",
                         "shards = [rng.choice(self.shards) for _ in self.shards]")
    assert "loop-over-endless-stream" not in causes(finite)


def test_a_per_rank_count_given_to_the_sampler_is_not_a_global_one():
    per_rank = with_source(sample("sixteenth_resume_consumed_samples"), "len(idx) * world", "len(idx)")
    assert "global-count-skips-own-indices" not in causes(per_rank)


def test_an_argument_error_that_names_a_timeout_is_the_ranks_own_crash_not_an_echo():
    """"requires timeout == 0" is an argument refused: every rank's crash, not a peer's failure echoed back."""
    evidence = with_log(sample("sixteenth_loader_timeout_no_workers"), "_SingleProcessDataLoaderIter requires",
                        "the loader requires")  # no rule of its own: the crash as every rank raised it
    assert diagnose(evidence)[0].cause == "rank-crashed"


# Part A, scored on fd50fe0 (SIXTEENTH_BATCH_A.md): a lab crash (a rule raised), a pipeline's polling loop taken for
# a branch, new_subgroups' per-node groups taken for a mismatch, and two crashes whose fix led elsewhere.
TOLD_A = [
    ("sixteenth_pipeline_prefetch_poll", "request-polled-not-waited",
     ["rank 1 polls `req.is_completed()` in a loop (pipeline_prefetch_poll.py:41)", "marked completed inside wait()"],
     ["call req.wait() where the loop polls"]),
    ("sixteenth_node_rebalance_objects", "collective-list-length",
     ["gave all_gather_object a list of 4 on its group of 2 ranks", "leaves the other 2 None"],
     ["[None] * dist.get_world_size(group)"]),
    ("sixteenth_mesh_dp_tp_loader", "sampler-rank-outside-replicas",
     ["num_replicas=mesh['dp'].size() (2 here) and rank=rank (3 on this rank)", "mesh_dp_tp_loader.py:65"],
     ["rank=mesh['dp'].get_local_rank()", "dist.get_rank(group=dp_group)"]),
    ("sixteenth_fsdp_token_normalized", "reduce-op-not-in-backend",
     ["Gloo has no ReduceOp.PREMUL_SUM", "set_gradient_divide_factor", "fsdp_token_normalized.py:64"],
     ["set_force_sum_reduction_for_comms(True)"]),
]


@pytest.mark.parametrize("name, cause, title, fix", TOLD_A, ids=[told[0] for told in TOLD_A])
def test_part_a_record_is_told_its_cause_and_fix(name, cause, title, fix):
    assert_told(name, cause, title, fix)


def test_a_rank_that_runs_other_code_never_left_the_other_ranks_loop():
    """Rank 0 in stage0's recv and rank 1 in stage1's polling loop: the loop is not a branch the ranks took apart."""
    evidence = with_source(sample("sixteenth_pipeline_prefetch_poll"), "req.is_completed()", "ready(req)")
    assert not {"collective-under-own-condition", "request-polled-not-waited"} & set(causes(evidence))


def with_object_list(evidence, length: int):
    """The record with every rank's all_gather_object given a list of `length`."""
    def changed(call):
        args = tuple((name, f"list of {length}, all None" if name == "object_list" else value)
                     for name, value in call.args)
        return replace(call, args=args) if call.op == "all_gather_object" else call
    return replace(evidence, traces=[replace(trace, calls=replace(trace.calls, recent=tuple(
        changed(call) for call in trace.calls.recent))) for trace in evidence.traces])


def test_a_list_as_long_as_the_subgroup_and_one_partition_of_subgroups_are_not_these_causes():
    evidence = sample("sixteenth_node_rebalance_objects")
    assert "group-mismatch" not in causes(evidence)  # new_subgroups gives each node's ranks their own group
    assert "collective-list-length" not in causes(with_object_list(evidence, 2))
    overlapping = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, groups=tuple(
        replace(call, group=(1, 2)) for call in trace.calls.groups))) if trace.rank == 1 else trace
        for trace in evidence.traces])
    assert causes(overlapping)[0] == "group-mismatch"  # rank 1's subgroup is not the one its members got


def test_a_sampler_of_the_whole_world_and_an_average_on_gloo_are_told_without_a_group_or_fsdp():
    world = with_source(sample("sixteenth_mesh_dp_tp_loader"), "num_replicas=mesh[\"dp\"].size()",
                        "num_replicas=dist.get_world_size() // 2")
    top = diagnose(world)[0]
    assert top.cause == "sampler-rank-outside-replicas" and "whole world" not in top.title
    assert "count the same ranks" in top.fix
    plain = with_source(sample("sixteenth_fsdp_token_normalized"), "model.set_gradient_divide_factor(float(global_tokens))",
                        "pass")
    top = diagnose(plain)[0]
    assert top.cause == "reduce-op-not-in-backend" and "FSDP2" not in top.title


def test_a_rule_that_raises_costs_its_own_findings_and_is_logged(monkeypatch, tmp_path):
    from lab.analysis.diagnosis import order

    def broken(*_):
        raise AttributeError("'Name' object has no attribute 'func'")

    monkeypatch.setattr(order, "order_findings", broken)
    monkeypatch.setenv("LAB_HOME", str(tmp_path))
    monkeypatch.delenv("LAB_DIAGNOSIS_STRICT", raising=False)
    assert causes(sample("sixteenth_node_rebalance_objects"))[0] == "collective-list-length"
    assert "broken failed:" in (log := (tmp_path / "logs" / "diagnosis.log").read_text()) and "has no attribute" in log
    monkeypatch.setenv("LAB_DIAGNOSIS_STRICT", "1")
    with pytest.raises(AttributeError):
        diagnose(sample("sixteenth_node_rebalance_objects"))
