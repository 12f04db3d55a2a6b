"""How a rehearsed job scales: step time, exposed communication and efficiency per size, and what-ifs that teach.

Pure: a Rehearsal (rehearsal.py) and the target's options in, rows and words out. Weak scaling, as data-parallel
training runs: every rank keeps its batch, so a rank's computation per step stays what the rehearsal measured
(scaled when the user says so); the collectives grow with the ranks as the ring cost model says (model.py).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

from lab.forecast.model import LinkModel, fit_in_job_factor, fit_link, model_durations, replay
from lab.errors import ForecastError
from lab.forecast.rehearsal import RankProfile, Rehearsal
from lab.model.spec import format_rate, parse_link

DOMINATES = 0.3  # from this share of exposed communication on, the forecast names the levers
ACCUMULATION = 4  # micro-batches per optimizer step in the accumulation what-if
BUCKET_MERGE = 4  # the bucket what-if: this many of the step's all_reduces become one


@dataclass(frozen=True)
class TargetCluster:
    nodes: tuple[int, ...]
    nproc_per_node: int | None = None  # None: the rehearsal's
    link: str | None = None  # a profile parse_link reads; None: the rehearsal's
    compute_ms: float | None = None  # the user's own step computation (a GPU's): a what-if
    compute_scale: float = 1.0
    price_per_node_hour: float | None = None
    steps: int | None = None


@dataclass(frozen=True)
class Row:
    nodes: int
    nproc_per_node: int
    ranks: int
    step_ms: float
    compute_ms: float
    comm_ms: float  # the collectives' own time per step, summed (hidden or not)
    comm_exposed_ms: float
    comm_share: float  # exposed / step
    efficiency: float  # rehearsal-size step / this step (weak scaling: 1 is perfect)
    run_hours: float | None = None
    cost: float | None = None


@dataclass(frozen=True)
class Lever:
    name: str
    how: str
    step_ms: float
    comm_exposed_ms: float
    sample_speedup: float  # samples per second against the forecast as it stands
    note: str = ""


@dataclass
class Forecast:
    rows: list[Row]
    rehearsal_row: Row
    measured_step_ms: float
    measured_comm_share: float
    link: LinkModel
    in_job_factor: float
    assumptions: list[str] = field(default_factory=list)
    what_if: bool = False  # --compute-ms: not validated
    levers: dict[int, list[Lever]] = field(default_factory=dict)  # by nodes, where communication dominates

    def to_json(self) -> list[dict]:
        rows = []
        for row in self.rows:
            data = asdict(row)
            data["what_if"] = self.what_if
            data["levers"] = [asdict(lever) for lever in self.levers.get(row.nodes, [])]
            rows.append(data)
        return rows


@dataclass(frozen=True)
class _RankFit:
    """One rank's replay settings: its profile, the computation's scale, the in-job factor, the computation no
    collective hides (the anchoring offset), and the share of its computation's wall time it spent on the CPU."""

    rank: RankProfile
    scale: float
    factor: float
    offset: float
    unthrottled: float


