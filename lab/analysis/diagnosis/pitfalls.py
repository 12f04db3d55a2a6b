"""Python and torch pitfalls in the job's own code (kept by the jobs' hooks, read with Python's parser), each named
only where the run ended the way it leads to and nothing more specific was found:

- a store's get() (bytes) compared with a str: a wait for a value that never comes;
- an iterator (filter, map, model.parameters()) used twice: the second use gets nothing (an empty optimizer);
- `best = model.state_dict()` kept without a copy and loaded back: the "best" weights are the last ones;
- the log of a probability (`log(sigmoid(x))`, `log(1 - p)`): -inf, then nan, where a log-space form is exact;
- random_split without a generator in a job whose ranks seed torch differently: each rank splits its own way;
- a dataset changed per epoch (`data.set_epoch(...)`) behind a DataLoader with persistent workers, which keep their
  first copy;
- drop_last=True where a rank's share is smaller than a batch: no batch at all, and a division by the count;
- a collective given a strided view (a column): gloo reads and writes it as if it were contiguous;
- recv() without src, several times: messages arrive in any order;
- reduce() whose result the non-root ranks use: only the root holds the sum;
- a rank still in a `while <path>.exists():` loop when the run ended: a lock or marker file that never changes;
- a module's tensor kept as a plain attribute (not a buffer) and changed after construction, in a job that saves
  and loads state dicts: state_dict() leaves it out;
- an attribute every rank reads, changed only under a test of the rank: the replicas compute differently;
- a seeding call only under a test of the rank: the other ranks draw other numbers.
"""

from __future__ import annotations

import ast
import re

from lab.analysis.diagnosis.context import Context
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.replicas import SHARING
from lab.analysis.stacks import MAIN_THREAD
from lab.analysis.diagnosis.sources import (RANK_CALLS, RANK_VARIABLES, UNEXPLAINED, SourceFile, a_module,
                                            assignments, call_name, caller_place, calls_named, failure_summary, holds,
                                            names_in, parsed_files, root_name, self_attribute,
                                            source_named, walk)

# Where these may stand first: endings that say how a run failed, and the symptoms these pitfalls are known to show.
ENDINGS = UNEXPLAINED | {"learning-rate-differs", "collective-timeout"}
RANKS_APART = {"shape-mismatch", "collective-mismatch", "uneven-collectives", "collective-output-size"}
ITERATORS = {"filter", "map", "zip", "iter", "reversed", "parameters", "named_parameters", "buffers", "children",
             "modules", "named_modules"}
CONSUMERS = {"sum", "list", "tuple", "set", "sorted", "any", "all", "max", "min", "len", "enumerate"}
PROBABILITIES = {"sigmoid", "softmax"}


def pitfall_findings(ctx: Context, found: list[Finding]) -> list[Finding]:
    causes = {finding.cause for finding in found}
    if not causes <= ENDINGS:
        # A value only one rank holds, used by every rank, sends them down different paths: the collectives they then
        # pair up wrongly are its symptom, not the cause.
        if causes <= ENDINGS | RANKS_APART:
            files = parsed_files(ctx)
            return [finding for finding in [_reduce_read_off_root(ctx, files, failure_summary(ctx))] if finding]
        return []
    files = parsed_files(ctx)
    evidence = failure_summary(ctx)
    said = " ".join(f"{tb.short_type}: {tb.message}" for tb in ctx.tracebacks) + " " + " ".join(
        line.text for line in ctx.lines[-40:])
    checks = [_strided_view(ctx, evidence), _recv_any_source(ctx, evidence),
              _reduce_read_off_root(ctx, files, evidence), _polls_a_file(ctx, files, evidence)]
    for source in files:
        checks += [_store_bytes_compared(source, evidence, said), _iterator_used_twice(source, evidence),
                   _state_dict_kept(source, evidence), _log_of_probability(source, evidence, said),
                   _split_per_rank(ctx, source, evidence), _persistent_copy(source, evidence),
                   _drop_last_empty(ctx, source, evidence), _tensor_attribute_not_saved(source, evidence),
                   _state_changed_on_some_ranks(source, evidence), _seeded_on_some_ranks(ctx, source, evidence),
                   _received_into_one_buffer(source, evidence), changed_in_place_by_a_helper(source, evidence)]
    return [finding for finding in checks if finding is not None]


