"""The thirty-fourth held-out batch's mended misses (bench/diagnosis/THIRTYFOURTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

TOLD = [  # sample, cause, words of the title, words of the fix
    ("thirtyfourth_bootstrap_ci_eval", "int64-overflow",
     ["a Python integer outside int64's range", "was put into an int64 tensor"],
     ["value % 2**63", "broadcast_object_list"]),
    ("thirtyfourth_qa_eval_dedup", "tensor-from-strings", ["torch.tensor() was given strings"],
     ["all_gather_object", "map each to an integer id"]),
    ("thirtyfourth_shrink_to_one_node", "group-non-member",
     ["DDP was built on rank 2 with a process group this rank is not a member of", "NON_GROUP_MEMBER"],
     ["let only the group's members build and run that DDP"]),
    ("thirtyfourth_pretrain_finetune", "parameter-replaced-after-ddp",
     ["`model.head = nn.Linear(DIM, CLASSES)` (pretrain_finetune.py:65) after DDP wrapped the model (line 59)"],
     ["wrap the model again after replacing it"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("thirtyfourth_pretrain_finetune", "model.head = nn.Linear(DIM, CLASSES)", "model.head.reset_parameters()",
     "parameter-replaced-after-ddp"),  # the same layer, its values reset in place
]
