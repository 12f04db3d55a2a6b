"""What the code does to a model around DDP's wrapping of it, read with Python's parser from the job's own files:

- a parameter replaced after DDP(model) (weights tied, or a new nn.Parameter assigned, by the script or a method
  it calls): DDP keeps reducing the Parameter it registered, which forward no longer uses;
- a copy of the model (an EMA, deepcopy, AveragedModel) taken before DDP(model), in a job that seeds torch per
  rank: DDP's broadcast of rank 0's weights at construction makes the model alike, not the copy taken before;
- a loss divided by the world size before backward() through DDP, which already averages the gradients: they come
  out 1/world of their size;
- layers made in a loop over a set (or a directory listing): each process registers them in its own order, so DDP
  finds parameters whose shapes differ by position;
- tensors of different sizes in one collective, sized from the rank's own arithmetic or by len(text) for a buffer
  of text.encode()'s bytes (the recorded call's line, read back through its function).

Each fires only where the rest of the diagnosis found what these cause (a parameter without a gradient, a check
that the ranks differ) and nothing more specific.
"""

from __future__ import annotations

import ast
import re

from lab.analysis.diagnosis.context import Context
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.pitfalls import changed_in_place_by_a_helper
from lab.analysis.diagnosis.sources import (RANK_CALLS, RANK_NAMES, UNEXPLAINED, WORLD_NAMES, WORLD_VARIABLES, SourceFile,
                                            call_name, called_on, caller_place, calls_named, conditions_above, failure_summary,
                                            env_read, holds, identifier, made_of, origin_of, parsed_files, self_attribute,
                                            unordered, walk)

PARAMETER_ATTRIBUTES = {"weight", "bias"}
COPIES = {"deepcopy", "AveragedModel", "ModelEma", "ModelEmaV2", "ModelEmaV3", "EMA", "ExponentialMovingAverage",
          "EMAModel"}
OWN_CHECK_FAILED = {"rank-exited", "rank-crashed", "nonzero-exit"}  # how a job's own check that the ranks differ ends


def wrapping_findings(ctx: Context, found: list[Finding]) -> list[Finding]:
    causes = {finding.cause for finding in found}
    if "shape-mismatch" in causes and (resized := _buffer_resized(ctx, found)) is not None:
        return [resized]
    if "shape-mismatch" in causes and (sized := _characters_for_bytes(ctx, found) or _default_dtype_per_rank(
            ctx, found) or _collective_sized_by_rank(ctx, found) or _collective_sized_by_a_count(ctx, found)) is not None:
        return [sized]
    if (synced := _state_broadcast_unmatched(found)) is not None and (
            changed := _changed_under_a_rank_condition(parsed_files(ctx), synced.evidence)) is not None:
        return [changed]
    files = parsed_files(ctx) if causes <= UNEXPLAINED | {"ddp-unused-parameters", "ddp-parameter-mismatch"} else []
    if not files:
        return []
    evidence = next((finding.evidence for finding in found if finding.cause.startswith("ddp-")), None) or \
        failure_summary(ctx)
    replaced = _replaced_after_wrapping(files, evidence) if causes & {"ddp-unused-parameters",
                                                                       "ddp-parameter-mismatch"} else None
    reordered = (_layers_in_unordered_loop(files, evidence) or _wrapped_when_first_needed(files, evidence)) \
        if "ddp-parameter-mismatch" in causes else None
    sized = (next((found for source in files if (found := changed_in_place_by_a_helper(source, evidence))), None)
             or _sized_from_rank_data(files, evidence) or _changed_under_a_rank_condition(files, evidence)) \
        if "ddp-parameter-mismatch" in causes else None
    copied = _copied_before_wrapping(ctx, files, evidence) if causes <= OWN_CHECK_FAILED else None
    divided = _loss_divided_by_world(ctx, files, evidence) if causes <= UNEXPLAINED else None
    return [finding for finding in (replaced, reordered, sized, copied, divided) if finding is not None]


WRAPPERS = {"DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP", "fully_shard"}


