"""Ranks that ran the same code and still computed different things, which the script's own check then caught (its
error raised in its own code, not in torch): what the jobs' hooks saw each process do that makes replicas differ.

- a collective that wrote its result into a tensor (or list) nothing else held: the result was thrown away;
- an output list holding one tensor several times ([t] * world_size): every slot reads the last rank's piece;
- DDP forwards that all ran inside `no_sync()`: no gradient was ever all-reduced;
- DDP built with broadcast_buffers=False on a model with buffers: BatchNorm's statistics stay each rank's own;
- the user's own hash() of strings while each process has its own salt (PYTHONHASHSEED unset);
- learning rates that differ per rank at the same optimizer step (a scheduler stepped under `if rank == 0`);
- torch seeded differently per rank (or not at all) with no broadcast of the weights and no DDP to do it.
"""

from __future__ import annotations

import ast
import math
import re

from lab.analysis.calls import CallLog, DistCall
from lab.analysis.diagnosis.context import Context, echoes_a_peer, raised_by_own_check
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.signals import exited_alike
from lab.analysis.diagnosis.logs import LIBRARY_FILE, Traceback
from lab.analysis.diagnosis.sources import call_name, caller_place, calls_named, parsed_files, source_named, walk


def replica_findings(ctx: Context) -> list[Finding]:
    """Findings only where some rank's own code raised (its check of a result): the evidence is the hooks' record."""
    raised = [tb for tb in ctx.tracebacks if raised_by_own_check(ctx, tb)]
    logs = {trace.rank: (trace.node, trace.calls) for trace in ctx.evidence.traces
            if trace.rank is not None and trace.calls is not None}
    status = exited_alike(ctx) if not ctx.tracebacks else None  # a check that ends with sys.exit(1)
    exited = f"every rank exited with status {status} and no Python error (its own check)" if status else None
    if not (raised or exited) or not logs:
        return []
    evidence = "; ".join(sorted({f"rank {tb.rank}: {tb.short_type}: {tb.message}"[:200] for tb in raised}))[:600] \
        or exited
    return [finding for finding in (_discarded_result(logs, evidence), _aliased_outputs(logs, evidence),
                                    _never_synchronised(logs, evidence),
                                    _never_averaged(logs, evidence) if _means_ddp(ctx) else None, _buffers_apart(logs, evidence),
                                    _rates_apart(logs, evidence),
                                    _salted_hash(logs, evidence), _different_start(ctx, raised, logs, evidence))
            if finding is not None]


def _discarded_result(logs: dict[int, tuple[int | None, CallLog]], evidence: str) -> Finding | None:
    by_line: dict[tuple[str, str | None], list[tuple[int, int | None, DistCall]]] = {}
    for rank, (node, calls) in sorted(logs.items()):
        for call in calls.discarded:
            by_line.setdefault((call.op, call.caller), []).append((rank, node, call))
    if not by_line:
        return None
    (op, caller), found = next(iter(by_line.items()))
    rank, node, call = found[0]
    ranks = ", ".join(str(rank) for rank, _, _ in found)
    made = f"a {call.tensors[0]} tensor" if call.tensors else "a tensor"
    if call.discarded in ("tensor_list", "gather_list", "object_list"):
        return Finding(
            "collective-result-discarded", f"{op} at {caller} filled a list made for the call, which nothing keeps "
            f"(ranks {ranks}): the gathered values were thrown away as it returned", evidence, node, rank,
            f"keep the list in a variable, pass that to {op} and read the results from it (outputs = "
            f"[torch.empty_like(t) for _ in range(world_size)]; dist.{op}(outputs, t)), not from a list written "
            "inside the call's parentheses")
    return Finding(
        "collective-result-discarded", f"{op} at {caller} wrote its result into {made} made for the call, which "
        f"nothing keeps (ranks {ranks}): the result was thrown away as it returned, and every rank went on with its "
        "own values", evidence, node, rank,
        f"give {op} a tensor held in a variable and read the result from that variable (stacked = torch.stack(...); "
        f"dist.{op}(stacked); loss, correct = stacked.tolist()): torch.stack, torch.tensor, .clone() and .to() of "
        "another device or dtype make a new tensor, which the call fills and nobody reads")


