"""Why the ranks' collectives disagree, read from the code around them: where the ranks passed different tensors to
one collective, or ran different ones, the cause is often not in the call but in what decides which calls run:

- the call sits in a loop over something without a shared order (a set, whose order follows string hashes salted
  per process; os.listdir or glob, whose order is each filesystem's): each rank runs the loop's collectives in its
  own order;
- collectives on one group made from two threads of a rank: which comes first differs per rank;
- a collective of the code's own inside `with Join(...)`, which shadows DDP's collectives only;
- what sets up the communication (a DDP comm hook, DDP itself, a process group) runs under a test of the rank: the
  ranks then send different things;
- a collective inside a function whose results are cached (functools.lru_cache, cache, cached_property): a rank whose
  cache holds the answer skips the collective that another rank, with another argument, runs.

Each fires only where the rest of the diagnosis found the ranks at odds in a collective, or nothing more specific.
"""

from __future__ import annotations

import ast
import re

from lab.analysis.diagnosis.context import Context, echoes_a_peer, node_of_rank, quoted_source
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.sources import (RANK_CALLS, RANK_NAMES, RANK_VARIABLES, UNEXPLAINED, SourceFile, call_name,
                                            called_on, calls_named, caller_place, collective_at, failure_summary, holds,
                                            identifier, kept_by_a_local_test, made_of, parsed_files, root_name,
                                            source_named, unordered,
                                            walk)
from lab.analysis.diagnosis.logs import collective_in
from lab.analysis.diagnosis.signals import FATAL_ERROR, faulthandler_stack
from lab.analysis.stacks import MAIN_THREAD

# The findings that say the ranks disagreed in a collective without saying why.
AT_ODDS = {"shape-mismatch", "collective-mismatch", "collective-output-size", "reduce-op-dtype", "root-mismatch",
           "p2p-mismatch", "ddp-parameter-mismatch", "group-mismatch"}
# What sets up how a rank communicates: run on some ranks only, the ranks send different things.
SETS_UP_COMMUNICATION = {"register_comm_hook", "_register_comm_hook", "DistributedDataParallel", "DDP",
                         "FullyShardedDataParallel", "FSDP", "new_group", "new_subgroups", "_set_static_graph",
                         "register_ddp_comm_hook"}


def order_findings(ctx: Context, found: list[Finding]) -> list[Finding]:
    causes = {finding.cause for finding in found}
    if not causes or not causes <= AT_ODDS | UNEXPLAINED:
        return []
    files = parsed_files(ctx)
    evidence = next((finding.evidence for finding in found if finding.cause in AT_ODDS), None) or failure_summary(ctx)
    return [finding for finding in (_unordered_loop(ctx, files, evidence), _from_two_threads(ctx, files, evidence),
                                    _own_collective_in_join(files, evidence),
                                    _set_up_on_some_ranks(files, found, evidence),
                                    _collective_in_cached_function(files, evidence),
                                    _polls_work_completion(ctx, files, evidence),
                                    _branch_on_own_values(ctx, files, evidence),
                                    _sharded_without_shape(files, found, evidence),
                                    _sharded_unit_skipped(files, evidence),
                                    _identity_of_a_received_copy(files, evidence),
                                    _step_skipped_on_some_ranks(files, evidence),
                                    _collective_behind_a_rank_test(files, evidence),
                                    _autograd_collective_used_on_some_ranks(files, evidence),
                                    _first_number_of_a_rank_name(files, evidence),
                                    _backward_skipped_on_own_test(files, evidence),
                                    _one_call_of_other_sizes(ctx, files, evidence),
                                    _sends_left_unreceived(ctx, files, evidence)) if finding is not None]


OBJECT_RECEIVERS = {"recv_object_list", "broadcast_object_list", "scatter_object_list", "all_gather_object",
                    "gather_object"}
SINGLETONS = (None, True, False, Ellipsis)


def _identity_of_a_received_copy(files: list[SourceFile], evidence: str) -> Finding | None:
    """`received is SENTINEL` (or `==` where SENTINEL's class, defined in the job, has no __eq__ and so compares by
    identity), where `received` came through an object collective and SENTINEL is an object of the module's own:
    objects sent between ranks are pickled and arrive as new objects, so the test is never true on the receiving rank
    (a stop message is taken for work, another branch is taken, and the ranks' calls no longer pair)."""
    for source in files:
        objects = _module_objects(source)
        received = sorted({(call_name(call), root_name(call.args[0]), call.lineno)
                           for call in calls_named(source, OBJECT_RECEIVERS) if call.args}, key=lambda item: item[2])
        for compare in (node for node in source.walk() if isinstance(node, ast.Compare) and len(node.ops) == 1
                        and isinstance(node.ops[0], (ast.Is, ast.IsNot, ast.Eq, ast.NotEq))):
            by_identity = isinstance(compare.ops[0], (ast.Is, ast.IsNot))
            sides = (compare.left, compare.comparators[0])
            sentinel = next((side for side in sides if root_name(side) in objects and (
                by_identity or objects[root_name(side)])), None)
            other = next((side for side in sides if side is not sentinel), None)
            if sentinel is None or other is None or (isinstance(other, ast.Constant) and other.value in SINGLETONS):
                continue
            through = _came_through(source, other, source.function_of(compare), received)
            if through is None:
                continue
            how = "tests by identity" if by_identity else (
                f"compares with == (its class, {objects[root_name(sentinel)]}, defines no __eq__, so == is identity)")
            return Finding(
                "identity-of-a-received-copy", f"`{ast.unparse(compare)}` ({source.name}:{compare.lineno}) {how} an "
                f"object that came through {through[0]} (line {through[1]}) against this rank's own "
                f"{ast.unparse(sentinel)}: objects sent between ranks are pickled and arrive as new objects, so the "
                "test is never true on the ranks that received it, and they go another way than the sender (the "
                "ranks' calls then no longer pair)", evidence, None, None,
                f"compare by value: a field ({ast.unparse(other)[:30]}.<name> == {ast.unparse(sentinel)[:30]}.<name>), "
                "a dataclass (whose == compares fields), or send a plain marker (a name, None, a negative id) that "
                "survives pickling and look the object up on each rank")
    return None