def _sized_from_rank_data(files: list[SourceFile], evidence: str) -> Finding | None:
    """DDP's parameter mismatch where an argument of the wrapped model's constructor follows, through the
    assignments, from a rank's own value (its shard of the data, a per-rank path): the ranks sized their layers from
    what each of them had."""
    for source in files:
        for wrap in calls_named(source, WRAPPERS):
            scope = source.function_of(wrap)
            built = wrap.args[0] if wrap.args else None
            if isinstance(built, ast.Name):
                made = source.assignments_to(built.id, scope, before=wrap.lineno)
                built = made[-1].value if made else None
            if not isinstance(built, ast.Call):
                continue
            for argument in [*built.args, *(item.value for item in built.keywords)]:
                chain = origin_of(source, argument, scope, _rank_value)
                if any(_agreed_at(source, line) for text, line in chain if text):
                    continue  # a value the ranks agreed on (gathered, broadcast) is not one rank's own
                steps = [line for text, line in chain if text]
                if len(steps) >= 2 or steps and _computed_by_the_job(source, steps[0]):  # not `16 if rank == 0 else 32`
                    steps = " <- ".join(f"`{text}` (line {line})" for text, line in chain if text)
                    return Finding(
                        "size-from-rank-data", f"the model's size comes from each rank's own data: "
                        f"`{ast.unparse(built)[:60]}` ({source.name}:{built.lineno}) <- {steps}: each rank computed it "
                        "from what it alone had, so the ranks built layers of different sizes", evidence, None, None,
                        "size the model from what every rank shares: compute it once from the whole data (or a fixed "
                        "file shipped with the job) and send it to every rank (broadcast_object_list), or on every "
                        "rank from the same full data before it is split into shards")
    return None


AGREEING = {"all_gather_object", "broadcast_object_list", "all_gather", "broadcast", "all_reduce",
            "all_gather_into_tensor"}


def _agreed_at(source: SourceFile, line: int) -> bool:
    """The statement at `line` takes its value from a function of the job that gathers or broadcasts: every rank gets
    the same result."""
    statement = source.statement_at(line)
    functions = {node.name: node for node in source.walk() if isinstance(node, ast.FunctionDef)}
    return statement is not None and any(
        isinstance(node, ast.Call) and call_name(node) in functions and any(
            isinstance(inner, ast.Call) and call_name(inner) in AGREEING for inner in walk(functions[call_name(node)]))
        for node in walk(statement))


CHANGES_A_MODEL = {"requires_grad_", "add_module", "register_module", "register_parameter", "register_buffer",
                   "prune", "fuse_modules", "convert_sync_batchnorm"}


def _changed_under_a_rank_condition(files: list[SourceFile], evidence: str) -> Finding | None:
    """DDP's parameter mismatch where, before the model was wrapped, an `if` whose test follows from the rank (its
    share of the batch, its data) changed the model on some ranks only: froze parameters, added or replaced layers."""
    for source in files:
        own = {node.name: node for node in source.walk() if isinstance(node, ast.FunctionDef)}
        for wrap in calls_named(source, WRAPPERS):
            scope = source.function_of(wrap)
            for branch in (node for node in walk(scope) if isinstance(node, ast.If) and node.lineno < wrap.lineno
                           and holds(node.test, source.ranks, set(), RANK_CALLS)):
                body = [part for statement in branch.body for part in walk(statement)]
                called = [own[call_name(part)] for part in body if call_name(part) in own]
                change = next((part for part in [*body, *(node for function in called for node in walk(function))]
                               if call_name(part) in CHANGES_A_MODEL or isinstance(part, ast.Attribute)
                               and part.attr == "requires_grad" and isinstance(part.ctx, ast.Store)), None)
                if change is None:
                    continue
                chain = origin_of(source, branch.test, scope, _rank_value)
                steps = " <- ".join(f"`{text}` (line {line})" for text, line in chain if text)
                return Finding(
                    "model-changed-per-rank", f"the ranks built different models: `if {ast.unparse(branch.test)[:50]}:` "
                    f"({source.name}:{branch.lineno}) follows from the rank" + (f" ({steps})" if steps else "") +
                    f", and on the ranks where it holds it changes the model before DDP wraps it (`"
                    f"{ast.unparse(change)[:50]}`, line {change.lineno}), so DDP meets another model there (it "
                    "compares the parameters and broadcasts rank 0's parameters and buffers as it wraps)",
                    evidence, None, None,
                    "decide it from what every rank shares (the global batch, a config flag, or the rank's value "
                    "agreed first: all_reduce with MIN or MAX), so that every rank builds, freezes and wraps the same "
                    "model")
    return None


def _state_broadcast_unmatched(found: list[Finding]) -> Finding | None:
    """Ranks out of step where one of them was in a broadcast (DDP broadcasts rank 0's parameters and buffers as it
    wraps a model, once for each: a rank whose model has no buffers skips the second)."""
    return next((finding for finding in found if finding.cause == "collective-mismatch"
                 and re.search(r"\bcalled broadcast\b", finding.title)), None)


CACHES = {"lru_cache", "cache", "cached_property"}