ALIASED = re.compile(r"list of (?P<slots>\d+) holding (?P<tensors>\d+) tensors?")


def _aliased_outputs(logs: dict[int, tuple[int | None, CallLog]], evidence: str) -> Finding | None:
    """An output list that holds one tensor several times ([t] * world_size): every rank's piece is written into it
    in turn, and every slot reads the last."""
    for rank, (node, calls) in sorted(logs.items()):
        for call in calls.made:
            for name, text in call.args:
                if (found := ALIASED.match(text)) and int(found["tensors"]) < int(found["slots"]):
                    return Finding(
                        "output-list-aliased", f"{call.op} at {call.caller} was given a {name} of {found['slots']} "
                        f"slots holding {found['tensors']} tensor(s) ([t] * n makes one tensor n times): every rank's "
                        "piece was written into the same tensor, so every slot holds the last one", evidence, node,
                        rank, f"allocate one output tensor per rank: {name} = [torch.empty_like(t) for _ in "
                        "range(dist.get_world_size())] (a list comprehension, not [torch.empty_like(t)] * n)")
    return None


def meta_tensor_findings(ctx: Context) -> list[Finding]:
    """A collective given tensors on the meta device: they hold no data, so the call moves nothing into them (and the
    rank goes on as if it had), while its peers wait for or compute with what never came."""
    for trace in ctx.evidence.traces:
        for call in trace.calls.made if trace.calls else ():
            if any(tensor.device == "meta" for tensor in call.tensors):
                return [Finding(
                    "meta-tensors", f"rank {trace.rank}'s {call.op} at {call.caller} was given tensors on the meta "
                    "device (shapes without data): the model was built on meta (device='meta', init_empty_weights) "
                    "and never materialised, so nothing moves into it",
                    f"rank {trace.rank}: {call}", trace.node, trace.rank,
                    "materialise the model before any collective touches it: model.to_empty(device='cpu') (or "
                    "'cuda'), then broadcast or load the weights into it; build on meta only the ranks that load a "
                    "checkpoint right after")]
    return []


def _never_synchronised(logs: dict[int, tuple[int | None, CallLog]], evidence: str) -> Finding | None:
    quiet = {rank: (node, calls.ddp_forwards.get("no_sync", 0)) for rank, (node, calls) in sorted(logs.items())
             if calls.ddp_forwards.get("no_sync", 0) and not calls.ddp_forwards.get("synced", 0)}
    if not quiet:
        return None
    rank, (node, forwards) = next(iter(quiet.items()))
    ranks = ", ".join(map(str, quiet))
    return Finding(
        "gradients-not-synchronised", f"every DDP forward of ranks {ranks} ran inside no_sync() ({forwards} on rank "
        f"{rank}, none outside): DDP never all-reduced a gradient, so each rank stepped on its own gradients and the "
        "replicas drifted apart", evidence, node, rank,
        "run the last micro-batch of each accumulation outside no_sync(): only the first ACCUM-1 forward/backward "
        "passes go in `with model.no_sync():`, the last one (before optimizer.step()) runs plainly, and its backward "
        "all-reduces the accumulated gradients")


def _means_ddp(ctx: Context) -> bool:
    """The job's code (where the hooks kept it) builds a DistributedDataParallel somewhere: replicas are meant to
    train together. Code that trains each rank's model alone on purpose has none."""
    texts = [text for trace in ctx.evidence.traces for text in trace.sources.values()]
    return not texts or any("DistributedDataParallel" in text or "DDP(" in text for text in texts)


REDUCING = ("all_reduce", "reduce", "reduce_scatter", "reduce_scatter_tensor", "all_reduce_coalesced")