STORE_TYPES = {"TCPStore", "FileStore", "HashStore", "PrefixStore"}
TEXT_CALLS = {"str", "hexdigest", "format", "join", "decode", "strip", "lower", "upper", "dumps"}


def _store_bytes_compared(source: SourceFile, evidence: str, said: str) -> Finding | None:
    """A store's get() (bytes) compared with a str: a str constant, a name the code made text, or one a message of
    the run shows beside a bytes value (`b'...'`)."""
    texts = {name for name, value in assignments(source) if isinstance(value, ast.JoinedStr) or (
        isinstance(value, ast.Constant) and isinstance(value.value, str)) or (
        isinstance(value, ast.Call) and call_name(value) in TEXT_CALLS)}
    shown_as_bytes = re.search(r"\bb'[^']+'", said) is not None
    stores = {name for name, value in assignments(source) if isinstance(value, ast.Call)
              and call_name(value) in STORE_TYPES} | {name for name in source.names if "store" in name.lower()}

    def a_get(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and call_name(node) == "get" and isinstance(node.func, ast.Attribute) and (
            root_name(node.func.value) in stores or "store" in ast.unparse(node.func.value).lower())

    read = {name: value for name, value in assignments(source) if a_get(value)}
    for node in source.walk():
        if not isinstance(node, ast.Compare) or len(node.comparators) != 1:
            continue
        sides = (node.left, node.comparators[0])
        got = next((side for side in sides if a_get(side) or isinstance(side, ast.Name) and side.id in read), None)
        other = next((side for side in sides if side is not got), None)
        if got is None or other is None or _bytes_like(other):
            continue
        text = other.value if isinstance(other, ast.Constant) and isinstance(other.value, str) else None
        if text is None and not (isinstance(other, ast.JoinedStr) or isinstance(other, ast.Name) and (
                other.id in texts or shown_as_bytes)):
            continue
        call = read[got.id] if isinstance(got, ast.Name) else got
        held = f"{got.id} (from {ast.unparse(call)[:50]}, line {call.lineno})" if isinstance(got, ast.Name) else \
            ast.unparse(got)[:60]
        bytes_form = f"b{text!r}" if text is not None else f"{ast.unparse(other)}.encode()"
        return Finding(
            "store-value-compared-with-str", f"`{ast.unparse(node)[:80]}` ({source.name}:{node.lineno}): {held} "
            f"comes from a store's get(), which returns bytes{f' (b{text!r})' if text is not None else ''}, and "
            f"{ast.unparse(other)[:40]} is a str; bytes never equal a str, so the comparison says they differ even "
            "when the value is the same", evidence, None, None,
            f"compare bytes with bytes: {ast.unparse(got)[:40]} == {bytes_form} (or {ast.unparse(got)[:40]}.decode() "
            "first); store.wait([key]) waits for a key without polling")
    return None


def _bytes_like(node: ast.AST) -> bool:
    """A bytes constant, or a value encoded or decoded on the spot."""
    return (isinstance(node, ast.Constant) and isinstance(node.value, bytes)) or (
        isinstance(node, ast.Call) and call_name(node) in {"encode", "decode", "bytes"})


def _iterator_used_twice(source: SourceFile, evidence: str) -> Finding | None:
    for node in source.walk():
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and (isinstance(node.value, ast.GeneratorExp) or isinstance(node.value, ast.Call)
                     and call_name(node.value) in ITERATORS)):
            continue
        name = node.targets[0].id
        uses = sorted((use for use in walk(source.function_of(node)) if isinstance(use, ast.Name)
                       and use.id == name and isinstance(use.ctx, ast.Load) and use.lineno > node.lineno
                       and _iterates(source, use)), key=lambda use: (use.lineno, use.col_offset))
        if len(uses) >= 2:
            first, second = uses[0], uses[1]
            return Finding(
                "iterator-used-twice", f"`{ast.unparse(node)[:80]}` ({source.name}:{node.lineno}) is an iterator: its "
                f"first use (line {first.lineno}) went through it, so the next one (line {second.lineno}, "
                f"`{ast.unparse(source.parent(second))[:60]}`) gets nothing", evidence, None, None,
                f"make it a list once: {name} = list({ast.unparse(node.value)[:60]}) (or a list comprehension), so "
                "that every use sees every item")
    return None