def cached_before_init(ctx: Context, found: list[Finding]) -> list[Finding]:
    """A collective refused a size in a job whose own helper for the world size is cached
    (@functools.lru_cache) and answers a constant when torch.distributed is not initialized yet: one call before
    init_process_group (logging set up first) fixes that constant for the whole run."""
    if not any(finding.cause in ("collective-list-length", "shape-mismatch", "collective-output-size")
               for finding in found):
        return []
    for source in parsed_files(ctx):
        for function in (node for node in source.walk() if isinstance(node, ast.FunctionDef)):
            cached = next((decorator for decorator in function.decorator_list
                           if call_name(decorator) in CACHES or identifier(decorator) in CACHES), None)
            asks = next((node for node in walk(function) if call_name(node) == "get_world_size"  # what sizes lists
                         and called_on(node) in ("dist", "torch.distributed")), None)
            guarded = any(call_name(node) in ("is_initialized", "is_available") for node in walk(function))
            if cached is None or asks is None or not guarded:
                continue
            evidence = next(finding.evidence for finding in found if finding.cause in (
                "collective-list-length", "shape-mismatch", "collective-output-size"))
            return [Finding(
                "cached-before-init", f"{function.name}() ({source.name}:{function.lineno}) is cached "
                f"(@{ast.unparse(cached)}) and answers a constant while torch.distributed is not initialized: a call "
                "before init_process_group fixed that answer for the whole run, so what the job sized with it later "
                "fits one process, not this launch", evidence, None, None,
                f"do not cache {function.name}() (dist.get_world_size() is cheap), or initialize the process group "
                f"before anything calls it (set up logging after init_process_group), or clear the cache after init "
                f"({function.name}.cache_clear())")]
    return []


GROUP_COLLECTIVES = {"all_reduce", "all_gather", "broadcast", "reduce", "barrier", "all_gather_object",
                     "broadcast_object_list", "gather", "scatter", "reduce_scatter", "all_gather_into_tensor"}


def world_collective_in_group_code(ctx: Context, found: list[Finding]) -> list[Finding]:
    """Ranks out of step on the default group, in a job that splits its ranks into groups, where a collective runs
    without group= in code that holds its group (`self.group`, a `group` parameter) and passes it to its other
    calls: that collective was meant for the group, and on the whole world it pairs with other groups' calls."""
    if not any(finding.cause in ("collective-mismatch", "uneven-collectives") for finding in found):
        return []
    for source in parsed_files(ctx):
        if not calls_named(source, {"new_group", "new_subgroups", "new_subgroups_by_enumeration"}):
            continue
        for scope in (node for node in source.walk() if isinstance(node, (ast.FunctionDef, ast.ClassDef))):
            # its own group: a parameter of the function, or an attribute of the object (not a local that picks one)
            given = {arg.arg for arg in scope.args.args} if isinstance(scope, ast.FunctionDef) else set()
            held = {ast.unparse(node) for node in walk(scope) if isinstance(getattr(node, "ctx", None), ast.Load)
                    and (isinstance(node, ast.Name) and node.id in given or self_attribute(node))
                    and (identifier(node) or "").endswith("group")}
            grouped = [call for call in walk(scope) if call_name(call) in GROUP_COLLECTIVES | {"get_rank",
                       "get_world_size", "DistributedDataParallel", "DDP"} and any(
                ast.unparse(value) in held for value in [*call.args, *(item.value for item in call.keywords)])]
            bare = next((call for call in walk(scope) if call_name(call) in GROUP_COLLECTIVES and called_on(call) in (
                "dist", "torch.distributed") and not any(item.arg == "group" for item in call.keywords)), None)
            if not held or not grouped or bare is None or isinstance(scope, ast.ClassDef) and any(
                    isinstance(node, ast.FunctionDef) and bare in walk(node) and node is not scope and
                    not any(ast.unparse(part) in held for part in walk(node)) for node in scope.body):
                continue
            method = source.function_of(bare)  # the name the call's own function uses for the group
            near = {ast.unparse(node) for node in walk(method) if isinstance(node, (ast.Name, ast.Attribute))
                    and ast.unparse(node) in held} if isinstance(method, ast.FunctionDef) else set()
            group = sorted(near or held, key=len)[0]
            return [Finding(
                "collective-on-the-world", f"`{ast.unparse(bare)[:60]}` ({source.name}:{bare.lineno}) runs on the "
                f"whole world, in code that works on its group `{group}` (its other calls pass it, e.g. "
                f"`{ast.unparse(grouped[0])[:50]}`, line {grouped[0].lineno}): each group's ranks call it for their "
                "own work, and on the world it pairs them with the other groups' calls, so the ranks fell out of step",
                next(finding.evidence for finding in found if finding.cause in ("collective-mismatch",
                                                                              "uneven-collectives")), None, None,
                f"pass the group: dist.{call_name(bare)}(..., group={group}); keep the default group only for what "
                "every rank of the job reaches together")]
    return []


def _computed_by_the_job(source: SourceFile, line: int) -> bool:
    """The assignment at `line` calls one of the file's own functions (`importance = channel_importance(model, rank)`):
    a value computed from what the rank reads, not a choice made on the rank."""
    own = {node.name for node in source.walk() if isinstance(node, ast.FunctionDef)}
    statement = source.statement_at(line)
    return statement is not None and any(call_name(node) in own for node in walk(statement))


