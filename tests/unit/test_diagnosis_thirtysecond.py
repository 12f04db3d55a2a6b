"""The thirty-second held-out batch's mended misses (bench/diagnosis/THIRTYSECOND_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

TOLD = [  # sample, cause, words of the title, words of the fix
    ("thirtysecond_swa_finalize", "ddp-wrapper-passed-on",
     ["`AveragedModel(model)` (swa_finalize.py:41) was given the DistributedDataParallel wrapper",
      "(`DDP(net, process_group=dp_group)`, line 36)", "cannot be copied or pickled"], ["AveragedModel(model.module)"]),
    ("thirtysecond_export_serving_model", "ddp-wrapper-passed-on",
     ["`torch.export.export(model, (example,))` (export_serving_model.py:29) was given the DistributedDataParallel "
      "wrapper", "torch.export cannot trace its forward"], ["torch.export.export(model.module.eval(), ...)"]),
    ("thirtysecond_lr_range_test", "collective-under-own-condition",
     ["rank 0 waits in all_reduce at lr_range_test.py:64 and rank 1 in DDP's gradient all_reduce (in backward) at "
      "line 34", "having left the loop (line 28) it calls at `if smoothed > self.diverge * best: break` (line 41)"],
     ["all_reduce the value, or a flag with op=MAX"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("thirtysecond_lr_range_test", "if smoothed > self.diverge * best:", "if it >= 1000:",
     "collective-under-own-condition"),  # a count every rank shares
]