def _never_averaged(logs: dict[int, tuple[int | None, CallLog]], evidence: str) -> Finding | None:
    """Optimizer steps on every rank with no DDP forward and fewer reductions than steps: the gradients were never
    averaged (the model was not wrapped, or the wrapper not called)."""
    if len(logs) < 2:
        return None
    steps = {rank: calls.optimizer_steps for rank, (_, calls) in logs.items()}
    reductions = {rank: sum(calls.counts.get(op, 0) for op in REDUCING) for rank, (_, calls) in logs.items()}
    if not all(steps.values()) or any(sum(calls.ddp_forwards.get(kind, 0) for kind in ("synced", "no_sync"))
                                      for _, calls in logs.values()) or any(
            reductions[rank] >= steps[rank] for rank in logs):
        return None
    rank = min(logs)
    return Finding(
        "gradients-never-averaged", f"every rank took its optimizer steps on its own gradients ({steps[rank]} steps "
        f"on rank {rank}, no DDP forward, {reductions[rank]} reducing collectives): the model was not wrapped in "
        "DistributedDataParallel (or the wrapper was not the module called), so the replicas trained apart",
        evidence, logs[rank][0], rank,
        "wrap the model on every rank and train through the wrapper: model = DistributedDataParallel(model), then "
        "model(x) in the loop (a guard such as `if torch.cuda.device_count() > 1:` skips it on CPU nodes: wrap "
        "whenever dist.get_world_size() > 1); or all_reduce each gradient and divide by the world size before "
        "optimizer.step()")


def _buffers_apart(logs: dict[int, tuple[int | None, CallLog]], evidence: str) -> Finding | None:
    apart = {rank: (node, calls.ddp_forwards["buffers_not_broadcast"]) for rank, (node, calls) in sorted(logs.items())
             if calls.ddp_forwards.get("buffers_not_broadcast")}
    if not apart:
        return None
    rank, (node, buffers) = next(iter(apart.items()))
    return Finding(
        "buffers-not-broadcast", f"DDP was built with broadcast_buffers=False on a model with {buffers} buffers "
        "(BatchNorm's running mean and variance): each rank's buffers follow its own data, so the replicas' weights "
        "agree and their evaluation does not", evidence, node, rank,
        "keep broadcast_buffers=True (DDP then copies rank 0's buffers at every forward), or convert the model with "
        "torch.nn.SyncBatchNorm.convert_sync_batchnorm(model) before wrapping it, or broadcast the buffers from rank 0 "
        "before evaluating (for b in model.module.buffers(): dist.broadcast(b, src=0))")


def _rates_apart(logs: dict[int, tuple[int | None, CallLog]], evidence: str) -> Finding | None:
    """The ranks took as many optimizer steps with different learning rates: a scheduler stepped (or a rate set) on
    some ranks only. DDP averages the gradients, not the updates, so the replicas drift apart."""
    rates = {rank: (node, calls.optimizer_steps, calls.learning_rates) for rank, (node, calls) in sorted(logs.items())
             if calls.optimizer_steps}
    if len(rates) < 2 or len({steps for _, steps, _ in rates.values()}) != 1 \
            or len({learning for _, _, learning in rates.values()}) < 2:
        return None
    shown = ", ".join(f"rank {rank} {', '.join(f'{rate:g}' for rate in learning)}"
                      for rank, (_, _, learning) in list(rates.items())[:4])
    rank, (node, steps, _) = next(iter(rates.items()))
    return Finding(
        "learning-rate-differs", f"the ranks took {steps} optimizer steps each with different learning rates ({shown}): "
        "a learning-rate scheduler stepped, or a rate set, on some ranks only; DDP averages the gradients, not the "
        "updates, so the replicas drifted apart", evidence, node, rank,
        "step the scheduler (and set any learning rate) on every rank, outside `if rank == 0:` blocks such as "
        "logging or checkpointing; only the printing belongs there")


def _salted_hash(logs: dict[int, tuple[int | None, CallLog]], evidence: str) -> Finding | None:
    probes = {calls.hash_probe for _, calls in logs.values() if calls.hash_probe is not None}
    hashed = [(rank, node, caller) for rank, (node, calls) in sorted(logs.items()) for caller in calls.hashed]
    if len(probes) < 2 or not hashed:
        return None
    rank, node, caller = hashed[0]
    return Finding(
        "hash-differs-per-process", f"hash() of strings at {caller} gives each process its own value: Python salts "
        "string hashes per process (PYTHONHASHSEED is not set), so the ranks computed different assignments from the "
        "same names", evidence, node, rank,
        "use a hash that is the same in every process (zlib.crc32(name.encode()), or int(hashlib.md5(name.encode())"
        ".hexdigest(), 16)), or set one PYTHONHASHSEED for every process before Python starts (`lab torchrun --env "
        "PYTHONHASHSEED=0`, the same on every node)")