def _iterates(source: SourceFile, name: ast.Name) -> bool:
    """`name` is gone through where it stands: a loop's or comprehension's iterable, or given to a call."""
    parent = source.parent(name)
    if isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is name:
        return True
    return isinstance(parent, ast.Call) and name in parent.args


def _state_dict_kept(source: SourceFile, evidence: str) -> Finding | None:
    loaded = {arg.id for call in calls_named(source, {"load_state_dict"}) for arg in call.args[:1]
              if isinstance(arg, ast.Name)}
    for node in source.walk():
        if not isinstance(node, ast.Assign):
            continue
        for target, value in _pairs(node):
            if isinstance(target, ast.Name) and target.id in loaded and isinstance(value, ast.Call) and \
                    call_name(value) == "state_dict":
                return Finding(
                    "state-dict-kept-without-copy", f"`{target.id} = {ast.unparse(value)}` ({source.name}:"
                    f"{node.lineno}) keeps references to the model's live tensors, not a copy: training goes on "
                    f"changing them, so load_state_dict({target.id}) restores the last weights, not the ones kept",
                    evidence, None, None,
                    f"copy it: {target.id} = copy.deepcopy({ast.unparse(value)}) (or {{k: v.detach().clone() for k, "
                    f"v in {ast.unparse(value)}.items()}})")
    return None


def _pairs(node: ast.Assign):
    for target in node.targets:
        if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) and \
                len(target.elts) == len(node.value.elts):
            yield from zip(target.elts, node.value.elts)
        else:
            yield target, node.value


def _log_of_probability(source: SourceFile, evidence: str, said: str) -> Finding | None:
    if "nan" not in said.lower() and "inf" not in said.lower():
        return None
    for call in calls_named(source, {"log"}):
        argument = call.args[0] if call.args else getattr(call.func, "value", None)
        if argument is None:
            continue
        scope = source.function_of(call)
        probabilities = {target.id for node in walk(scope) if isinstance(node, ast.Assign) and isinstance(
            node.value, ast.Call) and call_name(node.value) in PROBABILITIES for target in node.targets
            if isinstance(target, ast.Name)}
        if any(isinstance(part, ast.Call) and call_name(part) in PROBABILITIES or isinstance(part, ast.Name)
               and part.id in probabilities for part in walk(argument)):
            return Finding(
                "log-of-probability", f"`{ast.unparse(call)[:80]}` ({source.name}:{call.lineno}) takes the log of a "
                "probability, which rounds to 0 (or 1) in float32 for large logits: log gives -inf, and the loss "
                "becomes nan", evidence, None, None,
                "compute it in log space from the logits: F.logsigmoid(x) for log(sigmoid(x)), F.logsigmoid(-x) for "
                "log(1 - sigmoid(x)), F.log_softmax for log(softmax(x)), or the losses that take logits "
                "(F.binary_cross_entropy_with_logits, F.cross_entropy)")
    return None


def _split_per_rank(ctx: Context, source: SourceFile, evidence: str) -> Finding | None:
    seeds = sorted({trace.calls.torch_seed for trace in ctx.evidence.traces if trace.calls and trace.calls.torch_seed
                    is not None})
    if len(seeds) < 2:
        return None
    for call in calls_named(source, {"random_split"}):
        if not any(keyword.arg == "generator" for keyword in call.keywords) and len(call.args) < 3:
            return Finding(
                "split-differs-per-rank", f"`{ast.unparse(call)[:80]}` ({source.name}:{call.lineno}) draws from "
                f"torch's global generator, which the ranks seed differently (seeds {', '.join(map(str, seeds[:4]))}): "
                "each rank splits the data its own way, so one rank's held-out samples are another's training "
                "samples", evidence, None, None,
                "give the split a generator seeded alike on every rank: random_split(data, sizes, generator="
                "torch.Generator().manual_seed(42)), or split once on rank 0 and broadcast the indices")
    return None


