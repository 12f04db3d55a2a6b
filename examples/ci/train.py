"""A tiny data-parallel training run: what the lab_cluster tests start with torchrun across the nodes. Gradients are
averaged with all_reduce by hand (the same seed gives every replica the same first weights)."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(64, 4, generator=torch.Generator().manual_seed(dist.get_rank()))
for step in range(5):
    loss = (model(data) - data.sum(dim=1, keepdim=True)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    for parameter in model.parameters():
        dist.all_reduce(parameter.grad, op=dist.ReduceOp.AVG)
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
for parameter in model.parameters():
    mean = parameter.detach().clone()
    dist.all_reduce(mean, op=dist.ReduceOp.AVG)
    assert torch.allclose(mean, parameter), "replicas differ"
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: replicas equal")
dist.destroy_process_group()
