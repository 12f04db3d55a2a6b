"""The twenty-first held-out batch's mended misses (bench/diagnosis/TWENTYFIRST_BATCH_A.md, _B.md): each scored run's
own record, with the cause and fix the lab must now give first, and the same record changed where the finding must
not fire."""


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


NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("twentyfirst_seqpar_rope_finetune", "position_ids = torch.arange(rank * local, (rank + 1) * local)",
     "position_ids = torch.arange(0, local) + local", "global-index-on-shard"),  # an offset not from the rank
    ("twentyfirst_train_with_node_profiles", "    profile = NODE_PROFILES.get(host, {})\n",
     "    print(host)\n    profile = {}\n", "settings-per-host"),  # a host name only printed
    ("twentyfirst_tp_gqa_decode_bench",
     "self.wq, self.wk, self.wv = (column_shard(w, rank, world) for w in (wq, wk, wv))",
     "self.wq, self.wk, self.wv = wq, wk, wv", "view-of-a-split"),  # the weights unsplit
    ("twentyfirst_finetune_from_manifest", 'p.add_argument("--rank", default=os.environ.get("RANK", 0))',
     'p.add_argument("--rank", type=int, default=os.environ.get("RANK", 0))', "env-string-compared"),  # typed
    ("twentyfirst_sweep_trial_trainer", "cfg = TrialConfig(**json.loads(payload[0]))",
     "cfg = TrialConfig(trial_id=json.loads(payload[0])['trial_id'])", "nested-dataclass-from-dict"),  # by field
]