def _persistent_copy(source: SourceFile, evidence: str) -> Finding | None:
    for loader in calls_named(source, {"DataLoader"}):
        persistent = any(keyword.arg == "persistent_workers" and isinstance(keyword.value, ast.Constant) and
                         keyword.value.value is True for keyword in loader.keywords)
        dataset = loader.args[0] if loader.args else None
        if not persistent or not isinstance(dataset, ast.Name):
            continue
        for node in walk(source.function_of(loader)):
            changed = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(
                node.func.value, ast.Name) and node.func.value.id == dataset.id and node.func.attr.startswith("set_"))
            changed = changed or (isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and
                target.value.id == dataset.id for target in node.targets))
            if changed and node.lineno > loader.lineno:
                return Finding(
                    "persistent-workers-keep-a-copy", f"DataLoader({dataset.id}, ..., persistent_workers=True) "
                    f"({source.name}:{loader.lineno}) keeps each worker's copy of {dataset.id} from the first epoch: "
                    f"`{ast.unparse(node)[:60]}` (line {node.lineno}) changes the main process's copy only",
                    evidence, None, None,
                    f"pass what changes per epoch through the sampler (it runs in the main process), or make the "
                    f"loader with persistent_workers=False (workers start again each epoch with the current "
                    f"{dataset.id}), or keep the value in shared memory (a torch tensor, multiprocessing.Value)")
    return None


def _drop_last_empty(ctx: Context, source: SourceFile, evidence: str) -> Finding | None:
    if not any(tb.short_type == "ZeroDivisionError" or "division by zero" in tb.message for tb in ctx.tracebacks):
        return None
    for node in source.walk():
        if isinstance(node, ast.keyword) and node.arg == "drop_last" and isinstance(node.value, ast.Constant) and \
                node.value.value is True:
            return Finding(
                "drop-last-left-no-batch", f"drop_last=True ({source.name}:{node.value.lineno}) drops a rank's last "
                "partial batch: where a rank's share of the data (its size / the world size) is smaller than the "
                "batch, it gets no batch at all, and the count it divides by is 0", evidence, None, None,
                "use drop_last=False for evaluation (or a batch no larger than each rank's share), and divide only "
                "after all_reduce of the sums and the counts (or guard it: max(count, 1))")
    return None


# The operations that write their result into the tensor they are given: a strided view there gets wrong values.
# (What a collective only reads, such as all_gather's input, gloo copies to contiguous memory first.)
WRITE_IN_PLACE = {"all_reduce", "broadcast", "reduce", "recv", "irecv", "all_reduce_coalesced"}


def _strided_view(ctx: Context, evidence: str) -> Finding | None:
    for trace in ctx.evidence.traces:
        for call in (*trace.calls.strided, *trace.calls.made) if trace.calls else ():
            if call.tensors and not call.tensors[0].contiguous and not call.tensors[0].layout and not (
                    call.error and "sparse" in call.error.lower()) and (call.op in WRITE_IN_PLACE or call.error):
                effect = (f"gloo refused it ({call.error.split(':', 1)[-1].strip()[:60]})" if call.error else
                          "gloo reduces the elements that lie next to its first one in memory, so the view gets "
                          "wrong values and its neighbours change")
                return Finding(
                    "tensor-not-contiguous", f"{call.op} at {call.caller} was given a strided view "
                    f"({call.tensors[0]}: a column or a transpose, not contiguous in memory): {effect}",
                    evidence, trace.node, trace.rank,
                    f"give {call.op} a contiguous tensor and copy the result back: part = view.contiguous(); "
                    f"dist.{call.op}(part); view.copy_(part) (or reduce the whole tensor, or keep the data laid out "
                    "so that what is reduced is contiguous)")
    return None


RECEIVES_INTO = {"recv", "irecv", "broadcast", "scatter"}


