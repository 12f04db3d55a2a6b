"""The eleventh held-out batch's misses (bench/diagnosis/ELEVENTH_BATCH_B.md), each told from the code's structure and
the run's record: the sample is the scored run's own record, and the same record with the code (or the log) as the
fix leaves it does not give the cause."""

from dataclasses import replace

from lab.analysis.diagnosis import Evidence, diagnose
from tests.unit.test_diagnosis_replicas import causes, sample, with_calls
from tests.unit.test_diagnosis_sources import with_source


def without_lines(evidence: Evidence, text: str) -> Evidence:
    """The record with every log line holding `text` left out."""
    return replace(evidence, nodes=[replace(node, lines=[line for line in node.lines if text not in line])
                                    for node in evidence.nodes])


def test_a_tensor_kept_as_a_plain_attribute_is_left_out_of_the_state_dict():
    evidence = sample("eleventh_normalizer_plain_attr")
    found = diagnose(evidence)[0]
    assert found.cause == "tensor-attribute-not-saved"
    assert "`self.mean`" in found.title and "normalizer_plain_attr.py:15" in found.title
    assert "fit_normalizer()" in found.title and "state_dict()" in found.title
    assert "self.register_buffer('mean', torch.zeros(dim))" in found.fix
    buffers = with_source(evidence, "self.mean = torch.zeros(dim)\n        self.std = torch.ones(dim)",
                          "self.register_buffer('mean', torch.zeros(dim))\n"
                          "        self.register_buffer('std', torch.ones(dim))")
    assert "tensor-attribute-not-saved" not in causes(buffers)
    # a tensor attribute set once in __init__ comes back alike from a new model: nothing is lost
    fixed_in_init = with_source(evidence, "        self.mean = x.mean(0)\n        self.std = x.std(0)\n",
                                "        pass\n")
    assert "tensor-attribute-not-saved" not in causes(fixed_in_init)
    # a job that never saves nor loads a state dict loses nothing
    assert "tensor-attribute-not-saved" not in causes(with_source(
        evidence, "exported.load_state_dict(torch.load(blob))", "exported = model"))


def test_a_loss_divided_by_the_world_size_under_ddp_scales_the_gradients_down():
    evidence = sample("eleventh_loss_div_world_size")
    found = diagnose(evidence)[0]
    assert found.cause == "loss-divided-by-world-size"
    assert "`loss = loss / world`" in found.title and "loss_div_world_size.py:23" in found.title
    assert "DDP (line 20)" in found.title and "1/world" in found.title
    assert "do not divide" in found.fix and "DDP" in found.fix
    assert "loss-divided-by-world-size" not in causes(with_source(
        evidence, "    loss = loss / world  # average the loss over the ranks\n", ""))
    # the same mistake written in one expression, with torch's call for the world size
    inline = with_source(evidence, "    loss = loss / world  # average the loss over the ranks\n    loss.backward()",
                         "    (loss / dist.get_world_size()).backward()")
    assert causes(inline)[0] == "loss-divided-by-world-size"
    # divided by something else (gradient accumulation): not this
    assert "loss-divided-by-world-size" not in causes(with_source(evidence, "loss = loss / world", "loss = loss / 4"))
    # no DDP forward synchronised (the hooks' record): nothing averaged the gradients, dividing may be meant
    assert "loss-divided-by-world-size" not in causes(with_calls(evidence, ddp_forwards={"synced": 0, "no_sync": 0}))


