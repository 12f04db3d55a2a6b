import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist


class QNet(nn.Module):
    def __init__(self, obs_dim, n_actions, hidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, n_actions))

    def forward(self, x):
        return self.net(x)


class ReplayShard:
    def __init__(self, capacity, obs_dim):
        self.obs = torch.zeros(capacity, obs_dim)
        self.next_obs = torch.zeros(capacity, obs_dim)
        self.actions = torch.zeros(capacity, dtype=torch.long)
        self.rewards = torch.zeros(capacity)
        self.dones = torch.zeros(capacity)
        self.priorities = torch.ones(capacity)
        self.capacity = capacity
        self.pos = 0

    def add(self, o, a, r, o2, d):
        i = self.pos % self.capacity
        self.obs[i], self.actions[i], self.rewards[i], self.next_obs[i], self.dones[i] = o, a, r, o2, d
        self.priorities[i] = self.priorities.max()
        self.pos += 1


def collect(shard, qnet, steps, obs_dim, gen):
    o = torch.randn(obs_dim, generator=gen)
    for t in range(steps):
        with torch.no_grad():
            a = int(qnet(o).argmax()) if torch.rand(1, generator=gen) > 0.1 else int(torch.randint(4, (1,), generator=gen))
        o2 = o + 0.1 * torch.randn(obs_dim, generator=gen)
        r = float(-o2.norm())
        d = float(t % 50 == 49)
        shard.add(o, a, r, o2, d)
        o = torch.randn(obs_dim, generator=gen) if d else o2


def sample_global(shard, batch_size, alpha, step):
    world = dist.get_world_size()
    local_p = shard.priorities.pow(alpha).contiguous()
    all_p = [torch.empty_like(local_p) for _ in range(world)]
    dist.all_gather(all_p, local_p)
    probs = torch.cat(all_p)
    probs = probs / probs.sum()
    g = torch.Generator().manual_seed(1234 + step)
    idx = torch.multinomial(probs, batch_size, replacement=True, generator=g)
    weights = (len(probs) * probs[idx]).pow(-0.4)
    weights = weights / weights.max()
    return idx, weights


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(0)
    obs_dim, capacity, batch_size, gamma = 8, 512, 64, 0.99
    qnet, target = QNet(obs_dim, 4), QNet(obs_dim, 4)
    target.load_state_dict(qnet.state_dict())
    opt = torch.optim.Adam(qnet.parameters(), lr=1e-3)
    shard = ReplayShard(capacity, obs_dim)
    gen = torch.Generator().manual_seed(100 + rank)
    collect(shard, qnet, capacity, obs_dim, gen)

    for step in range(200):
        idx, w = sample_global(shard, batch_size, 0.6, step)
        o, a, r = shard.obs[idx], shard.actions[idx], shard.rewards[idx]
        o2, d = shard.next_obs[idx], shard.dones[idx]
        q = qnet(o).gather(1, a[:, None]).squeeze(1)
        with torch.no_grad():
            y = r + gamma * (1 - d) * target(o2).max(1).values
        td = y - q
        loss = (w * td.pow(2)).mean()
        opt.zero_grad()
        loss.backward()
        for p in qnet.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
        shard.priorities[idx] = td.detach().abs() + 1e-3
        if step % 50 == 0:
            target.load_state_dict(qnet.state_dict())
            if rank == 0:
                print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.barrier()
    if rank == 0:
        print("done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