def _received_into_one_buffer(source: SourceFile, evidence: str) -> Finding | None:
    """A loop that receives every message into one tensor made before it and keeps that tensor itself (`rows[k] =
    buf`, `results.append(buf)`): each later receive overwrites what was kept, so every entry holds the last message."""
    for call in calls_named(source, RECEIVES_INTO):
        loop = source.loop_of(call)
        buffer = call.args[0] if call.args and isinstance(call.args[0], ast.Name) else None
        if loop is None or buffer is None or not any(
                assign.lineno < loop.lineno for assign in source.assignments_to(buffer.id, source.function_of(call))):
            continue
        kept = next((node for node in walk(loop) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
                     and node.value.id == buffer.id and any(isinstance(target, ast.Subscript)
                                                            for target in node.targets)
                     or isinstance(node, ast.Call) and call_name(node) in ("append", "insert") and node.args
                     and isinstance(node.args[-1], ast.Name) and node.args[-1].id == buffer.id), None)
        if kept is None:
            continue
        return Finding(
            "received-into-one-buffer", f"the loop at {source.name}:{loop.lineno} receives every message into the one "
            f"tensor `{buffer.id}` (`{ast.unparse(call)[:50]}`, line {call.lineno}) and keeps `{buffer.id}` itself "
            f"(`{ast.unparse(kept)[:50]}`, line {kept.lineno}): each later receive overwrites what was kept, so every "
            "entry ends up holding the last message", evidence, None, None,
            f"keep a copy of each message ({buffer.id}.clone() where it is stored), or make a new buffer for each "
            "receive inside the loop")
    return None


def _recv_any_source(ctx: Context, evidence: str) -> Finding | None:
    for trace in ctx.evidence.traces:
        anywhere = [call for call in (trace.calls.made if trace.calls else ()) if call.op in ("recv", "irecv")
                    and call.src is None and not call.error]
        if len(anywhere) >= 2:
            return Finding(
                "recv-from-any-source", f"rank {trace.rank} received {len(anywhere)} messages with {anywhere[0].op}() "
                f"and no src (at {anywhere[0].caller}): they arrive in whatever order the senders finish, so what is "
                "filled in by position holds another rank's data", evidence, trace.node, trace.rank,
                "name the sender of each receive (for peer in ...: dist.recv(buf, src=peer)), or file what arrives "
                "under the sender recv() returns (sender = dist.recv(buf); results[sender] = buf.clone())")
    return None


