"""What the job's own files say where no message does (lab/analysis/diagnosis/sources.py), and a variable the
processes read with other values on other nodes (nodes.read_env_findings): on real records of tests/failures/
scripts run on a 2-node lab with the jobs' hooks, and the same records changed where each finding must not fire."""

from dataclasses import replace

from lab.analysis.diagnosis import Evidence, diagnose
from tests.unit.test_diagnosis_replicas import causes, sample, with_calls


def with_source(evidence: Evidence, old: str, new: str) -> Evidence:
    """The record with `old` replaced by `new` in the job's files the hooks kept (which must hold `old`)."""
    assert any(old in text for trace in evidence.traces for text in trace.sources.values()), old
    return replace(evidence, traces=[replace(trace, sources={path: text.replace(old, new) for path, text in
                                                             trace.sources.items()}) for trace in evidence.traces])


def test_a_local_rank_read_as_a_string_and_compared_with_0_is_why_no_rank_built_the_file():
    evidence = sample("local_rank_compared_as_string")
    found = diagnose(evidence)[0]
    assert found.cause == "env-string-compared"
    assert "local_rank_compared_as_string.py:17" in found.title and "`LOCAL_RANK == 0` is never true" in found.title
    assert "int(os.environ.get(" in found.fix
    # converted where it is read, the comparison is of numbers: the file is missing for some other reason
    converted = with_source(evidence, 'os.environ.get("LOCAL_RANK", 0)', 'int(os.environ.get("LOCAL_RANK", 0))')
    assert causes(converted)[0] == "file-missing-everywhere"
    # a name assigned again (rank = int(rank)) is not known to be a string where it is compared
    assert "env-string-compared" not in causes(with_source(evidence, "\n\ndef is_first_on_node",
                                                           "\nLOCAL_RANK = int(LOCAL_RANK)\n\ndef is_first_on_node"))
    # without the files (a record from before the hooks kept them) the finding cannot be made
    assert causes(replace(evidence, traces=[replace(trace, sources={}) for trace in evidence.traces]))[0] == \
        "file-missing-everywhere"


def test_a_tensor_read_between_its_async_all_reduce_and_the_wait_is_the_rank_own_values():
    evidence = sample("async_reduce_read_before_wait")
    found = diagnose(evidence)[0]
    assert found.cause == "async-result-read-early"
    assert "all_reduce at async_reduce_read_before_wait.py:17" in found.title and "squares is read at line 18" in \
        found.title and "work.wait() at line 20" in found.title
    assert "move line 18 below the wait" in found.fix
    # read after the wait: nothing early
    moved = with_source(evidence, "global_norm = squares.sum().sqrt().item()  # the mistake: read before work.wait()\n"
                        "next_batch = torch.randn(64, 1024)  # overlapped with the reduction\nwork.wait()\n",
                        "next_batch = torch.randn(64, 1024)\nwork.wait()\nglobal_norm = squares.sum().sqrt().item()\n")
    assert "async-result-read-early" not in causes(moved)
    # only what it is (shape, dtype) read before the wait: not its values
    assert "async-result-read-early" not in causes(with_source(evidence, "squares.sum().sqrt().item()",
                                                               "float(squares.numel())"))
    # the work handed to a list (waited for elsewhere): not followed
    assert "async-result-read-early" not in causes(with_source(evidence, "work.wait()", "pending.append(work)"))
    # no async call recorded by the hooks at that line: the code alone does not make it the cause
    assert "async-result-read-early" not in causes(with_calls(evidence, posted=()))