# The tensor argument of a collective, by its position: the input of a gather, the one tensor of the others.
TENSOR_ARGUMENT = {"all_gather": 1, "all_gather_into_tensor": 1, "gather": 0, "reduce_scatter": 1,
                   "reduce_scatter_tensor": 1, "all_reduce": 0, "broadcast": 0, "reduce": 0, "scatter": 0}


def _tensors_passed(ctx: Context):
    """(trace, call, source, statement, the tensor expression) of each recorded collective whose tensor argument the
    job's line passes by position."""
    for trace, call, source, line in _recorded_call_sites(ctx):
        statement = source.statement_at(line)
        node = next((node for node in walk(statement) if call_name(node) == call.op), None) if statement else None
        position = TENSOR_ARGUMENT.get(call.op)
        if node is not None and position is not None and len(node.args) > position:
            yield trace, call, source, statement, node.args[position]


def _collective_sized_by_rank(ctx: Context, found: list[Finding]) -> Finding | None:
    """Tensors of different sizes in one collective, where what a rank passes is computed, through the assignments
    before the call, with the rank in its arithmetic (`k = int(ratio * self.rank * n)`, then topk(g, k)): its size
    follows from the rank."""
    for trace, call, source, statement, tensor in _tensors_passed(ctx):
        chain = origin_of(source, tensor, source.function_of(statement), _rank_arithmetic)
        steps = [(text, line) for text, line in chain if text]
        if not steps or _reduced(source.statement_at(steps[0][1])):
            continue  # a mean or a sum of it has one size on every rank, whatever it was computed from
        shown = " <- ".join(f"`{text}` (line {line})" for text, line in steps)
        return Finding(
            "size-from-rank-data", f"the ranks passed tensors of different sizes to the {call.op} at "
            f"{source.name}:{statement.lineno}, and the size of what each passes follows from its rank: "
            f"`{ast.unparse(tensor)}` <- {shown}", _mismatch_evidence(found), trace.node, trace.rank,
            "compute the size from what every rank shares (a ratio of the same tensor, a constant, a global "
            "count), not from the rank; where the sizes must differ, gather them first and pad to the largest "
            "(or use all_gather_object)")
    return None


# Calls that make a tensor of a size they are given, and what counts a rank's data.
SIZED = {"zeros", "ones", "empty", "full", "linspace", "arange", "randn", "rand", "new_zeros", "new_empty", "histc"}
COUNTS = {"sum", "len", "numel", "count_nonzero", "size", "nonzero"}


def _collective_sized_by_a_count(ctx: Context, found: list[Finding]) -> Finding | None:
    """Tensors of different sizes in one collective, made with a size (`torch.zeros(n_bins)`) computed from a count of
    the rank's own data (`n_bins = max(10, int(math.sqrt(valid.sum())))`): each rank counted what it alone had."""
    for trace, call, source, statement, tensor in _tensors_passed(ctx):
        scope = source.function_of(statement)
        for made in made_of(source, tensor, scope):
            for sized in (part for part in walk(made) if call_name(part) in SIZED):
                for size in {part.id for argument in sized.args for part in walk(argument)
                             if isinstance(part, ast.Name) and part.id in source.ranks}:
                    chain = origin_of(source, ast.Name(size, lineno=statement.lineno), scope, lambda expression: any(
                        call_name(part) in COUNTS for part in walk(expression)))
                    steps = [(text, at) for text, at in chain if text]
                    if not steps:
                        continue
                    shown = " <- ".join(f"`{text}` (line {at})" for text, at in steps)
                    return Finding(
                        "size-from-rank-data", f"the ranks passed tensors of different sizes to the {call.op} at "
                        f"{source.name}:{statement.lineno}: they are made with a size `{size}` that each rank counts "
                        f"in its own data ({shown}; `{ast.unparse(sized)[:50]}`, line {sized.lineno})",
                        _mismatch_evidence(found), trace.node, trace.rank,
                        f"give `{size}` one value on every rank: a constant, or the count agreed first (n = "
                        "torch.tensor([count]); dist.all_reduce(n, op=dist.ReduceOp.SUM or MAX)) and the size derived "
                        "from that")
    return None