def _reduce_read_off_root(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    # Every rank runs the same code: the root's own record of the call says as much as another rank's (which may
    # have died before it wrote one), as long as the job has other ranks.
    off_root = sorted(((trace, call) for trace in ctx.evidence.traces for call in (
        trace.calls.made if trace.calls else ()) if call.op == "reduce" and call.root is not None
                       and trace.rank is not None and ctx.evidence.expected_world_size > 1),
                      key=lambda pair: pair[1].root == pair[0].rank)
    for trace, call in off_root:
        where = caller_place(call.caller)
        for source in files:
            if where is None or source.name != where[0]:
                continue
            reduced = next((node for node in calls_named(source, {"reduce"})
                            if node.lineno == where[1] and node.args), None)
            if reduced is None or not isinstance(reduced.args[0], ast.Name):
                continue
            name = reduced.args[0].id
            scope = source.function_of(reduced)
            used = next((use for use in walk(scope) if isinstance(use, ast.Name) and use.id == name and
                         isinstance(use.ctx, ast.Load) and use.lineno > reduced.lineno and _rank_test_around(
                             source, use) is None), None)
            if used is not None:
                return Finding(
                    "reduce-read-off-root", f"`{ast.unparse(reduced)[:60]}` ({source.name}:{reduced.lineno}) leaves "
                    f"the result on rank {call.root} only, and every rank then uses {name} (line {used.lineno}): on "
                    + (f"rank {trace.rank} and the other non-root ranks" if trace.rank != call.root else
                       "every rank but the root") + " it is not the total", evidence,
                    trace.node if trace.rank != call.root else None, trace.rank if trace.rank != call.root else None,
                    f"use dist.all_reduce({name}) where every rank needs the result; keep reduce for a value only "
                    "the root uses (under `if rank == root:`)")
    return None


def _rank_test_around(source: SourceFile, node: ast.AST) -> ast.If | None:
    """The innermost `if <a test of the rank>:` whose body or else holds `node`: code that runs on some ranks only."""
    while (node := source.parent(node)) is not None:
        if isinstance(node, ast.If) and holds(node.test, source.ranks, RANK_VARIABLES, RANK_CALLS):
            return node
    return None


FILE_TESTS = {"exists", "is_file", "isfile", "isdir", "is_dir", "glob", "iglob", "listdir", "lexists"}


def _polls_a_file(ctx: Context, files: list[SourceFile], evidence: str) -> Finding | None:
    """A rank whose stack, as the run ended, is in a loop whose condition tests a file: it waits on that file."""
    for process in ctx.evidence.processes:
        main = next((thread for thread in process.threads if thread.name == MAIN_THREAD), None)
        for frame in reversed(main.frames if main else []):
            source = source_named(files, frame.file)
            if source is None:
                continue
            loop = next((node for node in source.walk() if isinstance(node, ast.While) and node.lineno <=
                         frame.line <= (node.end_lineno or node.lineno) and any(
                             isinstance(part, ast.Call) and call_name(part) in FILE_TESTS
                             for part in walk(node.test))), None)
            if loop is None:
                break  # the innermost frame of the job's own code is not in such a loop
            who = f"rank {process.rank}" if process.rank is not None else f"a process on node{process.node}"
            if (suffixed := _saved_with_suffix(source)) is not None:
                save, saved_as = suffixed
                return Finding(
                    "waits-on-a-file", f"{who} on node{process.node} was still in `while "
                    f"{ast.unparse(loop.test)[:60]}:` ({source.name}:{loop.lineno}) waiting for {saved_as}, but "
                    f"`{ast.unparse(save)[:50]}` (line {save.lineno}) wrote {saved_as} + '.npy': numpy adds the suffix "
                    "to a name without one, so the name waited for never appears", evidence, process.node,
                    process.rank,
                    f"give numpy the whole name: make {saved_as} a path that ends in .npy, used by the writer, "
                    "the waiter and np.load alike; better, have the ranks wait with dist.barrier() after rank 0 "
                    "saves, not a loop over the file system")
            return Finding(
                "waits-on-a-file", f"{who} on node{process.node} was still in `while {ast.unparse(loop.test)[:60]}:` "
                f"({source.name}:{loop.lineno}) when the run ended: the file it waits on never changed there (a lock or "
                f"marker left on node{process.node}'s own disk by an earlier run, or written where this node cannot "
                "see it)", evidence, process.node, process.rank,
                f"remove the stale file on node{process.node}, and do not wait on files without an end: put the "
                "owner's pid and time in a lock and take it over when that process is gone, remove it in a finally, "
                "or let the job coordinate (rank 0 builds, then dist.barrier() or the store) instead of a file")
    return None


NUMPY_SAVES = {"save": ".npy", "savez": ".npz", "savez_compressed": ".npz"}


def _saved_with_suffix(source: SourceFile) -> tuple[ast.Call, str] | None:
    """A np.save(NAME, ...) whose NAME has no .npy (numpy then writes NAME.npy) and which the code also hands to
    another call (a wait, an exists test, np.load): (the save, NAME)."""
    for save in (call for call in source.walk() if isinstance(call, ast.Call) and call_name(call) in
                 NUMPY_SAVES and isinstance(call.func, ast.Attribute) and ast.unparse(call.func.value) in
                 {"np", "numpy"} and call.args):
        name, suffix = ast.unparse(save.args[0]), NUMPY_SAVES[call_name(save)]
        values = [save.args[0]] + [value for target, value in assignments(source) if target == name]
        if any(isinstance(part, ast.Constant) and isinstance(part.value, str) and part.value.endswith(suffix)
               for value in values for part in walk(value)):
            continue
        if any(isinstance(call, ast.Call) and call is not save and any(ast.unparse(arg) == name for arg in call.args)
               for call in source.walk()):
            return save, name
    return None


# torch functions named in lower case that do not make a tensor
NOT_TENSORS = {"device", "dtype", "get_default_dtype", "finfo", "iinfo", "is_tensor", "no_grad", "compile", "load",
               "save"}
TENSOR_METHODS = {"mean", "std", "var", "sum", "amax", "amin", "median", "quantile", "clone", "detach", "float",
                  "double"}


def _tensor_attribute_not_saved(source: SourceFile, evidence: str) -> Finding | None:
    """A module's tensor made in __init__ as a plain attribute (not a buffer, not a parameter) and changed by another
    method, in a file that saves and loads state dicts: state_dict() holds parameters and buffers only, so a model
    loaded from it keeps the value its __init__ gave."""
    if not {"state_dict", "load_state_dict"} <= source.names:
        return None
    for cls in source.walk():
        if not isinstance(cls, ast.ClassDef) or not a_module(cls):
            continue
        registered = {call.args[0].value for call in walk(cls) if isinstance(call, ast.Call) and call.args and
                      call_name(call) in ("register_buffer", "register_parameter")
                      and isinstance(call.args[0], ast.Constant)}
        assigned: dict[str, list[tuple[str, ast.AST]]] = {}
        for method in (item for item in cls.body if isinstance(item, ast.FunctionDef)):
            for node in walk(method):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                        node, ast.AugAssign) else []:
                    if self_attribute(target):
                        assigned.setdefault(target.attr, []).append((method.name, node))
        for name, places in assigned.items():
            made = next((node for method, node in places if method == "__init__" and isinstance(node, ast.Assign)
                         and _a_tensor(node.value)), None)
            changed = next(((method, node) for method, node in places if method != "__init__"), None)
            read = any(self_attribute(node) == name and isinstance(node.ctx, ast.Load) for node in walk(cls))
            if name in registered or made is None or changed is None or not read:
                continue
            return Finding(
                "tensor-attribute-not-saved", f"{cls.name} keeps `self.{name}` as a plain tensor attribute "
                f"({source.name}:{made.lineno}), not a buffer, and {changed[0]}() changes it (line "
                f"{changed[1].lineno}): state_dict() holds parameters and buffers only, so the saved model leaves "
                f"{name} out and a model loaded from it computes with the value __init__ gave", evidence, None, None,
                f"register it as a buffer in __init__: self.register_buffer({name!r}, {ast.unparse(made.value)[:50]}) "
                f"(persistent, the default; assigning self.{name} = ... later updates the buffer), so state_dict() "
                "saves it and load_state_dict() restores it")
    return None


