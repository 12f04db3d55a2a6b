import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist
from torch.nn.utils.rnn import pad_sequence

VOCAB = 29
BLANK = 0


def make_eval_set(n_utts=64, n_feats=40, seed=11):
    g = torch.Generator().manual_seed(seed)
    utts = []
    for i in range(n_utts):
        frames = int(torch.randint(80, 400, (1,), generator=g))
        feats = torch.randn(frames, n_feats, generator=g)
        ref_len = max(1, frames // 12)
        ref = torch.randint(1, VOCAB, (ref_len,), generator=g)
        utts.append((i, feats, ref))
    return utts


class TinyCTC(nn.Module):
    def __init__(self, n_feats=40, hidden=96):
        super().__init__()
        self.rnn = nn.GRU(n_feats, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, VOCAB)

    def forward(self, x):
        h, _ = self.rnn(x)
        return self.out(h)


def greedy_decode(logits):
    best = logits.argmax(-1).tolist()
    hyp, prev = [], BLANK
    for tok in best:
        if tok != prev and tok != BLANK:
            hyp.append(tok)
        prev = tok
    return torch.tensor(hyp if hyp else [BLANK], dtype=torch.long)


def edit_distance(a, b):
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            cur = min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
            prev, d[j] = d[j], cur
    return d[-1]


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TinyCTC().eval()

    utts = make_eval_set()[rank::world]
    ids, hyps, refs = [], [], []
    with torch.no_grad():
        for uid, feats, ref in utts:
            hyps.append(greedy_decode(model(feats.unsqueeze(0))[0]))
            refs.append(ref)
            ids.append(uid)

    hyp_pad = pad_sequence(hyps, batch_first=True, padding_value=-1)
    ref_pad = pad_sequence(refs, batch_first=True, padding_value=-1)
    all_hyp = [torch.empty_like(hyp_pad) for _ in range(world)]
    all_ref = [torch.empty_like(ref_pad) for _ in range(world)]
    dist.all_gather(all_hyp, hyp_pad)
    dist.all_gather(all_ref, ref_pad)

    if rank == 0:
        errors = words = 0
        for h_batch, r_batch in zip(all_hyp, all_ref):
            for h, r in zip(h_batch, r_batch):
                h = h[h >= 0].tolist()
                r = r[r >= 0].tolist()
                errors += edit_distance(h, r)
                words += len(r)
        print(f"CER {errors / words:.3f} over {len(all_ref) * all_ref[0].shape[0]} utterances", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