def _default_dtype_per_rank(ctx: Context, found: list[Finding]) -> Finding | None:
    """torch.set_default_dtype() on some ranks only (in code run under a condition on the rank): tensors the job
    makes without a dtype are float64 there and float32 elsewhere, so one collective moves twice the bytes on some
    ranks."""
    for source in parsed_files(ctx):
        functions = {node.name: node for node in source.walk() if isinstance(node, ast.FunctionDef)}
        for change in calls_named(source, {"set_default_dtype", "set_default_tensor_type"}):
            gates = conditions_above(source, change)
            owner = source.function_of(change)
            if isinstance(owner, ast.FunctionDef) and owner.name in functions:
                gates += [test for call in source.walk() if call_name(call) == owner.name
                          for test in conditions_above(source, call)]
            gate = next((test for test in gates if holds(test, source.ranks, set(), RANK_CALLS)), None)
            if gate is None:
                continue
            return Finding(
                "default-dtype-per-rank", f"`{ast.unparse(change)[:50]}` ({source.name}:{change.lineno}) changes the "
                f"default dtype of the whole process, and it runs only where `{ast.unparse(gate)[:40]}` holds: "
                "there the tensors the job makes without a dtype (torch.zeros(...), torch.tensor(...)) are of "
                "another type than on the other ranks, so the same collective moves a different number of bytes",
                _mismatch_evidence(found), None, None,
                "do not change the default dtype on some ranks: pass dtype= to the calls that need another precision "
                "(or restore the previous default in a try/finally), and give the tensors of every collective an "
                "explicit dtype on every rank")
    return None


def _characters_for_bytes(ctx: Context, found: list[Finding]) -> Finding | None:
    """Byte tensors of different sizes in one collective, in a function that sizes them with len(text) and fills them
    with text.encode(): the length counts characters, the buffer holds bytes, and non-ASCII text has more bytes."""
    for trace, call, source, line in _recorded_call_sites(ctx):
        if not call.tensors or call.tensors[-1].dtype not in ("uint8", "int8"):
            continue
        scope = source.function_of(source.statement_at(line) or source.tree)
        counted = {ast.unparse(node.args[0]): node for node in walk(scope) if call_name(node) == "len"
                   and node.args}
        encoded = next((node for node in walk(scope) if call_name(node) == "encode" and isinstance(
            node.func, ast.Attribute) and ast.unparse(node.func.value) in counted), None)
        if encoded is None:
            continue
        text = ast.unparse(encoded.func.value)
        return Finding(
            "characters-counted-for-bytes", f"the ranks passed byte buffers of different sizes to the {call.op} "
            f"at {source.name}:{line}: the length sent is `len({text})` (line {counted[text].lineno}), a count of "
            f"characters, and the buffer is `{text}.encode()` (line {encoded.lineno}), which holds more bytes than "
            "characters wherever the text is not ASCII", _mismatch_evidence(found), trace.node, trace.rank,
            f"encode first and send the encoded length: data = {text}.encode('utf-8'); n = len(data); or send "
            "strings with broadcast_object_list / all_gather_object, which carry them whole")
    return None


REDUCTIONS = {"mean", "sum", "max", "min", "norm", "std", "var", "item", "numel", "count_nonzero", "any", "all", "prod",
              "logsumexp", "amax", "amin"}


def _reduced(statement: ast.AST | None) -> bool:
    """The tensor is made by a reduction (`(a - b).mean().reshape(1)`): its size does not follow from its inputs'."""
    return statement is not None and any(call_name(node) in REDUCTIONS for node in walk(statement))


def _recorded_call_sites(ctx: Context):
    """(trace, call, source, line) of each torch.distributed call the hooks recorded at a line of the job's own files,
    each process's latest first."""
    files = parsed_files(ctx)
    for trace in ctx.evidence.traces:
        for call in reversed(trace.calls.made if trace.calls else ()):
            place = caller_place(call.caller)
            source = next((file for file in files if place and file.name == place[0]), None)
            if source is not None:
                yield trace, call, source, place[1]


def _mismatch_evidence(found: list[Finding]) -> str:
    return next(finding.evidence for finding in found if finding.cause == "shape-mismatch")


def _rank_arithmetic(expression: ast.AST) -> bool:
    """The rank as an operand of arithmetic (`0.5 * self.rank * n`): a number made from the rank, not data picked by
    it."""
    return any(isinstance(node, ast.BinOp) and any(holds(side, RANK_NAMES, set(), RANK_CALLS)
                                                    for side in (node.left, node.right))
               for node in walk(expression))


def _rank_value(expression: ast.AST) -> bool:
    return any(isinstance(node, ast.Name) and node.id in RANK_NAMES or call_name(node) in RANK_CALLS
               for node in walk(expression))


BUFFER_SYNC = ("_sync_buffers", "_sync_module_buffers", "_default_broadcast_coalesced")