def _a_tensor(value: ast.AST) -> bool:
    """torch.zeros(...), torch.tensor(...), x.mean(0): an expression that makes a tensor."""
    if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
        return False
    func = value.func
    if isinstance(func.value, ast.Name) and func.value.id == "torch":
        return func.attr[:1].islower() and func.attr not in NOT_TENSORS
    return func.attr in TENSOR_METHODS


def _state_changed_on_some_ranks(source: SourceFile, evidence: str) -> Finding | None:
    """An attribute that every rank reads (outside any test of the rank; a method called is not a read), assigned or
    changed in place only under a test of the rank, and not sent to the others: they keep the old value, so the
    replicas compute differently."""
    for node in source.walk():
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            changed = next((target for target in targets if isinstance(target, ast.Attribute)), None)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_") and \
                not node.func.attr.startswith("_") and isinstance(node.func.value, ast.Attribute):
            changed = node.func.value  # model.scale.mul_(0.5)
        else:
            continue
        test = _rank_test_around(source, node) if changed is not None else None
        if test is None:
            continue
        name, shown = changed.attr, ast.unparse(changed)
        read = next((use for use in source.walk() if isinstance(use, ast.Attribute) and use.attr == name and
                     isinstance(use.ctx, ast.Load) and _rank_test_around(source, use) is None and not (
                         isinstance(source.parent(use), ast.Call) and source.parent(use).func is use)), None)
        elsewhere = any(isinstance(other, (ast.Assign, ast.AugAssign)) and other is not node and any(
            ast.unparse(target) == shown for target in (other.targets if isinstance(other, ast.Assign) else
                                                        [other.target])) for other in source.walk())
        shared = any(name in names_in(call) for call in calls_named(source, set(SHARING)))
        if read is None or elsewhere or shared:
            continue
        return Finding(
            "state-changed-on-some-ranks", f"`{ast.unparse(node)[:70]}` ({source.name}:{node.lineno}) changes "
            f"{shown} only where `{ast.unparse(test.test)}` holds (line {test.lineno}), and every rank uses {name} "
            f"(`{ast.unparse(source.parent(read))[:50]}`, line {read.lineno}): the other ranks keep the old value, so "
            "the replicas compute differently", evidence, None, None,
            f"change it on every rank: move `{ast.unparse(node)[:60]}` out of `if {ast.unparse(test.test)}:` (keep "
            "only printing and saving there), or send rank 0's value to the others (dist.broadcast_object_list(["
            "value], src=0)) before they use it")
    return None