def _module_objects(source: SourceFile) -> dict[str, str | None]:
    """Module-level names bound to objects the module makes (a call, or a dict or list of calls) -> the job's own
    class they are instances of where it defines no __eq__ and is no dataclass (None otherwise)."""
    classes = {node.name: node for node in source.tree.body if isinstance(node, ast.ClassDef)}

    def identity_class(call: ast.AST) -> str | None:
        cls = classes.get(call_name(call)) if isinstance(call, ast.Call) else None
        if cls is None or any("dataclass" in ast.unparse(decorator) and "eq=False" not in ast.unparse(decorator)
                              for decorator in cls.decorator_list):
            return None
        methods = {node.name for node in cls.body if isinstance(node, ast.FunctionDef)}
        return cls.name if "__eq__" not in methods and not cls.bases else None

    objects = {}
    for node in source.tree.body:
        if not isinstance(node, ast.Assign):
            continue
        value = node.value
        made = [value] if isinstance(value, ast.Call) else list(value.values) if isinstance(value, ast.Dict) else \
            list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else []
        if not made or not all(isinstance(item, ast.Call) for item in made):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name):
                objects[target.id] = next((found for item in made if (found := identity_class(item))), None)
    return objects


def _came_through(source: SourceFile, expression: ast.AST, scope: ast.AST, received, depth: int = 0):
    """(the object collective, its line) that `expression` came through: what it is made of, and for a parameter of
    its function, what the callers pass."""
    behind = {node.id for part in made_of(source, expression, scope) for node in walk(part) if isinstance(node, ast.Name)}
    found = next(((op, line) for op, name, line in received if name in behind), None)
    if found is not None or depth >= 2 or not isinstance(scope, ast.FunctionDef):
        return found
    parameters = [argument.arg for argument in scope.args.args]
    for position, name in enumerate(parameters):
        if name not in behind:
            continue
        for call in calls_named(source, {scope.name}):
            given = call.args[position] if position < len(call.args) else next(
                (item.value for item in call.keywords if item.arg == name), None)
            if given is not None and (found := _came_through(source, given, source.function_of(call), received,
                                                             depth + 1)):
                return found
    return None