def test_an_attribute_every_rank_uses_changed_under_a_rank_test_sets_the_replicas_apart():
    evidence = sample("eleventh_temperature_rank0_only")
    found = diagnose(evidence)[0]
    assert found.cause == "state-changed-on-some-ranks"
    assert "temperature_rank0_only.py:42" in found.title and "`rank == 0 and step % 10 == 0`" in found.title
    assert "self.body(x) / self.temperature" in found.title
    assert "every rank" in found.fix and "broadcast_object_list" in found.fix
    assert "state-changed-on-some-ranks" not in causes(with_source(
        evidence, "            model.module.temperature = anneal(step + 10, steps)\n", "")
        ) and "state-changed-on-some-ranks" not in causes(with_source(
            evidence, "            model.module.temperature = anneal(step + 10, steps)\n",
            "        if step % 10 == 0:\n            model.module.temperature = anneal(step + 10, steps)\n"))
    # an in-place change of a tensor the model reads, under a rank test from torch's call: the same mistake
    in_place = with_source(with_source(evidence, "if rank == 0 and step", "if dist.get_rank() == 0 and step"),
                           "model.module.temperature = anneal(step + 10, steps)",
                           "model.module.temperature.fill_(anneal(step + 10, steps))")
    assert causes(in_place)[0] == "state-changed-on-some-ranks"
    # what no rank reads outside a rank test (a counter for rank 0's log; `opt.step()` calls a method of that
    # name, it does not read the attribute) may change on rank 0 alone
    logged = with_source(evidence, "model.module.temperature = anneal(step + 10, steps)", "model.module.step = step")
    assert "state-changed-on-some-ranks" not in causes(logged)


def test_a_seed_set_under_a_rank_test_leaves_the_other_ranks_drawing_other_numbers():
    evidence = sample("eleventh_shuffle_seed_rank0_only")
    found = diagnose(evidence)[0]
    assert found.cause == "seeded-on-some-ranks"
    assert "`random.seed(SEED)`" in found.title and "shuffle_seed_rank0_only.py:15" in found.title
    assert "`rank == 0`" in found.title and "rank 0 1234, rank 1 3004619478421060595" in found.title
    assert "same seed" in found.fix and "out of `if rank == 0:`" in found.fix
    seeded_everywhere = with_source(evidence, "        random.seed(SEED)\n        torch.manual_seed(SEED)\n",
                                    "    random.seed(SEED)\n    torch.manual_seed(SEED)\n")
    assert "seeded-on-some-ranks" not in causes(seeded_everywhere)
    # the other ranks seeded in the else branch: every rank has a seed
    both = with_source(evidence, "        torch.manual_seed(SEED)\n",
                       "        torch.manual_seed(SEED)\n    else:\n        random.seed(SEED)\n"
                       "        torch.manual_seed(SEED)\n")
    assert "seeded-on-some-ranks" not in causes(both)
    # torch's seed alone under the test, while the hooks saw every rank with the same torch seed: not this
    torch_only = with_source(evidence, "        random.seed(SEED)\n", "")
    assert causes(torch_only)[0] == "seeded-on-some-ranks"
    assert "seeded-on-some-ranks" not in causes(with_calls(torch_only, torch_seed=1234))


def test_std_of_a_batch_of_one_warned_by_torch_then_nan_is_the_last_small_batch():
    evidence = sample("eleventh_target_std_single")
    found = diagnose(evidence)[0]
    assert found.cause == "statistic-of-one-sample"
    assert "std() of a single value at target_std_single.py:26" in found.title and "nan" in found.title
    assert "drop_last=True" in found.fix and "std(correction=0)" in found.fix
    # with drop_last=True (or correction=0) torch does not warn: only the nan is left, which says no more
    assert "statistic-of-one-sample" not in causes(without_lines(evidence, "degrees of freedom is <= 0"))
    # the warning alone, in a run that never reported nan, is not why it failed
    assert "statistic-of-one-sample" not in causes(without_lines(evidence, "nan"))


def test_a_shape_error_in_the_optimizer_step_after_loading_its_state_is_groups_in_another_order():
    evidence = sample("eleventh_optim_groups_reordered")
    found = diagnose(evidence)[0]
    assert found.cause == "optimizer-state-mismatch"
    assert "torch.optim" in found.title and "`opt2.load_state_dict(ckpt['optim'])`" in found.title
    assert "optim_groups_reordered.py:66" in found.title and "lines 25, 34" in found.title
    assert "same order" in found.fix and "do not load the old state" in found.fix
    # an optimizer built anew and not given the old state: the crash is not this
    assert "optimizer-state-mismatch" not in causes(with_source(
        evidence, '    opt2.load_state_dict(ckpt["optim"])\n', ""))
