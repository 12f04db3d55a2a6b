"""The twenty-first held-out batch's mended misses (bench/diagnosis/TWENTYFIRST_BATCH_A.md, _B.md): each scored run's
own record, with the cause and fix the lab must now give first, and the same record changed where the finding must
not fire."""

import pytest

from tests.unit.test_diagnosis_held_out import assert_told
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twentyfirst_tp_vocab_head_finetune", "global-index-on-shard",
     ["rank 0 used `vocab_start`, a value computed from its rank", "line 30", "on a tensor of size 2048"],
     ["local = index - shard_start", "masked"]),
    ("twentyfirst_seqpar_rope_finetune", "global-index-on-shard",
     ["rank 1 used `position_ids`", "`position_ids = torch.arange(rank * local, (rank + 1) * local", "size 64"],
     ["size the tensor for the whole range"]),
    ("twentyfirst_tp_gqa_decode_bench", "view-of-a-split",
     ["rank 1 reshaped `wk`, its part of a split by the world size", "line 27", "with 4 ranks",
      "8 values a row where the view groups them by 16"],
     ["give each rank whole heads", "replicate each group"]),
    ("twentyfirst_finetune_from_manifest", "env-string-compared",
     ["compares RANK (the default of the option --rank, which has no type=)", "`args.rank == 0` is never true"],
     ['add_argument("--rank", type=int, ...)']),
    ("twentyfirst_sweep_trial_trainer", "nested-dataclass-from-dict",
     ["rank 1 read `.d_in` of a plain dict where a ModelConfig was meant", "rebuilds TrialConfig from a dict",
      "its field `model`"],
     ["'model': ModelConfig(**d['model'])", "'optim': OptimConfig(**d['optim'])", "dacite.from_dict"]),
    ("twentyfirst_launch_pretrain", "world-size-mismatch",
     ["a process claims rank 2 in a world of 2", "smaller than the 4 process(es)"], ["world_size=4"]),
    ("twentyfirst_train_with_node_profiles", "settings-per-host",
     ["KeyError ('vocab') on node1 only", "`host = os.environ.get('NODE_NAME') or socket.gethostname()`"],
     ["a deep merge, not dict.update", "broadcast_object_list"]),
]


@pytest.mark.parametrize("name, cause, title, fix", TOLD, ids=[told[0] for told in TOLD])
def test_the_held_out_record_is_told_its_cause_and_fix(name, cause, title, fix):
    assert_told(name, cause, title, fix)


def test_an_offset_not_computed_from_the_rank_is_no_shard_of_it():
    evidence = with_source(sample("twentyfirst_seqpar_rope_finetune"),
                           "position_ids = torch.arange(rank * local, (rank + 1) * local)",
                           "position_ids = torch.arange(0, local) + local")
    assert "global-index-on-shard" not in causes(evidence)


def test_a_host_name_only_printed_selects_no_settings():
    evidence = with_source(sample("twentyfirst_train_with_node_profiles"),
                           "    profile = NODE_PROFILES.get(host, {})\n", "    print(host)\n    profile = {}\n")
    assert "settings-per-host" not in causes(evidence)


def test_a_reshape_of_a_tensor_no_split_made_is_no_split_by_the_world():
    evidence = with_source(sample("twentyfirst_tp_gqa_decode_bench"),
                           "self.wq, self.wk, self.wv = (column_shard(w, rank, world) for w in (wq, wk, wv))",
                           "self.wq, self.wk, self.wv = wq, wk, wv")
    assert "view-of-a-split" not in causes(evidence)


def test_an_option_with_a_type_is_no_string_from_the_environment():
    evidence = with_source(sample("twentyfirst_finetune_from_manifest"),
                           'p.add_argument("--rank", default=os.environ.get("RANK", 0))',
                           'p.add_argument("--rank", type=int, default=os.environ.get("RANK", 0))')
    assert "env-string-compared" not in causes(evidence)


def test_a_dataclass_built_field_by_field_is_no_rebuild_from_a_dict():
    evidence = with_source(sample("twentyfirst_sweep_trial_trainer"), "cfg = TrialConfig(**json.loads(payload[0]))",
                           "cfg = TrialConfig(trial_id=json.loads(payload[0])['trial_id'])")
    assert "nested-dataclass-from-dict" not in causes(evidence)