def _one_call_of_other_sizes(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """Ranks now in different collectives made the same collective at the same line with tensors of different sizes
    (gloo paired them, or one rank went on): the sizes are the cause of the ranks falling apart, and where the job
    builds that tensor from a list each rank filters by its own data, that is why they differ."""
    last = {next(iter(trace.calls.pending[-1:] or trace.calls.failed[-1:]), None).op for trace in ctx.evidence.traces
            if trace.calls and (trace.calls.pending or trace.calls.failed)}
    if len(last) < 2:
        return None  # the ranks are still in one collective: they did not fall apart after an earlier one
    made: dict[str, dict[int, object]] = {}
    for trace in ctx.evidence.traces:
        for call in (trace.calls.recent + trace.calls.failed + trace.calls.pending) if trace.calls else ():
            if call.tensors and call.caller and trace.rank is not None and call.op not in ("send", "recv"):
                made.setdefault(call.caller.split(" in ")[0], {})[trace.rank] = call
    for caller, calls in made.items():
        shapes = {rank: tuple(str(tensor) for tensor in call.tensors) for rank, call in calls.items()}
        if len(calls) < 2 or len(set(shapes.values())) < 2 or len({call.op for call in calls.values()}) > 1:
            continue
        call = next(iter(calls.values()))
        source, collective = collective_at(files, call) or (None, None)
        kept = kept_by_a_local_test(source, collective.args[0], source.function_of(collective)) \
            if collective is not None else None
        passed = ", ".join(f"rank {rank} {' '.join(shape)}" for rank, shape in sorted(shapes.items()))
        why = (f": `{ast.unparse(collective.args[0])[:40]}` is made from `{kept[0]}`, whose items each rank "
               f"{'skips where' if kept[2] else 'keeps only where'} `{ast.unparse(kept[1])[:60]}` (line "
               f"{kept[1].lineno}) holds on its own data" if kept else "")
        return Finding(
            "shape-mismatch", f"the ranks passed tensors of different sizes to {call.op} at {caller} ({passed}), and "
            f"fell out of step after it{why}", evidence, None, None,
            "keep every item on every rank (a zero entry where a rank has none: a gradient it does not hold counts "
            "0) so the tensor has one size everywhere, or reduce one fixed-size value (a sum of squares) instead of "
            "a list" if kept else SIZES_FIX_IN_ORDER)
    return None


SIZES_FIX_IN_ORDER = ("make every rank pass the same shape to this collective: compute what sizes it from what every "
                      "rank shares (or agree on it first: all_reduce(MAX) of the length, then pad)")


BUILTIN_HOOKS = {"len": "__len__", "iter": "__iter__", "str": "__str__", "repr": "__repr__", "format": "__format__",
                 "bool": "__bool__", "hash": "__hash__"}
MAKES_COLLECTIVES = {"all_reduce", "all_gather", "all_gather_object", "broadcast", "broadcast_object_list", "barrier",
                     "reduce", "gather", "scatter", "reduce_scatter", "all_to_all", "gather_object"}


def _collective_behind_a_rank_test(files: list[SourceFile], evidence: str) -> Finding | None:
    """Under `if rank == 0:` (with no else that the other ranks run instead) a call of the job's own code that makes a
    collective out of sight: a method of its own class (len(ds) runs __len__), or a function of the job: only that
    rank makes it."""
    for source in files:
        functions = {node.name: node for node in source.walk() if isinstance(node, ast.FunctionDef)}
        collecting = {name: call for name, function in functions.items() for call in walk(function)
                      if isinstance(call, ast.Call) and call_name(call) in MAKES_COLLECTIVES}
        if not collecting:
            continue
        modules = {alias.asname or alias.name.split(".")[0] for node in source.walk()
                   if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
        for branch in (node for node in source.walk() if isinstance(node, ast.If) and not node.orelse and any(
                identifier(part) in RANK_NAMES or call_name(part) in RANK_CALLS for part in walk(node.test))):
            for call in (node for statement in branch.body for node in walk(statement) if isinstance(node, ast.Call)
                         and root_name(node.func) not in modules):  # torch.save is not the job's own save
                name = call_name(call)
                runs = BUILTIN_HOOKS.get(name) if name in BUILTIN_HOOKS and call.args else name
                if runs not in collecting or (runs == name and name in MAKES_COLLECTIVES):
                    continue
                made = collecting[runs]
                return Finding(
                    "collective-behind-a-rank-test", f"`{ast.unparse(call)[:40]}` under `if {ast.unparse(branch.test)[:30]}:` "
                    f"({source.name}:{call.lineno}) runs {runs} (line {functions[runs].lineno}), which makes a "
                    f"collective ({call_name(made)}, line {made.lineno}): only the ranks that pass the test make it, so "
                    "the ranks' collectives no longer pair", evidence, None, None,
                    f"take the collective out of what some ranks alone run: compute the value on every rank before the "
                    f"branch (for {runs}, once, when the object is made, and return the cached value) and use that "
                    "inside the branch")
    return None


def _autograd_collective_used_on_some_ranks(files: list[SourceFile], evidence: str) -> Finding | None:
    """A value made with an autograd collective (torch.distributed.nn's all_reduce, whose backward runs another
    collective) that joins the loss only under a test of each rank's own data: the ranks that leave it out make no
    backward collective, and the others' meets DDP's gradient all_reduce."""
    for source in files:
        modules = {alias.asname or alias.name for node in source.walk() if isinstance(node, (ast.Import, ast.ImportFrom))
                   for alias in node.names if "distributed.nn" in (getattr(node, "module", None) or alias.name)
                   or alias.name == "torch.distributed.nn"}
        autograd = {function.name: call for function in source.walk() if isinstance(function, ast.FunctionDef)
                    for call in walk(function) if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr in MAKES_COLLECTIVES and ("distributed.nn" in ast.unparse(call.func)
                                                                 or root_name(call.func) in modules)}
        for assign in (node for node in source.walk() if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                       and call_name(node.value) in autograd and isinstance(node.targets[0], ast.Name)):
            made = assign.targets[0].id
            used = next((node for node in source.walk() if isinstance(node, ast.If) and node.lineno > assign.lineno
                         and any(isinstance(part, ast.Name) and part.id == made for statement in node.body
                                 for part in walk(statement))
                         and not any(identifier(part) in RANK_NAMES or call_name(part) in RANK_CALLS
                                     for part in walk(node.test))), None)
            if used is None:
                continue
            collective = autograd[call_name(assign.value)]
            return Finding(
                "autograd-collective-used-on-some-ranks", f"`{ast.unparse(assign)[:50]}` ({source.name}:{assign.lineno}) "
                f"is made with an autograd collective (`{ast.unparse(collective.func)}`, line {collective.lineno}), "
                f"whose backward runs a collective too, and `{made}` joins the loss only where "
                f"`{ast.unparse(used.test)[:40]}` holds (line {used.lineno}), on each rank's own data: the ranks that "
                "leave it out make no backward collective for it, and the others' meets DDP's gradient all_reduce",
                evidence, None, None,
                f"keep `{made}` in every rank's loss (add it always, times 0 where a rank has nothing for it), or make "
                "it from detached values with a plain dist.all_reduce, which has no backward")
    return None


FIRST_NUMBER = re.compile(r"^\(?\\d\+\)?$|^\[0-9\]\+$")  # a pattern that takes whatever number comes first


def _first_number_of_a_rank_name(files: list[SourceFile], evidence: str) -> Finding | None:
    """A number read as the first one in a name the job makes with the rank before it (`worker{rank}-step{step}`):
    the regex takes the rank, so each rank reads its own rank where it meant the step, and the ranks go on from
    different places."""
    for source in files:
        names = [node for node in source.walk() if isinstance(node, ast.JoinedStr)]
        ranked = next((name for name in names if len([part for part in name.values
                                                      if isinstance(part, ast.FormattedValue)]) >= 2
                       and identifier(next(part for part in name.values if isinstance(part, ast.FormattedValue)).value)
                       in RANK_NAMES), None)
        parse = next((call for call in source.walk() if isinstance(call, ast.Call) and call_name(call) in
                      ("search", "findall", "match") and called_on(call) == "re" and call.args
                      and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)
                      and FIRST_NUMBER.match(call.args[0].value)), None) if ranked is not None else None
        if parse is None:
            continue
        return Finding(
            "first-number-of-a-rank-name", f"`{ast.unparse(parse)[:50]}` ({source.name}:{parse.lineno}) takes the first "
            f"number of names the job makes as `{ast.unparse(ranked)[:50]}` (line {ranked.lineno}), where the rank "
            "comes first: each rank reads its own rank where it meant the later number (a step), so the ranks go on "
            "from different places and their collectives no longer pair", evidence, None, None,
            "keep the number in the file (state['step']) and read it from there, or parse the field by its name "
            "(re.search(r'step(\\d+)', name)); then check that every rank resumes at the same step (all_reduce MIN "
            "and MAX)")
    return None


def _backward_skipped_on_own_test(files: list[SourceFile], evidence: str) -> Finding | None:
    """In a job that wraps its model in DDP, a `continue` (or `break`) before `loss.backward()` in the same loop, under
    a test of the rank's own values (its loss, a spike, a NaN): the rank that skips makes none of DDP's gradient
    all_reduces for that step, and its next step's meet the others' of this one."""
    for source in files:
        if not calls_named(source, {"DistributedDataParallel", "DDP"}):
            continue
        agreed = {root_name(call.args[0]) for call in calls_named(source, MAKES_COLLECTIVES) if call.args}
        for backward in calls_named(source, {"backward"}):
            loop = source.loop_of(backward)
            skip = next((node for node in walk(loop) if isinstance(node, ast.If) and node.lineno < backward.lineno
                         and any(isinstance(step, (ast.Continue, ast.Break)) for step in node.body)
                         and any(isinstance(part, (ast.Call, ast.Attribute)) for part in walk(node.test))
                         and not any(identifier(part) in RANK_NAMES or call_name(part) in RANK_CALLS
                                     or identifier(part) in agreed for part in walk(node.test))),
                        None) if loop is not None else None  # a value every rank got from a collective is agreed
            if skip is None:
                continue
            return Finding(
                "backward-skipped-on-own-test", f"`if {ast.unparse(skip.test)[:50]}:` ({source.name}:{skip.lineno}) "
                f"skips `{ast.unparse(backward)[:30]}` (line {backward.lineno}) on the ranks whose own values pass it: "
                "a rank that skips makes none of DDP's gradient all_reduces for that step, so its next step's meet the "
                "other ranks' of this one", evidence, None, None,
                "decide the skip together: all_reduce a flag with MAX (skip on every rank when any rank would), or keep "
                "the backward and zero that rank's loss (loss * 0) so every rank makes the same all_reduces")
    return None


COLLECTIVES_IN_A_STEP = {"all_gather", "all_gather_into_tensor", "broadcast", "all_reduce", "reduce_scatter",
                        "reduce_scatter_tensor", "barrier", "all_to_all"}


def _step_skipped_on_some_ranks(files: list[SourceFile], evidence: str) -> Finding | None:
    """GradScaler.step (not the sharded one) on an optimizer of the job's own whose step makes collectives: the scaler
    skips the step where this rank's gradients hold inf or NaN, and with gradients split over the ranks each checks
    only its own part, so a rank skips the step's collectives that the others make."""
    for source in files:
        steps = {node.name: node for node in source.walk() if isinstance(node, ast.ClassDef) for method in node.body
                 if isinstance(method, ast.FunctionDef) and method.name == "step" and any(
                     call_name(call) in COLLECTIVES_IN_A_STEP for call in walk(method) if isinstance(call, ast.Call))}
        scalers = {target.id for node in source.walk() if isinstance(node, ast.Assign)
                   and isinstance(node.value, ast.Call) and call_name(node.value) == "GradScaler"
                   for target in node.targets if isinstance(target, ast.Name)}
        stepped = next((call for call in calls_named(source, {"step"}) if call.args
                        and isinstance(call.func, ast.Attribute) and root_name(call.func.value) in scalers), None)
        if not steps or stepped is None:
            continue
        name, cls = next(iter(steps.items()))
        method = next(node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "step")
        collective = next(call for call in walk(method) if isinstance(call, ast.Call)
                          and call_name(call) in COLLECTIVES_IN_A_STEP)
        return Finding(
            "step-skipped-on-some-ranks", f"`{ast.unparse(stepped)}` ({source.name}:{stepped.lineno}) skips the "
            f"optimizer's step where this rank's own gradients hold inf or NaN, and {name}.step makes a collective "
            f"({call_name(collective)}, line {collective.lineno}): each rank checks only the gradients it holds (a "
            "shard, after a reduce-scatter), so a rank whose part held the inf skipped that collective while the "
            "others made it, and the ranks fell out of step", evidence, None, None,
            "decide the skip for every rank together: a found-inf flag all-reduced with MAX before stepping "
            "(torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler does this), so that every rank steps or "
            "skips alike; and keep NaN inputs out of the loss")
    return None


def _sends_left_unreceived(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """Ranks left in send to one rank that had stopped receiving (it ended, or waits in something else): the receiver's
    loop ended before the last messages came, typically a coordinator that counts the work left to hand out rather
    than the results still out with its workers."""
    traces = {trace.rank: trace for trace in ctx.evidence.traces if trace.rank is not None and trace.calls}
    senders: dict[int, list[tuple[int, object]]] = {}
    for rank, trace in traces.items():
        last = next(iter(trace.calls.pending[-1:] or trace.calls.failed[-1:]), None)
        if last is not None and last.op in ("send", "isend") and last.dst is not None and last.dst != rank:
            senders.setdefault(last.dst, []).append((rank, last))
    for receiver, waiting in sorted(senders.items()):
        trace = traces.get(receiver)
        still = next(iter(trace.calls.pending[-1:]), None) if trace else None
        if trace is None or (still is not None and still.op in ("recv", "irecv")):
            continue  # it is still receiving: the messages are merely slow
        received = trace.calls.counts.get("recv", 0) + trace.calls.counts.get("irecv", 0)
        last_receive = next((call for call in reversed(trace.calls.recent) if call.op in ("recv", "irecv")), None)
        ended = f"raised {trace.exception}" if trace.exception else (
            f"went on to {still.op} at {still.caller}" if still else "ended")
        loop = _receiving_loop(files, last_receive.caller if last_receive else None)
        if not loop or received < 2:
            continue  # no loop of receives that stopped: the receiver failed on its own, which other rules tell
        ranks = ", ".join(str(rank) for rank, _ in waiting)
        return Finding(
            "sends-left-unreceived", f"rank{'s' if len(waiting) > 1 else ''} {ranks} "
            f"{'were' if len(waiting) > 1 else 'was'} still sending to rank "
            f"{receiver} ({waiting[0][1].caller}) after rank {receiver} had stopped receiving: it received "
            f"{received} message{'s' if received != 1 else ''}{f', the last at {last_receive.caller}' if last_receive else ''}, "
            f"and {ended}{loop}", evidence, None, receiver,
            f"have rank {receiver} receive every message the others send: count what is still out (work handed out "
            "and not returned, or the workers not yet told to stop) and keep receiving until it is none, e.g. "
            "`while todo or in_flight:`, answering each worker that reports with its stop once the work is gone")
    return None


def _receiving_loop(files: list[SourceFile], caller: str | None) -> str:
    """'; its receiving loop, `while todo:` (line 46), ends on ...': the loop around the last receive, or around the
    calls of the function that made it."""
    place = caller_place(caller)
    source = source_named(files, place[0]) if place else None
    statement = source.statement_at(place[1]) if source else None
    if statement is None:
        return ""
    loop = source.loop_of(statement)
    if loop is None:
        function = source.function_of(statement)
        name = getattr(function, "name", None)
        loop = next((source.loop_of(call) for call in calls_named(source, {name}) if name and source.loop_of(call)),
                    None)
    if not isinstance(loop, ast.While):
        return ""
    return (f"; its receiving loop, `while {ast.unparse(loop.test)[:40]}:` ({source.name}:{loop.lineno}), ends on "
            "its own condition, not on the messages still to come")


def _sharded_without_shape(files: list[SourceFile], found: list[Finding], evidence: str) -> Finding | None:
    """DTensor.from_local with a Shard placement and no shape=: torch takes every rank's piece to be as large as
    this rank's, so uneven pieces give a wrong global shape and gathering them passes other sizes to all_gather."""
    if not any(finding.cause in ("shape-mismatch", "collective-output-size") for finding in found):
        return None
    for source in files:
        for call in calls_named(source, {"from_local"}):
            if "Shard" in ast.unparse(call) and not any(keyword.arg == "shape" for keyword in call.keywords):
                return Finding(
                    "sharded-without-shape", f"`{ast.unparse(call)[:70]}` ({source.name}:{call.lineno}) makes a "
                    "sharded DTensor from each rank's own piece without shape=: torch then takes every piece to be as "
                    "large as this rank's, so pieces of uneven size (a length the ranks do not divide evenly) give a "
                    "wrong global shape, and gathering it (full_tensor, redistribute) hands all_gather tensors of "
                    "different sizes", evidence, None, None,
                    "pass the global shape and stride: DTensor.from_local(local, mesh, [Shard(0)], shape=full_shape, "
                    "stride=full_stride), or make the pieces even (pad the dimension "
                    "to a multiple of the world size), or let distribute_tensor(full, mesh, [Shard(0)]) split it")
    return None


SHARDS = {"fully_shard", "FSDP", "FullyShardedDataParallel"}


def _sharded_unit_skipped(files: list[SourceFile], evidence: str) -> Finding | None:
    """Each module of a list sharded on its own (fully_shard in a loop over model.experts), and a forward that skips
    one of them on a condition of its own data: a skipped unit's all-gather and reduce-scatter do not run on that
    rank, while the ranks that ran it wait in them."""
    for source in files:
        for loop in (node for node in source.walk() if isinstance(node, (ast.For, ast.AsyncFor))):
            shard = next((call for statement in loop.body for call in walk(statement)
                          if isinstance(call, ast.Call) and call_name(call) in SHARDS), None)
            if shard is None or not isinstance(loop.iter, ast.Attribute):
                continue
            listed = loop.iter.attr  # model.moe.experts -> experts
            for use in (node for node in source.walk() if isinstance(node, (ast.For, ast.AsyncFor))
                        and listed in {part.attr for part in walk(node.iter) if isinstance(part, ast.Attribute)}
                        and node is not loop):
                skip = next((branch for branch in walk(use) if isinstance(branch, ast.If) and
                             not _agreed(source, branch) and any(isinstance(part, ast.Continue)
                                                                   for part in branch.body)), None)
                if skip is None:
                    continue
                return Finding(
                    "sharded-unit-skipped", f"each of `{ast.unparse(loop.iter)}` is a sharded unit of its own "
                    f"(`{ast.unparse(shard)[:40]}`, {source.name}:{shard.lineno}), and the loop at line {use.lineno} "
                    f"skips one where `{ast.unparse(skip.test)[:50]}` (line {skip.lineno}), which each rank decides "
                    "from its own data: a unit skipped on one rank does not run its all-gather (forward, backward) "
                    "or its gradients' reduce-scatter there, while the ranks that ran it wait in them",
                    evidence, None, None,
                    f"run every sharded unit on every rank each step: call it on an empty batch where "
                    f"`{ast.unparse(skip.test)[:40]}` instead of skipping it, or shard the list together (fully_shard "
                    "the layer that holds it, not each item)")
    return None


def _polls_work_completion(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A rank in its own code, in a loop that polls a request's is_completed() (an irecv, an async collective) instead
    of wait(): gloo marks a send's or recv's work completed inside wait() only, so the loop can spin for ever while
    its peer waits for what the rank does after it."""
    for process in ctx.evidence.processes:
        where = process.waiting() if process.role != "agent" and process.rank is not None else None
        if where is None or where.in_distributed_call or where.user_frame is None:
            continue
        frame = where.user_frame
        source = source_named(files, frame.file)
        at = source.statement_at(frame.line) if source else None
        loop = at if isinstance(at, ast.While) else source.loop_of(at) if at else None  # the innermost
        polled = next((call for call in walk(loop) if isinstance(call, ast.Call)
                       and call_name(call) == "is_completed"), None) if loop else None
        if polled is None:
            continue
        request = called_on(polled)
        return Finding(
            "request-polled-not-waited", f"rank {process.rank} polls `{ast.unparse(polled)}` in a loop "
            f"({source.name}:{loop.lineno}) and does not call {request}.wait(): with gloo the work of a send or recv "
            "(isend/irecv, batch_isend_irecv) is marked completed inside wait() only, so is_completed() stays False "
            "though the data arrived, and the loop spins while the peers wait for what the rank does after it",
            evidence, process.node, process.rank,
            f"call {request}.wait() where the loop polls (it returns at once when the data is there); to overlap "
            "work with the transfer, do that work between the isend/irecv and the wait(), not in a polling loop")
    return None


AGREED_BY = {"all_reduce", "broadcast", "all_gather", "all_gather_object", "broadcast_object_list",
             "all_gather_into_tensor"}


def _branch_on_own_values(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """Two ranks stuck at different lines because an `if` (or an `if ...: break` out of their loop) that does not test
    the rank went one way on one rank and the other way on another: the test reads each rank's own values (its own
    loss, its own clock, its own data), so the ranks took different branches and the collectives under them."""
    places: dict[int, tuple[str, int, str]] = {}
    for name, line, op, _, rank in _collective_lines(ctx):
        if rank is not None:
            places.setdefault(rank, (name, line, op))
    waits = {trace.rank: trace.waiting_in.operation for trace in ctx.evidence.traces if trace.waiting_in}
    for process in ctx.evidence.processes:  # the user's line each rank's stack stood at, when the lab took it
        if process.rank is not None and process.role != "agent" and process.rank not in places and \
                (where := process.waiting()) and where.user_frame:
            frame = where.user_frame
            places[process.rank] = (frame.file.rsplit("/", 1)[-1], frame.line, waits.get(process.rank, "its own code"))
    for rank, (name, line, op) in sorted(places.items()):
        for other, (other_name, other_line, other_op) in sorted(places.items()):
            if other == rank or other_name != name or other_line == line:
                continue
            source = source_named(files, name)
            if source is None:
                continue
            told = _branch_between(source, line, other_line) or _left_a_called_loop(ctx, source, line, other)
            if told is None:
                continue
            branch, how = told
            test = ast.unparse(branch.test)
            return Finding(
                "collective-under-own-condition", f"rank {rank} waits in {op} at {name}:{line} and rank {other} in "
                f"{other_op} at line {other_line}: {how.format(test=test, line=branch.lineno, rank=rank, other=other)}"
                f"; `{test[:70]}` reads each rank's own values (its own loss, clock or data), not the rank, so it "
                "went one way on one rank and the other way on another, and the ranks' collectives no longer pair",
                evidence, node_of_rank(ctx, rank), rank,
                f"decide `{test[:60]}` together, so every rank takes the same branch: reduce what it tests first "
                "(all_reduce the value, or a flag with op=MAX: stop when any rank would), or let rank 0 decide and "
                "broadcast the decision; then the collectives under it run on every rank or on none")
    return None


def _branch_between(source: SourceFile, line: int, other_line: int) -> tuple[ast.If | ast.While, str] | None:
    """The `if` that put `line` and `other_line` on different paths, with how, unless it tests the rank or values
    the ranks agreed on."""
    for node in source.walk():
        if not isinstance(node, ast.If) or not _spans(source.function_of(node), line, other_line) or \
                _agreed(source, node):
            continue
        if _holds_line(node.body, line) != _holds_line(node.body, other_line) and (
                _holds_line(node.body, line) or _holds_line(node.body, other_line)):
            inside = line if _holds_line(node.body, line) else other_line
            return node, ("line {inside} runs only where `{{test}}` holds (line {{line}})".format(inside=inside))
    for loop in (node for node in source.walk() if isinstance(node, (ast.For, ast.While))):
        # both lines in the loop's function: a line of another function (a rank that runs other code, as a
        # pipeline's stages do) never was in the loop
        if _holds_line(loop.body, other_line) and not _holds_line(loop.body, line) and \
                _spans(source.function_of(loop), line, other_line):
            if isinstance(loop, ast.While) and not _agreed(source, loop):
                return loop, "rank {rank} left the loop `while {test}` (line {line}) while rank {other} is still in it"
            exit_branch = next((node for node in walk(loop) if isinstance(node, ast.If) and not _agreed(source, node)
                                and any(isinstance(part, ast.Break) and source.loop_of(part) is loop
                                        for statement in node.body for part in walk(statement))), None)
            if exit_branch is not None:
                return exit_branch, ("rank {rank} left the loop (line " + str(loop.lineno) + ") at `if {test}: break` "
                                     "(line {line}) while rank {other} is still in it")
    return None


def _left_a_called_loop(ctx: Context, source: SourceFile, line: int, other: int) -> tuple[ast.If | ast.While, str] | None:
    """A rank past a call (its line later in the same function) while rank `other` is still inside it, in a loop the
    called function leaves at `if ...: break` (or `while ...`): the first rank left that loop earlier."""
    tb = next((tb for tb in ctx.tracebacks if tb.rank == other), None)
    own = [frame for frame in (tb.frames if tb else []) if frame.file.rsplit("/", 1)[-1] == source.name]
    for outer, inner in zip(own, own[1:]):
        caller = source.statement_at(outer.line)
        if caller is None or source.function_of(caller) is not source.function_of(source.statement_at(line)) or \
                not outer.line < line:
            continue
        loop = source.loop_of(source.statement_at(inner.line))
        if loop is None or isinstance(loop, ast.While) and _agreed(source, loop):
            continue
        if isinstance(loop, ast.While):
            return loop, (f"rank {{rank}} is past line {outer.line} and left the loop `while {{test}}` (line {{line}}) "
                          "it calls, while rank {other} is still in it")
        exit_branch = next((node for node in walk(loop) if isinstance(node, ast.If) and not _agreed(source, node)
                            and any(isinstance(part, ast.Break) and source.loop_of(part) is loop
                                    for statement in node.body for part in walk(statement))), None)
        if exit_branch is not None:
            return exit_branch, (f"rank {{rank}} is past line {outer.line}, having left the loop (line {loop.lineno}) "
                                 f"it calls at `if {{test}}: break` (line {{line}}), while rank {{other}} is still in "
                                 "it")
    return None


def _spans(scope: ast.AST, *lines: int) -> bool:
    """Both lines are in `scope` (a function, or the module): an `if` of another function says nothing of them."""
    return isinstance(scope, ast.Module) or all(scope.lineno <= line <= (scope.end_lineno or scope.lineno)
                                                for line in lines)


def _holds_line(body: list[ast.stmt], line: int) -> bool:
    return any(statement.lineno <= line <= (statement.end_lineno or statement.lineno) for statement in body)


def _agreed(source: SourceFile, branch: ast.If | ast.While) -> bool:
    """The test reads the rank itself (other findings tell those), or names a collective gave every rank alike before
    it (all_reduce(t) then `if t.item() > x`). Values only computed from the rank's own shard are not agreed."""
    if holds(branch.test, _ranks_in(source, source.function_of(branch)), RANK_VARIABLES, RANK_CALLS):
        return True  # `if up >= 0` with `up = rank - 1`: a neighbour that exists on some ranks only
    names = {node.id for node in walk(branch.test) if isinstance(node, ast.Name)}
    alike = _counters(source, branch) | {name for name in names if name.isupper() or name in CONFIGS}
    if names <= alike:
        return True  # `if step % 10 == 0`, `if epoch == EPOCHS - 1`, `if step >= args.max_steps`: alike everywhere
    scope = source.function_of(branch)
    shared = {part.id for node in walk(scope) if isinstance(node, ast.Call) and call_name(node) in AGREED_BY
              and node.lineno < branch.lineno for argument in node.args[:1] for part in walk(argument)
              if isinstance(part, ast.Name)}
    return bool(names) and bool(names & shared)


def _ranks_in(source: SourceFile, scope: ast.AST) -> set[str]:
    """The rank's names in `scope`, and what the scope computes from them by arithmetic alone (`up, down = rank - 1,
    rank + 1`): a test of those tests the rank. A value a call computes from the rank (a loss over the rank's shard)
    is the rank's own value, not the rank. Within one function: a name that holds a rank elsewhere does not count."""
    found = set(RANK_NAMES)
    assigned = [(target, value) for node in walk(scope) if isinstance(node, ast.Assign) for target, value in (
        zip(node.targets[0].elts, node.value.elts) if isinstance(node.targets[0], ast.Tuple) and isinstance(
            node.value, ast.Tuple) and len(node.targets[0].elts) == len(node.value.elts)
        else [(node.targets[0], node.value)])]
    while more := {target.id for target, value in assigned if isinstance(target, ast.Name) and target.id not in found
                   and holds(value, found, RANK_VARIABLES, RANK_CALLS) and not any(
                       isinstance(part, (ast.Call, ast.Subscript)) for part in walk(value))}:
        found |= more
    return found


# Names that hold a run's options, the same on every rank (a setting that differs per node is told elsewhere).
CONFIGS = {"args", "opts", "options", "cfg", "config", "conf", "hparams", "params", "settings", "flags"}


def _counters(source: SourceFile, node: ast.AST) -> set[str]:
    """The names the loops around `node` count with (`for step in range(...)`, `for i, batch in enumerate(...)`'s i),
    and names only ever set to a constant or stepped by one (`step = 0` ... `step += 1`)."""
    counted = {name for name in _stepped_names(source) if _only_counts(source, name)}
    while (node := source.parent(node)) is not None:
        if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.iter, ast.Call):
            if call_name(node.iter) == "range" and isinstance(node.target, ast.Name):
                counted.add(node.target.id)
            elif call_name(node.iter) == "enumerate" and isinstance(node.target, ast.Tuple) and \
                    isinstance(node.target.elts[0], ast.Name):
                counted.add(node.target.elts[0].id)
    return counted


def _stepped_names(source: SourceFile) -> set[str]:
    """The names an augmented assignment changes (`step += 1`)."""
    return {node.target.id for node in source.walk() if isinstance(node, ast.AugAssign)
            and isinstance(node.target, ast.Name)}


def _only_counts(source: SourceFile, name: str) -> bool:
    """Every write of `name` is a constant (`step = 0`) or a constant added (`step += 1`)."""
    for node in source.walk():
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            if not isinstance(node.value, ast.Constant):
                return False
        elif isinstance(node, ast.Assign) and any(isinstance(target, ast.Name) and target.id == name
                                                  for target in node.targets):
            if not isinstance(node.value, ast.Constant):
                return False
    return True


def group_made_again_findings(ctx: Context) -> list[Finding]:
    """A rank that called init_process_group again after destroy_process_group: the second rendezvous meets on the
    store the first group used (the same MASTER_ADDR and MASTER_PORT, its keys still there), so the ranks do not form
    the second group alike."""
    for trace in ctx.evidence.traces:
        made = [call for call in (trace.calls.made if trace.calls else ()) if call.op in ("init_process_group",
                                                                                        "destroy_process_group")]
        destroyed = next((index for index, call in enumerate(made) if call.op == "destroy_process_group"), None)
        again = next((call for call in made[destroyed + 1:] if call.op == "init_process_group"), None) \
            if destroyed is not None else None
        if again is None:
            continue
        first = made[0].caller if made[0].op == "init_process_group" else None
        seen = "; ".join(process.summary() for process in ctx.evidence.processes
                         if process.rank is not None and process.role != "agent")
        return [Finding(
            "group-made-again", f"rank {trace.rank} made the default process group again ({again.caller}) after "
            f"destroy_process_group ({made[destroyed].caller})" + (f", having made it first at {first}" if first else "")
            + ": the second rendezvous meets on the store the first group used (the same MASTER_ADDR and "
            "MASTER_PORT, its keys still there), so the ranks do not form the new group alike and wait for each other",
            (f"rank {trace.rank}: " + " -> ".join(f"{call.op} ({call.caller})" for call in made)
             + (f"; at the end: {seen}" if seen else ""))[:400], trace.node, trace.rank,
            "make the process group once per process: init_process_group at the start of the program, "
            "destroy_process_group at its very end, and let train() and evaluate() use the group that is there "
            "(if not dist.is_initialized(): init ...) rather than tearing it down in between; a second group for "
            "part of the work is dist.new_group(), not a new default group")]
    return []


def _collective_lines(ctx: Context) -> list[tuple[str, int, str, int | None, int | None]]:
    """(file name, line, operation, node, rank) of each collective a rank was stuck in or that raised."""
    lines = []
    for trace in ctx.evidence.traces:
        for call in (*trace.calls.failed, *trace.calls.pending) if trace.calls else ():
            if (where := caller_place(call.caller)) is not None:
                lines.append((*where, call.op, trace.node, trace.rank))
    for tb in ctx.tracebacks:
        op = tb.collective()
        frame = tb.user_frame()
        if frame and not op and echoes_a_peer(tb):  # a collective torch ran for the line: DDP's in backward/forward
            quoted = quoted_source(ctx, tb, frame)
            op = "DDP's gradient all_reduce (in backward)" if ".backward(" in quoted else \
                f"a collective torch runs in `{quoted[:40]}`" if quoted else None
        if op and frame:
            lines.append((frame.file.rsplit("/", 1)[-1], frame.line, op, tb.node, tb.rank))
    known = {rank for *_, rank in lines}
    for node, rank in {(line.node, line.rank) for line in ctx.lines if FATAL_ERROR.search(line.text)}:
        frames, _ = faulthandler_stack(ctx, node, rank)  # a rank a fatal signal ended inside a collective
        op, own = collective_in(list(reversed(frames)))
        if op and own and rank not in known:
            lines.append((own.file.rsplit("/", 1)[-1], own.line, op, node, rank))
    return lines


def _unordered_loop(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    if not files:
        return None
    for name, line, op, node, rank in _collective_lines(ctx):
        for source in files:
            if source.name != name:
                continue
            for loop in _loops_around(source, line):
                if (filled := _filled_in_rank_order(source, loop.iter)) is not None:
                    return Finding(
                        "collectives-in-unordered-loop", f"the {op} at {name}:{line} runs in a loop over "
                        f"{ast.unparse(loop.iter)[:40]} (line {loop.lineno}), a dict filled in an order that depends "
                        f"on the rank ({filled}); a dict keeps the order its keys came in, so each rank runs the "
                        "loop's collectives in its own order and pairs them with other tensors than its peers",
                        evidence, node, rank,
                        f"loop in an order every rank shares, whatever order each filled it in: `for key in "
                        f"sorted({ast.unparse(loop.iter)[:40]})` (or the fixed list the keys come from)")
                if (found := unordered(source, loop.iter)) is None:
                    continue
                what, text = found
                why = ("a set's order follows its items' hashes, and strings hash with a salt of each process's own "
                       "(unless PYTHONHASHSEED is set)" if what == "a set" else
                       f"{what} lists entries in the filesystem's own order, which differs between nodes and runs")
                return Finding(
                    "collectives-in-unordered-loop", f"the {op} at {name}:{line} runs in a loop over {text} "
                    f"(line {loop.lineno}): {why}, so each rank runs the loop's collectives in its own order and pairs "
                    "them with other tensors than its peers", evidence, node, rank,
                    f"loop in an order every rank shares: `for ... in sorted({ast.unparse(loop.iter)[:60]})`; to drop "
                    "repeats and keep the order given, use dict.fromkeys(items) instead of set(items)")
    return None


def _filled_in_rank_order(source: SourceFile, iterated: ast.AST) -> str | None:
    """"`for ... in ...`, line N" when a loop iterates a dict (NAME, NAME.items(), .keys(), .values()) that the same
    function filled in a loop over something that depends on the rank (a task order rotated by the rank): a dict
    iterates in the order its keys came in, so each rank's order is its own."""
    base = iterated.func.value if isinstance(iterated, ast.Call) and isinstance(iterated.func, ast.Attribute) and \
        iterated.func.attr in ("items", "keys", "values") else iterated
    if not isinstance(base, ast.Name):
        return None
    ranks = source.ranks
    for loop in walk(source.function_of(iterated)):
        if isinstance(loop, ast.For) and loop.lineno < iterated.lineno and holds(loop.iter, ranks, set(), ()) and any(
                isinstance(node, ast.Assign) and any(isinstance(target, ast.Subscript) and isinstance(
                    target.value, ast.Name) and target.value.id == base.id for target in node.targets)
                for node in walk(loop)):
            return f"`for {ast.unparse(loop.target)} in {ast.unparse(loop.iter)[:40]}`, line {loop.lineno}"
    return None


def _loops_around(source: SourceFile, line: int) -> list[ast.For | ast.comprehension]:
    """The for loops and comprehensions whose body holds `line`, innermost first."""
    loops = []
    for node in source.walk():
        if isinstance(node, (ast.For, ast.AsyncFor)) and node.lineno < line <= (node.end_lineno or node.lineno):
            loops.append((node.lineno, node))
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)) and \
                node.lineno <= line <= (node.end_lineno or node.lineno):
            loops.extend((node.lineno, generator) for generator in node.generators)
    return [loop for _, loop in sorted(loops, key=lambda item: -item[0])]


