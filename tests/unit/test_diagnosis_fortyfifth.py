"""The forty-fifth held-out batch's mended misses (bench/diagnosis/FORTYFIFTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fortyfifth_dcgan_train", "shares-short-of-the-whole",
     ["`N_SAMPLES // world` (dcgan_train.py:91) gives each of the 2 ranks 4", "hold 8, not the 9"],
     ["n // world + (rank < n % world)"]),
    ("fortyfifth_stylegan_disc_train", "share-not-a-multiple",
     ["`GLOBAL_BATCH // world` (stylegan_disc_train.py:81) is 6 at this world size of 4", "groups of 4"],
     ["a multiple of 4 x the world size (32 here)"]),
    ("fortyfifth_ddpm_pairs_train", "share-not-a-multiple",
     ["`GLOBAL_BATCH // world` (ddpm_pairs_train.py:53) is 3 at this world size of 2",
      "groups of 2 (`n // 2`, ddpm_pairs_train.py:39)"], ["(8 here)"]),
    ("fortyfifth_aerial_tile_trainer", "sum-of-nothing",
     ["`sum(losses)` (aerial_tile_trainer.py:80) is the int 0 where `losses` is empty"],
     ["sum(losses, outputs.sum() * 0)"]),
    ("fortyfifth_scene_count_eval", "squeezed-to-a-scalar",
     ["`torch.cat(preds).squeeze()` (scene_count_eval.py:47) drops every dimension of size 1"], [".squeeze(-1)"]),
    ("fortyfifth_detection_map_eval", "key-from-other-ranks",
     ["`p['image_id']` (detection_map_eval.py:61) is a key from what the other ranks sent (through `gathered`)",
      "looked up in `self.gts`"], ["gather `self.gts`'s entries too"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fortyfifth_dcgan_train", "per_rank = N_SAMPLES // world", "per_rank = N_SAMPLES",
     "shares-short-of-the-whole"),
    ("fortyfifth_stylegan_disc_train", "batch_gpu = GLOBAL_BATCH // world", "batch_gpu = GLOBAL_BATCH",
     "share-not-a-multiple"),
    ("fortyfifth_ddpm_pairs_train", "t = torch.randint(0, NUM_TIMESTEPS, (n // 2,), generator=gen)",
     "t = torch.randint(0, NUM_TIMESTEPS, (n,), generator=gen)", "share-not-a-multiple"),
    ("fortyfifth_aerial_tile_trainer", "return sum(losses)", "return torch.stack(losses).sum()", "sum-of-nothing"),
    ("fortyfifth_scene_count_eval", "return torch.cat(preds).squeeze(), torch.cat(targets).squeeze()",
     "return torch.cat(preds).squeeze(-1), torch.cat(targets).squeeze(-1)", "squeezed-to-a-scalar"),
    ("fortyfifth_detection_map_eval", "dist.all_gather_object(gathered, self.predictions)",
     "gathered = [self.predictions] * world", "key-from-other-ranks"),
]
