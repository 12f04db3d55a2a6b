"""The cost of a collective on a link, fitted from the rehearsal, and a step replayed with other collective times.

Ring algorithms (what gloo runs on CPU): an all_reduce of S bytes over p ranks is a reduce-scatter and an
all-gather, 2(p-1) steps each moving S/p bytes in and out of every rank:

    T = 2(p-1)·α + 2(p-1)/p·S/B + (p-1)/p·S·γ

α the latency of one step, B the rate a node's link carries, γ the CPU's seconds per byte to add a chunk it
received (reduce-scatter only). all_gather and reduce_scatter are one half: (p-1)·α + (p-1)/p·S/B (+ (p-1)/p·S·γ for
reduce_scatter), S the whole gathered tensor; broadcast a binomial tree: ⌈log2 p⌉·(α + S/B).

At 2 ranks the bandwidth and reduction terms cannot be told apart (both scale as (p-1)/p), so the calibration's
sweep gives α and the per-byte slope, and γ is measured on its own (an add of two tensors on a node); 1/B is what
is left of the slope. The link a forecast targets changes B (in the ratio of the nominal rates) and α (by the
change of one-way delay).

The rehearsal's own collectives then say how much slower they ran in the job than alone (the CPU shared with
backward, gloo's two threads sharing the link): one factor, fitted so that the replay of the profiled steps on the
rehearsal's own size gives the step time measured there.

Replay: the training thread's actions in order (compute, issue, wait); collectives run one after the other in issue
order on the link (one lane: the bytes a node's link carries per step do not depend on how gloo's threads interleave
them); a wait ends when its collective has. The step is when the last action ends; exposed communication is what
the step takes beyond its computation.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from lab.forecast.rehearsal import StepTrace
from lab.model.spec import LinkProfile

HALF_OPS = {"all_gather", "allgather", "_allgather_base", "all_gather_into_tensor", "reduce_scatter",
            "_reduce_scatter_base", "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced",
            "allgather_into_tensor_coalesced", "all_to_all", "alltoall", "alltoall_base"}
REDUCING = {"reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor", "reduce_scatter_tensor_coalesced"}
GATHERING = {"all_gather", "allgather", "_allgather_base", "all_gather_into_tensor", "allgather_into_tensor_coalesced"}
TREE_OPS = {"broadcast", "barrier", "reduce", "gather", "scatter"}
FACTOR_RANGE = (0.05, 50.0)  # the in-job factor is looked for in here
HIDDEN_SHARE = 0.01  # a step that waited less than this share of itself hid its collectives


@dataclass(frozen=True)
class LinkModel:
    latency_s: float  # α: one ring step
    wire_s_per_byte: float  # 1/B: a byte through a node's link
    reduce_s_per_byte: float  # γ: a byte added on the CPU
    rate_bps: float | None = None  # the nominal rate it was fitted on (None: unshaped)
    delay_s: float = 0.0  # the one-way delay of that link

    def collective_seconds(self, op: str, nbytes: int, ranks: int, rehearsal_ranks: int | None = None) -> float:
        """Seconds of one collective of `nbytes` (its input, as the Flight Recorder gives it) over `ranks` ranks.
        An all_gather's input is one rank's shard: the gathered whole is shard x the rehearsal's ranks."""
        p = max(1, ranks)
        if p == 1:
            return 0.0
        share = (p - 1) / p
        if op in GATHERING:
            whole = nbytes * (rehearsal_ranks or p)
            return (p - 1) * self.latency_s + share * whole * self.wire_s_per_byte
        if op in HALF_OPS:
            reduce = share * nbytes * self.reduce_s_per_byte if op in REDUCING else 0.0
            return (p - 1) * self.latency_s + share * nbytes * self.wire_s_per_byte + reduce
        if op in TREE_OPS:
            return math.ceil(math.log2(p)) * (self.latency_s + (nbytes * self.wire_s_per_byte if op != "barrier" else 0))
        return 2 * (p - 1) * self.latency_s + 2 * share * nbytes * self.wire_s_per_byte + share * nbytes * self.reduce_s_per_byte

    def on_link(self, target: LinkProfile | None) -> LinkModel:
        """This model on another link: the wire time in the ratio of the rates, the latency by the change of delay.
        From an unshaped rehearsal the wire cannot get faster than it was (the host's copies set it)."""
        if target is None:
            return self
        wire = (self.wire_s_per_byte * self.rate_bps / target.rate_bps if self.rate_bps
                else max(self.wire_s_per_byte, 8 / target.rate_bps))
        delay = target.delay_us / 1e6
        return replace(self, wire_s_per_byte=wire, latency_s=max(1e-6, self.latency_s + delay - self.delay_s),
                       rate_bps=target.rate_bps, delay_s=delay)