def _different_start(ctx: Context, raised: list[Traceback], logs: dict[int, tuple[int | None, CallLog]],
                     evidence: str) -> Finding | None:
    """Every rank's own check failed alike, their seeds differ, and nothing made their weights the same."""
    lines = {(tb.short_type, tb.frames[-1].file, tb.frames[-1].line) for tb in raised}
    ranks = {tb.rank for tb in raised}
    if len(lines) != 1 or None in ranks or len(ranks) < (ctx.evidence.expected_world_size or 2):
        return None
    seeds = {rank: calls.torch_seed for rank, (_, calls) in sorted(logs.items()) if calls.torch_seed is not None}
    synced = any(calls.counts.get("broadcast") or sum(calls.ddp_forwards.values()) for _, calls in logs.values())
    unsynced_ddp = _ddp_without_init_sync(ctx)
    if len(set(seeds.values())) < 2 or (synced and not unsynced_ddp):
        return None
    shown = ", ".join(f"rank {rank} {seed}" for rank, seed in list(seeds.items())[:4])
    if unsynced_ddp:
        rank = min(seeds)
        return Finding(
            "initial-weights-differ", f"the ranks started from different weights: torch's seed differs per rank "
            f"({shown}) and {unsynced_ddp} skips what DDP does when it wraps a model, broadcasting rank 0's "
            "parameters and buffers; DDP then averages the gradients, so every update is the same and the weights "
            "stay as far apart as they began", evidence, logs[rank][0], rank,
            "let DDP broadcast rank 0's weights (drop init_sync=False), or build the model under one seed on every "
            "rank and seed per rank only what must differ (the augmentation, dropout)")
    # averaged by hand: all_reduce of floating tensors of several shapes (a model's gradients), not one metric
    averaged = {rank: {call.tensors[0] for call in (*calls.recent, *calls.failed)
                       if call.op == "all_reduce" and call.tensors and "float" in call.tensors[0].dtype}
                for rank, (_, calls) in logs.items()}
    rank = min(seeds)
    if len(averaged.get(rank, ())) < 2:
        return None
    shapes = ", ".join(sorted(map(str, averaged[rank]))[:4])
    return Finding(
        "initial-weights-differ", f"the ranks started from different weights: torch's seed differs per rank "
        f"({shown}) and nothing broadcast rank 0's parameters (no broadcast, no DDP); the gradients averaged by hand "
        f"(all_reduce of {shapes}) keep the updates equal but never the weights", evidence, logs[rank][0], rank,
        "start every rank from rank 0's weights: after building the model, `for p in model.parameters(): "
        "dist.broadcast(p.data, src=0)` (DDP does this when it wraps the model), or build the model under the same "
        "seed on every rank and seed per rank only what must differ (the data order)")


def _ddp_without_init_sync(ctx: Context) -> str | None:
    """'`DDP(model, init_sync=False)` (FILE:LINE)' where the job wraps a model without DDP's first broadcast."""
    for source in parsed_files(ctx):
        for call in calls_named(source, {"DDP", "DistributedDataParallel"}):
            if any(keyword.arg == "init_sync" and ast.unparse(keyword.value) == "False" for keyword in call.keywords):
                return f"`{ast.unparse(call)[:60]}` ({source.name}:{call.lineno})"
    return None


SHARING = ("broadcast", "broadcast_object_list", "scatter", "scatter_object_list")


# What ranks that resumed from different states show: out of step, or the script's check of their results.
APART = {"collective-mismatch", "uneven-collectives", "shape-mismatch", "late-rank", "collective-timeout", "peer-lost",
         "timed-out", "rank-crashed"}