class _Ranks:
    """Everything per rank the forecast replays: its profiled steps, the in-job factor fitted on them, and the
    anchoring of its computation to the steps outside the profiled window.

    Anchoring: the profiled steps ran under the profiler (which slows what it watches) and, on a shared host, beside
    other work; the steps outside the window give the rehearsal's measured step time. What the replay at the
    rehearsal's own size misses of it is computation no collective overlaps (added after the step's last wait; the
    communication the window measured is kept), so the forecast at the rehearsal's size is what was measured there
    and every other size differs from it by what the model says changes.

    A node with a CPU limit (CFS quota) cannot finish a step sooner than its CPU time over the limit, however the
    work overlaps: a step is the longer of the replayed path (the training thread's computation at full speed, its
    CPU time, and its waits) and that bound. The node's CPU besides the training threads (gloo's threads moving and
    adding the bytes, the launcher) grows as the bytes a rank moves in a ring, (p-1)/p."""

    def __init__(self, rehearsal: Rehearsal, link: LinkModel, compute_scale: float, quota: bool = True):
        self.entries = []
        self.world0 = world = rehearsal.world_size
        self.cpus = rehearsal.cpus if quota else None
        self.node_cpu = rehearsal.node_cpu_seconds() if self.cpus else None
        for rank in rehearsal.ranks:
            factor = fit_in_job_factor(rank.window, link, world, 1.0)
            durations = [model_durations(step, link, world, world, factor) for step in rank.window]
            compute = statistics.fmean(replay(step, times).compute for step, times in zip(rank.window, durations))
            thread = rank.cpu_seconds(0)
            # the computation at full speed: its CPU time, where the node's quota held it off the CPU
            unthrottled = min(1.0, thread / compute) if self.node_cpu and thread and compute > 0 else 1.0
            replays = [replay(step, times, unthrottled) for step, times in zip(rank.window, durations)]
            modelled = max(statistics.fmean(result.seconds for result in replays), self._bound(world, 1.0))
            offset = rank.unprofiled_seconds - modelled
            self.entries.append(_RankFit(rank, compute_scale, factor, max(offset, -0.5 * compute * unthrottled),
                                         unthrottled))

    @property
    def quota_bound(self) -> bool:
        return self.node_cpu is not None

    def _bound(self, ranks: int, scale: float, accumulate: int = 1) -> float:
        """Seconds a node needs for one step's CPU time under its CPU limit (0 where it has none)."""
        if self.node_cpu is None:
            return 0.0
        threads, whole = self.node_cpu
        growth = ((ranks - 1) / ranks) / ((self.world0 - 1) / self.world0) if ranks > 1 and self.world0 > 1 else 1.0
        return (threads * scale * accumulate + (whole - threads) * growth) / self.cpus

    def step(self, link: LinkModel, ranks: int, world: int, extra_scale: float = 1.0,
             bytes_scale: float = 1.0, merge: int = 1, accumulate: int = 1) -> tuple[float, float, float]:
        """Median over ranks of the mean profiled step replayed: (seconds, compute, comm). The time a quota held
        the node off the CPU counts as computation, as the rehearsal measures it."""
        per_rank = []
        for fit in self.entries:
            scale = fit.scale * extra_scale
            bound = self._bound(ranks, scale, accumulate)
            replays = []
            for trace in fit.rank.window:
                trace = _merged(trace, merge) if merge > 1 else trace
                scale_bytes = {index: bytes_scale for index, c in enumerate(trace.collectives)
                               if c.op in ("allreduce", "all_reduce")} if bytes_scale != 1 else None
                durations = model_durations(trace, link, ranks, world, fit.factor, scale_bytes)
                result = replay(trace, durations, fit.unthrottled * scale)
                unhidden = fit.offset * scale
                extra = (accumulate - 1) * (result.compute + unhidden)  # the micro-batches under no_sync
                seconds = max(result.seconds + extra, bound) + unhidden
                exposed = max(0.0, result.seconds - result.compute)
                replays.append((seconds, seconds - exposed, result.comm))
            per_rank.append(tuple(statistics.fmean(values) for values in zip(*replays)))
        return tuple(statistics.median(values) for values in zip(*per_rank))


def _merged(trace, group: int):
    """The step with every `group` consecutive all_reduces sent as one, issued when the last of them was (a bigger
    bucket_cap_mb: fewer calls, later start)."""
    from lab.forecast.rehearsal import Action, Collective, StepTrace

    reduces = [index for index, c in enumerate(trace.collectives) if c.op in ("allreduce", "all_reduce")]
    if len(reduces) < 2:
        return trace
    batches = [reduces[start:start + group] for start in range(0, len(reduces), group)]
    leader = {}  # old index -> the index of the merged collective
    collectives = []
    others = [index for index in range(len(trace.collectives)) if index not in reduces]
    for index in others:
        leader[index] = len(collectives)
        collectives.append(trace.collectives[index])
    last_of = {}
    for batch in batches:
        first = trace.collectives[batch[0]]
        merged = Collective(first.op, sum(trace.collectives[i].nbytes for i in batch), first.group_size,
                            trace.collectives[batch[-1]].issued, first.started, trace.collectives[batch[-1]].ended)
        for index in batch:
            leader[index] = len(collectives)
        last_of[batch[-1]] = len(collectives)
        collectives.append(merged)
    actions = []
    for action in trace.actions:
        if action.kind == "issue":
            if action.index in others or action.index in last_of:
                actions.append(Action("issue", index=leader[action.index]))
        elif action.kind == "wait":
            actions.append(Action("wait", index=leader[action.index]))
        else:
            actions.append(action)
    return StepTrace(trace.seconds, tuple(collectives), tuple(actions))