IN_PLACE = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update", "setdefault",
            "popitem", "add", "discard"}


def changed_in_place_by_a_helper(source: SourceFile, evidence: str) -> Finding | None:
    """A function of the job, called only under a test of the rank, that changes in place a list or dict it is given
    (`labels.append(...)`), where every rank uses that object after the call: that rank's copy now differs."""
    functions = {node.name: node for node in source.walk() if isinstance(node, ast.FunctionDef)}
    for call in (node for node in source.walk() if isinstance(node, ast.Call) and call_name(node) in functions):
        function = functions[call_name(call)]
        parameters = [argument.arg for argument in function.args.args]
        test = _rank_test_around(source, call)
        if test is None:
            continue
        for position, given in enumerate(call.args[:len(parameters)]):
            if not isinstance(given, ast.Name):
                continue
            changed = next((node for node in walk(function) if isinstance(node, ast.Call)
                            and isinstance(node.func, ast.Attribute) and node.func.attr in IN_PLACE
                            and root_name(node.func.value) == parameters[position]), None)
            read = next((use for use in source.walk() if isinstance(use, ast.Name) and use.id == given.id
                         and isinstance(use.ctx, ast.Load) and use.lineno > test.end_lineno
                         and source.function_of(use) is source.function_of(call)
                         and _rank_test_around(source, use) is None), None) if changed is not None else None
            if read is None:
                continue
            return Finding(
                "changed-in-place-on-some-ranks", f"`{ast.unparse(call)[:60]}` runs only where "
                f"`{ast.unparse(test.test)}` holds (line {test.lineno}), and {function.name} changes `{given.id}` in "
                f"place (`{ast.unparse(changed)[:50]}`, {source.name}:{changed.lineno}); every rank uses `{given.id}` "
                f"after it (`{ast.unparse(source.parent(read))[:50]}`, line {read.lineno}), so that rank's copy now "
                "differs from the others'", evidence, None, None,
                f"give {function.name} a copy ({function.name}(list({given.id}), ...)) or make it leave what it is "
                "given alone; or make the change on every rank, before the ranks use it")
    return None


SEEDING = {"seed", "manual_seed", "manual_seed_all", "seed_everything", "set_seed"}


def _seeded_on_some_ranks(ctx: Context, source: SourceFile, evidence: str) -> Finding | None:
    """A seeding call only under a test of the rank: the other ranks draw other numbers (the hooks record torch's
    seed per process, which then differs)."""
    seeds = {trace.rank: trace.calls.torch_seed for trace in ctx.evidence.traces
             if trace.calls and trace.calls.torch_seed is not None and trace.rank is not None}
    for call in calls_named(source, SEEDING):
        test = _rank_test_around(source, call)
        if test is None or not any(call in walk(statement) for statement in test.body):
            continue
        seeder = ast.unparse(call.func)
        inside = {id(node) for statement in test.body for node in walk(statement)}
        if any(ast.unparse(other.func) == seeder and id(other) not in inside for other in calls_named(source, SEEDING)):
            continue  # seeded elsewhere too (the else branch, or after the test): every rank has a seed
        if "manual_seed" in seeder and len(seeds) > 1 and len(set(seeds.values())) == 1:
            continue  # the record says every rank's torch seed is the same
        told = (f" (torch's seed per rank: {', '.join(f'rank {rank} {seed}' for rank, seed in sorted(seeds.items()))})"
                if len(set(seeds.values())) > 1 else "")
        return Finding(
            "seeded-on-some-ranks", f"`{ast.unparse(call)[:60]}` ({source.name}:{call.lineno}) runs only where "
            f"`{ast.unparse(test.test)}` holds (line {test.lineno}): the other ranks never seed it and draw other "
            f"numbers{told}, so what the ranks draw to agree on (a shuffle, a split, initial weights) differs per "
            "rank", evidence, None, None,
            f"seed every rank with the same seed: move `{ast.unparse(call)[:50]}` out of `if "
            f"{ast.unparse(test.test)}:` to where every rank runs it; where ranks should differ (augmentation), "
            "seed base + rank on every rank and draw what must agree (the shuffle of shards) from a generator "
            "seeded alike, or broadcast rank 0's draw")
    return None