def _buffer_resized(ctx: Context, found: list[Finding]) -> Finding | None:
    """Tensors of different sizes in DDP's broadcast of the buffers (before each forward, broadcast_buffers=True): a
    registered buffer that the code assigns anew outside __init__ (a cache grown to the input's length) has
    another size on some ranks."""
    synced = any(function in line.text for line in ctx.lines for function in BUFFER_SYNC) or any(
        frame.function.endswith(BUFFER_SYNC) for process in ctx.evidence.processes for thread in process.threads
        for frame in thread.frames)
    if not synced:
        return None
    for source in parsed_files(ctx):
        buffers = {call.args[0].value: call for call in calls_named(source, {"register_buffer"})
                   if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)}
        for node in source.walk():
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                name = self_attribute(target)
                method = source.function_of(node)
                if name in buffers and getattr(method, "name", "__init__") != "__init__":
                    return Finding(
                        "buffer-resized", f"DDP broadcasts the model's buffers from rank 0 before each forward, and "
                        f"the buffer {name} (registered at {source.name}:{buffers[name].lineno}) is assigned anew in "
                        f"{method.name} (line {node.lineno}): grown to each rank's own input, it has another size on "
                        "some ranks, so the broadcast pairs tensors of different sizes",
                        next(finding.evidence for finding in found if finding.cause == "shape-mismatch"), None, None,
                        f"keep a size that changes out of the buffers DDP syncs: make {name} a plain attribute "
                        f"(self.{name} = tensor, not register_buffer), or build it once at the largest size in "
                        f"__init__ and slice it in forward, or wrap with DDP(model, broadcast_buffers=False)")
    return None


def _wrappers(source: SourceFile) -> set[str]:
    """The names DistributedDataParallel goes by in this file (`as DDP`)."""
    names = {"DistributedDataParallel"}
    for node in source.walk():
        if isinstance(node, ast.ImportFrom):
            names |= {alias.asname for alias in node.names if alias.name == "DistributedDataParallel" and alias.asname}
    return names


def _wrappings(source: SourceFile) -> list[ast.Call]:
    return calls_named(source, _wrappers(source))


def _replaces_parameter(statement: ast.AST) -> ast.Assign | None:
    """`x.weight = ...`, `x.p = nn.Parameter(...)` or `x.head = nn.Linear(...)` (a layer replaced) inside
    `statement`."""
    for node in walk(statement):
        if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Attribute) and (target.attr in PARAMETER_ATTRIBUTES or isinstance(
                    node.value, ast.Call) and (call_name(node.value) == "Parameter" or called_on(node.value) in (
                        "nn", "torch.nn"))) for target in node.targets):
            return node
    return None


def _methods(source: SourceFile) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in source.walk() if isinstance(node, ast.FunctionDef)}


def _replaced_after_wrapping(files: list[SourceFile], evidence: str) -> Finding | None:
    for source in files:
        methods = _methods(source)
        for wrapping in _wrappings(source):
            scope = source.function_of(wrapping)
            for statement in getattr(scope, "body", []):
                if statement.lineno <= wrapping.lineno:
                    continue
                assigned = _replaces_parameter(statement)
                via = None
                if assigned is None:  # a method of the file's own that the statement calls
                    for call in (node for node in walk(statement) if isinstance(node, ast.Call)):
                        method = methods.get(call_name(call) or "")
                        if method is not None and (assigned := _replaces_parameter(method)) is not None:
                            via = call
                            break
                if assigned is None:
                    continue
                shown = ast.unparse(assigned)[:80]
                what = (f"`{ast.unparse(via)[:60]}` ({source.name}:{via.lineno}) runs `{shown}` (line "
                        f"{assigned.lineno})" if via else f"`{shown}` ({source.name}:{assigned.lineno})")
                return Finding(
                    "parameter-replaced-after-ddp", f"{what} after DDP wrapped the model (line {wrapping.lineno}): "
                    "the model now uses other parameters than the ones DDP registered and reduces, so those never "
                    "get a gradient (and the new ones are never reduced)", evidence, None, None,
                    "change the model's parameters before wrapping it: build, tie the weights (load a checkpoint), "
                    "then DDP(model); after wrapping, change values in place under torch.no_grad() (p.copy_(...)) "
                    "rather than assigning a new Parameter; to change a layer for a new phase (a new head), wrap the "
                    "model again after replacing it (DDP(model)) and build the optimizer from that")
    return None


CONTAINERS = {"ModuleList", "ModuleDict", "Sequential", "ParameterList", "ParameterDict"}
REGISTERING = {"append", "add_module", "register_module", "register_parameter", "setattr", "update", "extend"}