def forecast(rehearsal: Rehearsal, target: TargetCluster) -> Forecast:
    if target.compute_ms is not None and target.compute_scale != 1.0:
        raise ForecastError("--compute-ms and --compute-scale both set the computation", "give one of them")
    rehearsal_link = parse_link(rehearsal.link) if rehearsal.link else None
    fitted = fit_link(rehearsal.calibration, rehearsal_link)
    target_link = parse_link(target.link) if target.link else rehearsal_link
    link = fitted.on_link(target_link) if target.link else fitted
    nproc = target.nproc_per_node or rehearsal.nproc_per_node
    world0 = rehearsal.world_size
    compute_scale = target.compute_scale
    if nproc != rehearsal.nproc_per_node and rehearsal.cpus:
        compute_scale *= nproc / rehearsal.nproc_per_node  # the node's CPU limit is shared by more processes
    ranks = _Ranks(rehearsal, fitted, 1.0, quota=target.compute_ms is None)  # a GPU's step: no node quota
    if target.compute_ms is not None:
        _, compute, _ = ranks.step(fitted, world0, world0)
        compute_scale = target.compute_ms / 1000 / compute
    # The rehearsal's node count on the target's link, processes and computation: what efficiency is against.
    base = _row(ranks, link, rehearsal.nodes, nproc, world0, compute_scale, None, target)
    rows = [_row(ranks, link, nodes, nproc, world0, compute_scale, base.step_ms, target) for nodes in target.nodes]
    base = Row(**{**asdict(base), "efficiency": 1.0})
    factor = statistics.median(fit.factor for fit in ranks.entries)
    result = Forecast(rows, base, rehearsal.step_seconds * 1000, rehearsal.comm_share, link, factor,
                      what_if=target.compute_ms is not None)
    result.assumptions = _assumptions(rehearsal, target, fitted, link, factor, compute_scale, nproc, ranks)
    for row in rows:
        if row.comm_share >= DOMINATES:
            result.levers[row.nodes] = _levers(ranks, link, row, world0, compute_scale)
    return result


def _row(ranks: _Ranks, link: LinkModel, nodes: int, nproc: int, world0: int, compute_scale: float,
         base_ms: float | None, target: TargetCluster) -> Row:
    seconds, compute, comm = ranks.step(link, nodes * nproc, world0, compute_scale)
    step_ms = seconds * 1000
    hours = target.steps * seconds / 3600 if target.steps else None
    cost = hours * nodes * target.price_per_node_hour if hours is not None and target.price_per_node_hour else None
    return Row(nodes, nproc, nodes * nproc, round(step_ms, 3), round(compute * 1000, 3), round(comm * 1000, 3),
               round(max(0.0, seconds - compute) * 1000, 3), round(max(0.0, seconds - compute) / seconds, 4),
               round(base_ms / step_ms, 4) if base_ms else 1.0, hours and round(hours, 4), cost and round(cost, 2))


