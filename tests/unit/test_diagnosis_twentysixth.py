"""The twenty-sixth held-out batch's mended misses (bench/diagnosis/TWENTYSIXTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from dataclasses import replace

from lab.analysis.calls import DistCall
from tests.unit.test_diagnosis_replicas import causes, sample

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twentysixth_launch_with_config_server", "ranks-wait-for-each-other",
     ["rank 0 waited in init_process_group (launch_with_config_server.py:57 in main) for rank 1 to join",
      "rank 1 never called it", "on node0"], ["start what the others need", "before init_process_group"]),
    ("twentysixth_feature_stats_job", "collectives-in-unordered-loop",
     ["the all_reduce at feature_stats_job.py:60 runs in a loop over selected = {s['name'] for s in SCHEMA} - "
      "set(args.drop)"], ["sorted(selected)"]),
    ("twentysixth_moe_layer_distill", "gathered-without-gradient",
     ["backward at moe_layer_distill.py:73 got a tensor with no autograd history",
      "the all_to_all_single at moe_layer_distill.py:17"], ["torch.autograd.Function", "torch.distributed.nn"]),
    ("twentysixth_moe_pretrain_expert_parallel", "shape-mismatch",
     ["input_split_sizes has 8 entries for a group of 4 ranks"], ["give all_to_all_single 4 split sizes"]),
    ("twentysixth_moe_router_calibration", "split-drops-remainder",
     ["`per_rank = max(1, E // ws)` (line 27)", "`owner = eid // per_rank`, line 45"],
     ["require that the count divides by the world size"]),
    ("twentysixth_eval_multitask_report", "collectives-in-unordered-loop",
     ["the all_reduce at eval_multitask_report.py:78 runs in a loop over results.items() (line 77)",
      "a dict filled in an order that depends on the rank (`for task in task_order(rank)`, line 73)"],
     ["sorted(results.items())"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("twentysixth_feature_stats_job", 'selected = {s["name"] for s in SCHEMA} - set(args.drop)',
     'selected = [s["name"] for s in SCHEMA if s["name"] not in args.drop]', "collectives-in-unordered-loop"),
    ("twentysixth_moe_router_calibration", "per_rank = max(1, E // ws)", "per_rank = max(1, E - ws)",
     "split-drops-remainder"),  # an index out of range, but not through a division by the world
    ("twentysixth_eval_multitask_report", "for task in task_order(rank):", "for task in TASKS:",
     "collectives-in-unordered-loop"),  # filled in one order everywhere: the sizes differ for another reason
]


def test_a_rank_that_had_joined_before_it_failed_is_not_a_start_up_order():
    """The same record where rank 1 had made its process group: it failed after joining, not waiting before it."""
    evidence = sample("twentysixth_launch_with_config_server")
    joined = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, recent=(
        DistCall("init_process_group", "launch_with_config_server.py:57 in main", entered_at=1.0, ended_at=2.0),
        *trace.calls.recent))) if trace.rank == 1 and trace.calls else trace for trace in evidence.traces])
    assert "ranks-wait-for-each-other" not in causes(joined)


def test_a_collective_that_is_autograd_aware_is_not_where_the_history_ended():
    evidence = sample("twentysixth_moe_layer_distill")
    aware = replace(evidence, traces=[replace(trace, sources={
        path: "import torch.distributed.nn\n" + text for path, text in trace.sources.items()})
        for trace in evidence.traces])
    assert "gathered-without-gradient" not in causes(aware)
