"""The seventeenth held-out batch's misses (bench/diagnosis/SEVENTEENTH_BATCH_A.md, _B.md): each scored run's own record,
with the cause and fix the lab must now give first, and the same record changed where the finding must not fire."""

from dataclasses import replace


from lab.analysis.diagnosis import diagnose

from tests.unit.test_diagnosis_fourteenth import with_log
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("seventeenth_multitask_heads_finetune", "layers-in-unordered-loop",
     ["loop over tasks (multitask_heads_finetune.py:51)", "MultiTaskModel(tasks) at multitask_heads_finetune.py:82",
      "tasks = {ex['task'] for ex in train}", "a set's order"], ["sorted(tasks)"]),
    ("seventeenth_pipeline_lm_two_stage", "grad-of-non-leaf",
     ["read act.grad at pipeline_lm_two_stage.py:83", "`act = recv_buf.requires_grad_().view(", "not a leaf"],
     [".detach().requires_grad_()", "act.retain_grad()"]),
    ("seventeenth_train_price_regressor", "learning-rate-scaled-by-world",
     ["loss became inf", "`lr = cfg['base_lr'] * global_batch / cfg['reference_batch']` (line 68)",
      "`global_batch = cfg['batch_per_rank'] * world` (line 67)", "with 4 ranks", "no warm-up"],
     ["sqrt(world size)", "LinearLR", "clip_grad_norm_"]),
    ("seventeenth_finetune_time_budget", "collective-under-own-condition",
     ["rank 1 waits in all_reduce at finetune_time_budget.py:85",
      "rank 0 in DDP's gradient all_reduce (in backward) at line 75", "`if deadline.expired(): break` (line 80)"],
     ["decide `deadline.expired()` together", "op=MAX", "broadcast the decision"]),
    ("seventeenth_regression_sweep_trial", "created-by-every-rank",
     ["ranks 1, 2, 3 crashed with FileExistsError at `os.makedirs(path)`", "rank 0 had made first",
      "every node shares"], ["then dist.barrier()", "exist_ok=True"]),
    ("seventeenth_train_with_metrics_sink", "service-at-localhost",
     ["the ranks of node1 could not connect", "f'http://localhost:{SINK_PORT}/log'", "ranks of node0 reached it"],
     ["MASTER_ADDR", "gather the values to rank 0"]),
]


def test_layers_made_in_a_comprehension_over_the_set_are_told_too():
    evidence = sample("seventeenth_multitask_heads_finetune")
    comprehension = with_source(evidence, "        self.heads = nn.ModuleDict()\n        for name in tasks:\n"
                                "            self.heads[name] = nn.Linear(HIDDEN, TASK_LABELS[name])\n",
                                "        self.heads = nn.ModuleDict({name: nn.Linear(HIDDEN, TASK_LABELS[name]) "
                                "for name in tasks})\n")
    top = diagnose(comprehension)[0]
    assert top.cause == "layers-in-unordered-loop" and "loop over tasks (multitask_heads_finetune.py:50)" in top.title


def test_layers_made_in_a_sorted_order_are_no_unordered_loop():
    evidence = sample("seventeenth_multitask_heads_finetune")
    ordered = with_source(evidence, "tasks = {ex[\"task\"] for ex in train}",
                          "tasks = sorted({ex[\"task\"] for ex in train})")
    assert causes(ordered)[0] == "ddp-parameter-mismatch"
    listed = with_source(evidence, "tasks = {ex[\"task\"] for ex in train}",
                         "tasks = list(dict.fromkeys(ex[\"task\"] for ex in train))")
    assert "layers-in-unordered-loop" not in causes(listed)


def test_the_grad_of_a_leaf_is_no_non_leaf_read():
    evidence = sample("seventeenth_pipeline_lm_two_stage")
    leaf = with_source(evidence, "act = recv_buf.requires_grad_().view(MICRO_BATCH, SEQ, HIDDEN)",
                       "act = recv_buf.view(MICRO_BATCH, SEQ, HIDDEN).detach().requires_grad_()")
    unwarned = with_log(leaf, "is not a leaf Tensor", "was read")
    assert "grad-of-non-leaf" not in causes(unwarned)
    # the source alone tells it, where torch's warning was not printed
    assert causes(with_log(evidence, "is not a leaf Tensor", "was read"))[0] == "grad-of-non-leaf"


def test_a_rate_not_scaled_or_a_loss_that_stayed_finite_is_no_scaled_rate():
    evidence = sample("seventeenth_train_price_regressor")
    unscaled = with_source(evidence, "global_batch = cfg[\"batch_per_rank\"] * world",
                           "global_batch = cfg[\"batch_per_rank\"]")
    assert "learning-rate-scaled-by-world" not in causes(unscaled)
    scaled_down = with_source(evidence, "global_batch = cfg[\"batch_per_rank\"] * world",
                              "global_batch = cfg[\"batch_per_rank\"] / world")
    assert "learning-rate-scaled-by-world" not in causes(scaled_down)
    other_error = with_log(replace(evidence, traces=[replace(trace, error=None) for trace in evidence.traces]),
                           "FloatingPointError: loss became inf", "ValueError: bad label 7")
    assert "learning-rate-scaled-by-world" not in causes(other_error)


def test_a_stop_every_rank_agreed_on_is_no_condition_of_its_own():
    evidence = sample("seventeenth_finetune_time_budget")
    agreed = with_source(evidence, "        if deadline.expired():\n",
                         "        stop = torch.tensor([float(deadline.expired())])\n"
                         "        dist.all_reduce(stop, op=dist.ReduceOp.MAX)\n        if stop:\n")
    assert "collective-under-own-condition" not in causes(agreed)


def test_a_folder_made_with_exist_ok_or_on_one_rank_only_is_no_race():
    evidence = sample("seventeenth_regression_sweep_trial")
    # a FileExistsError from a line that creates nothing (a check of the script's own) is not this cause
    checked = with_log(evidence, "os.makedirs(path)", "raise FileExistsError(path)")
    assert "created-by-every-rank" not in causes(checked)


def test_a_refused_connection_on_every_node_or_to_a_named_host_is_not_localhost():
    evidence = sample("seventeenth_train_with_metrics_sink")
    named = with_source(evidence, 'f"http://localhost:{SINK_PORT}/log"', 'f"http://node0:{SINK_PORT}/log"')
    assert "service-at-localhost" not in causes(named)
    # only the ranks' own bootstrap reads localhost (MASTER_ADDR's default): not a service the job addresses
    bootstrap = with_source(evidence, 'SINK_URL = os.environ.get("METRICS_SINK_URL", f"http://localhost:{SINK_PORT}/log")',
                            'SINK_URL = os.environ.get("METRICS_SINK_URL", f"http://node0:{SINK_PORT}/log")\n'
                            'MASTER = os.environ.get("MASTER_ADDR", "localhost")')
    assert "service-at-localhost" not in causes(bootstrap)
