"""Mixture-of-experts token dispatch: each rank sends its tokens to the rank that holds their expert."""
import datetime
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(100 + rank)

tokens = torch.randn(64, 16)
expert_of_token = torch.randint(0, world, (64,))  # router: one expert per rank
order = expert_of_token.argsort()
tokens = tokens[order]
send_counts = torch.bincount(expert_of_token, minlength=world).tolist()

received = torch.empty(sum(send_counts), 16)
dist.all_to_all_single(received, tokens, output_split_sizes=send_counts, input_split_sizes=send_counts)
out = received * 2.0  # the local expert
print(f"rank {rank}: processed {out.shape[0]} tokens", flush=True)
dist.destroy_process_group()