NOT_COLLECTIVES = {"init_process_group", "new_group", "new_subgroups", "destroy_process_group", "send", "recv",
                   "isend", "irecv", "batch_isend_irecv"}


def _from_two_threads(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A rank whose collectives on one group came from two threads: which runs first differs per rank. Seen in the
    calls the hooks recorded, or in a call of another thread than the main one while the recorder holds the default
    group's collectives from two threads (torch's own, such as DDP's gradients, are not among the recorded calls)."""
    for trace in ctx.evidence.traces:
        calls = trace.calls
        threads: dict[tuple, dict[str, str]] = {}
        for call in calls.made if calls else ():
            if call.op not in NOT_COLLECTIVES:
                threads.setdefault(call.group or (), {}).setdefault(call.thread, call.caller or call.op)
        issuers = {collective.thread for collective in trace.history if collective.thread}
        recorded = (*calls.made, *calls.failed, *calls.pending) if calls else ()
        side = next((call for call in recorded if call.op not in NOT_COLLECTIVES and call.thread != MAIN_THREAD
                     and not call.group), None)
        if side is not None and len(issuers) > 1 and len(threads.get((), {})) < 2:
            threads[()] = {MAIN_THREAD: "the training loop's, such as DDP's gradients",
                           side.thread: side.caller or side.op}
        for group, callers in threads.items():
            if len(callers) > 1:
                shown = ", ".join(f"{thread} ({caller})" for thread, caller in callers.items())
                saver = _async_save_without_group(files)
                return Finding(
                    "collectives-from-threads", f"rank {trace.rank} ran collectives on one process group from "
                    f"{len(callers)} threads: {shown}" + (f"; {saver} runs the checkpoint's collectives in a thread of "
                                                          "its own, on the default group" if saver else "")
                    + ": which thread's call comes first differs from rank to rank, so the ranks pair different "
                    "collectives", evidence, trace.node, trace.rank,
                    ("give the asynchronous save a process group of its own, made on every rank at the start: "
                     "ckpt_group = dist.new_group(backend='gloo'), then dcp.async_save(..., process_group=ckpt_group)"
                     if saver else "run every collective of a group from one thread (hand the other thread's values "
                     "to it through a queue), or give the other thread a process group of its own "
                     "(dist.new_group(...), made on every rank in the same order) and run its collectives there"))
    return None


def _async_save_without_group(files: list[SourceFile]) -> str | None:
    """'`dcp.async_save(...)` (FILE:LINE)' where the code saves asynchronously on the default group."""
    for source in files:
        for call in calls_named(source, {"async_save"}):
            if not any(keyword.arg == "process_group" for keyword in call.keywords):
                return f"`{ast.unparse(call)[:60]}` ({source.name}:{call.lineno})"
    return None


COLLECTIVES = {"all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "reduce", "barrier", "gather",
               "scatter", "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single",
               "all_gather_object", "broadcast_object_list"}


def _own_collective_in_join(files: list[SourceFile], evidence: str) -> Finding | None:
    """A collective of the code's own inside `with Join([...])`: Join shadows only the joinables' (DDP's)
    collectives for ranks that ran out of data; the others wait in this one alone."""
    for source in files:
        for block in source.walk():
            if not isinstance(block, ast.With) or not any(
                    isinstance(item.context_expr, ast.Call) and call_name(item.context_expr) == "Join"
                    for item in block.items):
                continue
            own = next((node for statement in block.body for node in walk(statement) if isinstance(node, ast.Call)
                        and call_name(node) in COLLECTIVES), None)
            if own is not None:
                return Finding(
                    "collective-inside-join", f"`{ast.unparse(own)[:70]}` ({source.name}:{own.lineno}) runs inside "
                    f"`with Join(...)` (line {block.lineno}): Join shadows only DDP's own collectives for the ranks "
                    "that ran out of data, so those ranks never run this one and it meets DDP's gradients instead",
                    evidence, None, None,
                    "move collectives of your own out of the Join block (after it, when every rank is done), or make "
                    "them Joinable (a Joinable with a join_hook that runs the same collective); for a running metric, "
                    "keep it local during the loop and all_reduce it once after")
    return None


def _set_up_on_some_ranks(files: list[SourceFile], found: list[Finding], evidence: str) -> Finding | None:
    if not any(finding.cause in AT_ODDS for finding in found):
        return None
    for source in files:
        ranks = source.ranks
        for node in source.walk():
            if not isinstance(node, ast.If) or not holds(node.test, ranks, RANK_VARIABLES, RANK_CALLS):
                continue
            for call in (part for statement in node.body for part in walk(statement)):
                if isinstance(call, ast.Call) and call_name(call) in SETS_UP_COMMUNICATION and \
                        not _also_elsewhere(source, node, call_name(call)):
                    text = ast.unparse(call)
                    return Finding(
                        "communication-set-up-on-some-ranks", f"`{text[:90]}` ({source.name}:{call.lineno}) runs only "
                        f"where `{ast.unparse(node.test)}` holds (line {node.lineno}): the ranks then communicate "
                        "differently (what they send, in which groups), so their collectives do not match",
                        evidence, None, None,
                        f"set up communication alike on every rank: call {call_name(call)}(...) on every rank, outside "
                        f"`if {ast.unparse(node.test)}:`; keep only logging, saving and printing under a test of the "
                        "rank")
    return None


def _also_elsewhere(source: SourceFile, branch: ast.If, name: str) -> bool:
    """The same set-up also runs outside this branch (its else, or after it): every rank has it."""
    calls = [node for node in source.walk() if isinstance(node, ast.Call) and call_name(node) == name]
    inside = {id(node) for statement in branch.body for node in walk(statement)}
    return any(id(call) not in inside for call in calls)


CACHES = {"lru_cache", "cache", "cached_property", "memoize", "cached"}


def _collective_in_cached_function(files: list[SourceFile], evidence: str) -> Finding | None:
    for source in files:
        for function in (node for node in source.walk() if isinstance(node, (ast.FunctionDef,
                                                                                     ast.AsyncFunctionDef))):
            cache = next((decorator for decorator in function.decorator_list if call_name(decorator) in CACHES or (
                isinstance(decorator, (ast.Name, ast.Attribute)) and ast.unparse(decorator).rsplit(".", 1)[-1]
                in CACHES)), None)
            takes = [arg for arg in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)
                     if arg.arg not in ("self", "cls")] + [extra for extra in (function.args.vararg,
                                                                               function.args.kwarg) if extra]
            # without arguments every rank's first call runs it and every later one skips it alike: no rank differs
            call = next((node for node in walk(function) if isinstance(node, ast.Call)
                         and call_name(node) in COLLECTIVES), None) if cache is not None and takes else None
            if call is not None:
                return Finding(
                    "collective-in-cached-function", f"{function.name}() ({source.name}:{function.lineno}) runs "
                    f"{call_name(call)} (line {call.lineno}) and is cached by @{ast.unparse(cache)}: a rank that "
                    "calls it again with an argument it has seen gets the cached answer and skips the collective, "
                    "while a rank with a new argument runs it, so the ranks pair different collectives",
                    evidence, None, None,
                    f"do not cache a function that runs a collective: remove @{ast.unparse(cache).split('(')[0]}, or "
                    "cache on a key every rank shares (compute the argument with an all_reduce first), or cache "
                    "only the result of the collective after every rank has run it")
    return None
