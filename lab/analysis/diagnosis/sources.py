"""What the user's own code says where no message and no record of a call does: the text of the job's files (the
jobs' hooks keep it, `sources` of their dumps) read with Python's parser.

- a value read from the environment, a string, compared with a number (`RANK == 0` is never true, `!= 0` always),
  so the branch meant for one rank runs on every rank or on none;
- a tensor read after its collective was started with async_op=True (or posted with irecv) and before the work was
  waited for: the read sees the rank's own values, not the result;
- `sys.exit(main())` where main() returns a value: a rank that finished its work exits with that status;
- layers held in a plain list or dict of a module (`self.blocks = [Block() ...]`): never registered, so never
  synchronised nor trained;
- an IterableDataset that does not split its records among the DataLoader's workers (no get_worker_info()),
  loaded with num_workers > 0: every worker yields the whole share;
- a DistributedSampler's padding (the dataset made a multiple of the world size) counted in an evaluation whose
  total the script's check finds too large by less than the world size;
- a value the script's check finds world-size times too large, with an all_reduce left at SUM: a sum, not a mean;
- a DataLoader with no sampler in a job of several ranks, where no DistributedSampler is used: every rank goes
  through the whole dataset;
- a DistributedSampler whose set_epoch() is never called, in a script that loops over epochs: every epoch repeats
  the first one's order;
- a share of the data sized by the world size and taken without the rank (`ids[:n // world]`, `chunks[0]` of
  `x.chunk(world)`): every rank takes the same samples and the others are never seen.

Each fires only where the rest of the diagnosis found nothing more specific than a crash, a file no node has or a
timeout: code like this is wrong wherever it runs, but it is the cause only where nothing else is.
"""

from __future__ import annotations

import ast
import functools
import math
import os
import re
from dataclasses import dataclass
from functools import cached_property

from lab.analysis.calls import DistCall
from lab.analysis.diagnosis.context import (Context, echoes_a_peer, failed_check_of, node_of_rank, quoted_source,
                                            raised_by_own_check, gist)
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.flight import FailedCheck

# What these findings may stand in front of: endings that say how a run failed, not why.
UNEXPLAINED = {"rank-crashed", "rank-exited", "file-missing-everywhere", "nonzero-exit", "timed-out",
               "collective-timeout", "peer-lost", "ranks-missing", "late-rank", "store-key-never-set", "stopped",
               "uneven-collectives", "process-killed",
               # told from where the value came, not what it is: any rule that says more outranks them
               "rank-made-value-out-of-range", "several-rank-path-only"}
# The argument an operation writes its result into (recv's buffer, a collective's output).
RESULT_ARGUMENT = {"all_reduce": (0, "tensor"), "broadcast": (0, "tensor"), "reduce": (0, "tensor"),
                   "irecv": (0, "tensor"), "all_gather": (0, "tensor_list"), "gather": (1, "gather_list"),
                   "all_gather_into_tensor": (0, "output_tensor"), "reduce_scatter": (0, "output"),
                   "reduce_scatter_tensor": (0, "output"), "all_to_all_single": (0, "output"),
                   "all_to_all": (0, "output_tensor_list"), "scatter": (0, "tensor")}
METADATA = {"shape", "dtype", "device", "size", "numel", "dim", "ndim", "requires_grad", "is_contiguous"}


def source_findings(ctx: Context, found: list[Finding]) -> list[Finding]:
    """Findings from the job's own files, where `found` (the other rules' findings) holds no specific cause."""
    if any(finding.cause not in UNEXPLAINED for finding in found):
        return []
    files = parsed_files(ctx)
    if not files:
        return []
    evidence = failure_summary(ctx)
    crashing = (_read_before_wait(ctx, files, evidence), _env_string_compared(files, evidence),
                _share_without_rank(files, evidence), _modules_in_plain_list(files, evidence),
                _exit_status_returned(ctx, files, evidence), _iterable_not_split(files, evidence),
                _none_off_one_rank(ctx, files, evidence), _option_left_a_string(ctx, files, evidence),
                _bool_option(files, evidence), _store_of_one_process(ctx, files, evidence),
                _bool_summed_as_count(ctx, files, evidence),
                _loaded_into_empty(ctx, files, evidence), _buffer_reused_before_sent(files, evidence),
                _child_signal_ignored(ctx, files, evidence), _last_batch_into_pipeline(ctx, files, evidence),
                _link_target_relative(ctx, files, evidence), _share_rounded_up(ctx, files, evidence),
                _read_before_flushed(ctx, files, evidence), _loop_over_endless_stream(ctx, files, evidence),
                _global_count_skips_own_indices(files, evidence), _rate_scaled_by_world(ctx, files, evidence),
                _variance_by_cancellation(ctx, files, evidence), _nan_from_an_empty_share(ctx, files, evidence),
                _nothing_in_this_share(ctx, files, evidence, found), _index_made_float(ctx, files, evidence),
                _shares_rounded_apart(ctx, files, evidence), _rank_state_in_a_fingerprint(ctx, files, evidence))
    silent = (_sampler_padding(ctx, files, evidence), _sum_not_mean(ctx, files, evidence),
              _data_not_sharded(ctx, files, evidence), _epoch_not_set(files, evidence),
              _local_denominator(files, evidence), _no_eval_mode(files, evidence),
              _optimizer_before_change(files, evidence), _zero_grad_once(files, evidence),
              _loaded_not_strict(files, evidence), _counts_in_low_precision(files, evidence),
              _sampler_seed_per_rank(files, evidence), _gathered_without_gradient(files, evidence),
              _weights_in_low_precision(ctx, files, evidence),
              _scheduler_per_micro_batch(ctx, files, evidence), _unfrozen_after_ddp(files, evidence),
              _off_by_the_world(ctx, files, evidence)) if not library_raised(ctx) else ()
    return [finding for finding in (*crashing, *silent) if finding is not None]


NON_FINITE = re.compile(r"\b(?:nan|inf|infinite|non-?finite|not finite|diverg\w*)\b", re.IGNORECASE)
WARM_UP = re.compile(r"warm_?up|LinearLR|LambdaLR|OneCycleLR|SequentialLR", re.IGNORECASE)