def test_a_variable_one_node_exports_is_why_its_rank_ran_more_collectives():
    evidence = sample("env_flag_on_one_node")
    found = diagnose(evidence)[0]
    assert found.cause == "env-differs-between-nodes" and found.node == 1
    assert "GRAD_ACCUM_STEPS differs between the nodes (node0 unset; node1 '4'" in found.title
    assert "remove it from node1's environment" in found.fix and "--env GRAD_ACCUM_STEPS=" in found.fix

    def reading(values: dict[int, str | None]) -> Evidence:
        return replace(evidence, traces=[replace(trace, calls=replace(trace.calls, env_read={
            **trace.calls.env_read, "GRAD_ACCUM_STEPS": values[trace.node]})) for trace in evidence.traces])

    assert causes(reading({0: "4", 1: "4"}))[0] == "uneven-collectives"  # the same everywhere: not why
    assert "env-differs-between-nodes" not in causes(reading({0: "/data/node0", 1: "/data/node1"}))  # per node
    renamed = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, env_read={
        "NODE_RANK" if name == "GRAD_ACCUM_STEPS" else name: value for name, value in trace.calls.env_read.items()}))
        for trace in evidence.traces])
    assert "env-differs-between-nodes" not in causes(renamed)  # a node's own number by design


def test_a_share_sized_by_the_world_size_without_the_rank_is_why_half_the_files_were_never_scored():
    evidence = sample("shard_files_without_rank")
    found = diagnose(evidence)[0]
    assert found.cause == "share-ignores-rank"
    assert "shard_files_without_rank.py:15" in found.title and "`files[:per_worker]`" in found.title
    assert "data[rank * per_rank:(rank + 1) * per_rank]" in found.fix and "DistributedSampler" in found.fix
    offset = "files[dist.get_rank() * per_worker:(dist.get_rank() + 1) * per_worker]"
    assert "share-ignores-rank" not in causes(with_source(evidence, "files[:per_worker]", offset))
    assert "share-ignores-rank" not in causes(with_source(evidence, "files[:per_worker]", "files[dist.get_rank()::world]"))
    # trimmed to a multiple of the world size (as DistributedSampler does): not a share
    assert "share-ignores-rank" not in causes(with_source(evidence, "files[:per_worker]", "files[:per_worker * world]"))
    # a stride of the world size from the same start on every rank is the same share too
    assert causes(with_source(evidence, "files[:per_worker]", "files[::world]"))[0] == "share-ignores-rank"


def test_a_loss_all_reduced_with_sum_and_read_as_a_mean_is_world_size_times_too_large():
    evidence = sample("metric_summed_not_averaged")
    found = diagnose(evidence)[0]
    assert found.cause == "sum-not-mean" and "2 times more, with 2 ranks" in found.title
    assert "metric_summed_not_averaged.py:20" in found.title and "ReduceOp.AVG" in found.fix
    averaged = with_source(evidence, "dist.all_reduce(val_loss)", "dist.all_reduce(val_loss, op=dist.ReduceOp.AVG)")
    assert "sum-not-mean" not in causes(averaged)
    # a count is meant to be summed
    assert "sum-not-mean" not in causes(with_source(evidence, "dist.all_reduce(val_loss)",
                                                    "dist.all_reduce(val_loss_total)"))


def test_a_dataloader_without_a_sampler_has_every_rank_go_through_all_the_data():
    evidence = sample("dataloader_without_sampler")
    found = diagnose(evidence)[0]
    assert found.cause == "data-not-sharded" and "dataloader_without_sampler.py:16: it has no sampler" in found.title
    assert "DistributedSampler(ds)" in found.fix
    sharded = with_source(evidence, "shuffle=True)  # the mistake", "sampler=DistributedSampler(dataset))  #")
    assert "data-not-sharded" not in causes(sharded)
    by_hand = with_source(evidence, "dataset = TensorDataset(torch.randn(512, 8), torch.randn(512, 1))",
                          "dataset = TensorDataset(torch.randn(512, 8), torch.randn(512, 1))[dist.get_rank()::2]")
    assert "data-not-sharded" not in causes(by_hand)


def test_a_distributed_sampler_never_told_the_epoch_repeats_the_first_order():
    evidence = sample("sampler_without_set_epoch")
    found = diagnose(evidence)[0]
    assert found.cause == "sampler-epoch-not-set" and "sampler_without_set_epoch.py:13" in found.title
    assert "sampler.set_epoch(epoch)" in found.fix
    told = with_source(evidence, "for epoch in range(3):  # the mistake: no sampler.set_epoch(epoch) here\n",
                       "for epoch in range(3):\n    sampler.set_epoch(epoch)\n")
    assert "sampler-epoch-not-set" not in causes(told)