def _layers_in_unordered_loop(files: list[SourceFile], evidence: str) -> Finding | None:
    """DDP found parameter shapes that differ by position, and the model's layers are made in a loop over a set or a
    directory listing (directly, or over an argument its caller built so): each process registers them in its own
    order. Python salts string hashes per process, so a set of names iterates in another order on every rank."""
    for source in files:
        for loop in _registering_loops(source):
            found, where = unordered(source, loop.iter), ""
            if found is None and (passed := _unordered_argument(files, source, loop)) is not None:
                found, where = passed
            if found is None:
                continue
            what, text = found
            why = ("a set's order follows its items' hashes, and strings hash with a salt of each process's own "
                   "(PYTHONHASHSEED)" if what == "a set" else
                   f"{what} lists entries in the filesystem's own order, which differs between nodes")
            iterated, line = ast.unparse(loop.iter), getattr(loop, "lineno", loop.iter.lineno)  # a comprehension's
            return Finding(
                "layers-in-unordered-loop", f"the model's layers are made in a loop over {iterated} "
                f"({source.name}:{line}){where}, {text}: {why}, so each rank registers the same layers in "
                "another order and DDP finds parameters whose shapes differ by position", evidence, None, None,
                f"make the layers in an order every rank shares: loop over sorted({iterated}) (or keep the names in "
                "a list: dict.fromkeys(items) drops repeats and keeps their order, set(items) does not); a "
                "PYTHONHASHSEED set alike for every process hides it, but a checkpoint saved in one order still "
                "loads wrongly in another")
    return None


def _wrapped_when_first_needed(files: list[SourceFile], evidence: str) -> Finding | None:
    """DDP found parameters that differ, and the job wraps modules in DDP inside a loop, each the first time it is
    needed (`if name not in wrapped: wrapped[name] = DDP(...)`): wrapping is a collective, so ranks that need the
    modules in another order (tasks picked per rank, per step) wrap different modules at the same moment."""
    for source in files:
        for wrap in calls_named(source, WRAPPERS):
            loop = source.loop_of(wrap)
            lazy = next((test for test in conditions_above(source, wrap) if any(
                isinstance(op, (ast.NotIn, ast.Is)) for node in walk(test) if isinstance(node, ast.Compare)
                for op in node.ops) or isinstance(test, ast.UnaryOp)), None) if loop is not None else None
            if lazy is None:
                continue
            return Finding(
                "wrapped-when-first-needed", f"`{ast.unparse(wrap)[:50]}` ({source.name}:{wrap.lineno}) wraps a module "
                f"in {call_name(wrap)} the first time a rank needs it (`if {ast.unparse(lazy)[:50]}`, inside the loop "
                f"at line {loop.lineno}): wrapping is a collective that compares the module's parameters across the "
                "ranks, so ranks that come to the modules in another order wrap different modules at the same moment",
                evidence, None, None,
                f"wrap every module once, before the loop, in the same order on every rank (or one {call_name(wrap)} "
                "around a module holding all of them, with find_unused_parameters=True); and pick what a step trains "
                "the same way on every rank (from the step, not the rank)")
    return None


def _registering_loops(source: SourceFile) -> list[ast.For | ast.comprehension]:
    """Loops that make layers: a for loop whose body stores a call's result into self's attributes (`self.heads[n] =
    nn.Linear(...)`, `self.blocks.append(...)`, add_module), or a comprehension given to ModuleList/ModuleDict."""
    loops = []
    for node in source.walk():
        if isinstance(node, (ast.For, ast.AsyncFor)) and any(_registers(part) for statement in node.body
                                                                for part in walk(statement)):
            loops.append(node)
        elif isinstance(node, ast.Call) and call_name(node) in CONTAINERS:
            for argument in node.args:
                if isinstance(argument, (ast.ListComp, ast.DictComp, ast.GeneratorExp)):
                    loops.extend(argument.generators)
    return loops


def _registers(node: ast.AST) -> bool:
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
        return any(isinstance(target, ast.Subscript) and self_attribute(target.value) is not None
                   for target in node.targets)
    if not (isinstance(node, ast.Call) and call_name(node) in REGISTERING and node.args):
        return False
    if isinstance(node.func, ast.Name):  # setattr(self, name, layer)
        return isinstance(node.args[0], ast.Name) and node.args[0].id == "self"
    receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
    return (isinstance(receiver, ast.Name) and receiver.id == "self" or self_attribute(receiver) is not None) and any(
        isinstance(argument, ast.Call) for argument in node.args)


def _unordered_argument(files: list[SourceFile], source: SourceFile, loop) -> tuple[tuple[str, str], str] | None:
    """A loop over a parameter of a class's __init__, where a call of that class passes a set (or a listing) built
    there: ((what, its text), ' with CLASS(ARG) at file:line')."""
    iterated = loop.iter
    method = source.function_of(iterated)
    if not isinstance(iterated, ast.Name) or not isinstance(method, ast.FunctionDef):
        return None
    parameters = [argument.arg for argument in method.args.args]
    if iterated.id not in parameters:
        return None
    owner = source.parent(method)
    name = owner.name if isinstance(owner, ast.ClassDef) and method.name == "__init__" else method.name
    index = parameters.index(iterated.id) - (1 if isinstance(owner, ast.ClassDef) else 0)
    for other in files:
        for call in calls_named(other, {name}):
            given = next((keyword.value for keyword in call.keywords if keyword.arg == iterated.id), None)
            if given is None and 0 <= index < len(call.args):
                given = call.args[index]
            if given is not None and (found := unordered(other, given)) is not None:
                return found, f" with {ast.unparse(call)[:60]} at {other.name}:{call.lineno}"
    return None