def _rate_scaled_by_world(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A loss that went nan or inf, in a job whose learning rate is multiplied by the world size (the linear scaling
    rule): DDP averages the gradients, so each step is world-size times the one the rate was tuned for, and a model
    that was stable in one process diverges."""
    said = next((f"{tb.exc_type}: {tb.message}".strip()[:120] for tb in ctx.tracebacks
                 if NON_FINITE.search(tb.message) or tb.short_type == "FloatingPointError"), None)
    world = ctx.evidence.expected_world_size
    if said is None or world < 2:
        return None
    for source in files:
        for call in (node for node in source.walk() if isinstance(node, ast.Call)
                     and call_name(node) in OPTIMIZERS):
            rate = next((item.value for item in call.keywords if item.arg == "lr"), None) or (
                call.args[1] if len(call.args) > 1 else None)
            if rate is None or (made := _scaled_up(source, rate)) is None:
                continue
            steps = " -> ".join(f"`{ast.unparse(node)[:80]}` (line {node.lineno})" for node in made)
            warmed = any(WARM_UP.search(name) for name in source.names)
            return Finding(
                "learning-rate-scaled-by-world", f"the loss went non-finite ({said}), and the learning rate grows "
                f"with the world size: {steps}, given to {call_name(call)} at {source.name}:{call.lineno}: with "
                f"{world} ranks each step is {world}x the one a single process takes (DDP averages the gradients, "
                "so the larger rate is the whole step)" + ("" if warmed else ", with no warm-up"), evidence, None,
                None, "keep the learning rate the single process was tuned with, or scale it by sqrt(world size); "
                "where you scale it, warm up to it over the first hundreds of steps (torch.optim.lr_scheduler."
                "LinearLR(opt, start_factor=1 / world_size, total_iters=N)) and clip the gradient norm "
                "(torch.nn.utils.clip_grad_norm_)")
    return None


def _scaled_up(source: SourceFile, rate: ast.AST) -> list[ast.AST] | None:
    """The assignments by which `rate` grows with the world size (`base_lr * world`, `base * global_batch / ref` with
    `global_batch = per_rank * world`), outermost first; None where it does not grow with it (a rate divided by it)."""
    chain: list[ast.AST] = []

    def sign(node: ast.AST, depth: int = 0) -> int:
        """+1 where `node` grows with the world size, -1 where it shrinks, 0 where it does not hold it."""
        if isinstance(node, ast.Name):
            if node.id in WORLD_NAMES:
                return 1
            if node.id not in source.worlds or depth > 3:
                return 0
            made = source.assignments_to(node.id)
            if len(made) != 1:
                return 0
            found = sign(made[0].value, depth + 1)
            if found:
                chain.append(made[0])
            return found
        if isinstance(node, ast.BinOp):
            left, right = sign(node.left, depth), sign(node.right, depth)
            if isinstance(node.op, ast.Div | ast.FloorDiv):
                right = -right
            total = left + right
            return (total > 0) - (total < 0)
        if reads_world_size(node):
            return 1
        return 0

    if sign(rate) <= 0:
        return None
    return sorted(chain, key=lambda node: -node.lineno) or [rate]


def _bool_summed_as_count(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A bool tensor summed with all_reduce and compared with the world size: a SUM of bools stays a bool (a logical
    or), so it reads 1 however many ranks said yes, and the count never reaches the world (a loop that waits for
    every rank to be done runs on)."""
    for source in files:
        for reduced in (call for call in calls_named(source, {"all_reduce"}) if call.args and identifier(call.args[0])):
            if not reduced_with(reduced, "SUM"):
                continue
            name, scope = identifier(reduced.args[0]), source.function_of(reduced)
            made = source.assignments_to(name, scope, before=reduced.lineno)
            value = made[-1].value if made else None
            if not _bool_tensor(value):
                continue
            compared = next((node for node in walk(scope) if isinstance(node, ast.Compare)
                             and node.lineno > reduced.lineno and name in names_in(node)
                             and any(identifier(part) in WORLD_NAMES or reads_world_size(part) for part in walk(node))),
                            None)
            if compared is None:
                continue
            return Finding(
                "bool-summed-as-count", f"`{name}` ({source.name}:{made[-1].lineno}) is a bool tensor, summed over the "
                f"ranks by all_reduce (line {reduced.lineno}) and compared with the world size (`"
                f"{ast.unparse(compared)[:50]}`, line {compared.lineno}): a SUM of bools stays a bool (a logical or), "
                "so it is 1 however many ranks said yes and never equals a world of 2 or more", evidence, None, None,
                f"count in an integer tensor (torch.tensor(int(...)) or dtype=torch.int64) before the SUM, or keep "
                "the bool and ask what you mean: ReduceOp.MIN for 'every rank', MAX for 'any rank'")
    return None


def _bool_tensor(value: ast.AST | None) -> bool:
    """`torch.tensor(not pending)`, `torch.tensor(x > 0)`, `torch.tensor(flag, dtype=torch.bool)`, `t.bool()`."""
    if not isinstance(value, ast.Call):
        return False
    if call_name(value) == "bool" and isinstance(value.func, ast.Attribute):
        return True
    dtype = argument(value, 99, "dtype")
    if dtype is not None:
        return ast.unparse(dtype).endswith("bool")
    given = value.args[0] if call_name(value) in ("tensor", "as_tensor") and value.args else None
    return isinstance(given, (ast.Compare, ast.BoolOp)) or isinstance(given, ast.UnaryOp) and isinstance(
        given.op, ast.Not) or isinstance(given, ast.Constant) and isinstance(given.value, bool) or isinstance(
        given, ast.Call) and call_name(given) == "bool"


def _store_of_one_process(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """init_process_group given a HashStore: it lives in one process's memory, so ranks never see each other's keys."""
    if ctx.evidence.expected_world_size < 2:
        return None
    for source in files:
        made = next(iter(calls_named(source, {"HashStore"})), None)
        hash_stores = {name for name, value in assignments(source) if any(
            isinstance(part, ast.Call) and call_name(part) == "HashStore" for part in walk(value))}
        joined = next((node for node in calls_named(source, {"init_process_group"}) for item in node.keywords
                       if item.arg == "store" and (names_in(item.value) & hash_stores or any(
                           isinstance(part, ast.Call) and call_name(part) == "HashStore"
                           for part in walk(item.value)))), None)  # the store given is (or may be) the HashStore
        if made is not None and joined is not None:
            return Finding(
                "store-of-one-process", f"the process group meets on a HashStore ({source.name}:{made.lineno}, given "
                f"to init_process_group at line {joined.lineno}): a HashStore lives in the memory of the process that "
                "made it, so each rank waits in its own store for keys the others write to theirs, until the timeout",
                evidence, None, None,
                "give every rank one store it can reach: dist.TCPStore(MASTER_ADDR, MASTER_PORT, world_size, "
                "is_master=(rank == 0)), or no store at all (init_method='env://', what torchrun sets up); a "
                "HashStore is for processes of one rank's own (tests)")
    return None


def _loaded_into_empty(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """torch.distributed.checkpoint's load given an empty dict: it loads in place into the keys the dict holds, so
    an empty one stays empty, and the next read of a key raises KeyError."""
    if not any(tb.short_type == "KeyError" for tb in ctx.tracebacks):
        return None
    for source in files:
        for load in calls_named(source, {"load"}):
            if not (load.args and isinstance(load.args[0], ast.Name) and checkpoint_call(load)):
                continue
            name, scope = load.args[0].id, source.function_of(load)
            empty = next((node for node in source.assignments_to(name, scope, before=load.lineno)
                           if isinstance(node.value, ast.Dict) and not node.value.keys), None)
            if empty is not None:
                return Finding(
                    "checkpoint-loaded-into-empty", f"`{ast.unparse(load)[:60]}` ({source.name}:{load.lineno}) loads "
                    f"into {name}, which is an empty dict (line {empty.lineno}): torch.distributed.checkpoint loads in "
                    "place into the keys and tensors the dict already holds, so nothing is loaded and the next read "
                    "of a key raises KeyError", evidence, None, None,
                    f"give load the structure to fill: {name} = {{'model': model.state_dict()}} (and the other keys "
                    f"that were saved), dcp.load({name}, ...), then model.load_state_dict({name}['model']); or "
                    "torch.distributed.checkpoint.state_dict.set_state_dict after loading into get_state_dict's "
                    "dicts")
    return None


IN_PLACE_WRITES = {"copy_", "fill_", "zero_", "add_", "mul_", "sub_", "div_", "index_copy_", "scatter_", "normal_",
                   "uniform_"}


def _buffer_reused_before_sent(files: list[SourceFile], evidence: str) -> Finding | None:
    """A loop that writes a tensor in place and hands it to isend (or irecv) on every pass, waiting only after the
    loop: a non-blocking send reads the tensor while it runs, so later passes overwrite what earlier ones send."""
    for source in files:
        for loop in (node for node in source.walk() if isinstance(node, (ast.For, ast.While))):
            body = [node for statement in loop.body for node in walk(statement)]
            if any(isinstance(node, ast.Call) and call_name(node) == "wait" for node in body):
                continue
            for post in (node for node in body if isinstance(node, ast.Call) and call_name(node) in {"isend", "irecv"}
                         and node.args and isinstance(node.args[0], ast.Name)):
                name = post.args[0].id
                written = next((node for node in body if isinstance(node, ast.Call) and call_name(node) in
                                IN_PLACE_WRITES and isinstance(node.func, ast.Attribute)
                                and isinstance(node.func.value, ast.Name) and node.func.value.id == name), None)
                if written is None:
                    continue
                return Finding(
                    "buffer-reused-before-sent", f"`{ast.unparse(post)[:50]}` ({source.name}:{post.lineno}) posts "
                    f"{name} on every pass of the loop at line {loop.lineno}, which writes {name} in place first "
                    f"(`{ast.unparse(written)[:40]}`, line {written.lineno}) and waits only after it: a non-blocking "
                    f"{call_name(post)} uses the tensor until it completes, so later passes overwrite what the earlier "
                    "ones were still sending (the receiver gets the last contents several times)", evidence, None,
                    None, f"give each {call_name(post)} a tensor of its own ({name}.clone(), or one buffer per "
                    "message), or wait() on a request before writing into its tensor again (two buffers, "
                    "alternating, waiting on the older one)")
    return None


def library_raised(ctx: Context) -> bool:
    """Every error of the run was raised by library code (torch refusing a call at the user's line), none by a check
    of the job's own: a mistake that only makes the numbers wrong (an epoch's order, a mean, a mode) explains a check
    that failed, not a crash."""
    return bool(ctx.tracebacks) and not any(raised_by_own_check(ctx, tb) for tb in ctx.tracebacks)


def walk(node: ast.AST) -> tuple[ast.AST, ...]:
    """walk(node), kept on the node: the rules walk the same trees and subtrees thousands of times in one
    diagnosis, and walking them again was three quarters of its time. Nothing changes a parsed tree."""
    try:
        return node._lab_walked
    except AttributeError:
        node._lab_walked = walked = tuple(ast.walk(node))
        return walked


@dataclass(frozen=True)
class SourceFile:
    path: str
    tree: ast.Module
    parents: dict[int, ast.AST]  # id(node) -> the node that holds it

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(id(node))

    def walk(self, node: ast.AST | None = None) -> tuple[ast.AST, ...]:
        return walk(node or self.tree)

    def statement_of(self, node: ast.AST) -> ast.AST:
        """The statement `node` is part of (itself, for a statement)."""
        while not isinstance(node, ast.stmt) and self.parent(node) is not None:
            node = self.parent(node)
        return node

    def loop_of(self, node: ast.AST) -> ast.AST | None:
        """The innermost for or while loop of the same function that holds `node` (a `break`'s loop)."""
        while (node := self.parent(node)) is not None:
            if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
                return node
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return None
        return None

    def function_of(self, node: ast.AST) -> ast.AST:
        """The innermost function (or the module) `node` is in."""
        while (node := self.parent(node)) is not None:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return node
        return self.tree

    def statement_at(self, line: int) -> ast.stmt | None:
        """The first statement that starts at `line` (a frame's line), the outermost where several do."""
        return next((node for node in self.walk() if isinstance(node, ast.stmt) and node.lineno == line), None)

    def statement_spanning(self, line: int) -> ast.stmt | None:
        """The innermost simple statement whose lines hold `line`: a traceback's line inside a statement written over
        several lines (Python names the line of the call that raised, not the statement's first)."""
        spanning = [node for node in self.walk() if isinstance(node, ast.stmt) and not hasattr(node, "body")
                    and node.lineno <= line <= (node.end_lineno or node.lineno)]
        return min(spanning, key=lambda node: (node.end_lineno or node.lineno) - node.lineno, default=None)

    def handler_at(self, line: int) -> str | None:
        """'except ValueError (line 40)' or 'finally (line 44)': the handler of its function that line `line` runs in."""
        node = self.statement_at(line)
        while node is not None and (holder := self.parent(node)) is not None:
            if isinstance(holder, ast.ExceptHandler):
                caught = f" {ast.unparse(holder.type)}" if holder.type is not None else ""
                return f"except{caught} (line {holder.lineno})"
            if isinstance(holder, ast.Try) and node in holder.finalbody:
                return f"finally (line {node.lineno - 1})"
            if isinstance(holder, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return None
            node = holder
        return None

    def assignments_to(self, name: str, scope: ast.AST | None = None, before: int | None = None) -> list[ast.Assign]:
        """The `name = ...` statements (`a, name = ...` among them) in `scope` (the whole file by default), above line
        `before` where given."""
        return [node for node in self.walk(scope) if isinstance(node, ast.Assign)
                and (before is None or node.lineno < before)
                and any(isinstance(part, ast.Name) and part.id == name for target in node.targets
                        for part in ([target] if isinstance(target, ast.Name) else
                                     target.elts if isinstance(target, (ast.Tuple, ast.List)) else []))]

    @cached_property
    def names(self) -> set[str]:
        """The names and attribute names the code uses (not its strings, docstrings or comments)."""
        return names_in(self.tree)

    @cached_property
    def ranks(self) -> set[str]:
        """The names that hold a rank (read once per file by every rule that asks)."""
        return derived(self, RANK_NAMES, RANK_VARIABLES, RANK_CALLS)

    @cached_property
    def worlds(self) -> set[str]:
        return derived(self, WORLD_NAMES, WORLD_VARIABLES, ("get_world_size",))


def source_named(files: list[SourceFile], path: str) -> SourceFile | None:
    """The job's file that `path` (a frame's full path, or a file name) names."""
    name = path.rsplit("/", 1)[-1]
    return next((source for source in files if source.name == name), None)


def parsed_files(ctx: Context) -> list[SourceFile]:
    texts = {}
    for trace in ctx.evidence.traces:
        for path, text in trace.sources.items():
            texts.setdefault(path, text)
    return [source for path, text in texts.items() if (source := _parsed(path, text)) is not None]


@functools.lru_cache(maxsize=32)
def _parsed(path: str, text: str) -> SourceFile | None:
    """One parse of a job's file for all the rules that read it (each asks parsed_files again)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    return SourceFile(path, tree, {id(child): node for node in walk(tree) for child in ast.iter_child_nodes(node)})


def failure_summary(ctx: Context) -> str:
    if ctx.tracebacks:
        tb = ctx.tracebacks[0]
        return f"node{tb.node}" + (f" rank {tb.rank}" if tb.rank is not None else "") + \
            f": {tb.short_type}: {tb.message}"[:300]
    return "the run failed" + (" (timed out)" if ctx.evidence.timed_out else "")


def _read_before_wait(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """An async operation the ranks posted (the hooks' record) whose result tensor the code reads before its wait."""
    posted: dict[tuple[str, int], tuple[DistCall, int | None, int | None]] = {}
    for trace in ctx.evidence.traces:
        for call in trace.calls.posted if trace.calls else ():
            where = caller_place(call.caller)
            if where and call.op in RESULT_ARGUMENT:
                posted.setdefault(where, (call, trace.node, trace.rank))
    for (name, line), (call, node, rank) in posted.items():
        for source in files:
            if source.name != name:
                continue
            early = _early_read(source, call.op, line)
            if early is None:
                continue
            tensor, read_at, waited_at, work = early
            waited = f"before {work}.wait() at line {waited_at}" if waited_at else \
                "and the work it returned is never waited for"
            started = "was posted" if call.op == "irecv" else "was started with async_op=True"
            return Finding(
                "async-result-read-early", f"{call.op} at {name}:{line} {started} and "
                f"{tensor} is read at line {read_at}, {waited}: that read sees this rank's own values (or a result "
                "half written), not the result of the collective", evidence, node, rank,
                f"read {tensor} only after the work is done: keep the work (work = dist.{call.op}(..., "
                f"async_op=True)), call work.wait() and only then use {tensor} (move line {read_at} below the "
                f"wait), or make the call without async_op")
    return None


def caller_place(caller: str | None) -> tuple[str, int] | None:
    """('train.py', 41) of 'train.py:41 in step'."""
    if not caller:
        return None
    place = caller.split(" in ", 1)[0]
    name, _, line = place.rpartition(":")
    return (name, int(line)) if line.isdigit() else None


def _early_read(source: SourceFile, op: str, line: int) -> tuple[str, int, int | None, str] | None:
    """(the tensor, the line reading it, the wait's line or None, the work's name) for the call of `op` at `line`."""
    call = next((node for node in source.walk() if isinstance(node, ast.Call) and node.lineno <= line
                 <= (node.end_lineno or node.lineno) and call_name(node) == op), None)
    if call is None:
        return None
    position, keyword = RESULT_ARGUMENT[op]
    tensor = root_name(argument(call, position, keyword))
    statement = source.parent(call)
    if tensor is None or not isinstance(statement, ast.Assign) or len(statement.targets) != 1 or not isinstance(
            statement.targets[0], ast.Name):
        return None  # a work not kept in a name (a list of works, a tuple) is waited for where this cannot follow
    work = statement.targets[0].id
    scope = source.function_of(call)
    after = (statement.end_lineno or statement.lineno)
    uses = [node for node in walk(scope) if isinstance(node, ast.Name) and node.lineno > after
            and source.function_of(node) is scope]
    if any(node.id == work and not _waits(source, node) for node in uses):
        return None  # the work is passed on (a list, a helper): where it is waited for is not here
    waited_at = min((node.lineno for node in uses if node.id == work and _waits(source, node)), default=None)
    reads = sorted(node.lineno for node in uses if node.id == tensor and isinstance(node.ctx, ast.Load)
                   and (waited_at is None or node.lineno < waited_at) and not _metadata(source, node))
    return (tensor, reads[0], waited_at, work) if reads else None


def origin_of(source: SourceFile, expression: ast.AST, scope: ast.AST, wanted, depth: int = 0) -> list[tuple[str, int]]:
    """The assignments (text, line) by which `expression` follows from something `wanted(expression)` recognises,
    outermost first and the longest way through the names first, the last one a ("", 0) for the origin itself; []
    where it does not follow from it."""
    names = sorted({node.id for node in walk(expression) if isinstance(node, ast.Name) and not wanted(node)})
    if depth < 4:
        for name in names:
            for assign in reversed(source.assignments_to(name, scope, before=getattr(expression, "lineno", None))):
                if chain := origin_of(source, assign.value, scope, wanted, depth + 1):
                    target = next(target for target in assign.targets if name in names_in(target))
                    assigned = ", ".join(map(ast.unparse, getattr(target, "elts", [target])))
                    return [(f"{assigned} = {ast.unparse(assign.value)[:60]}", assign.lineno)] + chain
    return [("", 0)] if wanted(expression) else []


def made_of(source: SourceFile, expression: ast.AST, scope: ast.AST, depth: int = 0) -> list[ast.AST]:
    """`expression` and what it is made of, a few steps back: the values its names are assigned in `scope` before
    it, and what the file's own functions it calls return."""
    made = [expression]
    if depth > 3:
        return made
    functions = {node.name: node for node in source.walk() if isinstance(node, ast.FunctionDef)}
    for node in walk(expression):
        if isinstance(node, ast.Name):
            for assign in source.assignments_to(node.id, scope, before=expression.lineno):
                made += made_of(source, assign.value, scope, depth + 1)
        elif isinstance(node, ast.Call) and (function := functions.get(call_name(node))) is not None and \
                function is not scope:
            for returned in (part for part in walk(function) if isinstance(part, ast.Return) and part.value):
                made += made_of(source, returned.value, function, depth + 1)
    return made


def collective_at(files: list[SourceFile], call: DistCall) -> tuple[SourceFile, ast.Call] | None:
    """(its file, the call in the job's code) of a torch.distributed call the hooks recorded, from its caller line."""
    place = caller_place(call.caller)
    source = source_named(files, place[0]) if place else None
    statement = source.statement_at(place[1]) if source else None
    made = next((node for node in walk(statement) if isinstance(node, ast.Call) and call_name(node) == call.op
                 and node.args), None) if statement is not None else None
    return (source, made) if made is not None else None


def kept_by_a_local_test(source: SourceFile, expression: ast.AST, scope: ast.AST) -> tuple[str, ast.AST, bool] | None:
    """(the list, the test, whether the test skips an item rather than keeps it) where `expression` is made of a list whose items each rank keeps or skips by a test on its
    own data (an `if` around the append, an `if ...: continue` before it, a comprehension's `if`): the list's length,
    and every size made from it, then differs per rank. Tests of the rank, the world size or constants alone are the
    same code's choice on every rank, not the data's."""
    names = {node.id for made in made_of(source, expression, scope) for node in walk(made) if isinstance(node, ast.Name)}
    for made in made_of(source, expression, scope):
        for part in walk(made):
            if isinstance(part, (ast.ListComp, ast.GeneratorExp)):
                test = next((test for generator in part.generators for test in generator.ifs
                             if _tests_the_data(source, test)), None)
                if test is not None:
                    return ast.unparse(part)[:60], test, False
    for call in calls_named(source, {"append", "extend"}):
        listed = root_name(call.func.value) if isinstance(call.func, ast.Attribute) else None
        loop = source.loop_of(call) if listed in names else None
        if loop is None:
            continue
        tests = [test for test in conditions_above(source, call) if source.loop_of(test) is loop or test is loop]
        skips = [node.test for node in walk(loop) if isinstance(node, ast.If) and node.lineno < call.lineno
                 and any(isinstance(step, ast.Continue) for step in node.body)]
        test = next((test for test in tests + skips if _tests_the_data(source, test)), None)
        if test is not None:
            return listed, test, test in skips
    return None


def _tests_the_data(source: SourceFile, test: ast.AST) -> bool:
    """A test that reads values (a call or an attribute: `idx.numel() == 0`, `np.ptp(col) > 0`) and not the rank."""
    return any(isinstance(node, (ast.Call, ast.Attribute)) for node in walk(test)) and not any(
        identifier(node) in RANK_NAMES | WORLD_NAMES or call_name(node) in RANK_CALLS + ("get_world_size",)
        for node in walk(test))


def conditions_above(source: SourceFile, node: ast.AST) -> list[ast.AST]:
    """The tests of the ifs, loops and conditional expressions `node` is inside, innermost first."""
    tests = []
    while (node := source.parent(node)) is not None:
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            tests.append(node.test)
    return tests


NUMBER_CALLS = {"int": int, "float": float, "round": round, "abs": abs, "max": max, "min": min, "floor": math.floor,
                "ceil": math.ceil, "sqrt": math.sqrt, "log2": math.log2}
ARITHMETIC = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
              ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
              ast.Pow: lambda a, b: a ** b}


def value_at_world(source: SourceFile, expression: ast.AST, scope: ast.AST, world: int,
                   callers: list[tuple[SourceFile, ast.stmt]] = (), depth: int = 0, count: bool = False
                   ) -> float | None:
    """What a number in the job comes to at this run's world size, where it is made of constants, the world size,
    arithmetic and the lengths of lists made from them (through assignments, module constants and, for a
    parameter, the call the caller made); None where anything else goes into it. With `count`, how many items
    `expression` holds (`[t for _ in range(world)]`, torch.stack of it) rather than its value."""
    if depth > 16 or expression is None:
        return None

    def value(node, at_scope=scope, calls=callers, items=False):
        return value_at_world(source, node, at_scope, world, calls, depth + 1, items)
    if isinstance(expression, ast.Name) and not (count is False and expression.id in WORLD_NAMES):
        made = source.assignments_to(expression.id, scope, before=getattr(expression, "lineno", None))
        if made and isinstance(made[-1].targets[0], ast.Name):
            return value(made[-1].value, items=count)
        if isinstance(scope, ast.FunctionDef) and expression.id in {arg.arg for arg in scope.args.args}:
            passed = passed_by_caller(scope, expression.id, callers)
            return value_at_world(*passed[:3], world, passed[3], depth + 1, count) if passed else None
        top = [assign for assign in source.assignments_to(expression.id, source.tree)
               if source.function_of(assign) is source.tree]
        return value(top[-1].value, source.tree, (), count) if len(top) == 1 and isinstance(
            top[0].targets[0], ast.Name) else None
    if count:
        if isinstance(expression, (ast.List, ast.Tuple)) and not any(isinstance(item, ast.Starred)
                                                                      for item in expression.elts):
            return len(expression.elts)
        if isinstance(expression, ast.ListComp) and len(expression.generators) == 1 \
                and not expression.generators[0].ifs:
            looped = expression.generators[0].iter
            if isinstance(looped, ast.Call) and call_name(looped) == "range" and len(looped.args) == 1:
                return value(looped.args[0])
            return value(looped, items=True)
        if isinstance(expression, ast.BinOp) and isinstance(expression.op, ast.Mult):
            listed, times = value(expression.left, items=True), value(expression.right)
            return listed * times if listed is not None and times is not None else None
        if isinstance(expression, ast.Call) and call_name(expression) in SAME_LENGTH and expression.args:
            return value(expression.args[0], items=True)
        return None
    if isinstance(expression, ast.Constant) and isinstance(expression.value, (int, float)) \
            and not isinstance(expression.value, bool):
        return expression.value
    if reads_world_size(expression) or isinstance(expression, ast.Name) and expression.id in WORLD_NAMES:
        return world
    if isinstance(expression, ast.UnaryOp) and isinstance(expression.op, ast.USub):
        inner = value(expression.operand)
        return -inner if inner is not None else None
    if isinstance(expression, ast.BinOp) and type(expression.op) in ARITHMETIC:
        left, right = value(expression.left), value(expression.right)
        if left is None or right is None:
            return None
        try:
            return ARITHMETIC[type(expression.op)](left, right)
        except (ZeroDivisionError, OverflowError, ValueError):
            return None
    # a length: len(x), x.shape[0], x.size(0)
    if isinstance(expression, ast.Call) and call_name(expression) == "len" and len(expression.args) == 1:
        return value(expression.args[0], items=True)
    if isinstance(expression, ast.Subscript) and isinstance(expression.value, ast.Attribute) \
            and expression.value.attr == "shape" and isinstance(expression.slice, ast.Constant) \
            and expression.slice.value == 0:
        return value(expression.value.value, items=True)
    if isinstance(expression, ast.Call) and call_name(expression) == "size" and isinstance(expression.func, ast.Attribute) \
            and len(expression.args) == 1 and isinstance(expression.args[0], ast.Constant) and expression.args[0].value == 0:
        return value(expression.func.value, items=True)
    if isinstance(expression, ast.Call) and call_name(expression) in NUMBER_CALLS and expression.args:
        given = [value(arg) for arg in expression.args]
        try:
            return None if None in given else NUMBER_CALLS[call_name(expression)](*given)
        except (TypeError, ValueError, OverflowError):
            return None
    return None


def passed_by_caller(scope: ast.FunctionDef, name: str, callers: list[tuple[SourceFile, ast.stmt]]):
    """What the innermost caller passed for parameter `name` of `scope`: (its file, the expression, its scope, the
    callers above it), or None. A method's call is found by its name, or (`net(x, state)` for forward) by its
    number of arguments."""
    names = [arg.arg for arg in scope.args.args]
    if name not in names or not callers:
        return None
    caller_source, statement = callers[0]
    method = names[0] == "self"
    calls = [node for node in walk(statement) if isinstance(node, ast.Call)]
    call = next((node for node in calls if call_name(node) == scope.name), None) or next(
        (node for node in calls if method and len(node.args) == len(names) - 1), None)
    position = names.index(name) - (1 if method else 0)
    given = argument(call, position, name) if call is not None and position >= 0 else None
    return (caller_source, given, caller_source.function_of(statement), callers[1:]) if given is not None else None


SAME_LENGTH = {"stack", "tensor", "as_tensor", "list", "tuple", "sorted", "array", "asarray", "vstack"}


def argument(call: ast.Call, position: int, keyword: str) -> ast.AST | None:
    """What `call` passes as its parameter `keyword`, the `position`-th (0-based): positionally, or by name."""
    if len(call.args) > position:
        return call.args[position]
    return next((item.value for item in call.keywords if item.arg == keyword), None)


def reduced_with(call: ast.Call, op: str) -> bool:
    """An all_reduce asks for the reduction `op` ('SUM', 'MAX'), SUM being what it does when given none."""
    given = argument(call, 1, "op")
    return ast.unparse(given).endswith(op) if given is not None else op == "SUM"


def calls_named(source: SourceFile, names: set[str]) -> list[ast.Call]:
    """The calls in `source` of a function or method with one of `names`."""
    return [node for node in source.walk() if isinstance(node, ast.Call) and call_name(node) in names]


def loaders_with_workers(source: SourceFile) -> list[tuple[ast.Call, str]]:
    """The DataLoaders of `source` that start worker processes (num_workers given, not 0), with what it is given."""
    return [(loader, ast.unparse(count)) for loader in calls_named(source, {"DataLoader"}) for count in (next(
        (item.value for item in loader.keywords if item.arg == "num_workers"), None),)
            if count is not None and not (isinstance(count, ast.Constant) and count.value in (0, None))]


def self_attribute(node: ast.AST) -> str | None:
    """X of `self.X`, else None."""
    return node.attr if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
        node.value.id == "self" else None


def call_name(call: ast.AST) -> str | None:
    """The name of the function or method called; None for what is not a call (a bare `@staticmethod`)."""
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def called_on(call: ast.Call) -> str:
    """The text of what a method is called on (`np.random` of `np.random.seed(0)`); '' for a plain function."""
    return ast.unparse(call.func.value) if isinstance(call.func, ast.Attribute) else ""


def checkpoint_call(call: ast.Call) -> bool:
    """A call of torch.distributed.checkpoint's (dcp.save, torch.distributed.checkpoint.load, ...)."""
    return "dcp" in called_on(call) or "checkpoint" in called_on(call)


def root_name(node: ast.AST | None) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _waits(source: SourceFile, name: ast.Name) -> bool:
    """`work.wait()` (or is_completed(), get_future()): the work is waited for there."""
    attribute = source.parent(name)
    return isinstance(attribute, ast.Attribute) and attribute.attr in ("wait", "is_completed", "get_future")


def _metadata(source: SourceFile, name: ast.Name) -> bool:
    """`t.shape`, `t.size()`: what a tensor is, not its values."""
    attribute = source.parent(name)
    return isinstance(attribute, ast.Attribute) and attribute.attr in METADATA


def _env_string_compared(files: list[SourceFile], evidence: str) -> Finding | None:
    for source in files:
        strings = _env_strings(source)
        for node in source.walk():
            if not isinstance(node, ast.Compare) or len(node.ops) != 1 or not isinstance(
                    node.ops[0], (ast.Eq, ast.NotEq)):
                continue
            left, right = node.left, node.comparators[0]
            for value, number in ((left, right), (right, left)):
                name = _env_string(source, value, strings)
                if name and isinstance(number, ast.Constant) and type(number.value) is int:
                    verdict = "never true, on any rank" if isinstance(node.ops[0], ast.Eq) else \
                        "always true, on every rank"
                    shown = ast.unparse(node)
                    option = _options_from_env(source).get(value.attr) if isinstance(value, ast.Attribute) else None
                    where = (f"give the option a type where it is declared: add_argument(\"{option[1]}\", type=int, "
                             "...) (argparse converts a default only through type=)" if option else
                             "convert it where it is read: int(os.environ.get(...))")
                    return Finding(
                        "env-string-compared", f"{source.name}:{node.lineno} compares {name}, a string read from "
                        f"the environment ('0', '1', ...), with the number {number.value}: `{shown}` is {verdict}, so "
                        "what it guards runs on every rank or on none", evidence, None, None,
                        f"{where} (or take the rank from dist.get_rank() / int(os.environ['RANK'])), so `{shown}` "
                        "compares numbers")
    return None


def _env_strings(source: SourceFile) -> dict[tuple[int, str], str]:
    """(id of a scope, a name) -> the variable: names whose every assignment in that scope is an environment read
    left a string; functions (scope 0) whose every return is one."""
    assigned: dict[tuple[int, str], list[ast.AST | None]] = {}
    returns: dict[str, list[ast.AST | None]] = {}
    for node in source.walk():
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            statement = source.parent(node)
            value = statement.value if isinstance(statement, (ast.Assign, ast.AnnAssign)) else None
            assigned.setdefault((id(source.function_of(node)), node.id), []).append(value)
        elif isinstance(node, ast.Return) and isinstance(scope := source.function_of(node), ast.FunctionDef):
            returns.setdefault(scope.name, []).append(node.value)
    strings = {key: variable for key, values in assigned.items()
               if (variable := _same_variable(env_read(value) for value in values))}
    strings.update({(0, name): variable for name, values in returns.items()
                    if (variable := _same_variable(env_read(value) for value in values))})
    return strings


def _same_variable(variables) -> str | None:
    found = set(variables)
    return found.pop() if len(found) == 1 and None not in found else None


def _env_string(source: SourceFile, node: ast.AST, strings: dict[tuple[int, str], str]) -> str | None:
    """The variable `node` holds as a string: an environment read, a name assigned one, a call of a function that
    returns one."""
    if direct := env_read(node):
        return direct
    if isinstance(node, ast.Name):
        scope = source.function_of(node)
        local = (id(scope), node.id)
        if local in strings:
            return strings[local]
        assigned_here = any(key == local for key in _assigned_names(source, scope))
        return None if assigned_here else strings.get((id(source.tree), node.id))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
        return strings.get((0, node.func.id))
    if isinstance(node, ast.Attribute) and (option := _options_from_env(source).get(node.attr)):
        return f"{option[0]} (the default of the option {option[1]}, which has no type=)"
    return None


def _options_from_env(source: SourceFile) -> dict[str, tuple[str, str]]:
    """argparse options whose default is read from the environment and that convert nothing (no type=, no action):
    dest -> (the variable, the option). argparse converts a string default only through type=, so the parsed value
    stays the environment's string."""
    found = {}
    for call in calls_named(source, {"add_argument"}):
        keywords = {keyword.arg: keyword.value for keyword in call.keywords}
        variable = env_read(keywords.get("default"))
        options = [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        if variable is None or "type" in keywords or "action" in keywords or not options:
            continue
        dest = keywords["dest"].value if isinstance(keywords.get("dest"), ast.Constant) else \
            next((option for option in options if option.startswith("--")), options[0]).lstrip("-").replace("-", "_")
        found[dest] = (variable, options[0])
    return found


def _assigned_names(source: SourceFile, scope: ast.AST):
    for node in walk(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and source.function_of(node) is scope:
            yield id(scope), node.id


def env_read(node: ast.AST | None) -> str | None:
    """'RANK' for os.environ['RANK'], os.environ.get('RANK', 0), os.getenv('RANK'): a string whenever it is set."""
    if isinstance(node, ast.Subscript) and _is_environ(node.value):
        key = node.slice
    elif isinstance(node, ast.Call) and node.args and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == "get" and _is_environ(node.func.value))
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "getenv")
            or (isinstance(node.func, ast.Name) and node.func.id == "getenv")):
        key = node.args[0]
    else:
        return None
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


RANK_NAMES = {"rank", "local_rank", "global_rank", "node_rank", "process_index", "local_process_index", "proc_id",
              "worker_rank", "shard_id", "shard_index"}
WORLD_NAMES = {"world_size", "world", "num_processes", "nprocs", "num_replicas", "num_shards", "nnodes", "world_sz"}
RANK_VARIABLES = {"RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}
WORLD_VARIABLES = {"WORLD_SIZE", "LOCAL_WORLD_SIZE", "NNODES", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"}
RANK_CALLS = ("get_rank", "get_local_rank", "get_node_local_rank")
SPLITS = {"chunk", "split", "array_split", "tensor_split"}


def _share_without_rank(files: list[SourceFile], evidence: str) -> Finding | None:
    for source in files:
        ranks, worlds = source.ranks, source.worlds
        shares = {name for name, value in assignments(source) if value is not None and _a_share(value, worlds)}
        chunked = {name for name, value in assignments(source) if isinstance(value, ast.Call)
                   and call_name(value) in SPLITS and _mentions(value, worlds | shares)}
        for node in source.walk():
            if not isinstance(node, ast.Subscript) or holds(node.slice, ranks, RANK_VARIABLES, RANK_CALLS) or holds(
                    node.value, ranks, RANK_VARIABLES, RANK_CALLS):
                continue  # the rank is in the slice, or what is sliced is already the rank's part (its batches)
            taken = isinstance(node.slice, ast.Slice) and not _multiplied(node.slice, worlds) and (
                _divides(node.slice, worlds) or _mentions(node.slice, shares)
                or (node.slice.step is not None and _mentions(node.slice.step, worlds)))
            first = (isinstance(node.slice, ast.Constant) and isinstance(node.value, ast.Name)
                     and node.value.id in chunked)
            if taken or first:
                shown = ast.unparse(node)
                return Finding(
                    "share-ignores-rank", f"{source.name}:{node.lineno} takes each rank's share of the data as "
                    f"`{shown}`: sized by the world size but the same on every rank (no rank in it), so every "
                    "rank works on the same samples and the rest are never seen", evidence, None, None,
                    "offset the share by the rank: data[rank * per_rank:(rank + 1) * per_rank] or data[rank::world] "
                    "(chunks[rank] of a chunk(world)), with rank = dist.get_rank(); or let "
                    "DistributedSampler(dataset) split it")
    return None


def assignments(source: SourceFile):
    """(name, value) of every plain assignment, tuple assignments item by item (rank, world = a, b), and each name
    unpacked from one value with that whole value (xs, ys = shard(x, y, rank, world))."""
    for node in source.walk():
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    yield target.id, node.value
                elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(
                        target.elts) == len(node.value.elts):
                    yield from ((item.id, value) for item, value in zip(target.elts, node.value.elts)
                                if isinstance(item, ast.Name))
                elif isinstance(target, ast.Tuple) and not isinstance(node.value, ast.Tuple):
                    yield from ((item.id, node.value) for item in target.elts if isinstance(item, ast.Name))


UNORDERED_CALLS = {"set": "a set", "frozenset": "a set", "listdir": "os.listdir()", "scandir": "os.scandir()",
                   "glob": "a glob", "iglob": "a glob", "iterdir": "Path.iterdir()", "rglob": "a glob"}


def unordered(source: SourceFile, expression: ast.AST) -> tuple[str, str] | None:
    """(what kind, its text) when `expression` iterates without an order the ranks share; a sorted() one is ordered."""
    if isinstance(expression, (ast.Set, ast.SetComp)):
        return "a set", ast.unparse(expression)[:60]
    if isinstance(expression, ast.Call) and (called := call_name(expression)) in UNORDERED_CALLS:
        return UNORDERED_CALLS[called], ast.unparse(expression)[:60]
    if isinstance(expression, ast.BinOp) and isinstance(expression.op, (ast.Sub, ast.BitOr, ast.BitAnd, ast.BitXor)) \
            and any(unordered(source, side) == ("a set", ast.unparse(side)[:60])
                    for side in (expression.left, expression.right)):  # set algebra gives a set
        return "a set", ast.unparse(expression)[:60]
    if isinstance(expression, ast.Name):  # a name the same function (or the module) set to one
        for node in source.assignments_to(expression.id, source.function_of(expression), before=expression.lineno):
            if (found := unordered(source, node.value)) is not None:
                return found[0], f"{expression.id} = {found[1]}"
    return None


def derived(source: SourceFile, names: set[str], variables: set[str], calls: tuple[str, ...]) -> set[str]:
    """Names that hold a rank (or a world size): parameters and attributes so named, torch's calls, the environment's
    variables, and names assigned from any of them."""
    found = set(names)
    for node in source.walk():
        if isinstance(node, ast.arg) and node.arg in names:
            found.add(node.arg)
    assigned = list(assignments(source))
    functions = [node for node in source.walk() if isinstance(node, ast.FunctionDef)]
    calls = tuple(calls)
    while True:
        more = {name for name, value in assigned if name not in found and holds(value, found, variables, calls)}
        more |= _parameters_given(functions, source, found, variables, calls) - found
        returning = {function.name for function in functions if function.name not in calls and any(
            isinstance(node, ast.Return) and node.value is not None and holds(node.value, found, variables, calls)
            for node in walk(function))}  # a function whose result holds it: its calls do too
        if not more and not returning:
            return found
        found |= more
        calls += tuple(returning)


def _parameters_given(functions: list[ast.FunctionDef], source: SourceFile, names: set[str], variables: set[str],
                      calls: tuple[str, ...]) -> set[str]:
    """The parameters of the file's functions that a call in the file passes a name holding it (`score(rank,
    world)` into `def score(shard, num_shards)`): by position, or by keyword."""
    given = set()
    for function in functions:
        parameters = [arg.arg for arg in function.args.args]
        for call in calls_named(source, {function.name}) + _module_calls(source, function):
            skip = 1 if parameters[:1] in (["self"], ["cls"]) and (
                isinstance(call.func, ast.Attribute) or call_name(call) != function.name) else 0
            for parameter, argument in zip(parameters[skip:], call.args):
                if not isinstance(argument, ast.Starred) and holds(argument, names, variables, calls):
                    given.add(parameter)
            given |= {keyword.arg for keyword in call.keywords if keyword.arg in parameters
                      and holds(keyword.value, names, variables, calls)}
    return given


def _module_calls(source: SourceFile, function: ast.FunctionDef) -> list[ast.Call]:
    """The calls that reach `function` when it is a class's forward: calls of the class's instances (`tower(x)` with
    `tower = ItemTower().eval()`, `self.block(x)`), which nn.Module's __call__ hands to forward."""
    owner = source.parent(function)
    if function.name != "forward" or not isinstance(owner, ast.ClassDef):
        return []
    made = [node for node in source.walk() if isinstance(node, ast.Assign)
            and any(call_name(part) == owner.name for part in walk(node.value))]
    names = {target.id for node in made for target in node.targets if isinstance(target, ast.Name)}
    attributes = {self_attribute(target) for node in made for target in node.targets} - {None}
    return [node for node in source.walk() if isinstance(node, ast.Call) and (
        isinstance(node.func, ast.Name) and node.func.id in names or self_attribute(node.func) in attributes)]


def holds(node: ast.AST, names: set[str], variables: set[str], calls: tuple[str, ...]) -> bool:
    for part in walk(node):
        if isinstance(part, ast.Name) and part.id in names or isinstance(part, ast.Attribute) and part.attr in names:
            return True
        if isinstance(part, ast.Call) and call_name(part) in calls or env_read(part) in variables:
            return True
    return False


def _mentions(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(part, ast.Name) and part.id in names or isinstance(part, ast.Attribute)
               and part.attr in names for part in walk(node))


def _a_share(node: ast.AST, worlds: set[str]) -> bool:
    """An expression that divides by a world size and does not multiply back (n // world, not n // world * world)."""
    return _divides(node, worlds) and not _multiplied(node, worlds)


def _multiplied(node: ast.AST, worlds: set[str]) -> bool:
    """Something times a world size (per_rank * world): the whole, trimmed to a multiple, not one share."""
    return any(isinstance(part, ast.BinOp) and isinstance(part.op, ast.Mult) and any(
        _mentions(side, worlds) and not _divides(side, worlds) for side in (part.left, part.right))
        for part in walk(node))


def _divides(node: ast.AST, worlds: set[str]) -> bool:
    return any(isinstance(part, ast.BinOp) and isinstance(part.op, (ast.FloorDiv, ast.Div))
               and _mentions(part.right, worlds) for part in walk(node))


def _modules_in_plain_list(files: list[SourceFile], evidence: str) -> Finding | None:
    """`self.blocks = [Block() for _ in range(n)]` in a module: layers nn.Module does not register."""
    for source in files:
        for cls in source.walk():
            if not isinstance(cls, ast.ClassDef) or not a_module(cls):
                continue
            for node in walk(cls):
                if (isinstance(node, ast.Assign) and len(node.targets) == 1 and self_attribute(node.targets[0])
                        and _layers(node.value)):
                    kind = "dict" if isinstance(node.value, (ast.Dict, ast.DictComp)) else "list"
                    holder = "nn.ModuleDict" if kind == "dict" else "nn.ModuleList"
                    attribute = node.targets[0].attr
                    return Finding(
                        "modules-in-plain-list", f"{cls.name} keeps layers in a plain Python {kind} (`self.{attribute} "
                        f"= ...` at {source.name}:{node.lineno}): nn.Module does not register them, so "
                        "model.parameters(), DDP (no broadcast, no gradient averaging), the optimizer and state_dict "
                        "never see their weights", evidence, None, None,
                        f"hold them in a {holder}: self.{attribute} = {holder}(...) around the same {kind} (it "
                        "iterates and indexes like the plain one)")
    return None


def a_module(cls: ast.ClassDef) -> bool:
    """A class of torch.nn.Module (by its bases' names) or one with a forward method."""
    return any((ast.unparse(base).split(".")[-1] in ("Module", "Sequential")) for base in cls.bases) or any(
        isinstance(item, ast.FunctionDef) and item.name == "forward" for item in cls.body)


def _layers(value: ast.AST) -> bool:
    """A list or dict (literal or comprehension) of calls that build objects: Block(...), nn.Linear(...)."""
    if isinstance(value, (ast.ListComp, ast.DictComp)):
        items = [value.elt] if isinstance(value, ast.ListComp) else [value.value]
    elif isinstance(value, ast.List):
        items = value.elts
    elif isinstance(value, ast.Dict):
        items = value.values
    else:
        return False
    return bool(items) and all(isinstance(item, ast.Call) and call_name(item) and call_name(item)[0].isupper()
                               for item in items)


ENDLESS_CALLS = {"cycle", "count", "repeat"}  # itertools' iterators without an end


def _endless(function: ast.AST) -> ast.AST | None:
    """The construct that makes an __iter__ endless: iter(f, sentinel), itertools.cycle/count/repeat, `while True`
    with no break or return in it."""
    for node in walk(function):
        if isinstance(node, ast.Call) and (call_name(node) in ENDLESS_CALLS or (
                call_name(node) == "iter" and len(node.args) == 2)):
            return node
        if isinstance(node, ast.While) and isinstance(node.test, ast.Constant) and node.test.value is True and not any(
                isinstance(part, (ast.Break, ast.Return)) for part in walk(node)):
            return node
    return None


def endless_stream(source: SourceFile) -> tuple[ast.ClassDef, ast.AST] | None:
    """(the class, the construct) of an IterableDataset in `source` whose __iter__ never ends."""
    for cls in (node for node in source.walk() if isinstance(node, ast.ClassDef)
                and any("IterableDataset" in ast.unparse(base) for base in node.bases)):
        for method in cls.body:
            if isinstance(method, ast.FunctionDef) and method.name == "__iter__" and (found := _endless(method)):
                return cls, found
    return None


def _loop_over_endless_stream(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A run stopped at its timeout with every rank computing in one loop of its own code (not waiting in
    torch.distributed), and an IterableDataset in the job whose __iter__ never ends: the loop runs over that stream."""
    if not ctx.evidence.timed_out:
        return None
    points = [process.waiting() for process in ctx.evidence.processes if process.rank is not None
              and process.role != "agent"]
    waiting = any(trace.waiting_in or (trace.calls and trace.calls.pending) for trace in ctx.evidence.traces)
    if waiting or not points or any(point is None or point.user_frame is None for point in points):
        return None  # a rank in a collective, a store or a rendezvous: the waits' own findings tell it
    places = {(point.user_frame.file.rsplit("/", 1)[-1], point.user_frame.line) for point in points}
    for source in files:
        endless = endless_stream(source)
        loop = next((node for node in source.walk() if isinstance(node, (ast.For, ast.AsyncFor)) and any(
            name == source.name and node.lineno <= line <= (node.end_lineno or node.lineno) for name, line in places)),
            None)
        if endless is None or loop is None:
            continue
        cls, construct = endless
        return Finding(
            "loop-over-endless-stream", f"every rank was still computing in the loop at {source.name}:{loop.lineno} "
            f"(`for ... in {ast.unparse(loop.iter)[:40]}`) when the lab stopped the run, not waiting for a peer: "
            f"{cls.name}.__iter__ never ends (`{ast.unparse(construct)[:50]}`, line {construct.lineno}), so a loop "
            "over it runs until something breaks out of it", evidence, None, None,
            f"give the loop an end: iterate a finite stream where a pass must end (an evaluation: draw each sample "
            f"once), or stop after a number of batches (itertools.islice(loader, steps)); an endless {cls.name} "
            "needs the loop to count its steps")
    return None


def _read_before_flushed(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A file a rank read that the job's code keeps open for writing (`self.fh = open(path, 'a')`) and flushes or
    closes only after that read, or never: what was written sat, whole or in part, in the writer's buffer when the
    file was read."""
    writes = {op.path: op for trace in ctx.evidence.traces if trace.calls for op in trace.calls.writes}
    read = next(((trace.rank, op) for trace in ctx.evidence.traces if trace.calls for op in trace.calls.reads
                 if op.path in writes), None)
    place = caller_place(writes[read[1].path].caller) if read else None
    source = source_named(files, place[0]) if place else None
    if source is None:
        return None
    opened = next((node for node in source.walk() if isinstance(node, ast.Assign) and node.lineno == place[1]
                   and isinstance(node.value, ast.Call) and call_name(node.value) == "open"), None)
    if opened is None:
        return None
    handle = ast.unparse(opened.targets[0])
    rank, op = read
    read_at = caller_place(op.caller)
    if not _unflushed_when_read(source, handle, read_at[1] if read_at and read_at[0] == source.name else None):
        return None
    size = "at 0 bytes" if op.size == 0 else f"at {op.size:,} bytes"
    return Finding(
        "read-before-flushed", f"rank {rank} read {op.path.rsplit('/', 1)[-1]} {size} ({op.caller}): the job writes "
        f"it through `{ast.unparse(opened)[:60]}` ({source.name}:{opened.lineno}), kept open and not flushed or "
        "closed before that read, so what was written sat, whole or in part, in the writer's buffer when the file "
        "was read", evidence, None, rank,
        f"flush it where the readers may start ({handle}.flush(), and os.fsync({handle}.fileno()) for a reader on "
        "another host) or close it before the barrier that lets them read; or open it line-buffered (buffering=1)")


def _unflushed_when_read(source: SourceFile, handle: str, read_line: int | None) -> bool:
    """No flush or close of `handle` (self.fh is log.fh to the code outside the class) comes before line
    `read_line` of the function that reads: none at all, or each one only after it (`writer.close()` below the
    read, where the class's close() closes the handle)."""
    tail = handle.rsplit(".", 1)[-1]
    closers = [node for node in source.walk() if isinstance(node, ast.Call) and call_name(node) in (
        "flush", "close") and isinstance(node.func, ast.Attribute)
        and ast.unparse(node.func.value).rsplit(".", 1)[-1] == tail]
    if not closers:
        return True
    if read_line is None or (reader := source.statement_at(read_line)) is None:
        return False
    scope = source.function_of(reader)
    lines = []
    for closer in closers:
        method = source.function_of(closer)
        if method is scope:
            lines.append(closer.lineno)
        elif isinstance(method, ast.FunctionDef):  # called through the writer's method: where that is called
            lines += [call.lineno for call in calls_named(source, {method.name})
                      if source.function_of(call) is scope] or [0]
        else:
            lines.append(0)
    return all(line > read_line for line in lines)


def rounded_up(node: ast.AST, worlds: set[str]) -> bool:
    """math.ceil(n / world), -(-n // world) or (n + world - 1) // world."""
    if isinstance(node, ast.Call) and call_name(node) == "ceil" and node.args:
        return _mentions(node.args[0], worlds)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return isinstance(node.operand, ast.BinOp) and isinstance(node.operand.op, ast.FloorDiv) and _mentions(
            node.operand.right, worlds)
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and _mentions(node.right, worlds) and \
        isinstance(node.left, ast.BinOp) and _mentions(node.left, worlds)


def _share_rounded_up(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A share of the data rounded up (ceil of n / world) that the last rank alone crashed on: its window, rank *
    share to (rank + 1) * share, runs past the end of the data, which holds fewer than world * share items."""
    world = ctx.evidence.expected_world_size
    own = [tb for tb in ctx.tracebacks if not echoes_a_peer(tb)]
    if not world or world < 2 or {tb.rank for tb in own} != {world - 1} or not any(
            tb.short_type in EMPTINESS_ERRORS for tb in own):
        return None  # a short or empty window raises as working on nothing does, not a KeyError or a TypeError
    for source in files:
        for name, value in assignments(source):
            if rounded_up(value, source.worlds) and _windowed(source, name) and not _clipped(source, name) \
                    and not _divides_evenly(source, value, world):
                return Finding(
                    "share-rounded-up", f"`{name} = {ast.unparse(value)[:50]}` ({source.name}:{value.lineno}) rounds "
                    f"each rank's share up, so the shares add up to more than the data holds: the last rank, "
                    f"{world - 1}, the only one that failed, gets a window that runs past the end", evidence,
                    node_of_rank(ctx, world - 1), world - 1,
                    f"clip the last rank's window to the data (end = min(start + {name}, total)), or take the shares "
                    "from torch.tensor_split / np.array_split, which hand the remainder out one item at a time")
    return None


def _windowed(source: SourceFile, share: str) -> bool:
    """The share places a rank's window: multiplied by the rank (`rank * share`, `(rank + 1) * share`)."""
    return any(isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and any(
        _mentions(side, {share}) for side in (node.left, node.right)) and any(
        holds(side, source.ranks, RANK_VARIABLES, RANK_CALLS) for side in (node.left, node.right))
        for node in source.walk())


def _clipped(source: SourceFile, share: str) -> bool:
    """The window made from the share is clipped to the data (`min(total, (rank + 1) * share)`)."""
    return any(call_name(node) == "min" and _mentions(node, {share}) for node in source.walk())


def _divides_evenly(source: SourceFile, value: ast.AST, world: int) -> bool:
    """The rounded share's total is a constant of the file that the world size divides: rounding up adds nothing."""
    totals = {name for name in names_in(value) if name not in source.worlds and name not in ("math", "ceil")}
    constants = {name: node.value for name, node in assignments(source) if isinstance(node, ast.Constant)
                 and type(node.value) is int}
    return len(totals) == 1 and (total := totals.pop()) in constants and constants[total] % world == 0


ANCHORED = {"abspath", "realpath", "resolve", "absolute", "basename", "relpath", "name"}  # a target a link can hold


def _link_target_relative(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A symbolic link made with a target relative to the working directory: a link's relative target is read from
    the link's own folder, so the link points at a path that does not exist, and opening it is FileNotFoundError."""
    if not any(tb.short_type == "FileNotFoundError" for tb in ctx.tracebacks):
        return None
    for source in files:
        for call in calls_named(source, {"symlink", "symlink_to"}):
            target = call.args[0] if call.args else None
            if target is None or (isinstance(target, ast.Constant) and str(target.value).startswith("/")) or any(
                    isinstance(part, ast.Call) and call_name(part) in ANCHORED for part in walk(target)) or \
                    isinstance(target, ast.Attribute) and target.attr == "name":
                continue
            shown = ast.unparse(target)[:30]
            return Finding(
                "link-target-relative", f"`{ast.unparse(call)[:50]}` ({source.name}:{call.lineno}) makes a link whose "
                f"target, {shown}, is a path from the working directory, but a link's relative target is read from "
                "the link's own folder: the link points at that folder joined with the path again, which does not "
                "exist, so opening the link fails though the link is there", evidence, None, None,
                "give the link a target relative to its own folder (os.symlink(os.path.basename(path), link), or "
                "os.path.relpath(path, os.path.dirname(link))) or an absolute one (os.path.abspath(path)); check the "
                "target with os.path.exists(link), which follows the link")
    return None


TWO_SIZES = re.compile(r"size of tensor a \((?P<a>\d+)\) must match the size of tensor b \((?P<b>\d+)\)")


def _last_batch_into_pipeline(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A pipeline stage (torch.distributed.pipelining) fed a smaller last batch: the stages size what they send and
    receive from the first batch's micro-batches, so the last step's smaller micro-batches meet buffers of the first
    size."""
    tb = next((tb for tb in ctx.tracebacks if TWO_SIZES.search(tb.message)
               and any("/distributed/pipelining/" in frame.file for frame in tb.frames)), None)
    if tb is None:
        return None
    sizes = TWO_SIZES.search(tb.message)
    for source in files:
        loader = next((call for call in calls_named(source, {"DataLoader"}) if not any(
            keyword.arg == "drop_last" and ast.unparse(keyword.value) == "True" for keyword in call.keywords)), None)
        if loader is not None:
            return Finding(
                "pipeline-last-batch-smaller", f"rank {tb.rank if tb.rank is not None else '?'}'s pipeline stage met "
                f"micro-batches of {sizes['b']} rows where it was built for {sizes['a']} (or the reverse): the stages "
                "size what they send and receive from the first batch split into micro-batches, and the DataLoader at "
                f"{source.name}:{loader.lineno} keeps the last, smaller batch (no drop_last), so the last step of the "
                "epoch splits into smaller micro-batches that do not fit", evidence, tb.node, tb.rank,
                "give every stage full batches only: DataLoader(..., drop_last=True) on every stage (or a dataset "
                "length that is a multiple of batch_size), so each batch splits into n_microbatches of the size the "
                "pipeline was built for")
    return None


CHILD_WAITERS = re.compile(r"/multiprocessing/|/subprocess\.py$")


def _child_signal_ignored(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """SIGCHLD set to SIG_IGN: the kernel then reaps every child as it exits and keeps no exit status, so code that
    waits for its children (multiprocessing's join, subprocess's wait) finds none (exitcode None, ECHILD)."""
    if not any(any(CHILD_WAITERS.search(frame.file) for frame in tb.frames) or "No child processes" in tb.message
               for tb in ctx.tracebacks):
        return None
    for source in files:
        for call in calls_named(source, {"signal"}):
            if len(call.args) == 2 and "SIGCHLD" in ast.unparse(call.args[0]) and "SIG_IGN" in ast.unparse(call.args[1]):
                return Finding(
                    "child-signal-ignored", f"`{ast.unparse(call)}` ({source.name}:{call.lineno}) makes the kernel "
                    "reap every child of the process the moment it exits, keeping no exit status: code that waits for "
                    "its children (multiprocessing's join in mp.spawn, a DataLoader's workers, subprocess's wait) then "
                    "finds none (an exit code of None, 'No child processes') and fails, though the children did their "
                    "work", evidence, None, None,
                    "do not ignore SIGCHLD in a process that starts children it waits for: keep the helper's Popen "
                    "and wait() or poll() it yourself, or put signal.signal(signal.SIGCHLD, signal.SIG_DFL) back "
                    "before spawning")
    return None


def _exit_status_returned(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """Ranks that exited with a status of their own while `sys.exit(main())` hands main()'s return value to exit."""
    codes = sorted({code for entries in ctx.reports.values() for _, code in entries if code > 0})
    if not codes:
        return None
    for source in files:
        functions = {node.name: node for node in source.walk() if isinstance(node, ast.FunctionDef)}
        for node in source.walk():
            if not (isinstance(node, ast.Call) and call_name(node) in ("exit", "SystemExit") and len(node.args) == 1
                    and isinstance(node.args[0], ast.Call) and call_name(node.args[0]) in functions):
                continue
            called = functions[call_name(node.args[0])]
            values = [item for item in walk(called) if isinstance(item, ast.Return) and item.value is not None
                      and not (isinstance(item.value, ast.Constant) and item.value.value in (None, 0))]
            if values:
                shown = ast.unparse(node)
                return Finding(
                    "exit-status-returned", f"`{shown}` at {source.name}:{node.lineno} makes what {called.name}() "
                    f"returns the process's exit status: it returns `{ast.unparse(values[0].value)}` (line "
                    f"{values[0].lineno}), so ranks that finished their work exit with status "
                    f"{', '.join(map(str, codes))} and the launcher reports them failed", evidence, None, None,
                    f"exit 0 after a run that went well: call {called.name}() on its own (or sys.exit(0)), and keep "
                    f"sys.exit(...) for a status you mean (sys.exit(1) on failure); return the value to a caller "
                    "that uses it, not to sys.exit")
    return None


def _iterable_not_split(files: list[SourceFile], evidence: str) -> Finding | None:
    for source in files:
        loaders = loaders_with_workers(source)
        if not loaders:
            continue
        for cls in source.walk():
            if (isinstance(cls, ast.ClassDef) and any(ast.unparse(base).endswith("IterableDataset") for base in cls.bases)
                    and "get_worker_info" not in names_in(cls)):
                workers = loaders[0][1]
                return Finding(
                    "iterable-not-split-by-worker", f"{cls.name} ({source.name}:{cls.lineno}) is an IterableDataset "
                    f"that does not split its records among the DataLoader's workers (no get_worker_info()), and the "
                    f"DataLoader at line {loaders[0][0].lineno} runs num_workers={workers}: every worker yields the "
                    "rank's whole share, so each record comes once per worker", evidence, None, None,
                    "split by worker inside __iter__: info = torch.utils.data.get_worker_info(); if info is not None, "
                    "keep records[info.id::info.num_workers] of the rank's share (the rank split stays as it is); "
                    "or num_workers=0")
    return None


PADDED_AT_LEAST = 4  # samples per rank in a dataset whose padding a check would count


def _sampler_padding(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A count the script's check found larger than the dataset by what padding adds: the dataset rounded up to a
    multiple of the world size (a dataset of a few samples is no evaluation set: small numbers are epochs, ranks)."""
    world = ctx.evidence.expected_world_size
    if world < 2 or not any("DistributedSampler" in source.names for source in files):
        return None
    for tb, found in _check_numbers(ctx):
        numbers = [int(number) for number in found if number.is_integer()]
        for counted in numbers:
            for total in numbers:
                if total >= PADDED_AT_LEAST * world and counted == -(-total // world) * world != total:
                    return Finding(
                        "sampler-padding", f"DistributedSampler pads the dataset to a multiple of the {world} ranks: "
                        f"{total} samples become {counted} ({world} x {counted // world}), so {counted - total} "
                        "samples are seen twice and the evaluation's count is off", evidence, tb.node, tb.rank,
                        "count only the real samples: DistributedSampler(drop_last=False) still pads, so gather each "
                        "sample's index with its result and drop the repeats (or skip positions >= len(dataset) "
                        "of the sampler's order), or evaluate the set once on one rank with a plain DataLoader")
    return None


def names_in(tree: ast.AST) -> set[str]:
    """The names and attribute names the code uses (not its strings, docstrings or comments)."""
    return {identifier(node) for node in walk(tree) if isinstance(node, (ast.Name, ast.Attribute))}


def identifier(node: ast.AST) -> str | None:
    """A name's id or an attribute's name (`rank`, `self.vocab_start` -> vocab_start); None for anything else."""
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def reads_world_size(node: ast.AST) -> bool:
    """dist.get_world_size(), or a variable of the launcher's that holds it (WORLD_SIZE, ...) read from the
    environment."""
    return isinstance(node, ast.Call) and call_name(node) == "get_world_size" or env_read(node) in WORLD_VARIABLES


def _ratio_in_message(ctx: Context, ratio: int) -> tuple[object, float, float] | None:
    """(the traceback, big, small) for two numbers of the script's own check's message whose ratio is `ratio`
    (within 1%)."""
    for tb, numbers in _check_numbers(ctx):
        for big in numbers:
            for small in numbers:
                if small > 0 and abs(big / small - ratio) <= 0.01 * ratio:
                    return tb, big, small
    return None


COUNTED = re.compile(r"count|total|num|seen|correct|samples|tokens|hits|^n_|_n$|size|steps", re.IGNORECASE)  # sums
FLOAT = re.compile(r"(?<![\w./-])\d+(?:\.\d+)?(?![\w/-]|\.\w)")  # a number, not a piece of a path, id or name


def _check_numbers(ctx: Context) -> list[tuple[object, list[float]]]:
    """(traceback, the numbers of its message and those its statement compared) for each check of the script's own
    that raised: a check whose message says no number still had them in its frame."""
    return [(tb, [float(found) for found in FLOAT.findall(tb.message)] + compared_numbers(failed_check_of(ctx, tb)))
            for tb in ctx.tracebacks if raised_by_own_check(ctx, tb)]


def compared_numbers(check: FailedCheck | None) -> list[float]:
    """The numbers a failed check worked with: its operands that are numbers, and the lengths of those that are
    containers (`len(parts) == world` and `parts` say the same)."""
    if check is None:
        return []
    return [value for operand in check.operands if operand.type != "bool"
            for value in (operand.number, operand.length) if value is not None]


def _sum_not_mean(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """An all_reduce with the default op (SUM), and a check that found a value world-size times the expected one."""
    world = ctx.evidence.expected_world_size
    if world < 2:
        return None
    summed = [(source, node) for source in files for node in source.walk() if isinstance(node, ast.Call)
              and call_name(node) == "all_reduce" and not any(item.arg == "op" for item in node.keywords)
              and len(node.args) == 1 and not COUNTED.search(root_name(node.args[0]) or "")]
    found = _ratio_in_message(ctx, world) if summed else None
    if found is None:
        return None
    tb, big, small = found
    source, call = summed[0]
    return Finding(
        "sum-not-mean", f"the check found {big:g} where {small:g} was expected, {world} times more, with {world} ranks: "
        f"all_reduce at {source.name}:{call.lineno} (`{ast.unparse(call)[:80]}`) adds the ranks' values (its op is "
        "SUM by default), and the sum was used as a mean", evidence, tb.node, tb.rank,
        "divide by the world size after the all_reduce (value /= dist.get_world_size()), or reduce with "
        "op=dist.ReduceOp.AVG (gloo and NCCL support it); counts and totals stay SUM")


def _off_by_the_world(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A check of the job's own that compared two numbers (as its frame held them) exactly world-size apart: one side
    counts what every rank holds once per rank, or is one rank's share of what the other counts whole. Which of the
    two is told from the job's code: a SUM over the ranks made the bigger side, or a split by rank the smaller."""
    world = ctx.evidence.expected_world_size
    if world < 2:
        return None
    for tb in ctx.tracebacks:
        check = failed_check_of(ctx, tb) if raised_by_own_check(ctx, tb) else None
        pair = _world_apart(check, world) if check is not None else None
        if pair is None:
            continue
        (big, big_value), (small, small_value) = pair
        source = source_named(files, tb.user_frame().file)
        summed = _summed_over_ranks(source, big) if source is not None else None
        shared = source is not None and _share_of(source, small)
        seen = (f"the check `{check.statement[:90]}` ({check.where}) compared `{big}` = {big_value:g} with "
                f"`{small}` = {small_value:g}: exactly {world} times apart, with {world} ranks")
        if summed is not None:
            why, fix = (f". `{big}` is summed over the ranks ({summed}) while every rank already counted the same "
                        f"whole (nothing split what each rank counts), so each item is counted {world} times",
                        "sum only each rank's own part: split what is counted by rank before the SUM (a "
                        "DistributedSampler, items[rank::world]), or do not reduce a value every rank already holds "
                        "whole (or divide the sum by the world size)")
        elif shared:
            why, fix = (f". `{small}` is this rank's share only (the job splits by rank), and it is checked against "
                        f"`{big}`, the whole: each rank holds 1/{world} of it",
                        f"add the ranks' shares before comparing (all_reduce SUM of `{_held_in(small)}`), or compare "
                        "the share with the whole divided by the world size")
        else:
            why, fix = (": one side counts once per rank what every rank holds (a SUM or gather of a value each rank "
                        "already had whole), or the other is one rank's share of the whole",
                        f"find which side of `{check.statement[:60]}` the ranks were meant to split: sum each rank's "
                        "own part only (not the whole on every rank), or add the shares up (all_reduce SUM) before "
                        "comparing them with the whole")
        return Finding("counted-by-every-rank", seen + why, evidence, tb.node, tb.rank, fix)
    return None


def _held_in(expression: str) -> str:
    """The variable an operand reads (`processed` of `processed.item()`), or the operand itself."""
    try:
        node = ast.parse(expression, mode="eval").body
    except SyntaxError:
        return expression
    while isinstance(node, ast.Call):  # `processed.item()`, `int(total)`
        node = node.func.value if isinstance(node.func, ast.Attribute) else node.args[0] if node.args else None
    return root_name(node) or expression


def _nothing_in_this_share(ctx: Context, files: list[SourceFile], evidence: str,
                           found: list[Finding]) -> Finding | None:
    """Some ranks only raised at a statement that worked on a tensor or array which, in their frame, held no items or
    only NaN (a column with no values in this rank's share): a step the other ranks' shares give something to work
    on."""
    world = ctx.evidence.expected_world_size
    if any(finding.cause == "rank-made-value-out-of-range" for finding in found):
        return None  # emptied by a value made from the rank (a crop of size 0), not by how the data was split
    for tb in ctx.tracebacks:
        check = failed_check_of(ctx, tb) if tb.short_type in EMPTINESS_ERRORS else None
        empty = next((operand for operand in check.operands if operand.size == 0 or (
            operand.nan and operand.nan == operand.size) or (operand.length == 0 and operand.type in CONTAINERS)),
                     None) if check is not None and world >= 2 else None
        raised = {other.rank for other in ctx.tracebacks if other.exc_type == tb.exc_type
                  and other.user_frame() == tb.user_frame()}
        if empty is None or len(raised) >= world or None in raised:
            continue
        held = f"only NaN ({empty.nan} of {empty.size})" if empty.nan and empty.size else "no items"
        return Finding(
            "nothing-in-this-share", f"rank{'s' if len(raised) > 1 else ''} {', '.join(map(str, sorted(raised)))} "
            f"raised {tb.short_type} at `{check.statement[:70]}` ({check.where}) while `{empty.expression}` held {held}: "
            "what was split over the ranks (the data, the parameters, the work) left this rank nothing for this "
            f"step, while the other ranks' shares have some ({gist(tb.message, 80)})", evidence, tb.node, tb.rank,
            "make the per-rank step safe for a share with nothing in it: skip it or give it a neutral value (0, -1, "
            "-inf: what loses the reduction that follows) before reducing over the ranks, e.g. compute only over the "
            "values present and fall back when there are none; or split so that every rank's share holds some "
            "(shuffle or interleave the data before splitting; no more ranks than the parameters or tasks shared "
            "out)")
    return None


INDEX_NOT_INTEGER = re.compile(r"tensors used as indices must be long|indices? (?:must|should) be (?:of )?(?:an )?"
                               r"(?:long|int)|expected .*(?:Long|Int)\w* .*but (?:got|found) .*Float", re.IGNORECASE)


def _index_made_float(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """Indexing with a float tensor (as the frame held it) made by torch.tensor of per-rank lists without a dtype: the
    list of a rank that had nothing is empty, torch.tensor([]) is float32, and torch.cat promotes the others' ids."""
    for tb in ctx.tracebacks:
        check = failed_check_of(ctx, tb) if INDEX_NOT_INTEGER.search(tb.message) else None
        index = next((operand for operand in check.operands if operand.dtype and "float" in operand.dtype),
                     None) if check is not None else None
        source = source_named(files, tb.user_frame().file) if index is not None else None
        statement = source.statement_at(tb.user_frame().line) if source is not None else None
        if statement is None:
            continue
        try:
            indexed = ast.parse(index.expression, mode="eval").body
        except SyntaxError:
            continue
        ast.copy_location(indexed, statement)
        made = [node for part in made_of(source, indexed, source.function_of(statement)) for node in walk(part)
                if isinstance(node, ast.Call) and call_name(node) in ("tensor", "as_tensor")
                and not any(item.arg == "dtype" for item in node.keywords) and len(node.args) == 1]
        if not made:
            continue
        gathered = calls_named(source, {"all_gather_object", "gather_object"})
        why = (f"a rank's list gathered at line {gathered[0].lineno} is empty where that rank had nothing to add"
               if gathered else "a list that is empty")
        return Finding(
            "index-made-float", f"`{index.expression}` is {index.dtype} where it indexes (`{check.statement[:50]}`, "
            f"{check.where}): it is made with `{ast.unparse(made[0])[:50]}` (line {made[0].lineno}), which has no "
            f"dtype, and {why}: torch.tensor([]) is float32, and joining it with the other ranks' int64 ids makes "
            "every id a float", evidence, tb.node, tb.rank,
            f"give the ids their dtype where they become a tensor: {ast.unparse(made[0].func)}(..., dtype=torch.long) "
            "(an empty list then gives an empty long tensor), or leave out the empty lists before joining them")
    return None


ROUNDINGS = {"round", "int", "floor", "ceil"}


def _shares_rounded_apart(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A failing statement with two tensors a little apart in length (by less than the world size), one sized by a
    whole the job names (BUDGET) and each rank's share of that whole rounded on its own (`round(BUDGET * share)`):
    rounded shares need not add up to the whole."""
    world = ctx.evidence.expected_world_size
    for tb in ctx.tracebacks:
        check = failed_check_of(ctx, tb) if world >= 2 else None
        sized = [operand for operand in check.operands if operand.shape] if check is not None else []
        lengths = {operand.shape[0] for operand in sized}
        source = source_named(files, tb.user_frame().file) if len(lengths) == 2 and \
            0 < max(lengths) - min(lengths) < world else None
        statement = source.statement_at(tb.user_frame().line) if source is not None else None
        if statement is None:
            continue
        wholes = set()
        for operand in sized:
            try:
                expression = ast.copy_location(ast.parse(operand.expression, mode="eval").body, statement)
            except SyntaxError:
                continue
            wholes |= {node.id for part in made_of(source, expression, source.function_of(statement))
                       for node in walk(part) if isinstance(node, ast.Name) and node.id.isupper()}
        for assign in (node for node in source.walk() if isinstance(node, ast.Assign)):
            rounded = assign.value if isinstance(assign.value, ast.Call) and call_name(assign.value) in ROUNDINGS \
                else None
            if rounded is None or not rounded.args or not (names_in(rounded.args[0]) & wholes) or not any(
                    isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div))
                    for node in walk(rounded.args[0])):
                continue
            whole = sorted(names_in(rounded.args[0]) & wholes)[0]
            return Finding(
                "shares-rounded-apart", f"`{check.statement[:50]}` ({check.where}) found tensors of {min(lengths)} and "
                f"{max(lengths)} items: each rank takes its share of {whole} rounded on its own "
                f"(`{ast.unparse(assign)[:60]}`, line {assign.lineno}), and shares rounded one by one need not add "
                f"up to the whole (e.g. two shares of 12.5 round to 12 each)", evidence, tb.node, tb.rank,
                f"allot the shares so that they add up to {whole}: floor each share and give the rest to the ranks "
                "with the largest remainders (the same computation on every rank), or choose the whole selection "
                f"once from what the ranks gathered (a global top-{whole}); or size what follows from the gathered "
                "count")
    return None


CONTAINERS = ("list", "tuple", "dict", "set")
# What working on nothing raises (an index into an empty list, int() of NaN, a reduction of zero items); an
# AttributeError or a KeyError is about something else than how much a share holds.
EMPTINESS_ERRORS = {"IndexError", "ValueError", "RuntimeError", "ZeroDivisionError", "StopIteration"}


RNG_STATES = {"get_rng_state", "getstate", "get_state", "get_rng_state_all", "bit_generator"}
SEEDS = {"manual_seed", "seed", "default_rng", "Generator", "RandomState", "set_rng_state"}
GLOBAL_SEEDS = {"torch.manual_seed", "np.random.seed", "numpy.random.seed", "random.seed"}  # what get_rng_state reads


def _rank_state_in_a_fingerprint(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """The job's own check that the ranks' fingerprints (a hash or digest each rank makes, gathered) agree, where what
    is hashed includes the random number generator's state, and the job seeds it with the rank: the replicas may
    agree on everything that must agree, and the check still fails on what is each rank's own."""
    for tb in ctx.tracebacks:
        source = source_named(files, tb.user_frame().file) if raised_by_own_check(ctx, tb) and tb.user_frame() \
            else None
        if source is None or not calls_named(source, {"all_gather_object", "all_gather", "gather_object"}) or not \
                calls_named(source, {"sha256", "md5", "sha1", "blake2b", "hash", "crc32", "digest", "hexdigest"}):
            continue
        state = next(iter(calls_named(source, RNG_STATES)), None)
        seeded = next((call for call in sorted(calls_named(source, SEEDS), key=lambda call: ast.unparse(
            call.func) not in GLOBAL_SEEDS) if any(identifier(node) in RANK_NAMES or call_name(node) in RANK_CALLS
                                                   for node in walk(call))), None)
        if state is None or seeded is None or (ast.unparse(state.func).startswith(("torch.", "np.", "numpy.", "random."))
                                               and ast.unparse(seeded.func) not in GLOBAL_SEEDS):
            continue  # the global generator's state, seeded alike everywhere (a local generator seeded per rank aside)
        return Finding(
            "rank-state-in-a-fingerprint", f"the check at {tb.user_frame().location} compares the ranks' fingerprints, "
            f"and what each rank hashes includes its random number generator's state (`{ast.unparse(state)[:40]}`, "
            f"{source.name}:{state.lineno}), which the job seeds with the rank (`{ast.unparse(seeded)[:40]}`, line "
            f"{seeded.lineno}): that state differs between ranks by design, so the fingerprints differ however well "
            "the replicated state agrees", evidence, tb.node, tb.rank,
            "fingerprint only what the ranks share (the model, the optimizer, the scheduler, the step), and check each "
            "rank's own state (its RNG, its data position) against that rank's own saved copy")
    return None


NAN = re.compile(r"\bnan\b")
ACCUMULATES = {"index_add_", "add_", "scatter_add_", "index_put_", "bincount", "sum", "len", "count_nonzero"}


def _nan_from_an_empty_share(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A value the failing statement used held NaN (as its frame had it), and it is made from a division by a count this
    rank accumulated from its own share and never summed over the ranks: a category (a task, a class, a bucket) that
    the rank's share holds none of is 0/0."""
    for tb in ctx.tracebacks:
        check = failed_check_of(ctx, tb)
        nan = next((operand for operand in check.operands if operand.text and NAN.search(operand.text)),
                   None) if check is not None else None
        source = source_named(files, tb.user_frame().file) if nan is not None else None
        found = _divided_by_a_local_count(source, nan.expression) if source is not None else None
        if found is None:
            continue
        division, count = found
        ranks = sorted({other.rank for other in ctx.tracebacks if other.rank is not None and (
            other_check := failed_check_of(ctx, other)) is not None and any(
            operand.text and NAN.search(operand.text) for operand in other_check.operands)})
        return Finding(
            "mean-of-an-empty-share", f"`{nan.expression}` held NaN ({nan.text}) on rank"
            f"{'s ' + ', '.join(map(str, ranks)) if len(ranks) > 1 else ' ' + str(tb.rank)} when "
            f"`{check.statement[:60]}` ({check.where}) failed ({tb.short_type}): it is made from "
            f"`{ast.unparse(division)[:60]}` (line {division.lineno}), and `{count}` counts only this rank's own share, "
            "never summed over the ranks, so a category the share holds none of gives 0/0", evidence, tb.node,
            tb.rank,
            f"all_reduce the sums and `{count}` over the ranks before dividing (every rank then divides the same "
            f"totals), and guard the categories nobody saw ({count}.clamp_min(1), or torch.where({count} > 0, ...)); "
            "or give each rank a share that holds every category")
    return None


def _divided_by_a_local_count(source: SourceFile, expression: str) -> tuple[ast.BinOp, str] | None:
    """(the division, its count) behind `expression` (through assignments, appends and the file's own functions) whose
    denominator is a count accumulated on this rank (index_add_, +=, bincount, len) that no collective reduces."""
    names = _names_behind(source, expression, steps=5)
    for _ in range(3):  # what is appended to the lists among them, and the values returned by functions they call
        names |= {part.id for call in calls_named(source, {"append", "extend"}) if isinstance(call.func, ast.Attribute)
                  and root_name(call.func.value) in names for given in call.args for part in walk(given)
                  if isinstance(part, ast.Name)}
        names |= {part.id for function in source.walk() if isinstance(function, ast.FunctionDef)
                  and function.name in names for returned in walk(function) if isinstance(returned, ast.Return)
                  and returned.value is not None for part in walk(returned.value) if isinstance(part, ast.Name)}
        names |= _names_behind(source, " + ".join(sorted(names)) or "0", steps=2)
    reduced = {root_name(call.args[0]) for call in calls_named(source, {"all_reduce", "reduce", "all_gather",
                                                                        "all_gather_into_tensor"}) if call.args}
    values = [assign.value for assign in _assigned(source, names)] + [
        given for call in calls_named(source, {"append", "extend"}) if isinstance(call.func, ast.Attribute)
        and root_name(call.func.value) in names for given in call.args]
    for value in values:
        for division in (node for node in walk(value) if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
            count = root_name(division.right)
            if count and count not in reduced and _accumulated(source, count):
                return division, count
    return None


def _accumulated(source: SourceFile, name: str) -> bool:
    """`name` is counted up from the data: `name.index_add_(...)`, `name += ...`, `name[...] += ...`, or made by
    bincount, sum or len."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ACCUMULATES
               and root_name(node.func.value) == name or isinstance(node, ast.AugAssign)
               and root_name(node.target) == name for node in source.walk()) or any(
        call_name(part) in ACCUMULATES for assign in _assigned(source, {name}) for part in walk(assign.value)
        if isinstance(part, ast.Call))


def _world_apart(check: FailedCheck, world: int) -> tuple[tuple[str, float], tuple[str, float]] | None:
    """((bigger side, its value), (smaller side, its value)) of a comparison in `check` whose two sides' numbers (or
    lengths) are exactly `world` times apart."""
    try:
        tree = ast.parse(check.statement.strip(), mode="eval" if not check.statement.startswith(
            ("assert", "raise", "return")) else "exec")
    except SyntaxError:
        return None
    for node in walk(tree):
        if isinstance(node, ast.Compare) and len(node.comparators) == 1:
            sides = (node.left, node.comparators[0])
        elif isinstance(node, ast.Call) and call_name(node) in ("equal", "allclose", "isclose") and len(node.args) == 2:
            sides = tuple(node.args)
        else:
            continue
        values = []
        for side in sides:
            operand = check.operand(ast.unparse(side))
            value = operand and (operand.number if operand.number is not None else operand.length)
            values.append((ast.unparse(side), value))
        (left, a), (right, b) = values
        if a and b and a > 0 and b > 0:
            if a == b * world:
                return (left, a), (right, b)
            if b == a * world:
                return (right, b), (left, a)
    return None


def _summed_over_ranks(source: SourceFile, expression: str) -> str | None:
    """'all_reduce at line N' where what `expression` names was summed over the ranks: an all_reduce (SUM) of it or of
    what it is made of, or a sum over the parts an all_gather collected."""
    names = _names_behind(source, expression)
    for call in calls_named(source, {"all_reduce", "reduce", "all_gather", "all_gather_object", "all_gather_into_tensor"}):
        given = call.args[0] if call.args else None
        if given is None or root_name(given) not in names:
            continue
        if call_name(call) in ("all_reduce", "reduce") and reduced_with(call, "SUM"):
            return f"{call_name(call)} at line {call.lineno}"
        if call_name(call).startswith("all_gather"):
            return f"the parts {call_name(call)} collected at line {call.lineno}, added up"
    return None


def _share_of(source: SourceFile, expression: str) -> bool:
    """What `expression` names is one rank's share: made, a few assignments back, with the rank or split by the world
    size."""
    names = _names_behind(source, expression)
    return any(_mentions(assign.value, source.ranks) or _divides(assign.value, source.worlds)
               for assign in _assigned(source, names))


def _names_behind(source: SourceFile, expression: str, steps: int = 3) -> set[str]:
    """The names in `expression` and those the values assigned to them are made of, `steps` assignments back."""
    try:
        names = {part.id for part in walk(ast.parse(expression, mode="eval").body) if isinstance(part, ast.Name)}
    except SyntaxError:
        return set()
    for _ in range(steps):
        names |= {part.id for assign in _assigned(source, names) for part in walk(assign.value)
                  if isinstance(part, ast.Name)}
    return names


def _assigned(source: SourceFile, names: set[str]) -> list[ast.Assign]:
    return [assign for assign in source.walk() if isinstance(assign, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id in names for target in assign.targets)]


def _data_not_sharded(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A DataLoader without a sampler while nothing splits the data by rank (a DistributedSampler made and never
    given to it counts as nothing), and a check that saw world-size times the data."""
    world = ctx.evidence.expected_world_size
    if world < 2:
        return None
    for source in files:
        calls = [node for node in source.walk() if isinstance(node, ast.Call)]
        loaders = [node for node in calls if call_name(node) == "DataLoader"]
        unsharded = [node for node in loaders if not any(item.arg in ("sampler", "batch_sampler")
                                                          for item in node.keywords)]
        if not unsharded or len(unsharded) < len(loaders) or "init_process_group" not in source.names \
                or _share_taken(source):
            continue
        if _ratio_in_message(ctx, world) is None:
            return None
        made = next((node for node in calls if call_name(node) == "DistributedSampler"), None)
        unused = (f"a DistributedSampler is made at line {made.lineno} but never given to it (no sampler=), so "
                  if made else "it has no sampler and nothing splits the data by rank, so ")
        streams = [node.name for node in source.walk() if isinstance(node, ast.ClassDef)
                   and any(ast.unparse(base).endswith("IterableDataset") for base in node.bases)]
        if streams:  # no sampler applies to an IterableDataset: its __iter__ must split by rank itself
            return Finding(
                "data-not-sharded", f"{streams[0]}, an IterableDataset, splits its stream by DataLoader worker at most "
                f"and never by rank, so every rank reads the whole stream (the check saw {world} times what one pass "
                "gives)", evidence, None, None,
                f"split by rank and worker in {streams[0]}.__iter__: items[(rank * num_workers + worker_id)::(world "
                "* num_workers)] (torch.utils.data.get_worker_info() for the worker); a sampler cannot shard an "
                "IterableDataset")
        return Finding(
            "data-not-sharded", f"the DataLoader at {source.name}:{unsharded[0].lineno}: {unused}every rank goes "
            f"through the whole dataset (the check saw {world} times what one pass gives)", evidence, None, None,
            "give each rank its share: DataLoader(ds, sampler=DistributedSampler(ds), ...) (and no shuffle=True "
            "beside it; call sampler.set_epoch(epoch) each epoch)")
    return None


def _share_taken(source: SourceFile) -> bool:
    """The code takes a rank's share itself (a slice or index with the rank in it)."""
    ranks = source.ranks
    return any(isinstance(node, ast.Subscript) and holds(node.slice, ranks, RANK_VARIABLES, RANK_CALLS)
               for node in source.walk())


def _epoch_not_set(files: list[SourceFile], evidence: str) -> Finding | None:
    """A DistributedSampler that shuffles, never told its epoch, in a loop over epochs."""
    for source in files:
        samplers = [node for node in source.walk() if isinstance(node, ast.Call)
                    and call_name(node) == "DistributedSampler" and not any(
                        item.arg == "shuffle" and isinstance(item.value, ast.Constant) and item.value.value is False
                        for item in node.keywords)]
        epochs = [node for node in source.walk() if isinstance(node, ast.For)
                  and "epoch" in ast.unparse(node.target).lower()]
        if samplers and epochs and "set_epoch" not in source.names:
            return Finding(
                "sampler-epoch-not-set", f"the DistributedSampler at {source.name}:{samplers[0].lineno} is never told "
                f"the epoch (no set_epoch() in the loop at line {epochs[0].lineno}): it shuffles with the same seed "
                "every epoch, so every epoch repeats the first one's order", evidence, None, None,
                "call sampler.set_epoch(epoch) at the start of each epoch, before iterating the DataLoader")
    return None


def _local_denominator(files: list[SourceFile], evidence: str) -> Finding | None:
    """Two running totals, and only the numerator all-reduced before the division: a sum over every rank divided by
    this rank's count (world-size times too large)."""
    for source in files:
        accumulated = {node.target.id for node in source.walk() if isinstance(node, ast.AugAssign)
                       and isinstance(node.target, ast.Name)}
        counted = {name for name, value in assignments(source) if any(  # a count of this rank's own data
            isinstance(part, ast.Call) and call_name(part) in ("numel", "len", "count_nonzero") for part in
            walk(value))}
        reduced = {root_name(node.args[0]) for node in source.walk() if isinstance(node, ast.Call)
                   and call_name(node) in ("all_reduce", "reduce") and node.args}
        for node in source.walk():
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
                continue
            top, bottom = root_name(node.left), root_name(node.right)
            if top in reduced and bottom not in reduced and (bottom in accumulated and top in accumulated
                                                              or bottom in counted):
                return Finding(
                    "sum-over-local-count", f"{source.name}:{node.lineno} divides {top}, all-reduced (summed over every "
                    f"rank), by {bottom}, which is this rank's own count: `{ast.unparse(node)}` comes out about "
                    "world-size times too large", evidence, None, None,
                    f"all-reduce {bottom} too before dividing (put both in one tensor: totals = torch.tensor([{top}, "
                    f"{bottom}]); dist.all_reduce(totals); totals[0] / totals[1]), or divide the local values first "
                    "and average the ratios only where every rank counts the same")
    return None


def _none_off_one_rank(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """`x = Thing() if rank == 0 else None`, and ranks that then used x met None."""
    failed = [tb for tb in ctx.tracebacks if "NoneType" in tb.message]
    if not failed:
        return None
    lines = " ".join(quoted_source(ctx, tb, frame) for tb in failed for frame in tb.frames)
    for source in files:
        ranks = source.ranks
        for name, value in assignments(source):
            if (isinstance(value, ast.IfExp) and holds(value.test, ranks, RANK_VARIABLES, RANK_CALLS) and any(
                    isinstance(side, ast.Constant) and side.value is None for side in (value.body, value.orelse))
                    and re.search(rf"\b{re.escape(name)}\b", lines)):
                raised = sorted({tb.rank for tb in failed if tb.rank is not None})
                who = f"rank{'s' if len(raised) > 1 else ''} {', '.join(map(str, raised))}" if raised else "some ranks"
                return Finding(
                    "made-on-some-ranks", f"`{name} = {ast.unparse(value)[:90]}` ({source.name}:{value.lineno}) makes "
                    f"{name} only where `{ast.unparse(value.test)}` holds and None on the other ranks, and {who} then "
                    f"used it ({failed[0].short_type}: {failed[0].message[:80]})", evidence, failed[0].node,
                    failed[0].rank,
                    f"guard every use of {name} with the same condition (if {name} is not None: ...), or give the "
                    "other ranks a stand-in that does nothing (a logger whose log() is a no-op) instead of None")
    return None


STRING_MIXED = re.compile(r"'str'|\bstr\b.*(?:float|int)|(?:float|int).*\bstr\b|could not convert string")


def _option_left_a_string(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A command-line option declared without type= (so a string), whose value the failing line uses in arithmetic
    or a comparison: `'<=' not supported between instances of 'float' and 'str'`."""
    failed = next((tb for tb in ctx.tracebacks if tb.short_type == "TypeError" and STRING_MIXED.search(tb.message)),
                  None)
    if failed is None:
        return None
    for source in files:
        untyped = [node for node in source.walk() if isinstance(node, ast.Call)
                   and call_name(node) == "add_argument" and node.args and isinstance(node.args[-1], ast.Constant)
                   and str(node.args[-1].value).startswith("--") and not any(
                       item.arg in ("type", "action") for item in node.keywords)]
        lines = {quoted_source(ctx, failed, frame) for frame in failed.frames}
        for option in untyped:
            dest = str(option.args[-1].value).lstrip("-").replace("-", "_")
            if any(re.search(rf"\.{dest}\b", line) for line in lines):
                return Finding(
                    "option-left-a-string", f"the option {option.args[-1].value} ({source.name}:{option.lineno}) has no "
                    f"type=, so its value reaches the code as a string, and a line that computes with it failed "
                    f"({failed.short_type}: {failed.message[:100]})", evidence, failed.node, failed.rank,
                    f"declare its type: add_argument({option.args[-1].value!r}, type=float, ...) (type=int for counts); "
                    "a default of the right type does not convert a value given on the command line")
    return None


def _no_eval_mode(files: list[SourceFile], evidence: str) -> Finding | None:
    """A model with Dropout or BatchNorm, an evaluation under no_grad, and no .eval() anywhere in the code."""
    for source in files:
        names = source.names
        layers = sorted(name for name in names if name.startswith(("Dropout", "BatchNorm", "dropout")))
        evaluated = [node for node in source.walk() if isinstance(node, (ast.With, ast.FunctionDef))
                     and any(part in ("no_grad", "inference_mode") for item in (
                         node.items if isinstance(node, ast.With) else node.decorator_list)
                             for part in names_in(item.context_expr if isinstance(node, ast.With) else item))]
        if layers and evaluated and "eval" not in names:
            return Finding(
                "eval-mode-missing", f"the model has {layers[0]} layers and is never put in eval mode (no .eval() in "
                f"the code): the evaluation at {source.name}:{evaluated[0].lineno} runs with dropout on (BatchNorm on "
                "batch statistics), so its results are noisy and differ from rank to rank", evidence, None, None,
                "call model.eval() before evaluating and model.train() after it; torch.no_grad() only stops "
                "gradients, it does not switch layers to their evaluation behaviour")
    return None


SHARDERS = {"fully_shard", "FullyShardedDataParallel", "FSDP"}


def _optimizer_before_sharding(source: SourceFile, evidence: str) -> Finding | None:
    """An optimizer built (here, or in a function called here) before fully_shard/FSDP wraps the model: sharding
    puts new parameters (DTensors, or FSDP's flat ones) in the model, and the optimizer keeps the old ones."""
    built = [call for call in source.walk() if isinstance(call, ast.Call) and call_name(call) in OPTIMIZERS
             and call.args and isinstance(call.args[0], ast.Call) and call_name(call.args[0]) == "parameters"]
    for shard in calls_named(source, SHARDERS):
        scope = source.function_of(shard)
        for optimizer in built:
            home = source.function_of(optimizer)
            before = optimizer.lineno if home is scope else next(
                (call.lineno for call in calls_named(source, {getattr(home, "name", "")})
                 if source.function_of(call) is scope), None)
            rebuilt = any(call.lineno > shard.lineno and source.function_of(call) is scope for call in built)
            if before is not None and before < shard.lineno and not rebuilt:
                via = "" if home is scope else f" (in {home.name}, called at line {before})"
                return Finding(
                    "optimizer-before-model-change", f"the optimizer is built from the model's parameters at "
                    f"{source.name}:{optimizer.lineno}{via}, before {call_name(shard)} at line {shard.lineno} "
                    "shards the model: sharding gives the model new parameters (DTensors), and the optimizer keeps "
                    "stepping the old ones, which get no gradients, so the model never trains", evidence, None, None,
                    f"build the optimizer after sharding: call {call_name(shard)} on the layers and the model first, "
                    "then optimizer = ...(model.parameters()) (FSDP's documented order)")
    return None


def _optimizer_before_change(files: list[SourceFile], evidence: str) -> Finding | None:
    """An optimizer built from model.parameters(), then a layer of that model replaced: the new one never trains."""
    for source in files:
        if (sharded := _optimizer_before_sharding(source, evidence)) is not None:
            return sharded
        for scope in [source.tree, *(node for node in source.walk() if isinstance(node, ast.FunctionDef))]:
            built = [(node.lineno, ast.unparse(part.func.value)) for node in walk(scope)
                     if isinstance(node, ast.Call) and call_name(node) in OPTIMIZERS for part in node.args[:1]
                     if isinstance(part, ast.Call) and call_name(part) == "parameters"
                     and isinstance(part.func, ast.Attribute)]
            for line, model in built:  # a layer of that very model (model.fc, self.model.head), made anew
                replaced = next((node for node in walk(scope) if isinstance(node, ast.Assign)
                                 and node.lineno > line and len(node.targets) == 1
                                 and isinstance(node.targets[0], ast.Attribute)
                                 and ast.unparse(node.targets[0].value) == model and isinstance(node.value, ast.Call)
                                 and call_name(node.value)[:1].isupper()), None)
                rebuilt = any(isinstance(node, ast.Call) and call_name(node) in OPTIMIZERS and node.lineno > line
                              for node in walk(scope))
                if replaced is not None and not rebuilt:
                    target = ast.unparse(replaced.targets[0])
                    return Finding(
                        "optimizer-before-model-change", f"the optimizer is built from {model}.parameters() at "
                        f"{source.name}:{line}, and {target} is replaced at line {replaced.lineno}, after: the new "
                        "layer's parameters are not in the optimizer, so they never train", evidence, None, None,
                        f"build the optimizer after changing the model (move line {line} below line "
                        f"{replaced.lineno}), or add the new parameters: optimizer.add_param_group({{'params': "
                        f"{target}.parameters()}})")
    return None


OPTIMIZERS = {"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "LBFGS", "Lion",
              "Adafactor", "SparseAdam", "ASGD", "Rprop"}


def _zero_grad_once(files: list[SourceFile], evidence: str) -> Finding | None:
    """A loop that calls backward() and step() but never zero_grad(): gradients pile up step after step."""
    for source in files:
        for loop in source.walk():
            if not isinstance(loop, (ast.For, ast.While)):
                continue
            inside = {call_name(node) for node in walk(loop) if isinstance(node, ast.Call)}
            if {"backward", "step"} <= inside and not inside & {"zero_grad", "zero_"} and not any(
                    isinstance(node, (ast.For, ast.While)) and node is not loop and "backward" in {
                        call_name(call) for call in walk(node) if isinstance(call, ast.Call)}
                    for node in walk(loop)):
                return Finding(
                    "gradients-not-zeroed", f"the loop at {source.name}:{loop.lineno} calls backward() and step() each "
                    "time round but never zero_grad(): every step adds its gradient to all the earlier ones, so the "
                    "updates grow until training diverges", evidence, None, None,
                    "call optimizer.zero_grad() inside the loop, before each backward() (or after each step())")
    return None


def _loaded_not_strict(files: list[SourceFile], evidence: str) -> Finding | None:
    for source in files:
        for node in source.walk():
            if isinstance(node, ast.Call) and call_name(node) == "load_state_dict" and any(
                    item.arg == "strict" and isinstance(item.value, ast.Constant) and item.value.value is False
                    for item in node.keywords):
                return Finding(
                    "state-dict-not-strict", f"load_state_dict(..., strict=False) at {source.name}:{node.lineno} "
                    "skips, without a word, every key that does not match (a renamed or re-prefixed layer): the model "
                    "kept the weights it had before the load", evidence, None, None,
                    "load with strict=True (the default) to see which keys differ, then map the old names to the "
                    "new ones before loading; if some keys may really be missing, check what load_state_dict "
                    "returns (missing_keys, unexpected_keys)")
    return None


LOW_PRECISION = {"bfloat16", "float16", "half", "bf16", "fp16"}


def _counts_in_low_precision(files: list[SourceFile], evidence: str) -> Finding | None:
    """Counts all-reduced in a tensor built with a dtype of the model's, in a job that runs in bfloat16/float16."""
    for source in files:
        names = source.names
        if not names & LOW_PRECISION:
            continue
        reduced = {root_name(node.args[0]): node for node in source.walk() if isinstance(node, ast.Call)
                   and call_name(node) == "all_reduce" and node.args}
        for name, value in assignments(source):
            if name in reduced and isinstance(value, ast.Call) and call_name(value) == "tensor" and any(
                    item.arg == "dtype" and not (names_in(item.value) & {"int64", "int32", "float64", "long", "double",
                                                                        "float32", "float", "int"})
                    for item in value.keywords):
                return Finding(
                    "counts-in-low-precision", f"{name} ({source.name}:{value.lineno}) is made with the model's "
                    f"dtype and all-reduced at line {reduced[name].lineno}, and the job runs in bfloat16/float16: "
                    "those keep whole numbers exactly only up to 256 (2048 for float16), so the summed counts come "
                    "out rounded", evidence, None, None,
                    f"keep counts in an integer or float64 tensor: torch.tensor([...], dtype=torch.int64) (or "
                    "float64) for {name}, whatever dtype the model computes in")
    return None


def _sampler_seed_per_rank(files: list[SourceFile], evidence: str) -> Finding | None:
    for source in files:
        ranks = source.ranks
        for node in source.walk():
            if isinstance(node, ast.Call) and call_name(node) == "DistributedSampler" and any(
                    item.arg == "seed" and holds(item.value, ranks, RANK_VARIABLES, RANK_CALLS)
                    for item in node.keywords):
                return Finding(
                    "sampler-seed-per-rank", f"the DistributedSampler at {source.name}:{node.lineno} is given a seed "
                    "that differs per rank: each rank shuffles its own permutation and takes its slice of it, so "
                    "the shares overlap and some samples are never seen", evidence, None, None,
                    "give DistributedSampler the same seed on every rank (seed=base, not base + rank): it splits one "
                    "permutation among the ranks; seed other randomness (augmentation) per rank separately")
    return None


def _gathered_without_gradient(files: list[SourceFile], evidence: str) -> Finding | None:
    """torch.distributed's all_gather into a list the loss then uses, in a job that calls backward(): the gathered
    tensors carry no autograd history, so no rank's loss sends a gradient to the rank that made them."""
    for source in files:
        if "backward" not in source.names or "nn" in _distributed_modules(source):
            continue
        for gather in calls_named(source, {"all_gather"}):
            if len(gather.args) < 2 or not isinstance(gather.args[0], ast.Name):
                continue
            parts = gather.args[0].id
            scope = source.function_of(gather)
            used = next((node for node in walk(scope) if isinstance(node, ast.Call) and node.lineno > gather.lineno
                         and call_name(node) in {"cat", "stack"} and parts in names_in(node)), None)
            # the loss path: the local slot put back to keep its graph (`parts[rank] = k`), or backward in this function
            slot_put_back = any(isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Subscript) and root_name(target) == parts for target in node.targets)
                for node in walk(scope))
            backward_here = any(isinstance(node, ast.Call) and call_name(node) == "backward" and
                                node.lineno > gather.lineno for node in walk(scope))  # not the training before
            if used is None or "detach" in ast.unparse(gather.args[1]) or not (slot_put_back or backward_here):
                continue
            return Finding(
                "gathered-without-gradient", f"`{ast.unparse(gather)[:60]}` ({source.name}:{gather.lineno}) gathers "
                f"tensors with no autograd history, and the job builds its loss on them ({ast.unparse(used)[:40]}, line "
                f"{used.lineno}) and calls backward(): no rank's loss sends a gradient back to the rank whose "
                f"{ast.unparse(gather.args[1])[:20]} it gathered, so each rank's gradient misses the other ranks' terms",
                evidence, None, None,
                f"gather with the differentiable collective: torch.distributed.nn.functional.all_gather("
                f"{ast.unparse(gather.args[1])[:20]}) returns the tensors with their autograd history, and its backward "
                "hands each rank the gradients every rank's loss sends to its slice (no local slot to put back)")
    return None


HALF_TYPES = {"bfloat16", "float16", "half", "bf16"}
MIXED_PRECISION = {"autocast", "GradScaler", "MixedPrecision", "MixedPrecisionPolicy", "master_params", "amp"}
SCHEDULER_WARNING = "Detected call of `lr_scheduler.step()` before `optimizer.step()`"


def _is_scheduler(value: ast.AST) -> bool:
    """A learning-rate scheduler made here: torch's (LambdaLR, OneCycleLR, ...) or a get_*_schedule* helper."""
    name = call_name(value) if isinstance(value, ast.Call) else ""
    return bool(name) and (name.endswith("LR") or "schedule" in name.lower() or "Scheduler" in name)


def _scheduler_per_micro_batch(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A loop that steps the optimizer only under a condition (every N micro-batches: gradient accumulation) and the
    learning-rate scheduler on every pass: the schedule runs N times faster than the updates it is meant for."""
    warned = next((line.text for line in ctx.lines if SCHEDULER_WARNING in line.text), None)
    for source in files:
        named = dict(assignments(source))
        optimizers = {name for name, value in named.items() if isinstance(value, ast.Call)
                      and call_name(value) in OPTIMIZERS}
        schedulers = {name for name, value in named.items() if _is_scheduler(value)}
        for loop in (node for node in source.walk() if isinstance(node, (ast.For, ast.While))):
            steps = [node for statement in loop.body for node in walk(statement) if isinstance(node, ast.Call)
                     and call_name(node) == "step" and isinstance(node.func, ast.Attribute)
                     and isinstance(node.func.value, ast.Name)]
            # both in this loop itself, not in one nested in it (a scheduler stepped once per epoch is right)
            updates = [call for call in steps if call.func.value.id in optimizers and source.loop_of(call) is loop]
            schedules = [call for call in steps if call.func.value.id in schedulers and source.loop_of(call) is loop]
            if not updates or not schedules:
                continue
            guard = _guard_in(source, updates[0], loop)
            if guard is None or any(_guard_in(source, call, loop) is guard for call in schedules):
                continue
            update, schedule = updates[0], schedules[0]
            return Finding(
                "scheduler-per-micro-batch", f"`{ast.unparse(schedule)}` ({source.name}:{schedule.lineno}) runs on "
                f"every pass of the loop at line {loop.lineno}, but `{ast.unparse(update)}` (line {update.lineno}) "
                f"only where `{ast.unparse(guard.test)[:50]}` holds (line {guard.lineno}): the learning-rate schedule "
                "advances once per micro-batch, faster than the updates it was sized for, so the rate reaches the "
                "schedule's end (its floor, 0 for a decay to zero) early and the later updates barely move the model",
                evidence + (f"; torch warned: {warned.strip()[:160]}" if warned else ""), None, None,
                f"step the scheduler with the optimizer: move {ast.unparse(schedule)} into the `if "
                f"{ast.unparse(guard.test)[:40]}:` block, right after {ast.unparse(update)}")
    return None


def _global_count_skips_own_indices(files: list[SourceFile], evidence: str) -> Finding | None:
    """A count of samples over all ranks (`consumed += len(batch) * world`) given to a sampler that skips that many
    of each rank's own indices when it resumes: every rank skips world times what it consumed."""
    for source in files:
        counts = [node for node in source.walk() if isinstance(node, ast.AugAssign) and isinstance(
            node.op, ast.Add) and _mentions(node.value, source.worlds)]
        for cls in (node for node in source.walk() if isinstance(node, ast.ClassDef)
                    and any("Sampler" in ast.unparse(base) for base in node.bases)):
            methods = {item.name: item for item in cls.body if isinstance(item, ast.FunctionDef)}
            skip = next((node for node in walk(methods.get("__iter__", cls)) if isinstance(node, ast.Subscript)
                         and isinstance(node.slice, ast.Slice) and self_attribute(node.slice.lower)), None)
            if skip is None:
                continue
            start = self_attribute(skip.slice.lower)
            setter = next((method for method in methods.values() if any(
                isinstance(node, ast.Assign) and any(self_attribute(target) == start for target in node.targets)
                for node in walk(method)) and method.name != "__init__"), None)
            for count in counts:
                counted = ast.unparse(count.target)
                given = next((call for call in calls_named(source, {setter.name}) if any(
                    counted in ast.unparse(argument) or ast.unparse(argument) in counted for argument in call.args)),
                    None) if setter else None
                if given is not None:
                    return Finding(
                        "global-count-skips-own-indices", f"`{ast.unparse(count)[:60]}` ({source.name}:{count.lineno}) "
                        f"counts the samples of every rank, and `{ast.unparse(given)[:50]}` (line {given.lineno}) "
                        f"makes {cls.name} skip that many of each rank's own indices (`{ast.unparse(skip)[:40]}`, line "
                        f"{skip.lineno}): each rank skips world-size times what it consumed", evidence, None, None,
                        f"skip a rank's share: {setter.name}({counted} // world_size) (or keep a count per rank for "
                        "resuming), and keep the global count for the logs and the schedule")
    return None


def _unfrozen_after_ddp(files: list[SourceFile], evidence: str) -> Finding | None:
    """Parameters frozen when DDP wrapped the model and unfrozen after: DDP averages the gradients of the parameters
    that required one when it was built, so the unfrozen ones train apart on every rank."""
    for source in files:
        wraps = sorted(call.lineno for call in calls_named(source, {"DDP", "DistributedDataParallel"}))
        if not wraps:
            continue
        settings = [(node.lineno, _requires_grad_set(node), node) for node in source.walk()
                    if _requires_grad_set(node) is not None] + _requires_grad_set_through(source)
        frozen = [line for line, value, _ in settings if value is False and line < wraps[0]]
        thawed = next(((line, node) for line, value, node in settings if value is True and line > wraps[0]
                       and not any(wrap > line for wrap in wraps[1:])), None)  # wrapped again after: the fix
        if frozen and thawed:
            return Finding(
                "unfrozen-after-ddp", f"`{ast.unparse(thawed[1])[:50]}` ({source.name}:{thawed[0]}) unfreezes "
                f"parameters that were frozen (line {frozen[0]}) when DDP wrapped the model (line {wraps[0]}): DDP "
                "averages the gradients of the parameters that required one when it was built, so it never averages "
                "the unfrozen ones, and each rank trains its own copy of them", evidence, None, None,
                "wrap the model in DDP again after unfreezing (ddp = DDP(model) once the stage begins), or leave every "
                "parameter that will train requiring grad from the start and keep the frozen stage out of the "
                "optimizer until it begins (add its param group then)")
    return None


def _requires_grad_set_through(source: SourceFile) -> list[tuple[int, bool, ast.Call]]:
    """(line, value, call) of the calls of the file's helpers that set requires_grad from a parameter
    (`def set_trainable(modules, flag): ... p.requires_grad_(flag)`), with the value each call passes."""
    found = []
    for function in (node for node in source.walk() if isinstance(node, ast.FunctionDef)):
        parameters = [arg.arg for arg in function.args.args]
        given = {value.id for node in walk(function) if isinstance(value := _requires_grad_value(node), ast.Name)
                 and value.id in parameters}
        for name in given:
            index = parameters.index(name)
            for call in calls_named(source, {function.name}):
                value = argument(call, index, name)
                if isinstance(value, ast.Constant) and isinstance(value.value, bool):
                    found.append((call.lineno, value.value, call))
    return found


def _requires_grad_value(node: ast.AST) -> ast.AST | None:
    """What `node` sets requires_grad to (`p.requires_grad_(flag)`, `p.requires_grad = True`); None elsewhere."""
    if isinstance(node, ast.Call) and call_name(node) == "requires_grad_":
        return node.args[0] if node.args else next((item.value for item in node.keywords), ast.Constant(True))
    if isinstance(node, ast.Assign) and any(isinstance(target, ast.Attribute) and target.attr == "requires_grad"
                                            for target in node.targets):
        return node.value
    return None


def _requires_grad_set(node: ast.AST) -> bool | None:
    """True or False where `node` sets requires_grad to a constant."""
    value = _requires_grad_value(node)
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, bool) else None


def _guard_in(source: SourceFile, node: ast.AST, loop: ast.AST) -> ast.If | None:
    """The innermost `if` between `node` and `loop` that holds it."""
    while (node := source.parent(node)) is not None and node is not loop:
        if isinstance(node, ast.If):
            return node
    return None


EPS_OPTIMIZERS = {"Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"}
FLOAT16_TINIEST = 6e-8  # float16's smallest subnormal: a smaller eps is 0 there


def _weights_in_low_precision(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A model cast to bfloat16/float16 whose parameters an optimizer then updates, with no float32 copy anywhere
    (no autocast, GradScaler, FSDP MixedPrecision): an update smaller than the weight's rounding step is lost; in
    float16 an Adam-like optimizer's default eps (1e-8) is 0, and an update divides by zero."""
    for source in files:
        if source.names & MIXED_PRECISION:
            continue
        cast = {}
        for name, value in assignments(source):
            if isinstance(value, ast.Call) and (
                    call_name(value) in {"bfloat16", "half"} or call_name(value) == "to" and any(
                        names_in(arg) & HALF_TYPES for arg in [*value.args, *(item.value for item in value.keywords)])):
                cast.setdefault(name, value)
        for optimizer in (call for call in source.walk() if isinstance(call, ast.Call)
                          and call_name(call) in OPTIMIZERS and call.args):
            model = root_name(optimizer.args[0].func.value) if isinstance(optimizer.args[0], ast.Call) and isinstance(
                optimizer.args[0].func, ast.Attribute) else None
            if model in cast and cast[model].lineno < optimizer.lineno:
                dtype = next(iter(names_in(cast[model]) & HALF_TYPES))
                shown = ast.unparse(cast[model])
                if len(shown) > 60 and isinstance(cast[model].func, ast.Attribute):
                    shown = f"... .{cast[model].func.attr}({', '.join(map(ast.unparse, cast[model].args))})"
                if dtype in {"float16", "half"} and call_name(optimizer) in EPS_OPTIMIZERS and _eps_vanishes(
                        optimizer) and _printed_not_a_number(ctx):
                    return Finding(
                        "weights-in-low-precision", f"`{model} = {shown}` ({source.name}:"
                        f"{cast[model].lineno}) keeps the weights in float16, and {call_name(optimizer)} (line "
                        f"{optimizer.lineno}) updates them there with its eps of 1e-8, which is 0 in float16: where a "
                        "gradient's second moment is 0 (or underflows) the update divides by zero, and the run "
                        "printed nan", evidence, None, None,
                        "keep the weights in float32 and compute in float16: drop the cast, wrap the forward in "
                        "torch.autocast(device_type, dtype=torch.float16) with torch.amp.GradScaler; if the weights "
                        "must stay float16, give the optimizer an eps float16 can hold (eps=1e-4)")
                return Finding(
                    "weights-in-low-precision", f"`{model} = {shown}` ({source.name}:"
                    f"{cast[model].lineno}) keeps the weights themselves in {dtype}, and {call_name(optimizer)} "
                    f"(line {optimizer.lineno}) updates them there: {dtype} keeps "
                    f"{8 if 'bf' in dtype else 11} bits of a weight's mantissa (float32 24), so an update smaller "
                    "than a weight's rounding step is lost and training stalls early", evidence, None, None,
                    f"keep the weights in float32 and compute in {dtype}: drop the cast, wrap the forward in "
                    f"torch.autocast(device_type, dtype=torch.{'bfloat16' if 'bf' in dtype else 'float16'}) "
                    "(with torch.amp.GradScaler for float16), or FSDP's MixedPrecisionPolicy(param_dtype=...) "
                    "with float32 master weights")
    return None


def _eps_vanishes(optimizer: ast.Call) -> bool:
    """The optimizer's eps is its default or a constant float16 rounds to 0."""
    given = next((item.value for item in optimizer.keywords if item.arg == "eps"), None)
    return given is None or (isinstance(given, ast.Constant) and isinstance(given.value, (int, float))
                             and given.value < FLOAT16_TINIEST)


NOT_A_NUMBER = re.compile(r"\b(?:nan|inf)\b", re.IGNORECASE)


def _printed_not_a_number(ctx: Context) -> bool:
    """Some line of the run's output shows a nan or an inf."""
    return any(NOT_A_NUMBER.search(line.text) for line in ctx.lines)


def _variance_by_cancellation(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A standard deviation as sqrt(E[x²] - mean²) in a run whose output shows nan or inf: in float32 the two terms
    cancel, for a feature whose mean is large against its spread, to nothing or less than nothing."""
    if not _printed_not_a_number(ctx):
        return None
    for source in files:
        for node in source.walk():
            if not (isinstance(node, ast.Call) and call_name(node) in {"sqrt", "rsqrt"}):
                continue
            inside = node.func.value if isinstance(node.func, ast.Attribute) and not node.args else (
                node.args[0] if node.args else None)
            if inside is None:
                continue
            # the variance as written in the sqrt, or where what the sqrt takes was assigned (`var = sq / n - m * m`,
            # `self.var = ...` in another method)
            attributes = {part.attr for part in walk(inside) if self_attribute(part)}
            written = [*made_of(source, inside, source.function_of(node)), *(
                assign.value for assign in source.walk() if isinstance(assign, ast.Assign) and any(
                    self_attribute(target) and target.attr in attributes for target in assign.targets))]
            difference = next((part for made in written for part in walk(made) if isinstance(part, ast.BinOp)
                               and isinstance(part.op, ast.Sub) and _a_square(part.right)), None)
            if difference is None:
                continue
            return Finding(
                "variance-by-cancellation", f"`{ast.unparse(node)[:70]}` ({source.name}:{node.lineno}) takes the "
                "standard deviation as sqrt(mean of squares - square of the mean): in float32 the two terms are "
                "nearly equal for a feature whose values are large against their spread (a timestamp, an offset), "
                "their difference is rounding noise or below 0, and the sqrt gives 0 or nan - the run's output "
                "shows nan", evidence, None, None,
                "compute the variance around the mean: all-reduce the count and sum first, then each rank's "
                "sum of (x - mean)**2 (a second pass), or merge each rank's (count, mean, M2) (Welford/Chan); "
                "accumulate in float64, and clamp(min=0) before sqrt")
    return None


def _a_square(node: ast.AST) -> bool:
    """`m * m`, `m ** 2`, `m.pow(2)` or `torch.square(m)`."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return ast.unparse(node.left) == ast.unparse(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return isinstance(node.right, ast.Constant) and node.right.value == 2
    if isinstance(node, ast.Call) and call_name(node) == "pow":
        return bool(node.args) and isinstance(node.args[-1], ast.Constant) and node.args[-1].value == 2
    return isinstance(node, ast.Call) and call_name(node) == "square"


def _distributed_modules(source: SourceFile) -> set[str]:
    """The torch.distributed submodules the file imports (`nn` for torch.distributed.nn)."""
    found = set()
    for node in source.walk():
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch.distributed"):
            found |= {(node.module or "").split(".")[2]} if (node.module or "").count(".") >= 2 else {
                alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[2] for alias in node.names if alias.name.startswith("torch.distributed.")}
    return found


def _bool_option(files: list[SourceFile], evidence: str) -> Finding | None:
    """`add_argument('--x', type=bool)`: bool('False') is True, so any value given turns it on."""
    for source in files:
        for node in source.walk():
            if isinstance(node, ast.Call) and call_name(node) == "add_argument" and any(
                    item.arg == "type" and isinstance(item.value, ast.Name) and item.value.id == "bool"
                    for item in node.keywords):
                option = ast.unparse(node.args[-1]) if node.args else "the option"
                return Finding(
                    "bool-option", f"{option} is declared with type=bool ({source.name}:{node.lineno}): argparse "
                    "calls bool() on the text, and bool('False') is True, so any value given on the command line "
                    "turns it on", evidence, None, None,
                    f"make it a flag: add_argument({option}, action='store_true') (and --no-... with "
                    "action='store_false', or argparse.BooleanOptionalAction), not type=bool")
    return None
