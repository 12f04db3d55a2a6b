"""The twenty-eighth held-out batch's mended misses (bench/diagnosis/TWENTYEIGHTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first."""

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twentyeighth_byol_pretrain", "ddp-without-trainable-parameters",
     ["DistributedDataParallel was given a module none of whose parameters requires a gradient"],
     ["wrap only the modules that train", "EMA-updated"]),
]