def _levers(ranks: _Ranks, link: LinkModel, row: Row, world0: int, compute_scale: float) -> list[Lever]:
    """Each lever the lab can show, forecast on this size: what it changes and how much faster a sample goes."""
    p = row.ranks
    per_sample = row.step_ms

    def lever(name, how, note="", **changes) -> Lever:
        step_link = changes.pop("link", link)
        accumulate = changes.get("accumulate", 1)
        seconds, compute, _ = ranks.step(step_link, p, world0, compute_scale, **changes)
        return Lever(name, how, round(seconds * 1000, 3), round(max(0.0, seconds - compute) * 1000, 3),
                     round(per_sample / (seconds * 1000 / accumulate), 3), note)

    faster = LinkModel(link.latency_s, link.wire_s_per_byte / 10, link.reduce_s_per_byte, link.rate_bps and link.rate_bps * 10,
                       link.delay_s)
    return [
        lever("gradient accumulation", f"{ACCUMULATION} micro-batches per optimizer step, the first "
              f"{ACCUMULATION - 1} under model.no_sync(): one all_reduce per {ACCUMULATION}", accumulate=ACCUMULATION,
              note="the step is 4 micro-batches; speedup is per sample (exercise13: bytes per sample drop 4x)"),
        lever("fp16 compression", "model.register_comm_hook(None, default_hooks.fp16_compress_hook): half the bytes",
              bytes_scale=0.5, note="the casts' cost is left out; exercise13 measured 0.4-0.6 of the bytes"),
        lever("bigger buckets", f"bucket_cap_mb x{BUCKET_MERGE}: {BUCKET_MERGE} all_reduces become one",
              merge=BUCKET_MERGE, note="fewer latencies, less overlap with backward (exercise13: small buckets overlap)"),
        lever("a 10x faster link", f"--link {format_rate(int(link.rate_bps * 10)) if link.rate_bps else 'x10'}",
              link=faster, note="what the interconnect buys, for comparison"),
    ]


def _assumptions(rehearsal: Rehearsal, target: TargetCluster, fitted: LinkModel, link: LinkModel, factor: float,
                 compute_scale: float, nproc: int, ranks: _Ranks) -> list[str]:
    said = [
        f"rehearsal: {rehearsal.nodes} node(s) x {rehearsal.nproc_per_node} process(es), link "
        f"{rehearsal.link or 'unshaped'}, CPU limit {rehearsal.cpus or 'none'} per node; measured step "
        f"{rehearsal.step_seconds * 1000:.1f} ms, communication {rehearsal.comm_share:.0%} of it (the training thread "
        f"waiting); steps found by {rehearsal.ranks[0].step_source}",
        "weak scaling: every rank keeps its batch, so a rank's computation per step is the rehearsal's"
        + (f" x {compute_scale:.3g}" if compute_scale != 1 else ""),
        f"collectives: ring cost, α = {fitted.latency_s * 1e6:.0f} µs a step, link "
        f"{8 / fitted.wire_s_per_byte / 1e6:.0f} Mbit/s effective, reduction {1 / max(fitted.reduce_s_per_byte, 1e-15) / 1e6:.0f} MB/s "
        f"(calibration at 2 ranks); in the job they took {factor:.2f}x that (fitted on the rehearsal's own collectives)",
        "DDP's overlap: each collective issued when the rehearsal issued it, one after the other on the link; "
        "the step ends when the training thread's last wait does",
    ]
    if ranks.quota_bound:
        threads, whole = ranks.node_cpu
        said.append(f"CPU limit {rehearsal.cpus} per node: a node spent {whole * 1000:.1f} ms of CPU a step "
                    f"({threads * 1000:.1f} ms in the training threads, at full speed; the rest grows as a ring's bytes), "
                    f"so no step is shorter than {whole / rehearsal.cpus * 1000:.0f} ms at the rehearsal's size")
    elif rehearsal.cpus and target.compute_ms is None:
        said.append(f"CPU limit {rehearsal.cpus} per node, but the profile holds no CPU times (recorded by lab since "
                    "2026-11-27): the computation is taken as the rehearsal's wall time, throttling included")
    if target.link:
        said.append(f"target link {target.link}: {8 / link.wire_s_per_byte / 1e6:.0f} Mbit/s effective, α = "
                    f"{link.latency_s * 1e6:.0f} µs" + ("" if rehearsal.link else
                                                        " (rehearsed unshaped: the wire was assumed no faster than then)"))
    if nproc != rehearsal.nproc_per_node:
        said.append(f"{nproc} processes per node instead of {rehearsal.nproc_per_node}: one ring over all ranks, "
                    "each node's link carrying its share; with a CPU limit per node, computation slows in proportion")
    if target.compute_ms is not None:
        said.append(f"WHAT-IF, not validated: computation set to {target.compute_ms:g} ms a step (--compute-ms); "
                    "the overlap pattern is the rehearsal's, stretched to it")
    said.append("not modelled: stragglers (the slowest of more ranks), contention for a shared switch, "
                "a different algorithm than the ring at large sizes")
    return said
