import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist


class VecEnv:
    def __init__(self, n_envs, obs_dim, seed):
        self.gen = torch.Generator().manual_seed(seed)
        self.n, self.obs_dim = n_envs, obs_dim
        self.limits = torch.randint(20, 120, (n_envs,), generator=self.gen)
        self.t = torch.zeros(n_envs, dtype=torch.long)
        self.state = torch.randn(n_envs, obs_dim, generator=self.gen)

    def step(self, actions):
        self.state = self.state + 0.05 * (actions.float()[:, None] - 0.5) + 0.01 * torch.randn(self.n, self.obs_dim, generator=self.gen)
        self.t += 1
        rewards = -self.state.pow(2).mean(1)
        dones = self.t >= self.limits
        infos = {}
        if dones.any():
            infos["final_obs"] = self.state[dones].clone()
            self.state[dones] = torch.randn(int(dones.sum()), self.obs_dim, generator=self.gen)
            self.t[dones] = 0
        return self.state.clone(), rewards, dones, infos


def run_rollout(env, policy, T):
    batch = {"obs": [], "actions": [], "rewards": [], "dones": []}
    obs = env.state.clone()
    for _ in range(T):
        with torch.no_grad():
            a = torch.distributions.Categorical(logits=policy(obs)).sample()
        nxt, r, d, infos = env.step(a)
        batch["obs"].append(obs)
        batch["actions"].append(a)
        batch["rewards"].append(r)
        batch["dones"].append(d.float())
        for k, v in infos.items():
            batch.setdefault(k, []).append(v)
        obs = nxt
    return {k: torch.cat(v) for k, v in batch.items()}


def gather_batch(batch, world):
    out = {}
    for k in sorted(batch):
        t = batch[k].contiguous()
        n = torch.tensor([t.shape[0]])
        sizes = [torch.zeros_like(n) for _ in range(world)]
        dist.all_gather(sizes, n)
        parts = [t.new_empty((int(s),) + tuple(t.shape[1:])) for s in sizes]
        dist.all_gather(parts, t)
        out[k] = torch.cat(parts)
    return out


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    obs_dim, T = 4, 32
    policy = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, 2))
    opt = torch.optim.SGD(policy.parameters(), lr=1e-2)
    env = VecEnv(4, obs_dim, seed=1000 + rank)
    for it in range(10):
        local = run_rollout(env, policy, T)
        full = gather_batch(local, world)
        logits = policy(full["obs"])
        logp = torch.log_softmax(logits, -1).gather(1, full["actions"][:, None]).squeeze(1)
        adv = (full["rewards"] - full["rewards"].mean()) / (full["rewards"].std() + 1e-8)
        loss = -(logp * adv).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"iter {it} samples {full['obs'].shape[0]} loss {loss.item():.4f} ended {int(full['dones'].sum())}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