def _copied_before_wrapping(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    seeds = {trace.calls.torch_seed for trace in ctx.evidence.traces if trace.calls and trace.calls.torch_seed
             is not None}
    if len(seeds) < 2:
        return None  # every rank seeded alike: a copy before the broadcast is the same everywhere
    for source in files:
        for wrapping in _wrappings(source):
            wrapped = wrapping.args[0] if wrapping.args else None
            if not isinstance(wrapped, ast.Name):
                continue
            scope = source.function_of(wrapping)
            for node in walk(scope):
                if isinstance(node, ast.Call) and call_name(node) in COPIES and node.lineno < wrapping.lineno and any(
                        isinstance(arg, ast.Name) and arg.id == wrapped.id for arg in node.args):
                    return Finding(
                        "copied-before-ddp", f"`{ast.unparse(node)[:70]}` ({source.name}:{node.lineno}) copies "
                        f"{wrapped.id} before DDP({wrapped.id}) (line {wrapping.lineno}) broadcasts rank 0's weights, "
                        f"and the ranks seed torch differently (seeds {', '.join(map(str, sorted(seeds)))}): each "
                        "rank's copy starts from its own random weights and stays apart", evidence, None, None,
                        f"take the copy after wrapping (DDP(...) makes every rank's {wrapped.id} rank 0's), e.g. "
                        f"model = DDP({wrapped.id}); ema = {call_name(node)}({wrapped.id}, ...); or seed torch alike "
                        "on every rank before building the model")
    return None


def _loss_divided_by_world(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A loss divided by the world size and then backward() in a file that wraps the model in DDP, whose forwards the
    hooks saw synchronise (where they recorded calls): DDP's backward averages the gradients already."""
    logs = [trace.calls for trace in ctx.evidence.traces if trace.calls]
    if logs and not any(calls.ddp_forwards.get("synced") for calls in logs):
        return None
    for source in files:
        wrapping = next(iter(_wrappings(source)), None)
        if wrapping is None:
            continue
        for backward in calls_named(source, {"backward"}):
            divided = _divided_by_world(source, backward)
            if divided is not None:
                return Finding(
                    "loss-divided-by-world-size", f"`{ast.unparse(divided)[:70]}` ({source.name}:{divided.lineno}) "
                    f"divides the loss by the world size before backward() (line {backward.lineno}) through DDP (line "
                    f"{wrapping.lineno}), which already averages the gradients over the ranks: they come out 1/world "
                    "of their size (a smaller learning rate in effect)", evidence, None, None,
                    "do not divide the loss by the world size: DDP's backward all-reduces the gradients and divides "
                    "them by the world size itself; divide only where you sum gradients by hand (all_reduce of each "
                    "p.grad, no DDP)")
    return None


def _divided_by_world(source: SourceFile, backward: ast.Call) -> ast.AST | None:
    """What divides by the world size the value backward() is called on: `(loss / world).backward()`, or an
    assignment to that name before it in the same function (`loss = loss / world`, `loss /= world`)."""
    loss = backward.func.value if isinstance(backward.func, ast.Attribute) else None
    if loss is None:
        return None
    found = [loss] if not isinstance(loss, ast.Name) else [
        node for node in walk(source.function_of(backward)) if isinstance(node, (ast.Assign, ast.AugAssign))
        and node.lineno < backward.lineno and any(isinstance(target, ast.Name) and target.id == loss.id for target in (
            node.targets if isinstance(node, ast.Assign) else [node.target]))]
    for node in found:
        if isinstance(node, ast.AugAssign):
            if isinstance(node.op, ast.Div) and _world(source, node.value):
                return node
        elif any(isinstance(part, ast.BinOp) and isinstance(part.op, ast.Div) and _world(source, part.right)
                 for part in walk(node.value if isinstance(node, ast.Assign) else node)):
            return node
    return None


def _world(source: SourceFile, node: ast.AST) -> bool:
    """`node` is the world size itself (a name for it, get_world_size(), WORLD_SIZE, or a name assigned one of those
    as it is), not a count worked out from it (micro-batches per rank, a share): dividing by that is not averaging."""
    def itself(value: ast.AST) -> bool:
        while isinstance(value, ast.Call) and call_name(value) in ("int", "float") and value.args:
            value = value.args[0]
        return identifier(value) in WORLD_NAMES or call_name(value) == "get_world_size" or \
            env_read(value) in WORLD_VARIABLES
    if itself(node):
        return True
    return isinstance(node, ast.Name) and any(itself(assign.value) for assign in source.assignments_to(node.id))
