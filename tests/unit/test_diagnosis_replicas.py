"""Ranks that ran the same code and computed different things, which the script's own check caught
(lab/analysis/diagnosis/replicas.py): on real records of tests/failures/ scripts run on a 2-node lab with the jobs'
hooks, and the same records changed where each finding must not fire."""

from dataclasses import replace
from pathlib import Path

from lab.analysis.calls import CallLog, DistCall
from lab.analysis.diagnosis import Evidence, diagnose
from tools.docs_reference import load_evidence

SAMPLES = Path(__file__).parent / "diagnosis_samples"


def sample(name: str) -> Evidence:
    return load_evidence(SAMPLES / name)


def with_calls(evidence: Evidence, **changes) -> Evidence:
    """The record with every rank's CallLog changed as `changes` says."""
    return replace(evidence, traces=[replace(trace, calls=replace(trace.calls, **changes)) if trace.calls else trace
                                     for trace in evidence.traces])


def causes(evidence: Evidence) -> list[str]:
    return [finding.cause for finding in diagnose(evidence)]


def test_a_metric_all_reduced_in_a_stacked_tensor_is_a_result_thrown_away():
    evidence = sample("metrics_reduced_in_a_temporary")
    found = diagnose(evidence)[0]
    assert found.cause == "collective-result-discarded"
    assert "all_reduce at metrics_reduced_in_a_temporary.py:19" in found.title and "ranks 0, 1" in found.title
    assert "variable" in found.fix and "torch.stack" in found.fix
    # without the hooks' record of it the crash stays a crash
    assert "collective-result-discarded" not in causes(with_calls(evidence, discarded=()))


def test_every_micro_batch_inside_no_sync_is_gradients_never_synchronised():
    evidence = sample("accumulation_all_in_no_sync")
    found = diagnose(evidence)[0]
    assert found.cause == "gradients-not-synchronised" and "no_sync()" in found.title
    assert "last micro-batch" in found.fix
    # one forward outside no_sync per step (the usual accumulation) is fine
    assert "gradients-not-synchronised" not in causes(with_calls(evidence, ddp_forwards={"synced": 3, "no_sync": 9}))


def test_shards_assigned_by_the_hash_of_a_name_is_the_per_process_salt():
    evidence = sample("shards_by_string_hash")
    found = diagnose(evidence)[0]
    assert found.cause == "hash-differs-per-process" and "shards_by_string_hash.py:15" in found.title
    assert "PYTHONHASHSEED" in found.fix and "zlib.crc32" in found.fix
    # the same salt everywhere (PYTHONHASHSEED set): hash() is not why
    assert "hash-differs-per-process" not in causes(with_calls(evidence, hash_probe=7))


def test_hand_averaged_gradients_from_weights_seeded_per_rank_start_apart():
    evidence = sample("hand_averaged_gradients_seeded_per_rank")
    found = diagnose(evidence)[0]
    assert found.cause == "initial-weights-differ" and "rank 0 1234, rank 1 1235" in found.title
    assert "dist.broadcast(p.data, src=0)" in found.fix
    # one seed everywhere, or weights broadcast, or DDP: not why
    assert "initial-weights-differ" not in causes(with_calls(evidence, torch_seed=1234))
    broadcast = with_calls(evidence, counts={"broadcast": 6, "all_reduce": 30})
    assert "initial-weights-differ" not in causes(broadcast)
    assert "initial-weights-differ" not in causes(with_calls(evidence, ddp_forwards={"synced": 5}))


def test_none_fires_where_the_error_came_from_torch_not_the_scripts_own_check():
    """Dtypes that differ, rejected inside all_reduce, with every replica clue the hooks can record set on its
    ranks (a result thrown away, a hash() with salts that differ, DDP forwards all in no_sync)."""
    plain = sample("dtype_differs_metric")
    assert any(trace.calls for trace in plain.traces)
    thrown = DistCall("all_reduce", "x.py:2 in <module>", discarded="tensor")
    evidence = replace(plain, traces=[
        replace(trace, calls=replace(trace.calls, discarded=(thrown,), hashed=("x.py:1 in <module>",),
                                     hash_probe=trace.rank, ddp_forwards={"no_sync": 4})) if trace.calls else trace
        for trace in plain.traces])
    assert not {"collective-result-discarded", "gradients-not-synchronised", "hash-differs-per-process",
                "initial-weights-differ"} & set(causes(evidence))


def test_a_call_log_without_the_new_fields_reads_as_before():
    assert CallLog().discarded == () and CallLog().hash_probe is None and CallLog().ddp_forwards == {}


def test_batchnorm_buffers_kept_per_rank_by_broadcast_buffers_false():
    evidence = sample("batchnorm_buffers_not_broadcast")
    found = diagnose(evidence)[0]
    assert found.cause == "buffers-not-broadcast" and "broadcast_buffers=False" in found.title
    assert "SyncBatchNorm" in found.fix
    assert "buffers-not-broadcast" not in causes(with_calls(evidence, ddp_forwards={"synced": 10}))


def test_an_all_gather_into_one_tensor_repeated_is_an_aliased_output_list():
    evidence = sample("all_gather_into_one_tensor")
    found = diagnose(evidence)[0]
    assert found.cause == "output-list-aliased" and "2 slots holding 1 tensor" in found.title
    assert "list comprehension" in found.fix


def test_a_broadcast_into_a_model_on_the_meta_device_is_named_from_the_call():
    found = diagnose(sample("meta_model_broadcast"))[0]
    assert found.cause == "meta-tensors" and "broadcast at meta_model_broadcast.py:17" in found.title
    assert "to_empty" in found.fix


def test_a_relative_path_opened_after_a_chdir_is_named_with_both_folders():
    evidence = sample("chdir_then_relative_path")
    found = diagnose(evidence)[0]
    assert found.cause == "working-directory-changed" and "data/val.pt" in found.title
    assert found.title.count("/work") == 2 and "get_original_cwd" in found.fix
    # a rank that stayed where it started: the file is simply missing
    assert "working-directory-changed" not in causes(with_calls(evidence, cwd=None))
    stayed = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, cwd=trace.calls.started_in))
                                       if trace.calls else trace for trace in evidence.traces])
    assert "working-directory-changed" not in causes(stayed)


def test_a_scheduler_stepped_on_rank_0_only_is_learning_rates_that_differ():
    evidence = sample("scheduler_stepped_on_rank0")
    found = diagnose(evidence)[0]
    assert found.cause == "learning-rate-differs" and "rank 0 0.0125, rank 1 0.1" in found.title
    assert "every rank" in found.fix
    assert "learning-rate-differs" not in causes(with_calls(evidence, learning_rates=(0.1,)))  # the same rates
    uneven = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, optimizer_steps=trace.rank + 3))
                                       if trace.calls else trace for trace in evidence.traces])
    assert "learning-rate-differs" not in causes(uneven)  # other step counts: not this (uneven steps are)