def fit_link(calibration: dict, link: LinkProfile | None) -> LinkModel:
    """α and the per-byte slope from the calibration's all_reduce sweep at 2 ranks (least squares on relative
    error), γ as measured; the wire's 1/B is the slope less γ/2 (kept at least a fifth of the slope)."""
    rows = [(float(size), float(seconds)) for size, seconds in calibration["all_reduce"] if seconds > 0]
    ranks = int(calibration.get("world_size") or 2)
    share = (ranks - 1) / ranks
    # T = a + b·S, each row weighted by 1/T (relative error): solve the 2x2 normal equations.
    weights = [1 / seconds ** 2 for _, seconds in rows]
    sw = sum(weights)
    sx = sum(w * size for w, (size, _) in zip(weights, rows))
    sy = sum(w * seconds for w, (_, seconds) in zip(weights, rows))
    sxx = sum(w * size * size for w, (size, _) in zip(weights, rows))
    sxy = sum(w * size * seconds for w, (size, seconds) in zip(weights, rows))
    det = sw * sxx - sx * sx
    slope = (sw * sxy - sx * sy) / det if det else rows[-1][1] / rows[-1][0]
    intercept = (sy - slope * sx) / sw
    slope = max(slope, 1e-12)
    gamma = float(calibration.get("reduce_s_per_byte", calibration.get("reduce_seconds_per_byte")) or 0.0)
    wire = max(slope - share * gamma, 0.2 * slope) / (2 * share)
    gamma = (slope - 2 * share * wire) / share
    latency = max(intercept, 1e-6) / (2 * (ranks - 1))
    return LinkModel(latency, wire, max(gamma, 0.0), float(link.rate_bps) if link else None,
                     (link.delay_us / 1e6) if link else 0.0)


@dataclass(frozen=True)
class Replayed:
    seconds: float
    compute: float
    comm: float  # the collectives' own time, summed

    @property
    def exposed(self) -> float:
        return max(0.0, self.seconds - self.compute)


def replay(step: StepTrace, durations: list[float], compute_scale: float = 1.0) -> Replayed:
    """The step's actions again, computation scaled by `compute_scale`, collective i taking durations[i]."""
    clock = lane = compute = 0.0
    ends: dict[int, float] = {}
    for action in step.actions:
        if action.kind == "compute":
            clock += action.seconds * compute_scale
            compute += action.seconds * compute_scale
        elif action.kind == "issue":
            lane = max(clock, lane) + durations[action.index]
            ends[action.index] = lane
        else:
            clock = max(clock, ends.get(action.index, clock))
    return Replayed(clock, compute, sum(durations))


def model_durations(step: StepTrace, link: LinkModel, ranks: int, rehearsal_ranks: int, factor: float = 1.0,
                    byte_scale: dict[int, float] | None = None) -> list[float]:
    """Each collective of `step` on `link` at `ranks` ranks (a subgroup smaller than the rehearsal's world keeps its
    size), times the in-job `factor`; byte_scale[i] scales collective i's bytes (a what-if: compression)."""
    durations = []
    for index, collective in enumerate(step.collectives):
        group = collective.group_size or rehearsal_ranks
        size = ranks if group >= rehearsal_ranks else group
        nbytes = int(collective.nbytes * (byte_scale or {}).get(index, 1.0))
        durations.append(factor * link.collective_seconds(collective.op, nbytes, size, group))
    return durations


def fit_in_job_factor(steps: tuple[StepTrace, ...], link: LinkModel, ranks: int, compute_scale: float = 1.0) -> float:
    """The factor on the model's collective times for which the replay of a profiled step at the rehearsal's size
    takes as long as it did (bisection; the replay only grows with it), the median over the steps that waited (a step
    slowed by other work on the host moves one of them, not the fit). Where no step waited the collectives were
    hidden: any factor up to where they would show fits, and 1 is taken if it does."""
    def fitted(step: StepTrace) -> float:
        def replayed(factor: float) -> float:
            return replay(step, model_durations(step, link, ranks, ranks, factor), compute_scale).seconds

        low, high = FACTOR_RANGE
        if replayed(high) <= step.seconds * (1 + 1e-9):  # the step never waits for them, however slow
            return high
        if replayed(low) >= step.seconds:
            return low
        for _ in range(30):
            middle = math.sqrt(low * high)
            low, high = (middle, high) if replayed(middle) <= step.seconds else (low, middle)
        return low

    waiting = [step for step in steps if step.waited >= HIDDEN_SHARE * step.seconds]
    if waiting:
        return statistics.median(fitted(step) for step in waiting)
    return min(1.0, statistics.median(fitted(step) for step in steps))