def discarded_decision_findings(ctx: Context, found: list[Finding]) -> list[Finding]:
    """Ranks that went apart after a decision sent through a tensor made for the call (`dist.broadcast(torch.tensor(
    int(stop)), src=0)`): nothing keeps what was received, so each rank decides on its own value, and the ranks take
    different paths (one stops, the others train on) until their collectives no longer match."""
    if not any(finding.cause in APART for finding in found):
        return []
    files = parsed_files(ctx)
    for trace in ctx.evidence.traces:
        for call in trace.calls.discarded if trace.calls else ():
            place = caller_place(call.caller)
            if call.op not in ("broadcast", "all_reduce") or not call.tensors or math.prod(call.tensors[0].shape) > 1 or \
                    place is None or (source := source_named(files, place[0])) is None:
                continue
            statement = source.statement_at(place[1])
            sent = next((node.args[0] for node in walk(statement) if call_name(node) == call.op and node.args), None) \
                if statement else None
            decided = _decided_on(source, statement, sent) if sent is not None else None
            if decided is None:
                continue
            value, branch = decided
            return [Finding(
                "decision-result-discarded", f"{call.op} at {call.caller} sent a decision into a tensor made for the "
                f"call (`{ast.unparse(sent)[:60]}`), which nothing keeps: each rank then decided on its own "
                f"`{value}` (`{ast.unparse(branch.test)[:50]}`, line {branch.lineno}), so the ranks took different "
                "paths (one stopped or skipped, the others went on) and their collectives no longer matched",
                found[0].evidence, trace.node, trace.rank,
                f"keep the tensor and decide from what it holds after the call, on every rank: flag = "
                f"{ast.unparse(sent)[:60]}; dist.{call.op}(flag{', src=0' if call.op == 'broadcast' else ''}); "
                "if flag.item(): ...")]
    return []


def _decided_on(source, statement: ast.AST, sent: ast.AST) -> tuple[str, ast.If] | None:
    """(the value, the `if`) where an `if` after the call tests what was put into the sent tensor (`stop.should_stop`
    in `torch.tensor(int(stop.should_stop))`)."""
    values = {ast.unparse(node) for node in walk(sent) if isinstance(node, (ast.Name, ast.Attribute))} - {"torch"}
    after = (statement.end_lineno or statement.lineno)
    for branch in (node for node in source.walk() if isinstance(node, ast.If) and after < node.lineno <= after + 5):
        tested = {ast.unparse(node) for node in walk(branch.test) if isinstance(node, (ast.Name, ast.Attribute))}
        if shared := sorted(values & tested, key=len, reverse=True):
            return shared[0], branch
    return None


def resume_findings(ctx: Context, found: list[Finding]) -> list[Finding]:
    """A checkpoint loaded by some ranks and not by the others, with nothing sent from the ranks that loaded it, in a
    run whose ranks went out of step or disagreed: they started from different states (epochs, steps, weights).
    (Loading on rank 0 alone is fine where DDP or a broadcast then hands the state on and the ranks stay in step.)"""
    if not any(finding.cause in APART for finding in found):
        return []
    logs = {trace.rank: (trace.node, trace.calls) for trace in ctx.evidence.traces
            if trace.rank is not None and trace.calls is not None}
    if len(logs) < 2:
        return []
    loaded: dict[str, set[int]] = {}
    for rank, (_, calls) in logs.items():
        for op in calls.files:
            if op.op == "load" and not op.error:
                loaded.setdefault(op.path, set()).add(rank)
    for path, ranks in loaded.items():
        others = sorted(set(logs) - ranks)
        if not others or any(sum(logs[rank][1].counts.get(op, 0) for op in SHARING) for rank in ranks):
            continue
        if any(tb.rank in ranks and not echoes_a_peer(tb) for tb in ctx.tracebacks):
            continue  # a rank that loaded it then failed of its own error (a load_state_dict refused): it resumed nothing
        readers = ", ".join(map(str, sorted(ranks)))
        rank = min(ranks)
        caller = next(op.caller for op in logs[rank][1].files if op.path == path and op.op == "load")
        return [Finding(
            "resumed-on-some-ranks", f"only rank{'s' if len(ranks) > 1 else ''} {readers} loaded {path} (at {caller}); "
            f"rank{'s' if len(others) > 1 else ''} {', '.join(map(str, others))} never did and started from scratch, "
            "and nothing was sent from the ranks that loaded it: the ranks resumed from different states (epochs, "
            "steps, weights)", f"torch.load of {path}: ranks {readers}; none on ranks {', '.join(map(str, others))}",
            logs[rank][0], rank,
            "restore on every rank: each rank loads the checkpoint (torch.load(path, map_location='cpu')) and takes "
            "its epoch and step from it, with a barrier after rank 0's save; or load on rank 0 and send the state "
            "and the epoch to the others (broadcast_object_list) before training goes on")]
    return []
