"""A process failed on its own: an exception, an import, a missing script, bad arguments, a call before
init_process_group.
"""

from __future__ import annotations

import ast
import builtins
import math
import re
import sys
from urllib.parse import urlsplit

from lab.analysis.calls import POINT_TO_POINT, DistCall, arguments_that_differ
from lab.analysis.diagnosis.addresses import endpoint_host, is_loopback, job_own_port
from lab.analysis.diagnosis.context import (Context, PatternRule, echoes_a_peer, explained_by_rule, failed_check_of,
                                             job_lines, near, quote, quoted_source, report_root_rank, gist)
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.logs import EXCEPTION_LINE, LIBRARY_FILE, TRACEBACK_FRAME, WARNING_LINE, LogLine
from lab.analysis.diagnosis.sources import (OPTIMIZERS, RANK_CALLS, RANK_NAMES, RANK_VARIABLES, RESULT_ARGUMENT, SPLITS,
                                            TWO_SIZES, WORLD_NAMES, SourceFile, argument, assignments, call_name,
                                            called_on, caller_place, calls_named, checkpoint_call, conditions_above,
                                            derived, env_read, holds, identifier, made_of, names_in, origin_of,
                                            parsed_files, passed_by_caller, reads_world_size, reduced_with, root_name,
                                            rounded_up, self_attribute, source_named, value_at_world, walk)
from lab.analysis.stacks import FAULTHANDLER_FRAME

START_ERRORS = {"ModuleNotFoundError", "ImportError", "SyntaxError", "IndentationError"}
CHILD_ERROR_WRAPPERS = {"ProcessRaisedException", "ProcessExitedException"}  # torch.multiprocessing.spawn's


def traceback_findings(ctx: Context) -> list[Finding]:
    """Exceptions a rank raised on its own (not a peer's failure echoed back, not a cause found by a rule)."""
    found = []
    for tb in ctx.tracebacks:
        if tb.short_type in CHILD_ERROR_WRAPPERS and any(other.node == tb.node and other is not tb and
                                                         other.short_type not in CHILD_ERROR_WRAPPERS
                                                         for other in ctx.tracebacks):
            continue  # mp.spawn's report of a child's error: the child's own traceback, printed with it, speaks
        if tb.short_type == "BrokenPipeError" and not tb.collective():  # its own output, not a peer's socket
            found.append(_output_pipe_closed(ctx, tb))
            continue
        if tb.thread is not None and tb.thread != "MainThread" and not echoes_a_peer(tb):
            found.append(_thread_died(ctx, tb))
            continue
        if ADDRESS_IN_USE.search(tb.message) and job_own_port(tb):
            found.append(_own_port_taken(ctx, tb))
            continue
        if (moved_away := _directory_changed(ctx, tb)) is not None:
            found.append(moved_away)
            continue
        if (moved := RENAMED.search(tb.message)) and tb.short_type == "FileNotFoundError" and \
                ctx.evidence.expected_world_size > 1:
            found.append(_renamed_away(ctx, tb, moved))
            continue
        if _reads_a_checkpoint(tb) and (stale := _stale_copy(ctx, tb)) is not None:
            found.append(stale)
            continue
        if _reads_a_checkpoint(tb) and (READ_PAST_END.search(f"{tb.short_type}: {tb.message}")):
            found.append(_checkpoint_cut_short(ctx, tb))
            continue
        if (limited := _write_limited(ctx, tb)) is not None:
            found.append(limited)
            continue
        if explained_by_rule(ctx, tb.line) or echoes_a_peer(tb):
            continue
        if (told := next(filter(None, (mechanism(ctx, tb) for mechanism in EXCEPTION_MECHANISMS)), None)) is not None:
            found.append(told)
            continue
        rank = _rank_of(ctx, tb)
        frame = tb.user_frame()
        at = f" at {frame.file}:{frame.line} in {frame.function}" if frame else ""
        where = f"node{tb.node}" + (f" rank {rank}" if rank is not None else "")
        evidence = f"{where}: {tb.exc_type}: {tb.message}"[:400] + at
        if differs := _version_difference(ctx, tb):
            module, name, nodes = differs
            found.append(Finding(
                "package-version-differs", f"'{module}' differs between the nodes: on {nodes} it has no '{name}', "
                "which the other nodes got past", evidence, tb.node, rank,
                f"give every node the same version of '{module}' (or the same copy of your code): on a lab, pin it "
                f"(`lab up --pip {module}==VERSION --recreate`); `lab doctor --package {module}` names the node "
                "whose version differs; on real hosts, install on every host what the others have"))
            continue
        if tb.short_type in START_ERRORS:
            missing = re.search(r"No module named '([^'.]+)", tb.message)
            if missing and missing.group(1) == "torch":  # the lab's nodes all have torch: another Python ran
                found.append(Finding(
                    "another-interpreter", f"a process on node{tb.node} ran a Python that has no torch: not the nodes' "
                    "interpreter (a subprocess started as 'python3' or '/usr/bin/python3', a shebang, a tool's own "
                    "Python)", evidence, tb.node, rank,
                    "start helper processes with the job's own interpreter: [sys.executable, script, ...] in "
                    "subprocess, `python -m` inside the job's environment, never a hard-coded /usr/bin/python3"))
                continue
            lacking = _nodes_lacking(ctx, missing.group(1)) if missing else set()
            if missing and ctx.multi_node and lacking < {node.index for node in ctx.evidence.nodes}:
                module, nodes = missing.group(1), ", ".join(f"node{index}" for index in sorted(lacking))
                found.append(Finding(
                    "package-missing-on-nodes", f"'{module}' is missing on {nodes} only: the nodes' Python "
                    "environments differ", evidence, tb.node, rank,
                    f"give every node the same packages: on a lab, `lab up --pip <the package with '{module}'> "
                    f"--recreate` installs it on all of them, and `lab doctor` names a node whose versions differ; "
                    f"on real hosts, install it on {nodes} as on the others"))
                continue
            fix = (f"install '{missing.group(1)}' on the nodes: `lab up --pip <the package with '{missing.group(1)}'> "
                   "--recreate` on a lab (resolved on this host, no registry in the nodes), or remove the import"
                   if missing else "fix the error at the quoted line; every node runs the same file")
            found.append(Finding("import-error", f"the script fails at start on node{tb.node}: {tb.short_type}",
                                 evidence, tb.node, rank, fix))
        elif worker := _worker_error(ctx, tb):
            found.append(_worker_finding(ctx, tb, rank, worker, evidence, at))
        else:
            found.append(Finding("rank-crashed", f"rank {rank if rank is not None else '?'} crashed with "
                                                 f"{tb.short_type}: {gist(tb.message)}{at}", evidence, tb.node, rank,
                                 _crash_fix(ctx, tb, frame)))
    return found


def _warning_raised(ctx: Context, tb) -> Finding | None:
    """A warning raised as an exception: warnings are errors in that process (PYTHONWARNINGS=error, python -W error,
    warnings.simplefilter('error')), which the hooks' record of sys.warnoptions tells per node."""
    if not tb.short_type.endswith("Warning"):
        return None
    rank = _rank_of(ctx, tb)
    options = {trace.node: trace.calls.warnoptions for trace in ctx.evidence.traces
               if trace.calls is not None and trace.node is not None}
    strict = sorted(node for node, given in options.items() if any(option.startswith("error") for option in given))
    lenient = sorted(set(options) - set(strict))
    if strict and lenient:
        where = (f": node{', node'.join(map(str, strict))} turn warnings into errors (sys.warnoptions "
                 f"{list(options[strict[0]])}: PYTHONWARNINGS or python -W), node{', node'.join(map(str, lenient))} "
                 "do not")
        fix = (f"give every node the same warning settings: unset PYTHONWARNINGS (or drop -W error) on "
               f"node{', node'.join(map(str, strict))}")
    else:
        where = " (PYTHONWARNINGS=error, python -W error, or warnings.simplefilter('error') in the code)"
        fix = "let warnings be warnings where the job runs (no PYTHONWARNINGS=error / -W error / simplefilter('error'))"
    return Finding(
        "warning-raised-as-error", f"rank {rank if rank is not None else '?'} stopped on a {tb.short_type} raised as "
        f"an error{_at(tb)}: warnings are errors in that process{where}", _raised(tb, rank)[:400], tb.node, rank,
        f"{fix}, or exempt this one (warnings.filterwarnings('default', category={tb.short_type})); and remove what "
        f"it warns about: {gist(tb.message, 120)}")


def _shadowed_module(ctx: Context, tb) -> Finding | None:
    """A library's import that loaded one of the job's own files: a file named like a standard library module
    (tokenize.py, queue.py, logging.py) is found first, since the script's folder leads sys.path."""
    for importer, imported in zip(tb.frames, tb.frames[1:]):
        name = imported.file.rsplit("/", 1)[-1].removesuffix(".py")
        if (LIBRARY_FILE.search(importer.file) and not LIBRARY_FILE.search(imported.file)
                and imported.function == "<module>" and name in sys.stdlib_module_names):
            rank = _rank_of(ctx, tb)
            return Finding(
                "module-shadowed", f"the job's file {name}.py has the name of Python's own module '{name}': "
                f"{importer.file.rsplit('/', 1)[-1]} imported '{name}' and got the job's file (the script's folder "
                f"comes first on sys.path), which then failed ({tb.short_type}: {gist(tb.message, 100)})",
                _raised(tb, rank)[:400], tb.node, rank,
                f"rename {name}.py (and any {name}/ folder) in the job to a name no standard module has, e.g. "
                f"my_{name}.py, and delete a stale {name}.pyc / __pycache__ next to it")
    return None


def _output_encoding(ctx: Context, tb) -> Finding | None:
    """Text the process's output encoding cannot hold (ascii under PYTHONIOENCODING=ascii or a C locale), printed."""
    codec = re.search(r"'(\w[\w-]*)' codec can't encode", tb.message)
    if tb.short_type != "UnicodeEncodeError" or codec is None:
        return None
    encodings = {trace.node: trace.calls.stdout_encoding for trace in ctx.evidence.traces
                 if trace.calls is not None and trace.calls.stdout_encoding and trace.node is not None}
    rank = _rank_of(ctx, tb)
    apart = len(set(encodings.values())) > 1
    shown = "; ".join(f"node{node} {value}" for node, value in sorted(encodings.items()))
    return Finding(
        "output-encoding", f"rank {rank if rank is not None else '?'}'s output is encoded as {codec[1]}, which cannot "
        f"hold what it printed{_at(tb)}" + (f" (its output encoding by node: {shown})" if apart else "")
        + f": PYTHONIOENCODING={codec[1]}, or a C/POSIX locale, on node{tb.node}", _raised(tb, rank)[:400], tb.node,
        rank, f"give node{tb.node} a UTF-8 output: remove PYTHONIOENCODING={codec[1]} (or LANG=C) from its environment, "
        "or set it for the whole job (`lab exec --env PYTHONUTF8=1`, or PYTHONIOENCODING=utf-8); or print only ASCII")


def _spawn_unguarded(ctx: Context, tb) -> Finding | None:
    """multiprocessing's 'start a new process before ... bootstrapping phase': the child re-ran the script's top
    level, which starts processes again, because nothing guards it with `if __name__ == "__main__":`."""
    said = next((line for line in ctx.lines if line.node == tb.node and "bootstrapping phase" in line.text), None)
    if said is None:
        return None
    rank = _rank_of(ctx, tb)
    return Finding(
        "spawn-without-main-guard", f"the script starts processes (mp.spawn, multiprocessing, DataLoader workers "
        f"with spawn){_at(tb)} from its top level, unguarded: every child imports the script again and runs that "
        "line again before it has started", quote(said), tb.node, rank,
        "put the script's top level under `if __name__ == \"__main__\":` (def main(): ...; if __name__ == "
        "\"__main__\": main()), so a child that imports the file only defines its functions")


def _debugger_quit(ctx: Context, tb) -> Finding | None:
    """bdb.BdbQuit: a breakpoint() / pdb.set_trace() left in the code, whose debugger read end of input."""
    if tb.short_type != "BdbQuit":
        return None
    rank = _rank_of(ctx, tb)
    return Finding(
        "debugger-in-job", f"rank {rank if rank is not None else '?'} stopped in a debugger{_at(tb)}: a breakpoint() "
        "or pdb.set_trace() left in the code reads its commands from the terminal, which a job's processes do not "
        "have, so it quit (BdbQuit) and the other ranks lost this one", _raised(tb, rank)[:400], tb.node, rank,
        "remove the breakpoint() / pdb.set_trace() (or run with PYTHONBREAKPOINT=0, which turns breakpoint() off); "
        "to debug one rank of a job, use a remote debugger or stacks (`lab explain` keeps every rank's stack of a "
        "hung run)")


# torch.optim's step (or load_state_dict) meeting a state tensor of another shape than its parameter
OPTIMIZER_SHAPES = re.compile(r"size of tensor a \(\d+\) must match the size of tensor b|doesn't match the broadcast "
                              r"shape|parameter group that doesn't match the size of optimizer's group")


def _optimizer_state_mismatch(ctx: Context, tb) -> Finding | None:
    """A shape error inside torch.optim in a job that loads an optimizer's state: load_state_dict pairs the saved
    states with the parameters by position, group by group, so groups built in another order (or from other
    parameters) than when the checkpoint was saved put each state on the wrong parameter."""
    if not OPTIMIZER_SHAPES.search(tb.message) or not any("/torch/optim/" in frame.file for frame in tb.frames):
        return None
    for source in parsed_files(ctx):
        loaded = next((call for call in calls_named(source, {"load_state_dict"}) if _an_optimizer(source, call)), None)
        if loaded is None:
            continue
        built = sorted({node.lineno for node in calls_named(source, OPTIMIZERS)})
        rank = _rank_of(ctx, tb)
        builds = (f"; the file builds optimizers at lines {', '.join(map(str, built))}: compare their parameter "
                  "groups" if len(built) > 1 else "")
        return Finding(
            "optimizer-state-mismatch", f"rank {rank if rank is not None else '?'}'s optimizer failed inside "
            f"torch.optim{_at(tb)} ({gist(tb.message, 100)}) after `{ast.unparse(loaded)[:60]}` ({source.name}:"
            f"{loaded.lineno}): the loaded state (momentum, Adam's averages) does not fit the parameters it was put "
            "on: load_state_dict pairs states with parameters by position, group by group, and the groups were "
            f"built in another order or from other parameters than when the checkpoint was saved{builds}",
            _raised(tb, rank)[:400], tb.node, rank,
            "build the optimizer that loads the state exactly as the one that saved it (the same parameter groups, "
            "in the same order, from the same parameters: one function for both), then load_state_dict; if the "
            "groups had to change, build a new optimizer and do not load the old state")
    return None


def _an_optimizer(source: SourceFile, load: ast.Call) -> bool:
    """`x.load_state_dict(...)` on an optimizer: x is assigned an optimizer (torch.optim.AdamW(...), or a call of a
    function of the file that builds one), or its name or the state's says so (opt, optimizer, ckpt["optim"])."""
    receiver = load.func.value if isinstance(load.func, ast.Attribute) else None
    if receiver is None:
        return False
    builders = OPTIMIZERS | {function.name for function in source.walk() if isinstance(
        function, ast.FunctionDef) and any(isinstance(node, ast.Call) and call_name(node) in OPTIMIZERS
                                           for node in walk(function))}
    built = any(isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and call_name(node.value) in builders
                and any(ast.unparse(target) == ast.unparse(receiver) for target in node.targets)
                for node in source.walk())
    named = re.search(r"\bopt(?:im\w*|\d*)\b", " ".join(ast.unparse(part) for part in (receiver, *load.args)),
                      re.IGNORECASE)
    return built or named is not None


JSON_CALLS = re.compile(r"\bjson\.(?:loads?|dumps?)\(")


CREATING = {"makedirs", "mkdir", "symlink", "link", "symlink_to", "hardlink_to", "mkfifo"}


# What a store says when a name it keeps unique is taken: a database's constraint, a registry's own refusal.
ALREADY_TAKEN = re.compile(r"UNIQUE constraint failed|[Dd]uplicate (?:key|entry)|already (?:exists|registered)"
                           r"|AlreadyExists")


def _created_by_every_rank(ctx: Context, tb) -> Finding | None:
    """FileExistsError from a call that creates a path (makedirs without exist_ok, mkdir, open(..., 'x')), on some
    ranks and not on another: every rank runs the creation, the first one wins, and the rest find it made. Likewise
    a name a store keeps unique (a run registered in a tracker's database, a key inserted) taken by the first rank."""
    frame = tb.user_frame()
    if frame is None or ctx.evidence.expected_world_size < 2:
        return None
    if tb.short_type != "FileExistsError":
        return _taken_by_every_rank(ctx, tb, frame) if ALREADY_TAKEN.search(tb.message) else None
    quoted = quoted_source(ctx, tb, frame)
    try:
        call = next((node for node in walk(ast.parse(quoted.strip())) if isinstance(node, ast.Call)
                     and (call_name(node) in CREATING or call_name(node) == "open" and "x" in _open_mode(node))), None)
    except SyntaxError:
        call = None
    if call is None:
        return None
    raised = sorted({other.rank for other in ctx.tracebacks if other.short_type == "FileExistsError"
                     and other.rank is not None})
    made = [rank for rank in range(ctx.evidence.expected_world_size) if rank not in raised]
    if not raised or not made:
        return None
    shared = ctx.evidence.probes.shared if ctx.evidence.probes else []
    on_shared = next((folder for folder in shared if frame.file.startswith(folder + "/")), None)
    where = (f"; the job's folder is on {on_shared}, which every node shares, so every rank of every node races"
             if on_shared else "; the ranks of a node share its disk, so they race")
    return Finding(
        "created-by-every-rank", f"ranks {', '.join(map(str, raised))} crashed with FileExistsError at "
        f"`{quoted.strip()[:80]}` ({frame.location} in {frame.function}) that rank{'s' if len(made) > 1 else ''} "
        f"{', '.join(map(str, made))} had made first: every rank runs this creation, and all but the first find the "
        f"path there{where}", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        "make it once: on rank 0 (local rank 0 per node where each node has its own disk), then dist.barrier() "
        "before the other ranks use it; or let any rank make it (os.makedirs(path, exist_ok=True)); to refuse an "
        "earlier run's folder, check on that one rank and broadcast the answer")


def _taken_by_every_rank(ctx: Context, tb, frame) -> Finding | None:
    same = [other for other in ctx.tracebacks if _same_error(other, tb) and other.rank is not None]
    raised = sorted({other.rank for other in same})
    first = [rank for rank in range(ctx.evidence.expected_world_size) if rank not in raised]
    claimed: dict[int, set] = {}
    for trace in ctx.evidence.traces:
        if trace.rank is not None:
            claimed.setdefault(trace.rank, set()).add(trace.node)
    if not raised or not first or len(same) != len(raised) or any(len(nodes) > 1 for nodes in claimed.values()):
        return None  # a rank number held on two nodes: separate jobs, each with its own rank 0, not one job's ranks
    quoted = quoted_source(ctx, tb, frame).strip()
    return Finding(
        "created-by-every-rank", f"ranks {', '.join(map(str, raised))} crashed with {tb.short_type} "
        f"({gist(tb.message, 80)}) at `{quoted[:80]}` ({frame.location} in {frame.function}), where "
        f"rank{'s' if len(first) > 1 else ''} {', '.join(map(str, first))} got through: every rank runs this step "
        "that may happen once, and all but the first collide with what it registered",
        _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        "do it once: on rank 0 (or local rank 0 per node where each node keeps its own copy), then dist.barrier() "
        "before the others use it; or make it idempotent (get-or-create: INSERT OR IGNORE then SELECT, exist_ok), "
        "or give each rank a name of its own (the rank in it)")


# torch's words for a tensor of another size than the code expected.
SIZE_REFUSED = re.compile(r"shape '\[[-\d, ]+\]' is invalid for input of size \d+|[Ss]izes? (?:of tensors )?must "
                          r"match|size mismatch|must match the size of tensor|Expected .* elements")
# Calls whose result's length depends on the values in the data, and the keyword that fixes it where one does.
DATA_LENGTH = {"bincount": "minlength", "unique": None, "nonzero": None, "masked_select": None,
               "unique_consecutive": None}


def _length_from_data(ctx: Context, tb) -> Finding | None:
    """A size error on some ranks only, at a line that uses a tensor whose length comes from the data (bincount
    without minlength, unique, nonzero): a rank whose batch lacks the largest value gets a shorter tensor."""
    raised = _ranks_raising(ctx, tb)
    if not SIZE_REFUSED.search(tb.message) or not raised or len(raised) >= ctx.evidence.expected_world_size or \
            (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope = source.function_of(statement)
    for name in sorted({node.id for node in walk(statement) if isinstance(node, ast.Name)}):
        for assign in source.assignments_to(name, scope, before=frame.line):
            for call in (node for node in walk(assign.value) if isinstance(node, ast.Call)):
                kind = call_name(call)
                if kind not in DATA_LENGTH or (DATA_LENGTH[kind] and any(item.arg == DATA_LENGTH[kind]
                                                                         for item in call.keywords)):
                    continue
                fix = (f"give it the length: torch.bincount(..., minlength=N) with N the number of bins every rank "
                       "must have (the experts, the classes)" if kind == "bincount" else
                       f"pad what {kind} returns to a fixed length (or agree on the lengths first: all_gather them) "
                       "before any operation or collective that expects one size")
                return Finding(
                    "length-from-data", f"ranks {', '.join(map(str, raised))} crashed with {tb.short_type} "
                    f"({gist(tb.message, 80)}) at {frame.location}: `{name}` comes from `{ast.unparse(call)[:60]}` "
                    f"(line {assign.lineno}), whose length depends on the values in each rank's data; where a rank's "
                    "data lacks the largest value, its tensor is shorter", _crash_evidence(tb), tb.node,
                    _rank_of(ctx, tb), fix)
    return None


RPC_CALLS = {"rpc_sync", "rpc_async", "remote"}
BLOCKING = {"wait", "wait_for", "acquire", "join", "get", "barrier"}  # a Condition, Event, Lock, Thread, Queue, Barrier


def _rpc_handler_blocked(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """RPCs that ran past their timeout, to a function of the job that blocks (a Condition's wait for the other
    callers): the callee runs each RPC on a thread of a fixed pool (num_worker_threads), so handlers that wait for
    more callers than it has threads wait for calls that never run."""
    files = parsed_files(ctx)
    functions = {node.name: (source, node) for source in files for node in source.walk()
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for source in files:
        for call in calls_named(source, RPC_CALLS):
            target = argument(call, 1, "func")
            name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) \
                else None
            if name not in functions or any("async_execution" in ast.unparse(decorator)
                                            for decorator in functions[name][1].decorator_list):
                continue  # a handler that returns a future holds no thread while it waits
            blocked = _blocking_call(functions, functions[name][1], 0)
            if blocked is None:
                continue
            where, waits = blocked
            threads = next((item.value for options in calls_named(source, {"TensorPipeRpcBackendOptions"})
                            for item in options.keywords if item.arg == "num_worker_threads"), None)
            pool = (f"num_worker_threads={ast.unparse(threads)[:50]} ({source.name}:{threads.lineno})" if threads
                    else "its default num_worker_threads")
            callers = sorted({other.rank for other in ctx.tracebacks if match.group(0) in other.message
                              and other.rank is not None})
            return (f"the RPCs to {name} ({source.name}:{call.lineno}) ran past their timeout ({match['ms']} ms) on "
                    f"{'ranks ' + ', '.join(map(str, callers)) if callers else 'the callers'}: {name} blocks at "
                    f"`{waits}` ({where}) until other calls arrive, but the callee runs each RPC on a thread of a "
                    f"fixed pool ({pool}): with more callers waiting than threads, the calls that would wake them "
                    "never run",
                    f"let the handler return a future instead of blocking a thread: decorate {name} with "
                    "@rpc.functions.async_execution and return a torch.futures.Future completed when the last call "
                    "arrives (the batch-updating parameter server pattern); at the least give the callee more "
                    "num_worker_threads than callers that can wait at once")
    return None


def _blocking_call(functions: dict, function: ast.AST, depth: int) -> tuple[str, str] | None:
    """(FILE:LINE, code) of a wait in `function` or in a function it calls (two levels down)."""
    source = next(source for source, node in functions.values() if node is function)
    for call in (node for node in walk(function) if isinstance(node, ast.Call)):
        attribute = call.func.attr if isinstance(call.func, ast.Attribute) else None
        if attribute in BLOCKING and not (attribute in ("join", "get") and call.args):  # not str.join, dict.get
            return f"{source.name}:{call.lineno}", ast.unparse(call)[:60]
        callee = functions.get(call_name(call))
        if callee is not None and callee[1] is not function and depth < 2 and (
                found := _blocking_call(functions, callee[1], depth + 1)):
            return found
    return None


def _cast_in_place(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """An in-place operation whose result has a type its tensor cannot hold (a float quotient into a Long): where
    the tensors come from a loop over state_dict() or buffers(), it reached an integer buffer such as BatchNorm's
    num_batches_tracked."""
    tb = next((tb for tb in ctx.tracebacks if tb.line is line), None)
    frame = tb.user_frame() if tb else None
    source = source_named(parsed_files(ctx), frame.file) if frame else None
    loop = next((node for node in source.walk() if isinstance(node, ast.For) and node.body[0].lineno <=
                 frame.line <= (node.end_lineno or 0) and ("state_dict" in ast.unparse(node.iter) or call_name(
                     node.iter) in ("buffers", "named_buffers"))), None) if source else None
    at = f" at {frame.location}" if frame else ""
    if loop is not None:
        return (f"an in-place operation{at} puts a {match['result']} result into a {match['output']} tensor: the "
                f"loop over `{ast.unparse(loop.iter)[:50]}` (line {loop.lineno}) reaches integer buffers too (such "
                "as BatchNorm's num_batches_tracked), not only floating-point weights",
                "average only floating-point tensors (if t.is_floating_point(): ...; copy or broadcast the others), "
                "or loop over model.parameters() (and the float buffers) instead of the whole state_dict()")
    return (f"an in-place operation{at} puts a {match['result']} result into a {match['output']} tensor, which "
            "cannot hold it", f"make the tensor {match['result'].lower()} first (t = t.float()), or compute out of "
            "place and cast back explicitly (t.copy_((t / n).round()))")


def _static_graph(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """DDP(static_graph=True) meeting an iteration unlike the first: parameters used in some steps only, or gradient
    sync skipped with no_sync() (accumulation), which its reducer's internal assert reports without saying why."""
    files = parsed_files(ctx)
    static = next(((source, call) for source in files for call in calls_named(source, DDP_CALLS) if any(
        item.arg == "static_graph" and isinstance(item.value, ast.Constant) and item.value.value is True
        for item in call.keywords)), None)
    skipped = next(((source, call) for source in files for call in calls_named(source, {"no_sync"})), None)
    if "INTERNAL ASSERT" in match.group(0) and static is None:
        return None  # the assert alone, and no static graph in the job's code: not this cause
    built = f" ({static[0].name}:{static[1].lineno})" if static else ""
    if skipped is not None:
        return (f"DDP was built with static_graph=True{built}, and the job skips gradient sync with no_sync() "
                f"({skipped[0].name}:{skipped[1].lineno}): a static graph records the first iteration's hooks and "
                "reductions and expects every iteration to repeat them, which an accumulation step without sync "
                "does not",
                "drop static_graph=True where gradients are accumulated with no_sync(), or accumulate without "
                "no_sync() (every micro-batch synced); keep static_graph for loops whose every step is alike")
    return (f"DDP was built with static_graph=True{built}, and the set of parameters the forward uses changed between "
            "iterations (a branch, a warm-up or an auxiliary loss that uses a module in some steps only)",
            "build DDP without static_graph (DistributedDataParallel(model, find_unused_parameters=True) if "
            "some steps leave parameters unused), or use the same modules in every step (multiply the unused "
            "branch's output by 0 rather than skipping it)")


DDP_CALLS = {"DistributedDataParallel", "DDP"}  # the constructors that take static_graph


def _shared_memory_of_another_node(ctx: Context, tb) -> Finding | None:
    """A named shared-memory segment (multiprocessing.shared_memory, /dev/shm) another node's process created: each
    node has its own shared memory, so the name exists only where it was made."""
    if tb.short_type != "FileNotFoundError" or not any(frame.file.endswith("shared_memory.py") for frame in tb.frames):
        return None
    frame = tb.user_frame()
    raised = _ranks_raising(ctx, tb)
    nodes = sorted({other.node for other in ctx.tracebacks if _same_error(other, tb)})
    name = re.search(r"'([^']+)'", tb.message)
    return Finding(
        "shared-memory-of-another-node", f"rank{'s' if len(raised) > 1 else ''} {', '.join(map(str, raised))} (on "
        f"{', '.join(f'node{node}' for node in nodes)}) could not attach to the shared-memory segment "
        f"{name.group(1) if name else ''}" + (f" at {frame.location}" if frame else "") + ": shared memory belongs to "
        "one machine (its /dev/shm), and the segment was created on another node",
        _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        "create the segment once per node (local rank 0 creates it, the node's other ranks attach after a barrier of "
        "that node's ranks), and give each node its own data; across nodes, send the data (broadcast a tensor) or "
        "put it in a file on the shared folder")


OUT_OF_BOUNDS = re.compile(r"index (?P<index>-?\d+) is out of bounds for (?:dimension|axis) \d+ with size (?P<size>\d+)"
                           r"|start \((?P<start>\d+)\) \+ length \((?P<length>\d+)\) exceeds dimension size "
                           r"\((?P<dimension>\d+)\)")


def _global_index_on_shard(ctx: Context, tb) -> Finding | None:
    """An index out of bounds at a line that uses a value computed from the rank (a shard's start, positions offset
    by the rank): an index over the whole range used on a tensor that holds one rank's part, or the reverse."""
    bounds = OUT_OF_BOUNDS.search(tb.message)
    if bounds is None or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    per_rank = _assigned_from(source, RANK_NAMES, "get_rank")

    def offset(expression: ast.AST) -> bool:
        return any(identifier(node) in per_rank for node in walk(expression))

    chain = origin_of(source, statement, source.function_of(statement), offset)
    if not chain:
        return None
    # the offset the line reaches: the one its assignments name (the deepest cause), else the one in the line itself
    in_steps = next((found for text, _ in chain if text for found in per_rank if re.search(rf"\b{found}\b", text)),
                    None)
    in_line = next((identifier(node) for node in walk(statement) if identifier(node) in per_rank), None)
    name = in_steps or in_line or next(iter(per_rank))
    made, made_at = per_rank[name]
    origin = f" (`{made}`, line {made_at})"
    size = bounds["size"] or bounds["dimension"]
    rank = _rank_of(ctx, tb)
    return Finding(
        "global-index-on-shard", f"rank {rank if rank is not None else '?'} used `{name}`, a value computed from its "
        f"rank{origin}, at `{ast.unparse(statement)[:60]}` ({frame.location}) on a tensor of size {size} "
        f"({gist(tb.message, 70)}): an index or position over the whole range met a tensor that holds only this "
        "rank's part (or one sized for one rank's part met the whole range)",
        _crash_evidence(tb), tb.node, rank,
        "translate between the whole range and the shard where they meet: local = index - shard_start, with the "
        "indices outside [shard_start, shard_end) masked (valid = (index >= start) & (index < end); use "
        "local.clamp(0, size - 1) where valid and zero elsewhere, then all_reduce), or size the tensor for the whole "
        "range (a rotary cache over the full sequence length, a cache with room for every step)")


VIEW_REFUSED = re.compile(r"shape '\[(?P<dims>-?\d+(?:, -?\d+)*)\]' is invalid for input of size (?P<size>\d+)")


def _view_of_a_split(ctx: Context, tb) -> Finding | None:
    """A view or reshape refused at a line whose tensor each rank got from a split by the world size (a column of a
    tensor-parallel weight, a chunk of the sequence): at this world size a rank's part is no whole number of the
    groups the view makes (heads of head_dim values)."""
    refused = VIEW_REFUSED.search(tb.message)
    if refused is None or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    gathered = _gathered_lists(source)  # one slot per rank, filled by a gather: every rank's part, not a share
    split = {name: made for name, made in _assigned_from(source, _world_names(source), "get_world_size").items()
             if name not in gathered}
    viewed = [call.func.value for call in walk(statement) if isinstance(call, ast.Call)
              and isinstance(call.func, ast.Attribute) and call.func.attr in ("view", "reshape")]
    named = next((identifier(node) for tensor in viewed for node in walk(tensor) if identifier(node) in split),
                 None)
    if named is not None:
        made, made_at = split[named]
    elif by_world := _view_splits_by_world(ctx, tb, frame, statement, _world_names(source), refused):
        return by_world
    else:  # a share reached through functions and their returns (rewards scored on the rank's completions)
        taken, holding = _shares(source)
        named = next((identifier(node) for tensor in viewed for node in walk(tensor)
                      if identifier(node) in holding), None)
        last = int(refused["dims"].split(", ")[-1])
        if named is None or not taken or last <= 0 or int(refused["size"]) % last == 0:
            return None  # the share holds whole groups of the view's last dimension: not what was refused
        made, made_at = min(taken, key=lambda step: abs(step[1] - statement.lineno))
    dims, size = [int(dim) for dim in refused["dims"].split(", ")], int(refused["size"])
    rows = math.prod(dim for dim in dims[:-1] if dim != -1)
    share = (f"{size // rows} values a row where the view groups them by {dims[-1]}" if rows and size % rows == 0
             else f"{size} values, which do not fill [{refused['dims']}]")
    rank = _rank_of(ctx, tb)
    return Finding(
        "view-of-a-split", f"rank {rank if rank is not None else '?'} reshaped `{named}`, its part of a split by the "
        f"world size (`{made}`, line {made_at}), at `{ast.unparse(statement)[:60]}` ({frame.location}): with "
        f"{ctx.evidence.expected_world_size} ranks its part holds {share} ({gist(tb.message, 70)}): the split "
        "does not give each rank whole groups",
        _crash_evidence(tb), tb.node, rank,
        "split by whole groups of what the view makes: give each rank whole heads (chunk the number of heads by the "
        "world size, not the features); where the ranks outnumber the groups (more tensor-parallel ranks than "
        "key/value heads), replicate each group on world // groups ranks (group = rank * groups // world), or run "
        "a world size that divides the groups")


def _view_splits_by_world(ctx: Context, tb, frame, statement: ast.AST, worlds: set[str],
                          refused: re.Match) -> Finding | None:
    """A view that cuts a dimension into world-size parts (`x.reshape(rows, world, cols // world)`, as an all_to_all
    needs), refused because that dimension is no multiple of the world size (an rfft's N // 2 + 1 columns)."""
    call = next((node for node in walk(statement) if call_name(node) in ("view", "reshape") and any(
        _divides_by(argument, worlds) for argument in node.args)), None)
    if call is None:
        return None
    divided = next(argument for argument in call.args if _divides_by(argument, worlds))
    world = ctx.evidence.expected_world_size
    rank = _rank_of(ctx, tb)
    return Finding(
        "view-of-a-split", f"`{ast.unparse(call)[:60]}` ({frame.location}) cuts a dimension into world-size parts "
        f"(`{ast.unparse(divided)}`), and with {world} ranks that dimension is no multiple of {world}: "
        f"{gist(tb.message, 70)}", _crash_evidence(tb), tb.node, rank,
        "split the dimension unevenly and say so: per-rank counts with the remainder spread (torch.tensor_split, "
        "or sizes given to all_to_all_single as input_split_sizes/output_split_sizes); or pad it to a multiple of "
        "the world size before the view and drop the padding after")


EMPTY_OR_ZERO = re.compile(r"non-empty|\bempty\b|\bzero\b|=0\b|got 0\b|positive integer|must be positive", re.I)


THREAD_VARIABLES = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS"}


def _empty_share(ctx: Context, tb) -> Finding | None:
    """An error about something empty or zero at a line whose value is a rank's share of a split by the world size
    (`names[rank::world]`, `total // (world * accum)`): at this world size the share came out empty or 0."""
    if not EMPTY_OR_ZERO.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    worlds = _world_names(source)

    chain = origin_of(source, statement, source.function_of(statement), lambda expression: any(
        _split_by_world(part, worlds) for part in walk(expression)))
    split = next(((text, line) for text, line in reversed(chain) if text), None)
    if split is None:
        return None
    rank = _rank_of(ctx, tb)
    scope = source.function_of(statement)
    threads = next((variable for made in made_of(source, statement, scope) for part in walk(made)
                    if (variable := env_read(part)) in THREAD_VARIABLES), None)
    if threads is not None:  # the launcher's per-process thread count, divided once more by the processes
        return Finding(
            "threads-divided-again", f"`{split[0]}` (line {split[1]}) divides {threads} by the node's processes, but "
            f"torchrun already sets {threads} per process (1 where it starts several on a node), so the share comes "
            f"out 0, which `{ast.unparse(statement)[:50]}` ({frame.location}) refuses ({gist(tb.message, 60)})",
            _crash_evidence(tb), tb.node, rank,
            f"use {threads} as it is (it is already each process's share), or divide the node's cores instead "
            "(len(os.sched_getaffinity(0)) // LOCAL_WORLD_SIZE) and keep at least 1: max(1, ...)")
    return Finding(
        "empty-share-of-the-world", f"rank {rank if rank is not None else '?'} got an empty or zero share: "
        f"`{split[0]}` (line {split[1]}) splits by the world size, and with {ctx.evidence.expected_world_size} ranks "
        f"its part comes out empty or rounds down to 0, which `{ast.unparse(statement)[:50]}` ({frame.location}) "
        f"refuses ({gist(tb.message, 70)})", _crash_evidence(tb), tb.node, rank,
        "size the split for the world it runs on: every rank needs at least one item (as many shards as ranks or "
        "more, or split by samples rather than files), and a per-rank size taken from a global one must not round "
        "to 0 (keep the per-rank micro batch fixed and derive the accumulation steps from the world size: "
        "accum = global_batch // (world_size * micro_batch)); check the share is at least 1 where it is computed")


# A negative number in an error's message: a count or size that came out below zero.
NEGATIVE_NUMBER = re.compile(r"(?<![\w.])-\d+(?![\w.])|\bnegative\b")
NARROW_SIGNED = {"int32": 2 ** 31 - 1, "int16": 2 ** 15 - 1, "int8": 2 ** 7 - 1}


def _integer_sum_wrapped(ctx: Context, tb) -> Finding | None:
    """A count or size below zero, on a rank that summed narrow signed integers over the ranks: the total passed what
    the type holds and wrapped around (int32 counts of tokens, bytes or samples from every rank)."""
    if not NEGATIVE_NUMBER.search(tb.message) or not ctx.multi_node:
        return None
    rank = _rank_of(ctx, tb)
    sums = [call for call in _calls_of(ctx, tb.node, rank, ("all_reduce", "reduce")) if call.ended_at and call.tensors
            and call.tensors[0].dtype in NARROW_SIGNED and dict(call.args).get("op", "SUM") == "SUM"]
    if not sums or (failed := _failing_statement(ctx, tb)) is None:
        return None
    call, (frame, source, statement) = sums[-1], failed
    place = caller_place(call.caller)
    summed = source.statement_at(place[1]) if place and place[0] == frame.file.rsplit("/", 1)[-1] else None
    given = next((identifier(node.args[0]) for node in walk(summed) if isinstance(node, ast.Call)
                  and call_name(node) == call.op and node.args), None) if summed is not None else None
    if not given or not origin_of(source, statement, source.function_of(statement), lambda expression: any(
            identifier(node) == given for node in walk(expression))):
        return None  # the failing line's values do not come from the sum
    dtype = call.tensors[0].dtype
    return Finding(
        "integer-sum-wrapped", f"the {call.op} of `{given}`{_called_at(call)} summed {dtype} values "
        f"over {ctx.evidence.expected_world_size} ranks: {dtype} holds at most {NARROW_SIGNED[dtype]:,}, and a total "
        f"past it wraps around to a negative number without an error, which `{ast.unparse(statement)[:50]}` "
        f"({frame.location}) refuses ({gist(tb.message, 70)})", _crash_evidence(tb), tb.node, rank,
        f"sum counts in int64: build the tensor with dtype=torch.int64 (or .long() it, not a NumPy {dtype} array) "
        f"before the {call.op}; one rank's count fits in {dtype}, the sum over every rank of every node need not")


# What a broken connection raises: the socket's own errors, not bytes that arrived short.
CONNECTION_ERRORS = {"OSError", "ConnectionResetError", "ConnectionRefusedError", "ConnectionAbortedError",
                     "BrokenPipeError", "TimeoutError", "timeout", "gaierror", "herror"}


def _partial_recv(ctx: Context, tb) -> Finding | None:
    """Data that did not parse, at a line whose bytes come from one `sock.recv(n)`: recv returns what has arrived so
    far, up to n bytes, so a message bigger than a few packets comes in part."""
    if tb.short_type in CONNECTION_ERRORS or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    if "MSG_WAITALL" in names_in(source.tree):
        return None

    def one_recv(expression: ast.AST) -> bool:
        return any(isinstance(node, ast.Call) and call_name(node) == "recv" and node.args
                   for node in walk(expression))

    if one_recv(statement):
        return None  # the recv itself raised: a connection's error, not short data
    chain = origin_of(source, statement, source.function_of(statement), one_recv)
    received = chain[0] if chain and "recv(" in chain[0][0] else None  # the bytes the line consumes: not a header
    if received is None:
        return None
    rank = _rank_of(ctx, tb)
    return Finding(
        "partial-recv", f"`{received[0]}` (line {received[1]}) takes what one recv returns, and recv returns the bytes "
        f"that have arrived so far (up to the size asked), not the whole message: `{ast.unparse(statement)[:50]}` "
        f"({frame.location}) got part of it ({tb.short_type}: {gist(tb.message, 70)})", _crash_evidence(tb),
        tb.node, rank,
        "read until the announced length has arrived: loop on recv and append until len(data) == size (or "
        "sock.makefile('rb').read(size), or recv with socket.MSG_WAITALL), the same for the length header; or send "
        "tensors with torch.distributed (broadcast, send/recv) instead of a socket of your own")


def _lazy_sized_on_some_ranks(ctx: Context, tb) -> Finding | None:
    """DDP refused lazy layers (LazyLinear) with no shapes yet on some ranks: lazy modules take their shapes from
    their first forward, and the job ran that forward only under a rank condition (a summary on rank 0)."""
    if "uninitialized parameters" not in tb.message or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    wrapped = next((ast.unparse(call.args[0]) for call in walk(statement) if isinstance(call, ast.Call)
                    and call_name(call) in ("DistributedDataParallel", "DDP") and call.args), None)
    branch = next((node for node in source.walk() if isinstance(node, ast.If) and wrapped
                   and holds(node.test, source.ranks, set(), ()) and node.lineno < statement.lineno
                   and any(isinstance(part, ast.Name) and part.id == wrapped for item in node.body
                           for part in walk(item))), None)
    if branch is None:
        return None
    rank = _rank_of(ctx, tb)
    lazy = sorted({name for name in names_in(source.tree) if name and name.startswith("Lazy")})
    return Finding(
        "made-on-some-ranks", f"rank {rank if rank is not None else '?'}'s lazy layers ({', '.join(lazy) or 'Lazy*'}) "
        f"had no shapes when DDP wrapped `{wrapped}` ({frame.location}): lazy modules take their shapes from their "
        f"first forward, and that forward ran only under `if {ast.unparse(branch.test)[:40]}:` (line {branch.lineno})",
        _crash_evidence(tb), tb.node, rank,
        f"run the first forward on every rank before wrapping (a dummy batch through `{wrapped}` under "
        "torch.no_grad(), outside any rank condition), and keep only the printing under rank 0; or give the layers "
        "their input sizes (nn.Linear(in_features, ...)) instead of Lazy ones")


SPLIT_SIZES_REFUSED = re.compile(r"Sum of input lengths does not equal the length of the input dataset|"
                                 r"split_with_sizes expects split_sizes to sum exactly to")


def _split_drops_remainder(ctx: Context, tb) -> Finding | None:
    """random_split / torch.split refused lengths that do not add up to the whole, at a line that makes them by
    dividing by the world size (`[n // world] * world`): the remainder of the division is in no rank's share."""
    if not SPLIT_SIZES_REFUSED.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    worlds = _world_names(source)
    divided = next((part for part in walk(statement) if _divides_by(part, worlds)), None)
    if divided is None:
        return None
    rank = _rank_of(ctx, tb)
    return Finding(
        "split-drops-remainder", f"`{ast.unparse(divided)}` ({frame.location}) gives each of the "
        f"{ctx.evidence.expected_world_size} ranks the whole division's quotient, and the remainder is in no share: "
        f"the lengths add up to less than the data, which `{ast.unparse(statement)[:50]}` refuses "
        f"({gist(tb.message, 70)})", _crash_evidence(tb), tb.node, rank,
        "give the remainder to some shards (lengths = [n // world + (1 if i < n % world else 0) for i in "
        "range(world)]), or pass fractions ([1 / world] * world: random_split spreads the remainder), or split by "
        "index (indices[rank::world], torch.tensor_split); with 1 rank the division has no remainder, which is why "
        "it passed there")


TOP_K_REFUSED = re.compile(r"selected index k out of range|k \(\d+\) is too big|k not in range")


def _global_k_on_shard(ctx: Context, tb) -> Finding | None:
    """topk/kthvalue with a k set for the whole job, on a tensor that holds one rank's share of the data: as the
    world grows, a share gets smaller than k."""
    if not TOP_K_REFUSED.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    call = next((node for node in walk(statement) if isinstance(node, ast.Call)
                 and call_name(node) in ("topk", "kthvalue") and (node.args or node.keywords)), None)
    if call is None:
        return None
    method = isinstance(call.func, ast.Attribute) and called_on(call) not in ("torch", "np", "numpy")
    tensor, given = (call.func.value, call.args) if method else (call.args[0], call.args[1:])  # t.topk(k), topk(t, k)
    k = next((keyword.value for keyword in call.keywords if keyword.arg == "k"), given[0] if given else None)
    chain = origin_of(source, tensor, source.function_of(statement),  # down to the rank itself
                      lambda expression: holds(expression, RANK_NAMES, RANK_VARIABLES, RANK_CALLS))
    steps = [(text, line) for text, line in reversed(chain) if text]
    # where the share enters the function (`ids, emb = local_catalog(items, rank, world)`), else the chain's origin
    holding = _shares(source)[1]
    function = source.function_of(statement)
    entry = next((node for node in sorted((node for node in walk(function) if isinstance(node, ast.Assign)),
                                          key=lambda node: node.lineno)
                  if node.lineno < statement.lineno and names_in(node.targets[0]) & holding
                  and not names_in(node.value) & holding), None)
    share = (ast.unparse(entry)[:60], entry.lineno) if entry else steps[0] if steps else None
    if k is None or share is None or holds(k, source.ranks | _world_names(source), set(), ()):
        return None  # k already follows the rank's share
    rank = _rank_of(ctx, tb)
    return Finding(
        "global-index-on-shard", f"`{ast.unparse(call)[:60]}` ({frame.location}) asks for k={ast.unparse(k)} set "
        f"for the whole job, of a tensor that holds rank {rank if rank is not None else '?'}'s share only (`{share[0]}`,"
        f" line {share[1]}): with {ctx.evidence.expected_world_size} ranks a share has fewer items than k",
        _crash_evidence(tb), tb.node, rank,
        f"take at most the share's size on each rank (k_local = min({ast.unparse(k)}, tensor.size(dim))), gather "
        f"the candidates (padded, or with all_gather_object), and apply the global k={ast.unparse(k)} once, after "
        "the merge")


# A function of the user's that puts saved state back: the frame a restored state fails in.
RESTORES = re.compile(r"load|restore|set_?state|resume", re.IGNORECASE)


def _restored_another_ranks_state(ctx: Context, tb) -> Finding | None:
    """A rank failed putting back state from a file that another rank alone saved (rank 0's checkpoint): it got that
    rank's own state (its data position, its RNG, its shard), which does not fit it."""
    rank = _rank_of(ctx, tb)
    if rank is None or not ctx.multi_node:
        return None
    saved: dict[str, set[int]] = {}
    for trace in ctx.evidence.traces:
        for op in (trace.calls.files if trace.calls and trace.rank is not None else ()):
            if op.op == "save":
                saved.setdefault(op.path, set()).add(trace.rank)
    mine = next((trace for trace in ctx.evidence.traces if trace.rank == rank and trace.calls), None)
    loaded = [op for op in (mine.calls.files if mine else ()) if op.op == "load" and op.path in saved
              and rank not in saved[op.path] and op.error is None and op.size is not None]  # it did read the file
    restoring = next((frame for frame in tb.frames if not LIBRARY_FILE.search(frame.file)
                      and RESTORES.search(frame.function)), None)
    if not loaded or restoring is None:
        return None
    path, savers = loaded[-1].path, sorted(saved[loaded[-1].path])
    by = ", ".join(f"rank {saver}" for saver in savers)
    return Finding(
        "restored-another-ranks-state", f"rank {rank} put back state from {path.rsplit('/', 1)[-1]}, which {by} alone "
        f"saved, so it got {by}'s own state (what differs per rank: a data position, an RNG, a shard), and "
        f"`{restoring.function}` ({restoring.location}) refused it ({gist(tb.message, 70)})", _crash_evidence(tb),
        tb.node, rank,
        "keep what differs per rank per rank: save it in a file of each rank's own (state_rank{rank}.pt), or "
        "all_gather_object every rank's state into the checkpoint and restore each rank's own entry; rank 0's file "
        "holds only what every rank shares (the model, the optimizer)")


NON_FINITE = re.compile(r"non-?finite|\b(?:nan|inf)\b|infinit", re.IGNORECASE)
HALF_MAX = {"float16": 65504}


def _half_sum_overflowed(ctx: Context, tb) -> Finding | None:
    """Values that became inf or nan, on a rank that summed float16 tensors over the ranks: the sum of every rank's
    values passes float16's largest (65504) long before one rank's does (a compression hook that divides after)."""
    if not NON_FINITE.search(tb.message) or not ctx.multi_node:
        return None
    rank = _rank_of(ctx, tb)
    sums = [call for call in _calls_of(ctx, tb.node, rank, ("all_reduce", "reduce", "reduce_scatter",
                                                              "reduce_scatter_tensor"), posted=True)
            if call.tensors and call.tensors[0].dtype in HALF_MAX and dict(call.args).get("op", "SUM") == "SUM"]
    if not sums:
        return None
    call = sums[-1]
    world = ctx.evidence.expected_world_size
    where = _called_at(call)
    return Finding(
        "half-sum-overflowed", f"the {call.op}{where} sums {call.tensors[0]} over {world} ranks with op SUM: float16 "
        f"holds at most {HALF_MAX[call.tensors[0].dtype]:,}, and the sum of {world} ranks' values overflows to inf "
        f"where one rank's fits, so what follows is not finite ({gist(tb.message, 70)})", _crash_evidence(tb),
        tb.node, rank,
        f"divide by the world size before the reduction (x.div(world).to(torch.float16), as torch's "
        "fp16_compress_hook does), or reduce in float32 or bfloat16; with loss scaling, keep the scale small enough "
        "for the sum of every rank's gradients (or use a dynamic scaler)")


def _ratio_of_a_share(ctx: Context, tb) -> Finding | None:
    """A division by zero at a line whose denominator counts something in this rank's share of the data: a share can
    lack what the whole data always has (a class, a token kind), so the ratio must be taken of the reduced counts."""
    if tb.short_type != "ZeroDivisionError" or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    ranks = source.ranks
    division = next((part for part in walk(statement) if isinstance(part, ast.BinOp)
                     and isinstance(part.op, (ast.Div, ast.FloorDiv, ast.Mod))), None)
    if division is None or not holds(division.right, ranks, set(), ()):
        return None  # no division, or a denominator that does not follow from the rank's share
    scope = source.function_of(statement)
    assigned = next((assign for name in sorted(names_in(division.right) & ranks)
                     for assign in reversed(source.assignments_to(name, scope, before=statement.lineno))), None)
    counted = (ast.unparse(assigned)[:60], assigned.lineno) if assigned else (ast.unparse(division.right),
                                                                               statement.lineno)
    rank = _rank_of(ctx, tb)
    return Finding(
        "ratio-of-a-share", f"`{ast.unparse(division)}` ({frame.location}) divides by a count of rank "
        f"{rank if rank is not None else '?'}'s own share of the data (`{counted[0]}`, line {counted[1]}), and that "
        "share has none of what it counts: one process with all the data always has some, a share of it need not",
        _crash_evidence(tb), tb.node, rank,
        "reduce the counts, not the ratios: keep numerator and denominator as tensors, all_reduce (SUM) both across "
        "the ranks, then divide once (guarding a count of 0); or shard so every rank sees every kind "
        "(DistributedSampler, x[rank::world] on shuffled data)")


SUMS = {"sum", "nansum"}


def _uncalled(node: ast.AST) -> ast.AST:
    """What a chain of method calls starts from (`total.item()` -> `total`)."""
    while isinstance(node, ast.Call):
        node = node.func.value if isinstance(node.func, ast.Attribute) else node.func
    return node


def _share_over_a_global_total(ctx: Context, tb) -> Finding | None:
    """A rank's own values divided by their sum over every rank (`total = w.sum(); all_reduce(total); p = w / total`):
    on each rank the result adds up to that rank's part of the whole, not to 1, and what wants a distribution refuses
    it."""
    if (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope = source.function_of(statement)
    for name in sorted(names_in(statement)):
        for assign in reversed(source.assignments_to(name, scope, before=statement.lineno + 1)):
            division = assign.value
            if not (isinstance(division, ast.BinOp) and isinstance(division.op, ast.Div)):
                continue
            share, total = root_name(division.left), root_name(_uncalled(division.right))
            reduced = next((call for call in walk(scope) if call_name(call) == "all_reduce" and call.args
                            and root_name(call.args[0]) == total and call.lineno < assign.lineno
                            and not any(item.arg == "op" and "SUM" not in ast.unparse(item.value)
                                        for item in call.keywords) and len(call.args) < 2), None)
            summed = [made for made in source.assignments_to(total, scope, before=assign.lineno)
                      if any(call_name(part) in SUMS and share in names_in(part) for part in walk(made.value))]
            if share is None or reduced is None or not summed:
                continue
            rank = _rank_of(ctx, tb)
            return Finding(
                "share-over-global-total", f"`{ast.unparse(assign)[:60]}` ({source.name}:{assign.lineno}) divides this "
                f"rank's own `{share}` by `{total}`, the sum of `{share}` over every rank (`{ast.unparse(summed[-1])[:50]}`"
                f", line {summed[-1].lineno}, all-reduced at line {reduced.lineno}): on each rank `{name}` adds up to "
                f"that rank's part of the whole, not to 1, and {frame.location} refuses it", _crash_evidence(tb),
                tb.node, rank,
                f"normalise by the rank's own sum (`{share} / {share}.sum()`) to draw or weigh within the rank's share; "
                "where the whole is meant, gather every rank's values (all_gather) and use the whole on every rank")
    return None


def _can_be_zero(expression: ast.AST) -> bool:
    """An expression that gives 0 at an edge: `min(HALO, depth - z1)`, `max(0, ...)`, `x if ... else 0`."""
    def zero(node):
        return isinstance(node, ast.Constant) and node.value == 0
    return isinstance(expression, ast.Call) and (
        call_name(expression) == "min" and any(isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Sub) or zero(arg)
                                               for arg in expression.args)
        or call_name(expression) == "max" and any(zero(arg) for arg in expression.args)) \
        or isinstance(expression, ast.IfExp) and (zero(expression.body) or zero(expression.orelse))


def _slice_to_minus_zero(ctx: Context, tb) -> Finding | None:
    """`x[lo:-hi]` to drop a margin, where `hi` is 0 on the rank at the edge of the split (its slab has no neighbour
    after it): `x[lo:-0]` is `x[lo:0]`, empty, not 'to the end', and what follows meets a part of the wrong size."""
    if (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope = source.function_of(statement)
    for cut in (node for node in walk(scope) if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice)
                and node.lineno <= statement.lineno and isinstance(node.slice.upper, ast.UnaryOp)
                and isinstance(node.slice.upper.op, ast.USub) and isinstance(node.slice.upper.operand, ast.Name)):
        margin = cut.slice.upper.operand
        edge = next((made for made in made_of(source, margin, scope)[1:] if _can_be_zero(made)
                     and margin.id in {identifier(target) for assign in source.walk() if isinstance(assign, ast.Assign)
                                       and assign.value is made for target in walk(assign.targets[0])}), None)
        if edge is None:
            continue
        rank = _rank_of(ctx, tb)
        return Finding(
            "slice-to-minus-zero", f"`{ast.unparse(cut)[:50]}` ({source.name}:{cut.lineno}) ends at `-{margin.id}`, and "
            f"`{margin.id}` is 0 on a rank at the edge of the split (`{margin.id} = {ast.unparse(edge)[:40]}`, line "
            f"{edge.lineno}): `[...:-0]` is `[...:0]`, an empty slice, not 'to the end', so that rank's part is empty "
            f"and {frame.location} meets parts of the wrong size", _crash_evidence(tb), tb.node, rank,
            f"give the end as a length, not a negative offset: `{ast.unparse(cut.value)[:30]}"
            f"[{ast.unparse(cut.slice.lower) if cut.slice.lower else ''}:len({ast.unparse(cut.value)[:30]}) - "
            f"{margin.id}]` (or `-{margin.id} or None`), which is right when the margin is 0")
    return None


VALUE_OUT_OF_RANGE = re.compile(r"must be (?:in|between|at most|<|less|positive|in the range)|out of (?:the )?range|"
                          r"should be (?:in|between|at most|<|less)|\bnot in (?:\(|\[)")


def _rate_over_a_share(ctx: Context, tb) -> Finding | None:
    """A value refused as out of its range on every rank, made by dividing by the size of the rank's own share of the
    data (`rate = BATCH / len(x)` with `x` one rank's shard): a rate or fraction meant against the whole data comes
    out world-size times larger against a share of it."""
    if tb.short_type not in ("ValueError", "AssertionError") or not VALUE_OUT_OF_RANGE.search(tb.message) \
            or not ctx.multi_node:
        return None
    for source, statement in _job_statements(ctx, tb):
        scope, ranks = source.function_of(statement), source.ranks
        for name in sorted(names_in(statement)):
            for assign in source.assignments_to(name, scope, before=statement.lineno):
                division = assign.value
                if not (isinstance(division, ast.BinOp) and isinstance(division.op, ast.Div)
                        and call_name(division.right) == "len" and holds(division.right, ranks, set(), ())
                        and not holds(division.left, ranks, set(), ())):
                    continue
                rank = _rank_of(ctx, tb)
                share = ast.unparse(division.right.args[0]) if division.right.args else "the share"
                return Finding(
                    "rate-over-a-share", f"`{ast.unparse(assign)[:60]}` ({source.name}:{assign.lineno}) divides by the "
                    f"size of this rank's own share of the data (`{share}` is its part, about 1/world of the whole): "
                    f"a rate or fraction meant against the whole comes out world-size times larger, and "
                    f"{tb.user_frame().location} refuses it as out of range", _crash_evidence(tb), tb.node, rank,
                    f"divide by the size of the whole data (the dataset before it is split, or the shares' sizes summed "
                    f"with all_reduce), or scale what is divided to the rank's part (divide it by the world size)")
    return None


NO_ATTRIBUTE = re.compile(r"'(?P<kind>[\w.]+)' object has no attribute '(?P<attribute>\w+)'")


def _module_name_rebound(ctx: Context, tb) -> Finding | None:
    """`import torch.distributed as dist`, then `dist = torch.cdist(...)` at the module's top level: the name now
    holds the value, and a function that reads the module through it (`dist.get_world_size()`) meets the value."""
    if tb.short_type != "AttributeError" or not (refused := NO_ATTRIBUTE.search(tb.message)) \
            or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    used = {node.value.id for node in walk(statement) if isinstance(node, ast.Attribute)
            and node.attr == refused["attribute"] and isinstance(node.value, ast.Name)}
    for imported in (node for node in source.tree.body if isinstance(node, (ast.Import, ast.ImportFrom))):
        for alias in imported.names:
            name = alias.asname or alias.name.split(".")[0]
            if name not in used:
                continue
            module = f"{imported.module}.{alias.name}" if isinstance(imported, ast.ImportFrom) else alias.name
            rebinding = next((assign for assign in source.walk() if isinstance(assign, (ast.Assign, ast.AugAssign,
                                                                                          ast.For))
                              and assign.lineno > imported.lineno and source.function_of(assign) is source.tree
                              and name in {identifier(target) for target in walk(
                                  getattr(assign, "target", None) or ast.Tuple(elts=assign.targets))}), None)
            if rebinding is None:
                continue
            return Finding(
                "module-name-rebound", f"`{name}` is the module {module} (imported at {source.name}:{imported.lineno}),"
                f" but `{ast.unparse(rebinding).splitlines()[0][:60]}` (line {rebinding.lineno}) rebinds it at the "
                f"script's top level: from then on `{name}.{refused['attribute']}` ({frame.location}) finds a "
                f"{refused['kind']}, not the module", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                f"give the value its own name (e.g. `{name}s` or a longer word) or import the module under a name the "
                f"script does not reuse; a `main()` function keeps such names local")
    return None


def _the_world_size(source: SourceFile, node: ast.AST) -> bool:
    """The world size itself (`world`, `dist.get_world_size()`, a name only ever assigned it), not a size made from it."""
    if reads_world_size(node) or isinstance(node, ast.Name) and node.id in WORLD_NAMES:
        return True
    values = [value for name, value in assignments(source) if isinstance(node, ast.Name) and name == node.id]
    return bool(values) and all(reads_world_size(value) for value in values)


def _split_size_is_the_world(ctx: Context, tb) -> Finding | None:
    """`torch.split(x, world)[rank]`: an int given to torch.split is the size of each piece, not how many pieces, so
    every rank takes a piece of `world` items instead of its share. Told where the job's own check refused the result
    or the split is on the failing path."""
    if (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, failing_source, statement = failed
    on_path = {(frame.file.rsplit("/", 1)[-1], frame.line) for frame in tb.frames}
    for source in parsed_files(ctx):
        for split in (node for node in source.walk() if call_name(node) == "split" and isinstance(node, ast.Call)
                      and called_on(node) not in ("np", "numpy", "os.path", "re")):
            size = split.args[1] if called_on(split) == "torch" and len(split.args) > 1 else \
                split.args[0] if called_on(split) != "torch" and split.args else None
            if size is None or not _the_world_size(source, size) or not (
                    isinstance(statement, (ast.Raise, ast.Assert)) or (source.name, split.lineno) in on_path):
                continue
            return Finding(
                "split-size-is-the-world", f"`{ast.unparse(split)[:50]}` ({source.name}:{split.lineno}) cuts it into "
                f"pieces of `{ast.unparse(size)}` items each: an int given to split is the size of each piece, not "
                f"how many, so each rank takes a piece of {ast.unparse(size)} items instead of its share, and "
                f"{frame.location} fails on what is left", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                f"ask for that many pieces: torch.tensor_split(x, {ast.unparse(size)})[rank] or "
                f"x.chunk({ast.unparse(size)})[rank], or give each piece's size: math.ceil(len(x) / "
                f"{ast.unparse(size)})")
    return None


def _state_of_an_optimizer(source: SourceFile, node: ast.AST, scope: ast.AST) -> ast.AST | None:
    """The optimizer whose per-parameter state `node` is (`opt.state[p]`, or a name assigned it), else None."""
    for made in made_of(source, node, scope)[:3]:
        if isinstance(made, ast.Subscript) and isinstance(made.value, ast.Attribute) and made.value.attr == "state":
            return made.value.value
    return None


def _optimizer_state_not_made(ctx: Context, tb) -> Finding | None:
    """A KeyError reading an optimizer's state (`opt.state[p]['exp_avg']`) on the ranks whose optimizer never
    stepped: torch makes that state in the first step(), and a step under a condition that follows from the rank
    (a client that sat a round out, a rank with no batch) leaves it empty there."""
    if tb.short_type != "KeyError" or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope = source.function_of(statement)
    key = tb.message.strip().strip("'\"")
    read = next((node for node in walk(statement) if isinstance(node, ast.Subscript)
                 and isinstance(node.slice, ast.Constant) and node.slice.value == key), None)
    optimizer = _state_of_an_optimizer(source, read.value, scope) if read is not None else None
    if optimizer is None:
        return None
    name = ast.unparse(optimizer)
    steps = [call for call in source.walk() if isinstance(call, ast.Call) and (
        call_name(call) == "step" and ast.unparse(call.func).startswith(name + ".")
        or any(ast.unparse(arg) == name for arg in call.args))]
    gated = next(((call, test) for call in steps for test in conditions_above(source, call)
                  if holds(test, source.ranks, RANK_VARIABLES, RANK_CALLS)), None)
    rank = _rank_of(ctx, tb)
    return Finding(
        "optimizer-state-not-made", f"`{ast.unparse(read)[:50]}` ({frame.location}) reads {name}'s state before "
        f"{name} ever stepped on {_who_raised(ctx, tb, rank)}: torch's optimizers make their per-parameter state "
        "(exp_avg, momentum_buffer, step) in the first step()" + (
            f", and the step (`{ast.unparse(gated[0])[:50]}`, line {gated[0].lineno}) runs only where "
            f"`{ast.unparse(gated[1])[:40]}` holds, which follows from the rank" if gated else ""),
        _crash_evidence(tb), tb.node, rank,
        "make the state before any rank reads it (a step with zero gradients, or fill opt.state[p] with zeros_like "
        "tensors right after building the optimizer), or read it with a default of zeros "
        "(opt.state[p].get('exp_avg', torch.zeros_like(p))) so that every rank joins the collective with the same "
        "shapes")


def _decided_on_the_root_from_its_own(ctx: Context, tb) -> Finding | None:
    """A rank that is not the root crashed applying a value broadcast from the root (`choice`), which the root
    decided inside `if rank == 0:` from its own data (its buckets, its shard): the value fits the root's data, and
    each other rank applies it to its own, which differ."""
    if (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope, ranks, rank = source.function_of(statement), source.ranks, _rank_of(ctx, tb)
    # what the failing line works with: its names, what they are made of, and what the loops around it walk over
    loops = [node for node in walk(scope) if isinstance(node, ast.For) and node.lineno <= statement.lineno
             <= (node.end_lineno or node.lineno)]
    used = names_in(statement) | {name for part in made_of(source, statement, scope) for name in names_in(part)} | {
        name for loop in loops for name in names_in(loop.iter)}
    for sent in (call for call in walk(scope) if call_name(call) in ("broadcast", "broadcast_object_list")
                 and call.args and call.lineno < statement.lineno and identifier(call.args[0]) in used):
        name = identifier(sent.args[0])
        root = argument(sent, 1, "src")
        if rank is None or not isinstance(root, ast.Constant) or root.value == rank:
            continue
        decided = next((branch for branch in walk(scope) if isinstance(branch, ast.If) and branch.lineno < sent.lineno
                        and holds(branch.test, RANK_NAMES, set(), RANK_CALLS) and any(
                            isinstance(node, (ast.Name, ast.Subscript)) and isinstance(node.ctx, ast.Store)
                            and identifier(node.value if isinstance(node, ast.Subscript) else node) == name
                            for part in branch.body for node in walk(part))), None)
        if decided is None:
            continue
        made_there = {node.id for part in decided.body for node in walk(part) if isinstance(node, ast.Name)
                      and isinstance(node.ctx, ast.Store)}
        own = sorted(name_ for part in decided.body for name_ in names_in(part)
                     if name_ in ranks and name_ in used and name_ not in RANK_NAMES and name_ != name
                     and name_ not in made_there)
        if not own:
            continue
        if call_name(sent) == "broadcast_object_list":
            return Finding(
                "decided-on-the-root-from-its-own", f"`{name}` is built on rank {root.value} alone "
                f"(`if {ast.unparse(decided.test)[:30]}:`, {source.name}:{decided.lineno}) from its own `{own[0]}`, "
                f"and broadcast (line {sent.lineno}); {_who_raised(ctx, tb, rank)} looks up its own `{own[0]}` in it "
                f"({frame.location}), which holds what rank {root.value}'s did not ({gist(tb.message, 40)})",
                _crash_evidence(tb), tb.node, rank,
                f"build it from what every rank holds: all_gather_object each rank's own (its labels, keys, "
                f"vocabulary from `{own[0]}`) and take their union, in a sorted order, on every rank; or build it from "
                "the whole data or a fixed schema before it is split")
        return Finding(
            "decided-on-the-root-from-its-own", f"`{name}` is decided on rank {root.value} alone "
            f"(`if {ast.unparse(decided.test)[:30]}:`, {source.name}:{decided.lineno}) from its own `{own[0]}`, and "
            f"broadcast (line {sent.lineno}); {_who_raised(ctx, tb, rank)} applies it to its own `{own[0]}` "
            f"({frame.location}), which holds other data: what fits rank {root.value}'s does not fit there",
            _crash_evidence(tb), tb.node, rank,
            f"decide from what every rank holds: agree first on what is valid everywhere (all_reduce with MIN of each "
            f"rank's counts, or all_gather each rank's choices) and choose among those, stopping when any rank has "
            f"none left; or let each rank decide from its own `{own[0]}` with a seed they share")
    return None


ORDER_REFUSED = re.compile(r"must be sorted|not sorted|sorted in (?:de|in)creasing order|must be (?:monotonic|"
                           r"increasing|decreasing)", re.IGNORECASE)
SORTS = {"sorted", "argsort", "sort"}


def _padded_from_the_front_of_an_order(ctx: Context, tb) -> Finding | None:
    """A rank's share topped up to the others' count with items from the start of a sorted list (`mine +=
    order[:k]`): the padding puts the first items (the longest, the largest) after the last, so on a padded rank a
    call that needs the order (pack_padded_sequence with enforce_sorted, searchsorted) refuses it."""
    if not ORDER_REFUSED.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame = failed[0]
    for source in parsed_files(ctx):
        ordered = {name for name, value in assignments(source) if any(call_name(node) in SORTS for node in walk(value))}
        for pad in source.walk():
            itself = False  # `items + items[:k]`: a list topped up from its own front
            if isinstance(pad, ast.AugAssign) and isinstance(pad.op, ast.Add):
                added = pad.value
            elif isinstance(pad, ast.Call) and call_name(pad) == "extend" and pad.args:
                added = pad.args[0]
            elif isinstance(pad, ast.BinOp) and isinstance(pad.op, ast.Add) and isinstance(pad.right, ast.Subscript):
                added, itself = pad.right, root_name(pad.left) is not None and root_name(pad.left) == root_name(pad.right)
            else:
                continue
            sorts = itself and any(call_name(node) in SORTS for node in source.walk())
            if not (isinstance(added, ast.Subscript) and isinstance(added.slice, ast.Slice) and added.slice.lower is None
                    and added.slice.step is None and (root_name(added) in ordered or sorts)):
                continue
            rank = _rank_of(ctx, tb)
            return Finding(
                "padded-from-the-front-of-an-order", f"a rank's share is topped up with items from the start of "
                f"`{root_name(added)}`, a sorted list (`{ast.unparse(pad)[:50]}`, {source.name}:{pad.lineno}): on "
                f"{_who_raised(ctx, tb, rank)}, whose share was padded, those first items come after its last ones, "
                f"so its batches are out of the order {frame.location} needs", _crash_evidence(tb), tb.node, rank,
                "put each batch in the order the call needs after sharding and padding (sort it by length, or pass "
                "enforce_sorted=False), or pad a share with its own last items so the order holds")
    return None


def _sized_by_own_longest(ctx: Context, tb) -> Finding | None:
    """A size refused where the job pads its batches to the longest item over every rank (all_reduce with MAX) and
    sizes what goes with the batch (a padding mask, positions) from this rank's own longest (`lengths.max()`): on a
    rank whose own longest is shorter, the two differ."""
    if not TOO_SMALL.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    agreed = next((call for call in calls_named(source, {"all_reduce"}) if "MAX" in ast.unparse(argument(call, 1, "op")
                                                                                              or ast.Constant(None))),
                  None)
    if agreed is None:
        return None
    scope = source.function_of(statement)
    for name in sorted(names_in(statement)):
        for assign in source.assignments_to(name, scope, before=statement.lineno):
            longest = next((node for node in walk(assign.value) if call_name(node) in ("max", "amax")
                            and (node.args or isinstance(node.func, ast.Attribute))), None)
            if longest is None:
                continue
            return Finding(
                "sized-by-own-longest", f"`{ast.unparse(assign)[:60]}` ({source.name}:{assign.lineno}) is sized by "
                f"this rank's own longest item (`{ast.unparse(longest)[:30]}`), while the batches are padded to the "
                f"longest over every rank (`{ast.unparse(agreed)[:50]}`, line {agreed.lineno}): on "
                f"{_who_raised(ctx, tb, _rank_of(ctx, tb))}, whose own longest is shorter, `{name}` is smaller than "
                f"the padded tensor, and {frame.location} refuses it", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                f"size `{name}` from the padded tensor itself (its shape, e.g. torch.arange(x.shape[1])), not from the "
                "lengths; or pad each rank's batch to its own longest")
    return None


def _arguments_refused(tb) -> bool:
    """pybind's refusal of a torch.distributed call's argument types (a float where an int goes, an int past 32 bits)."""
    return tb.short_type == "TypeError" and "incompatible function arguments" in tb.message


FLOAT_MAKERS = {"histc", "histogram", "float", "mean", "double", "half", "linspace", "rand", "randn", "true_divide"}


def _split_sizes_of_floats(ctx: Context, tb) -> Finding | None:
    """A collective refused its arguments' types (pybind's "incompatible function arguments") where the split sizes
    it was given are a float tensor's .tolist() (torch.histc counts in float32; a division): split sizes are ints."""
    if not _arguments_refused(tb) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope = source.function_of(statement)
    for call in (node for node in walk(statement) if isinstance(node, ast.Call)
                 and call_name(node) in ("all_to_all_single", "split", "split_with_sizes")):
        for position, keyword in ((2, "output_split_sizes"), (3, "input_split_sizes"), (1, "split_size_or_sections")):
            sizes = argument(call, position, keyword)
            made = made_of(source, sizes, scope) if sizes is not None else []
            floats = next((node for value in made for node in walk(value) if isinstance(node, ast.Call)
                           and call_name(node) in FLOAT_MAKERS or isinstance(node, ast.BinOp)
                           and isinstance(node.op, ast.Div)), None)
            if floats is None or not any(call_name(node) == "tolist" for value in made for node in walk(value)):
                continue
            return Finding(
                "split-sizes-of-floats", f"`{ast.unparse(call)[:60]}` ({frame.location}) is given "
                f"`{ast.unparse(sizes)}` as split sizes, the .tolist() of a float tensor (`{ast.unparse(floats)[:40]}`"
                f", line {floats.lineno}): its items are Python floats, and {call_name(call)} takes ints",
                _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                "make the counts integers before .tolist(): torch.bincount(owner, minlength=world) instead of "
                "histc, or `.long()` on the counts before exchanging them")
    return None


def _job_statements(ctx: Context, tb) -> list[tuple[SourceFile, ast.stmt]]:
    """The job's own lines the traceback went through, innermost first, with their files."""
    found = []
    for frame in reversed([frame for frame in tb.frames if not LIBRARY_FILE.search(frame.file)]):
        source = source_named(parsed_files(ctx), frame.file)
        statement = source.statement_at(frame.line) if source else None
        if statement is not None:
            found.append((source, statement))
    return found


def _zero_at_this_world_size(ctx: Context, tb) -> Finding | None:
    """A division by zero whose divisor, worked out from the job's own arithmetic, is 0 at this run's world size
    (`num_actors - 1` with num_actors = world - 1, at a world of 2): the formula holds only for more ranks."""
    world = ctx.evidence.expected_world_size
    if tb.short_type != "ZeroDivisionError" or not world or not (path := _job_statements(ctx, tb)):
        return None
    source, statement = path[0]
    scope = source.function_of(statement)
    for division in (node for node in walk(statement) if isinstance(node, ast.BinOp)
                     and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod))):
        if value_at_world(source, division.right, scope, world, path[1:]) != 0 \
                or not value_at_world(source, division.right, scope, world + 2, path[1:]):
            continue  # not 0 here, or 0 at any world size (nothing to do with the number of ranks)
        return Finding(
            "zero-at-this-world-size", f"`{ast.unparse(division.right)}` ({source.name}:{statement.lineno}) comes to "
            f"0 at this run's world size of {world}: the job works it out from the number of ranks (through "
            f"{', '.join(sorted(names_in(division.right)))[:60]}), and the formula holds only for more of them",
            _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
            f"make the formula hold for every world size the job may run at: handle the smallest case on its own "
            f"(one actor, one worker, one shard) or guard the divisor (max({ast.unparse(division.right)}, 1)); or "
            "run with more ranks")
    return None


SIZES = re.compile(r"[(\[](\d+(?:, ?\d+)+)[)\]]")


def _passed_from_callers(path: list[tuple[SourceFile, ast.stmt]], expression: ast.AST) -> list[tuple]:
    """`expression` at the innermost line of `path`, then, while it is a parameter of its function, what each caller
    on the traceback passed for it: (file, scope, expression) from the innermost out."""
    source, statement = path[0]
    found, scope, callers = [], source.function_of(statement), path[1:]
    while True:
        found.append((source, scope, expression))
        passed = passed_by_caller(scope, expression.id, callers) if isinstance(scope, ast.FunctionDef) \
            and isinstance(expression, ast.Name) else None
        if passed is None:
            return found
        source, expression, scope, callers = passed


def _joined_along_the_wrong_dim(ctx: Context, tb) -> Finding | None:
    """A size refused as (1, 16, 32) where (2, 8, 32) came: the ranks' parts joined along one dimension where the
    batch runs along another (LSTM states are (layers, batch, hidden): torch.cat of the gathered states along dim 0
    stacks layers). Told where the refused value is a torch.cat of gathered parts along the dimension that grew."""
    world = ctx.evidence.expected_world_size
    sizes = [tuple(int(part) for part in found.split(",")) for found in SIZES.findall(tb.message)]
    if not world or len(sizes) < 2 or len(sizes[0]) != len(sizes[1]) or not (path := _job_statements(ctx, tb)):
        return None
    expected, got = sizes[0], sizes[1]
    grew = [axis for axis in range(len(got)) if got[axis] == expected[axis] * world]
    shrank = [axis for axis in range(len(got)) if got[axis] * world == expected[axis]]
    if len(grew) != 1 or len(shrank) != 1:
        return None
    source, statement = path[0]
    calls = [node for node in walk(statement) if isinstance(node, ast.Call) and len(node.args) > 1]
    given = [arg for call in calls for arg in (call.args[1:] if "hidden" in tb.message else call.args)]
    for expression in given:
        for at_source, scope, passed in _passed_from_callers(path, expression):
            for join in (node for made in made_of(at_source, passed, scope) for node in walk(made)
                         if isinstance(node, ast.Call) and call_name(node) in ("cat", "concat", "concatenate")
                         and node.args):
                dim = argument(join, 1, "dim")
                if (dim.value if isinstance(dim, ast.Constant) else 0 if dim is None else None) != grew[0] or \
                        not _made_by_a_gather(at_source, join.args[0], scope):
                    continue
                return Finding(
                    "joined-along-the-wrong-dim", f"`{ast.unparse(join)[:50]}` ({at_source.name}:{join.lineno}) "
                    f"joins the ranks' gathered parts along dim {grew[0]}, and the batch of what it makes runs along "
                    f"dim {shrank[0]}: {list(got)} came where {list(expected)} was expected ({world} ranks' parts "
                    "stacked where they should sit side by side)", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                    f"join along the batch's dimension: torch.cat({ast.unparse(join.args[0])}, dim={shrank[0]}) (an "
                    "LSTM's or GRU's states are (layers, batch, hidden): their batch is dim 1)")
    return None


def _group_ranks_repeated(ctx: Context, tb) -> Finding | None:
    """new_group refused a ranks list with repeats: the list was built with one entry per item a rank owns (stores,
    shards, experts), so a rank that owns several appears several times."""
    if "duplicate entries" not in tb.message or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    call = next((node for node in walk(statement) if call_name(node) in ("new_group", "new_subgroups_by_enumeration",
                                                                         "DeviceMesh")), None)
    ranks = argument(call, 0, "ranks") if call is not None else None
    if ranks is None:
        return None
    made = made_of(source, ranks, source.function_of(statement))
    built = next((node for value in made for node in walk(value) if isinstance(node, (ast.ListComp, ast.GeneratorExp))),
                 None)
    listed = f"`{ast.unparse(built)[:60]}` (line {built.lineno})" if built is not None else f"`{ast.unparse(ranks)}`"
    return Finding(
        "group-ranks-repeated", f"{frame.location} gives {call_name(call)} the ranks {listed}, one entry per item "
        f"each rank owns, so a rank that owns several is listed several times ({gist(tb.message, 80)})",
        _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        "list each rank once: sorted(set(...)) of the owners, and create every group in the same order on every "
        "rank")


def _bucketized_to_the_rank_before(ctx: Context, tb) -> Finding | None:
    """An index out of range on a rank where the job routes ids to their owner with torch.bucketize over the shards'
    start rows and the default right=False: an id equal to a boundary (the first row of a shard) goes to the bucket
    below, so the rank before it looks up a row one past its own shard."""
    if not OUT_OF_RANGE.search(tb.message) or not ctx.multi_node:
        return None
    for source in parsed_files(ctx):
        for routed in calls_named(source, {"bucketize", "searchsorted"}):
            right = argument(routed, 3 if call_name(routed) == "searchsorted" else 2, "right")
            side = next((item.value for item in routed.keywords if item.arg == "side"), None)
            if len(routed.args) < 2 or right is not None and not (isinstance(right, ast.Constant) and not right.value) \
                    or isinstance(side, ast.Constant) and side.value == "right":
                continue
            bounds = ast.unparse(routed.args[0 if call_name(routed) == "searchsorted" else 1])
            if not re.search(r"start|bound|offset|split|edge", bounds, re.IGNORECASE):
                continue
            return Finding(
                "bucketized-to-the-rank-before", f"`{ast.unparse(routed)[:50]}` ({source.name}:{routed.lineno}) routes "
                f"each id to the shard below the first boundary it does not pass, and with right=False (the default) "
                f"an id equal to a boundary (the first row of a shard) goes to the shard before it: that rank looks "
                f"the id up at its own length, one past its rows ({gist(tb.message, 60)})", _crash_evidence(tb),
                tb.node, _rank_of(ctx, tb),
                f"route with right=True ({ast.unparse(routed)[:-1][:60]}, right=True)), so that a shard's first "
                "row belongs to it; or compute the owner by division (ids // rows_per_rank) where shards are even")
    return None


NEGATIVE_REFUSED = re.compile(r"non-negative|index -\d+ is out of bounds|negative (?:index|dimension|value)")


def _owner_product_wrapped(ctx: Context, tb) -> Finding | None:
    """A negative number refused (bincount's "non-negative", a negative index) where the job maps K-bit keys to
    ranks as `(keys * world) >> K`: in int64 the product passes 2**63 once world * 2**K does, and wraps negative."""
    world = ctx.evidence.expected_world_size
    if not NEGATIVE_REFUSED.search(tb.message) or not world:
        return None
    for source in parsed_files(ctx):
        for shift in (node for node in source.walk() if isinstance(node, ast.BinOp) and isinstance(node.op, ast.RShift)
                      and isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Mult)):
            bits = value_at_world(source, shift.right, source.function_of(shift), world)
            sides = (shift.left.left, shift.left.right)
            if bits is None or not any(identifier(side) in WORLD_NAMES or reads_world_size(side) for side in sides) \
                    or world * 2 ** bits < 2 ** 63:
                continue
            return Finding(
                "owner-product-wrapped", f"`{ast.unparse(shift)[:50]}` ({source.name}:{shift.lineno}) multiplies "
                f"{int(bits)}-bit keys by the world size before shifting: at a world of {world} the product passes "
                f"2**63 for the larger keys and int64 wraps it negative, so some owners come out below 0 "
                f"({gist(tb.message, 60)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                f"divide instead of multiplying: keys // ((1 << {int(bits)}) // world) (clamped to world - 1), or "
                "keys % world; check that every owner is in [0, world) before using it")
    return None


SHORT_COUNT = re.compile(r"(\d+)\s*(?:!=|<|vs\.?|instead of|but expected|expected)\s*(\d+)")
INDEX_PAST = re.compile(r"index (\d+) is out of (?:bounds|range)")
FLOOR_CASTS = {"long", "int", "floor", "to", "trunc", "floor_divide"}


def _owner_index_reaches_world(ctx: Context, tb) -> Finding | None:
    """A count that came out short, or an index equal to the world size, where the job gives each item its rank by
    dividing a coordinate by (extent / world) and rounding down, with no clamp: an item exactly at the upper edge (a
    linspace's endpoint, a value not wrapped) gets rank `world`, which no rank is, so nobody keeps it."""
    world = ctx.evidence.expected_world_size
    short = any(int(a) < int(b) for a, b in SHORT_COUNT.findall(tb.message))
    past = any(int(index) == world for index in INDEX_PAST.findall(tb.message))
    if not world or world < 2 or not (short or past):
        return None
    for source in parsed_files(ctx):
        if calls_named(source, {"clamp", "clamp_", "clip", "clip_", "minimum"}) or any(
                isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and identifier(node.left) in WORLD_NAMES
                for node in source.walk()):
            continue  # the job keeps its owners in range somewhere
        for cast in (node for node in source.walk() if isinstance(node, ast.Call) and call_name(node) in FLOOR_CASTS
                     or isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv)):
            divided = [node for node in walk(cast) if isinstance(node, ast.BinOp)
                       and isinstance(node.op, (ast.Div, ast.FloorDiv))]
            if not divided or not any(identifier(node) in WORLD_NAMES or reads_world_size(node) for node in walk(cast)):
                continue
            if not any(isinstance(node, ast.Compare) and any(isinstance(op, ast.Eq) for op in node.ops)
                       and any(identifier(side) in RANK_NAMES for side in (node.left, *node.comparators))
                       for node in source.walk()):
                continue  # not an ownership test against the rank
            edge = next((node for node in calls_named(source, {"linspace"})), None)
            endpoint = (f"; `{ast.unparse(edge)[:50]}` ({source.name}:{edge.lineno}) includes its endpoint"
                        if edge is not None else "")
            return Finding(
                "owner-index-reaches-world", f"`{ast.unparse(cast)[:60]}` ({source.name}:{cast.lineno}) gives each "
                f"item its rank by dividing a coordinate by (extent / world) and rounding down: an item exactly at the "
                f"upper edge comes out as {world}, a rank that does not exist, so no rank keeps it{endpoint} "
                f"({gist(tb.message, 60)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                "keep every owner in [0, world): clamp it (`.clamp_(max=world - 1)`, min(owner, world - 1)) and keep "
                "coordinates inside [0, extent) (torch.remainder, a grid built without its endpoint)")
    return None


def _pairs_of_an_absent_rank(ctx: Context, tb) -> Finding | None:
    """The job's own check of an all_reduce's result, where each rank adds a term per peer that the peer cancels with
    the opposite sign (secure aggregation's pairwise masks: + where rank < peer, - where not), and adds them under a
    condition of its own (the client is available this round): a rank that skips leaves its partners' terms uncancelled
    in the sum."""
    if not ctx.multi_node or not (path := _job_statements(ctx, tb)):
        return None
    source, statement = path[0]
    scope = source.function_of(statement)
    for reduced in (call for call in calls_named(source, {"all_reduce"}) if call.args and identifier(call.args[0])
                    and source.function_of(call) is scope):
        name = identifier(reduced.args[0])
        for assign in source.assignments_to(name, scope, before=reduced.lineno):
            loop = source.loop_of(assign)
            if not isinstance(loop, ast.For):
                continue
            peers = {identifier(part) for part in walk(loop.target) if isinstance(part, ast.Name)}
            sides = [{identifier(node.test.left), *map(identifier, node.test.comparators)} for node in walk(assign.value)
                     if isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare)]
            signed = any(side & RANK_NAMES and side & peers for side in sides)
            owned = next((test for test in conditions_above(source, loop) if any(
                identifier(node) in RANK_NAMES for node in walk(test))), None)
            if not signed or owned is None:
                continue
            return Finding(
                "pairs-of-an-absent-rank", f"`{name}` ({source.name}:{assign.lineno}) gets a term per peer that the "
                f"peer cancels with the opposite sign, and each rank adds its terms only under `if "
                f"{ast.unparse(owned)[:50]}:`: where a rank skips, the terms its partners added against it stay in "
                f"the all_reduce's sum (line {reduced.lineno}), and the result fails the job's check "
                f"({gist(tb.message, 60)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                "agree who takes part before pairing (all_gather every rank's flag first) and add pair terms only "
                "between ranks that take part, or have the ranks that take part remove the terms they share with the "
                "absent ones before the result is decoded")
    return None


def _share_at_this_world_size(ctx: Context, tb) -> Finding | None:
    """A shape refused where the job divides a whole by the world size (`GLOBAL_BATCH // world`): worked out at this
    run's world size, the shares joined fall short of the whole (the remainder is on no rank), or a share is not a
    multiple of the group the job cuts it into (`n // 2` pairs, a reshape into groups of 4), as it is on one rank."""
    world = ctx.evidence.expected_world_size
    view, differ = VIEW_REFUSED.search(tb.message), TWO_SIZES.search(tb.message)
    if not world or world < 2 or not (view or differ) or not (path := _job_statements(ctx, tb)):
        return None
    source, statement = path[0]
    dims = [int(dim) for dim in view["dims"].split(", ")] if view else []
    known = math.prod(dim for dim in dims if dim != -1)
    size = int(view["size"]) if view else 0
    worlds = _world_names(source)
    halved = [node for made in made_of(source, statement, source.function_of(statement)) for node in walk(made)
              if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv)
              and isinstance(node.right, ast.Constant) and isinstance(node.right.value, int) and node.right.value > 1]
    for division in (node for node in source.walk() if _divides_by(node, worlds)):
        scope = source.function_of(division)
        share, whole = value_at_world(source, division, scope, world), value_at_world(source, division.left, scope, 1)
        if not share or not whole or share != int(share) or whole != int(whole):
            continue
        share, whole = int(share), int(whole)
        said = f"`{ast.unparse(division)}` ({source.name}:{division.lineno})"
        if view and -1 not in dims and whole % world and known * share * world == size * whole:
            return Finding(
                "shares-short-of-the-whole", f"{said} gives each of the {world} ranks {share}, so the shares joined "
                f"hold {share * world}, not the {whole} that `{ast.unparse(statement)[:50]}` ({source.name}:"
                f"{statement.lineno}) expects: the remainder of the division is on no rank "
                f"({gist(tb.message, 60)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                f"give the first {whole} % world ranks one more (n // world + (rank < n % world)), or make "
                f"ceil({whole} / world) on every rank and trim the joined result to {whole}; or size what follows "
                "from what was gathered, not from the whole")
        cut = f"`{ast.unparse(statement)[:50]}`, {source.name}:{statement.lineno}"
        groups = [(dim, cut) for dim in dims if dim > 1 and size % share == 0 and size % known] if view else \
            [(node.right.value, f"`{ast.unparse(node)}`, {source.name}:{node.lineno}") for node in halved
             if {share, share // node.right.value * node.right.value} == {int(differ['a']), int(differ['b'])}
             and value_at_world(source, node.left, source.function_of(node), world) in (None, share)]
        group, cut = next(((k, where) for k, where in groups if share % k and whole % k == 0), (None, None))
        if group is None:
            continue
        bigger = -(-whole // (group * world)) * group * world
        return Finding(
            "share-not-a-multiple", f"{said} is {share} at this world size of {world}, and the job cuts it into "
            f"groups of {group} ({cut}): {share} is not "
            f"a multiple of {group}, as {whole} is on one rank ({gist(tb.message, 60)})", _crash_evidence(tb),
            tb.node, _rank_of(ctx, tb),
            f"keep each rank's share a multiple of {group}: make the whole a multiple of {group} x the world size "
            f"({bigger} here), or let the grouping follow the share (a group that divides it, math.gcd({group}, "
            f"share); or make ceil(share / {group}) groups and trim to the share), and check it at start")
    return _share_seen_not_a_multiple(ctx, tb, source, statement, dims, worlds) if view else None


def _share_seen_not_a_multiple(ctx: Context, tb, source, statement, dims: list[int], worlds) -> Finding | None:
    """The same, where the whole is not a constant (a batch size ramped over the run): the share this rank had is read
    from the failing statement's tensor (its first dimension, as the hooks kept it), made from `n // world`."""
    check = failed_check_of(ctx, tb)
    divisions = [node for made in made_of(source, statement, source.function_of(statement)) for node in walk(made)
                 if _divides_by(node, worlds)]
    held = next((operand for operand in check.operands if operand.shape and len(operand.shape) >= 1),
                None) if check is not None and divisions else None
    if held is None:
        return None
    share = held.shape[0]
    group = next((dim for dim in dims if dim > 1 and share % dim), None)
    if group is None:
        return None
    division = divisions[0]
    return Finding(
        "share-not-a-multiple", f"`{ast.unparse(division)}` ({source.name}:{division.lineno}) gave this rank {share} "
        f"(`{held.expression}` holds {held.shape[0]} rows), and the job cuts it into groups of {group} "
        f"(`{ast.unparse(statement)[:50]}`, {source.name}:{statement.lineno}): {share} is not a multiple of {group} "
        f"at this world size of {ctx.evidence.expected_world_size} ({gist(tb.message, 60)})", _crash_evidence(tb),
        tb.node, _rank_of(ctx, tb),
        f"keep each rank's share a multiple of {group}: make the whole, at every value it takes (each stage of a ramp), "
        f"a multiple of {group} x the world size, or let the grouping follow the share (math.gcd({group}, share)), and "
        "check it where the whole is set")


NUMBER_HAS_NO = re.compile(r"'(?:int|float)' object has no attribute '(\w+)'")


def _sum_of_nothing(ctx: Context, tb) -> Finding | None:
    """A tensor method called on a plain 0 where the value is Python's sum() of a list the job fills item by item,
    skipping some: on a rank whose share gave no item the list is empty, sum([]) is the int 0, and the rank fails
    (or skips backward) where the others go on into the collectives."""
    said = NUMBER_HAS_NO.search(tb.message)
    if not said or not (path := _job_statements(ctx, tb)) or not ctx.multi_node:
        return None
    source, statement = path[0]
    scope = source.function_of(statement)
    for used in (node for node in walk(statement) if isinstance(node, ast.Attribute) and node.attr == said[1]):
        summed = next((node for made in made_of(source, used.value, scope) for node in walk(made)
                       if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "sum"
                       and len(node.args) == 1 and not node.keywords and identifier(node.args[0])), None)
        if summed is None:
            continue
        listed = identifier(summed.args[0])
        where = source.function_of(summed)
        started = any(isinstance(assign.value, ast.List) and not assign.value.elts
                      for assign in source.assignments_to(listed, where))
        if not started:
            continue
        return Finding(
            "sum-of-nothing", f"`{ast.unparse(summed)}` ({source.name}:{summed.lineno}) is the int 0 where "
            f"`{listed}` is empty: the job appends to it item by item and skips some, and on this rank's share none "
            f"was kept, so `.{said[1]}` met a number, not a tensor; the other ranks went on into the collectives "
            f"({gist(tb.message, 60)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
            f"start the sum from a tensor that stays in the graph (sum({listed}, outputs.sum() * 0), torch.stack"
            f"({listed}).sum() guarded by a zero of the outputs) so that every rank has a loss and runs backward, "
            "and give the skipped items their own term (a background-only loss) rather than dropping them")
    return None


ZERO_DIM_JOINED = re.compile(r"zero-dimensional tensor \(at position (\d+)\) cannot be concatenated")


def _squeezed_to_a_scalar(ctx: Context, tb) -> Finding | None:
    """torch.cat refused a 0-d part, where the job squeezes its per-rank results with no dimension named: a rank whose
    share held one item loses the item dimension with the others of size 1, and its part is a scalar."""
    position = ZERO_DIM_JOINED.search(tb.message)
    if not position or not ctx.multi_node:
        return None
    for source in parsed_files(ctx):
        squeezed = next((call for call in calls_named(source, {"squeeze"}) if not call.keywords and (
            not call.args if isinstance(call.func, ast.Attribute) and called_on(call) != "torch" else len(call.args) == 1
        )), None)
        if squeezed is None:
            continue
        return Finding(
            "squeezed-to-a-scalar", f"the part at position {position[1]} is 0-d: `{ast.unparse(squeezed)[:50]}` "
            f"({source.name}:{squeezed.lineno}) drops every dimension of size 1, and where a rank's share held one "
            f"item its item dimension goes too, so its part is a scalar ({gist(tb.message, 60)})",
            _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
            "squeeze only the dimension you mean (.squeeze(-1)), or .reshape(-1) / torch.atleast_1d the result "
            "before it is gathered and joined")
    return None


def _whole_beside_a_part(ctx: Context, tb) -> Finding | None:
    """Two sizes that differ by the world size (32 against 16 at a world of 2), where the job joins every rank's
    gathered part into one tensor: the whole of the ranks' rows met this rank's own part in one operation."""
    world = ctx.evidence.expected_world_size
    sizes = TWO_SIZES.search(tb.message)
    if not sizes or not world or world < 2 or not ctx.multi_node:
        return None
    big, small = sorted((int(sizes["a"]), int(sizes["b"])), reverse=True)
    if big != small * world:
        return None
    for source in parsed_files(ctx):
        lists = _gathered_lists(source)
        joined = next((call for call in calls_named(source, {"cat", "concat", "concatenate", "vstack"})
                       if call.args and identifier(call.args[0]) in lists), None)
        if joined is None:
            continue
        return Finding(
            "whole-beside-a-part", f"`{ast.unparse(joined)[:50]}` ({source.name}:{joined.lineno}) joins every rank's "
            f"gathered part into {big} rows, and the job then meets it with this rank's own {small} "
            f"({gist(tb.message, 70)}): the ranks' whole is used beside a single rank's part",
            _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
            "where it meets this rank's values, take this rank's slice of the whole (whole[rank * n:(rank + 1) * n]) "
            "and keep the whole for global statistics only (a mean, a normaliser); or gather the other side too, "
            "with an autograd-aware gather (torch.distributed.nn.functional.all_gather) where gradients must flow")
    return None


PROBABILITIES_REFUSED = re.compile(r"(?:do not|don't|must|should) sum to 1|probabilit\w* (?:are not|must be|do not)|"
                                   r"invalid multinomial distribution|not a valid probability|sum of probabilities")
NORMALISED = {"softmax", "sigmoid", "normalize", "dirichlet"}


def _distributions_summed(ctx: Context, tb) -> Finding | None:
    """A distribution refused (its probabilities do not sum to 1) where the job sums every rank's distribution with
    all_reduce and never divides by the number of ranks: each row sums to the world size."""
    if not PROBABILITIES_REFUSED.search(tb.message) or not ctx.multi_node:
        return None
    for source in parsed_files(ctx):
        for reduced in (call for call in calls_named(source, {"all_reduce"}) if call.args
                        and identifier(call.args[0])):
            if not reduced_with(reduced, "SUM"):
                continue
            name, scope = identifier(reduced.args[0]), source.function_of(reduced)
            made = next((node for value in made_of(source, reduced.args[0], scope) for node in walk(value)
                         if call_name(node) in NORMALISED), None)
            divided = any(isinstance(node, ast.AugAssign) and identifier(node.target) == name
                          and isinstance(node.op, ast.Div) or isinstance(node, ast.BinOp)
                          and isinstance(node.op, ast.Div) and identifier(node.left) == name
                          for node in walk(scope) if getattr(node, "lineno", 0) >= reduced.lineno)
            if made is None or divided:
                continue
            return Finding(
                "distributions-summed", f"`{name}` is a distribution on each rank (`{ast.unparse(made)[:40]}`, "
                f"{source.name}:{made.lineno}), summed over the ranks by all_reduce ({source.name}:{reduced.lineno}) "
                f"and never divided by their number: each row sums to the world size, not 1 "
                f"({gist(tb.message, 50)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                f"average it: divide `{name}` by dist.get_world_size() after the SUM (ReduceOp.AVG does it on NCCL; "
                "gloo has no AVG), or renormalise each row before it is used as a distribution")
    return None


TOO_FEW_POINTS = re.compile(r"at least (?:one|two|\d+) data points?|requires at least (?:one|two|\d+)|"
                            r"need at least (?:two|\d+) (?:values|points|samples)")


def _statistic_of_a_small_share(ctx: Context, tb) -> Finding | None:
    """A statistic that needs several values (quantiles, a variance) refused on a rank's share, in a job that splits
    its data over the ranks and gathers the per-rank statistics afterwards: more ranks leave each too few values."""
    if not TOO_FEW_POINTS.search(tb.message) or not ctx.multi_node or not (path := _job_statements(ctx, tb)):
        return None
    source, statement = path[0]
    gathers = calls_named(source, set(GATHERS) | {"gather", "all_gather_into_tensor"})
    worlds = _world_names(source)
    split = next((node for node in source.walk() if isinstance(node, ast.Subscript) and any(
        _split_by_world(part, worlds) or identifier(part) in RANK_NAMES for part in walk(node.slice))), None)
    if not gathers or split is None:
        return None
    return Finding(
        "statistic-of-a-small-share", f"`{ast.unparse(statement)[:60]}` ({source.name}:{statement.lineno}) needs "
        f"several values, and this rank's share has too few: the job splits its data over the ranks "
        f"(`{ast.unparse(split)[:40]}`, line {split.lineno}) and takes the statistic on each share before it gathers "
        f"(line {gathers[0].lineno}), so the more ranks, the fewer values each has ({gist(tb.message, 50)})",
        _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        "gather the raw values from every rank first and compute the statistic once over all of them; or guard the "
        "per-rank statistic for shares too small (report the single value, or skip it)")


SIZES_DISAGREE = re.compile(r"must match|size mismatch|shape mismatch|does not match|doesn't match|"
                            r"not broadcastable|could not broadcast|Expected .* size|out of (?:range|bounds)")


def _columns_sharded_differently(ctx: Context, tb) -> Finding | None:
    """Sizes that do not agree, in a job that takes its rank's share of parallel columns two ways in one function:
    some strided (`ids[rank::world]`), some in blocks (`np.array_split(lengths, world)[rank]`). On one rank both are
    the whole; on more, the i-th item of one column is no longer the i-th of the other."""
    if not SIZES_DISAGREE.search(tb.message) or not ctx.multi_node:
        return None
    for source in parsed_files(ctx):
        worlds, ranks = _world_names(source), _ranks_as_read(source)
        for function in (node for node in source.walk() if isinstance(node, (ast.FunctionDef, ast.Module))):
            strided, blocks = [], []
            for assign in (node for node in function.body if isinstance(node, ast.Assign)):
                value = assign.value
                if isinstance(value, ast.Subscript) and _strided_by_world(value.slice, worlds):
                    strided.append(assign)
                elif isinstance(value, ast.Subscript) and any(identifier(part) in ranks for part in walk(value.slice)) \
                        and (isinstance(value.value, ast.Call) and call_name(value.value) in SPLITS | {"array_split"}
                             or isinstance(value.slice, ast.Slice) and value.slice.lower is not None
                             and any(identifier(part) in ranks for part in walk(value.slice.lower))):
                    blocks.append(assign)
            if not strided or not blocks:
                continue
            one, other = strided[0], blocks[0]
            return Finding(
                "columns-sharded-differently", f"`{ast.unparse(one)[:50]}` ({source.name}:{one.lineno}) deals items "
                f"to the ranks strided, and `{ast.unparse(other)[:60]}` (line {other.lineno}) in blocks: on more than "
                f"one rank the i-th item of one is no longer the i-th of the other, and their sizes stop agreeing "
                f"({gist(tb.message, 60)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                "shard every column with the same index set (one `idx = range(rank, n, world)` applied to each, or "
                "shard whole records rather than columns), or recompute what a column derives from the shard's own "
                "items (len(tokens) for the lengths)")
    return None


TARGET_PAST = re.compile(r"Target (-?\d+) is out of bounds")
MATMUL_REFUSED = re.compile(r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")


def _labels_offset_past_the_logits(ctx: Context, tb) -> Finding | None:
    """A class target out of bounds on a rank above 0, where the job offsets its labels by `rank * size`: against
    logits of every rank's gathered rows the size must be the rows each rank adds (its own batch), and against its
    own logits there is no offset at all."""
    past = TARGET_PAST.search(tb.message)
    rank = _rank_of(ctx, tb)
    if not past or not rank or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope = source.function_of(statement)
    ranks = _ranks_as_read(source)
    for call in (node for node in walk(statement) if call_name(node) in ("cross_entropy", "nll_loss") and
                 len(node.args) > 1):
        offset = next((node for made in made_of(source, call.args[1], scope) for node in walk(made)
                       if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)
                       and {identifier(node.left), identifier(node.right)} & ranks), None)
        if offset is None:
            continue
        size = offset.right if identifier(offset.left) in ranks else offset.left
        if _made_by_a_gather(source, call.args[0], scope):
            told = (f"the logits hold every rank's gathered rows, and `{ast.unparse(offset)}` (line {offset.lineno}) "
                    f"offsets rank {rank}'s labels by `{ast.unparse(size)}`, which is not the number of rows each rank "
                    f"adds: its first label, {past[1]}, is past them",
                    f"offset by the rows this rank gave the gather: labels = torch.arange(B) + rank * B with B = the "
                    "local batch's size (x.shape[0]), equal on every rank (drop_last=True)")
        else:
            told = (f"the logits are this rank's own, and `{ast.unparse(offset)}` (line {offset.lineno}) offsets its "
                    f"labels as if they indexed every rank's rows: rank {rank}'s first label, {past[1]}, is past them",
                    "do not offset the labels by the rank where the logits are the rank's own (torch.arange(B)); "
                    "offset only against logits over every rank's gathered rows")
        return Finding("labels-offset-past-the-logits", f"{told[0]} ({gist(tb.message, 40)})", _crash_evidence(tb),
                       tb.node, rank, told[1])
    return None


def _joined_into_the_features(ctx: Context, tb) -> Finding | None:
    """A matrix product refused where one side's width is the world size times the other's, and the job joins the
    ranks' gathered parts along a dimension other than the samples' (torch.stack(parts, dim=1).flatten(1),
    torch.cat(parts, dim=1)): the ranks' rows became wider rows."""
    world = ctx.evidence.expected_world_size
    shapes = MATMUL_REFUSED.search(tb.message)
    if not shapes or not world or world < 2:
        return None
    inner, outer = int(shapes[2]), int(shapes[3])
    if max(inner, outer) != min(inner, outer) * world:
        return None
    for source in parsed_files(ctx):
        lists = _gathered_lists(source) | {identifier(call.args[0]): call for call in calls_named(source, {"all_gather"})
                                           if call.args and identifier(call.args[0])}
        for join in calls_named(source, {"stack", "cat", "concat", "hstack"}):
            dim = argument(join, 1, "dim")
            if not join.args or identifier(join.args[0]) not in lists or call_name(join) != "hstack" and not (
                    isinstance(dim, ast.Constant) and dim.value not in (0, None)):
                continue
            shown = source.parent(join) if isinstance(source.parent(join), ast.Attribute) else join
            shown = source.parent(shown) if isinstance(source.parent(shown), ast.Call) else shown
            return Finding(
                "joined-into-the-features", f"`{ast.unparse(shown)[:50]}` ({source.name}:{join.lineno}) joins the "
                f"ranks' gathered parts along a dimension other than the samples', so each row became {world} rows "
                f"side by side: a width of {max(inner, outer)} met {min(inner, outer)} ({gist(tb.message, 60)})",
                _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                f"join along the samples: torch.cat({identifier(join.args[0])}, dim=0) (or torch.stack(..., 0)"
                ".flatten(0, 1)), keeping each row's width")
    return None


def _padding_index_of_the_whole(ctx: Context, tb) -> Finding | None:
    """nn.Embedding refusing its padding_idx where the table is this rank's rows of a vocabulary split over the ranks:
    the padding id counts in the whole vocabulary, and lies outside every shard (or in one)."""
    if "Padding_idx must be within" not in tb.message or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope = source.function_of(statement)
    per_rank = _world_names(source) | _ranks_as_read(source) | set(_assigned_from(source, RANK_NAMES, "get_rank"))
    for table in (node for node in walk(statement) if call_name(node) == "Embedding" and node.args):
        rows = made_of(source, table.args[0], scope)
        if not any(identifier(node) in per_rank or reads_world_size(node) for made in rows for node in walk(made)):
            continue
        padding = argument(table, 2, "padding_idx")
        return Finding(
            "padding-index-of-the-whole", f"`{ast.unparse(table)[:60]}` ({frame.location}) is this rank's rows of a "
            f"vocabulary split over the ranks, and its padding index `{ast.unparse(padding) if padding else '?'}` "
            f"counts in the whole vocabulary: it lies outside this shard ({gist(tb.message, 50)})",
            _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
            "translate it to the shard: padding_idx = pad_id - start on the rank whose [start, end) holds it, None "
            "on the others (or drop padding_idx and zero the pad row on its owner)")
    return None


BOUNDARY_CALLS = {"nonzero", "where", "argwhere", "diff", "searchsorted"}


def _stream_cut_mid_record(ctx: Context, tb) -> Finding | None:
    """split sizes that do not add up on a rank whose tokens are a slice of a packed stream cut at a fixed offset,
    the sizes found from the record starts inside it: a slice that starts inside a record leaves its head in no
    size."""
    if not SPLIT_SIZES_REFUSED.search(tb.message) or not ctx.multi_node or not (path := _job_statements(ctx, tb)):
        return None
    source, statement = path[0]
    scope = source.function_of(statement)
    for split in (node for node in walk(statement) if call_name(node) == "split" and len(node.args) > 1):
        sizes = made_of(source, split.args[1], scope)
        found = next((node for made in sizes for node in walk(made) if call_name(node) in BOUNDARY_CALLS), None)
        if found is None:
            continue
        for at_source, at_scope, passed in _passed_from_callers(path, split.args[0]):
            ranks = _ranks_as_read(at_source)
            cut = next((node for made in made_of(at_source, passed, at_scope) for node in walk(made)
                        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice)
                        and node.slice.lower is not None and any(identifier(part) in ranks
                                                                 for part in walk(node.slice.lower))), None)
            if cut is None:
                continue
            return Finding(
                "split-mid-record", f"`{ast.unparse(split.args[0])}` is this rank's slice of a stream cut at a fixed "
                f"offset (`{ast.unparse(cut)[:40]}`, {at_source.name}:{cut.lineno}), and the sizes come from the "
                f"record starts found inside it (`{ast.unparse(found)[:40]}`, line {found.lineno}): where the slice "
                f"starts inside a record, its head is in no size ({gist(tb.message, 50)})", _crash_evidence(tb),
                tb.node, _rank_of(ctx, tb),
                "cut the stream at record boundaries (move each rank's start and end to the next record start, or "
                "deal whole records), or count the leading part as a record of its own (position 0 as a boundary)")
    return None


REDUCTIONS = {"sum", "mean", "prod", "amax", "amin", "max", "min", "norm", "all", "any", "item"}


def _gathered_vector_read_as_a_number(ctx: Context, tb) -> Finding | None:
    """float()/int()/.item() refused a tensor of several elements where the value is the ranks' gathered parts joined:
    one number per rank, which only is a single number on one rank."""
    if "only one element tensors can be converted" not in tb.message or not (path := _job_statements(ctx, tb)):
        return None
    source, statement = path[0]
    scope = source.function_of(statement)
    for read in (node for node in walk(statement) if isinstance(node, ast.Call) and (
            call_name(node) in ("float", "int", "bool") and node.args or call_name(node) == "item")):
        value = read.args[0] if read.args else read.func.value
        if not _made_by_a_gather(source, value, scope) or any(
                call_name(node) in REDUCTIONS and any(call_name(part) in JOINS | {"stack"} for part in walk(node))
                for made in made_of(source, value, scope) for node in walk(made)):
            continue  # the joined parts reduced to one number on the way
        return Finding(
            "gathered-vector-read-as-a-number", f"`{ast.unparse(value)[:30]}` ({source.name}:{statement.lineno}) holds "
            f"one value per rank, gathered and joined, and `{ast.unparse(read)[:30]}` reads it as one number: that "
            f"holds only on one rank ({gist(tb.message, 50)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
            f"reduce it first ({ast.unparse(value)[:30]}.sum(), or all_reduce with SUM instead of all_gather), then "
            "read the single number")
    return None


def _entry_made_by_its_owner_only(ctx: Context, tb) -> Finding | None:
    """A KeyError on a dict whose entries the job sets only under a condition on the rank (the owner of a task, a
    shard) and never sends to the others: each rank holds only its own entries."""
    if tb.short_type != "KeyError" or not ctx.multi_node or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    ranks = _ranks_as_read(source)
    shared = calls_named(source, {"broadcast_object_list", "all_gather_object", "broadcast", "scatter_object_list"})
    for looked in (node for node in walk(statement) if isinstance(node, ast.Subscript) and identifier(node.value)):
        table = identifier(looked.value)
        filled = [node for node in source.walk() if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Subscript) and identifier(target.value) == table for target in node.targets)]
        owned = [(assign, test) for assign in filled for test in conditions_above(source, assign)[:3]
                 if any(identifier(part) in ranks for part in walk(test))]
        if not filled or len(owned) != len(filled):
            continue
        if any(table in names_in(call) for call in shared):
            continue
        assign, test = owned[0]
        return Finding(
            "entry-made-by-its-owner-only", f"`{table}`'s entries are set only where `{ast.unparse(test)[:50]}` holds "
            f"({source.name}:{assign.lineno}), on the rank that owns each, and never sent to the others: rank "
            f"{_rank_of(ctx, tb)} looked up an entry another rank made ({tb.short_type}: {gist(tb.message, 30)})",
            _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
            "share each entry once its owner makes it (broadcast_object_list([entry], src=owner), or all_gather_object "
            "of every rank's new entries), or have every rank make every entry; or look up only the entries this "
            "rank holds")
    return None


SENTINELS = {"MAX": ("inf", "float('inf')"), "MIN": ("-inf", "float('-inf')")}


def _sentinel_wins_the_merge(ctx: Context, tb) -> Finding | None:
    """A tensor started at +inf (meaning 'not yet seen') merged over the ranks with MAX, or at -inf with MIN: where
    another rank has not seen an entry its sentinel wins over the value this rank measured, and inf/nan follow."""
    if not re.search(r"\b(?:nan|inf|invalid|non-?finite|probability)", tb.message, re.IGNORECASE) or not ctx.multi_node:
        return None
    for source in parsed_files(ctx):
        for reduced in (call for call in calls_named(source, {"all_reduce"}) if call.args):
            kind = next((name for name in SENTINELS if reduced_with(reduced, name)), None)
            if kind is None:
                continue
            target = ast.unparse(reduced.args[0])
            started = next((node for node in source.walk() if isinstance(node, ast.Assign)
                            and any(ast.unparse(t) == target for t in node.targets)
                            and _infinite(node.value, kind == "MIN")), None)
            if started is None:
                continue
            sign = "-inf" if kind == "MIN" else "+inf"
            return Finding(
                "sentinel-wins-the-merge", f"`{target}` starts at {sign} for entries not yet seen ({source.name}:"
                f"{started.lineno}) and is merged over the ranks with {kind} (line {reduced.lineno}): where another "
                f"rank has not seen an entry, its {sign} wins over the value this rank measured, and the infinities "
                f"reach the arithmetic ({gist(tb.message, 50)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                f"start unseen entries at the value that loses the {kind} ({'+inf' if kind == 'MIN' else '-inf'}, or "
                "a mask of the entries seen: all_reduce values*mask and mask with SUM and divide), and give entries "
                "nobody saw a finite default before they are used")
    return None


def _infinite(value: ast.AST, negative: bool) -> bool:
    """`float('inf')`, `math.inf`, `torch.full(..., float('inf'))` (with the sign asked for) somewhere in `value`."""
    text = ast.unparse(value)
    found = re.search(r"float\(['\"](-?)inf['\"]\)|(-?)\s*(?:math|torch|np|numpy)\.inf\b", text)
    return bool(found) and bool((found.group(1) or found.group(2) or "").strip()) == negative


SIZE_CHECKED = re.compile(r"\bbytes\b|\bbudget\b|\b[KMG]i?B\b|too (?:large|big)|file size", re.IGNORECASE)


def _saved_view_of_the_whole(ctx: Context, tb) -> Finding | None:
    """The job's own size check failing after torch.save of a rank's slice of a tensor (`table[start:end]`): a slice
    is a view, and torch.save writes the storage it views, the whole tensor, into every rank's file."""
    if not SIZE_CHECKED.search(tb.message) or not ctx.multi_node:
        return None
    for source in parsed_files(ctx):
        for save in (call for call in calls_named(source, {"save"}) if call.args and called_on(call) == "torch"):
            scope = source.function_of(save)
            sliced = next((node for made in made_of(source, save.args[0], scope) for node in walk(made)
                           if isinstance(node, ast.Subscript) and (isinstance(node.slice, ast.Slice) or isinstance(
                               node.slice, ast.Tuple) and any(isinstance(part, ast.Slice) for part in node.slice.elts))
                           and not isinstance(source.parent(node), ast.Attribute)), None)
            if sliced is None or calls_named(source, {"clone", "contiguous", "copy"}) and any(
                    call_name(node) in ("clone", "contiguous", "copy") for made in made_of(source, save.args[0], scope)
                    for node in walk(made)):
                continue
            return Finding(
                "saved-view-of-the-whole", f"`{ast.unparse(sliced)[:40]}` ({source.name}:{sliced.lineno}) is a view "
                f"of the whole tensor, and torch.save ({source.name}:{save.lineno}) writes the storage a view shares: "
                f"each rank's file holds the whole tensor, not its slice ({gist(tb.message, 60)})",
                _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                f"save a copy that owns only its rows: {ast.unparse(sliced)[:40]}.clone() (or build only this "
                "rank's part)")
    return None


def _node_budget_over_the_world(ctx: Context, tb) -> Finding | None:
    """A DataLoader refused at a worker count the job makes by dividing a per-node budget by the whole world size:
    at this world size it is 0 (the budget is per node; the node's processes are LOCAL_WORLD_SIZE)."""
    world = ctx.evidence.expected_world_size
    if not world or not re.search(r"num_workers|prefetch_factor|persistent_workers", tb.message) \
            or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope = source.function_of(statement)
    for loader in (node for node in walk(statement) if call_name(node) == "DataLoader"):
        workers = argument(loader, 99, "num_workers")
        division = next((node for made in made_of(source, workers, scope) for node in walk(made)
                         if _divides_by(node, _world_names(source)) or isinstance(node, ast.BinOp) and isinstance(
                             node.op, ast.FloorDiv) and any(reads_world_size(part) for part in walk(node.right))),
                        None) if workers else None
        if division is None or value_at_world(source, division, scope, world) != 0 or any(
                env_read(part) == "LOCAL_WORLD_SIZE" or "local" in (identifier(part) or "").lower()
                for part in walk(division.right)):
            continue  # divided by the node's own processes: not this mistake
        return Finding(
            "node-budget-over-the-world", f"`{ast.unparse(division)[:60]}` ({source.name}:{division.lineno}) divides a "
            f"node's worker budget by the whole job's world size: at {world} ranks it is 0 workers, which the "
            f"DataLoader's other options refuse ({gist(tb.message, 50)})", _crash_evidence(tb), tb.node,
            _rank_of(ctx, tb),
            "divide a per-node budget by the processes of the node (LOCAL_WORLD_SIZE), keep at least one "
            "(max(1, ...)), and pass prefetch_factor only when num_workers > 0")
    return None


RAN_OUT = re.compile(r"ran out|run out|exhausted|StopIteration|no more (?:batches|items|data)", re.IGNORECASE)


def _length_of_the_whole(ctx: Context, tb) -> Finding | None:
    """The job ran out of batches, and its own sampler yields this rank's share (`batches[self.rank::self.world]`)
    while its __len__ counts every rank's: a loop sized by len() asks for world times what comes."""
    if not (RAN_OUT.search(tb.message) or tb.short_type == "StopIteration") or not ctx.multi_node:
        return None
    for source in parsed_files(ctx):
        worlds = _world_names(source) | {"world", "world_size", "num_replicas"}
        for cls in (node for node in source.walk() if isinstance(node, ast.ClassDef)):
            methods = {item.name: item for item in cls.body if isinstance(item, ast.FunctionDef)}
            if "__iter__" not in methods or "__len__" not in methods:
                continue
            shared = any(_strided_by_world(node, worlds) for node in walk(methods["__iter__"]))
            counted = any(identifier(node) in worlds for node in walk(methods["__len__"]))
            if not shared or counted:
                continue
            length = methods["__len__"]
            return Finding(
                "length-of-the-whole", f"{cls.name}.__iter__ yields this rank's share (every world-th item), but "
                f"{cls.name}.__len__ ({source.name}:{length.lineno}) counts every rank's: a loop sized by len() asks "
                f"for {ctx.evidence.expected_world_size} times what comes ({gist(tb.message, 50)})",
                _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                f"make {cls.name}.__len__ count this rank's share, as __iter__ yields it (len(items[self.rank::"
                "self.world])), or drive the loop by iterating rather than by range(len(...))")
    return None


def _replicated_counted_per_rank(ctx: Context, tb) -> Finding | None:
    """The job's own count check coming out over the expected total, where each rank counts the parameters it holds
    (`sum(p.numel() for p in model.parameters())`) and the counts are summed over the ranks: parameters every rank
    holds whole (norms, biases that are not split) are counted once per rank."""
    over = [(int(a), int(b)) for a, b in SHORT_COUNT.findall(tb.message)] + [
        (int(a), int(b)) for a, b in re.findall(r"(\d+)\D{1,60}?(?:but|expected|describes|config)\D{1,40}?(\d+)",
                                                tb.message)]
    if not any(a > b for a, b in over) or not ctx.multi_node:
        return None
    for source in parsed_files(ctx):
        for reduced in (call for call in calls_named(source, {"all_reduce", "reduce"}) if call.args):
            scope = source.function_of(reduced)
            counted = next((node for made in made_of(source, reduced.args[0], scope) for node in walk(made)
                            if call_name(node) == "numel" and any(call_name(part) in ("parameters", "named_parameters",
                                                                                        "state_dict", "values")
                                                                    for part in walk(made))), None)
            if counted is None:
                continue
            return Finding(
                "replicated-counted-per-rank", f"each rank counts the parameters it holds and the counts are summed "
                f"over the ranks ({source.name}:{reduced.lineno}): parameters every rank holds whole (norms, biases "
                f"that are not split) are counted once per rank, so the total comes out over the model's "
                f"({gist(tb.message, 60)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                "count a sharded parameter on every rank and a replicated one on one rank only (or divide its count "
                "by the world size) before the sum; or compare per-rank counts with what each rank's shard should "
                "hold")
    return None


REPLICA_STATE = re.compile(r"replica|weight|param|checksum|digest|hash|state|model", re.IGNORECASE)


def _renormalized_by_forward(ctx: Context, tb) -> Finding | None:
    """Replicas that the job's own check finds different after a forward on each rank's own data, where an
    nn.Embedding has max_norm: every lookup renormalizes the rows it touches in place, and ranks touch different
    rows."""
    if not re.search(r"disagree|differ|mismatch|not (?:the )?same|diverg", tb.message, re.IGNORECASE) \
            or not REPLICA_STATE.search(tb.message) or not ctx.multi_node:
        return None  # a shape or size mismatch is not the weights drifting apart
    for source in parsed_files(ctx):
        table = next((call for call in calls_named(source, {"Embedding", "EmbeddingBag", "embedding"})
                      if argument(call, 99, "max_norm") is not None), None)
        if table is None:
            continue
        return Finding(
            "renormalized-by-forward", f"`{ast.unparse(table)[:50]}` ({source.name}:{table.lineno}) has max_norm: "
            f"every forward renormalizes, in place, the rows it looks up, and each rank looks up its own data's rows, "
            f"so the replicas' weights drift apart ({gist(tb.message, 60)})", _crash_evidence(tb), tb.node,
            _rank_of(ctx, tb),
            "keep the weights out of reach of the forward: take the state and its checksums before it (or run it on "
            "a deepcopy), or clamp the looked-up vectors yourself (F.normalize / torch.renorm on the output) instead "
            "of max_norm")
    return None


def _empty_at_this_world_size(ctx: Context, tb) -> Finding | None:
    """A value the job's own check refused (nan, an empty result) that comes from a slice whose bounds, worked out at
    this run's world size, leave nothing (`ordered[k:n - k]` with k = max(1, ...) and n = 2 parts): the formula holds
    only for more ranks."""
    world = ctx.evidence.expected_world_size
    if not world or not (path := _job_statements(ctx, tb)):
        return None
    source, statement = path[0]
    scope = source.function_of(statement)
    own = {node.name: node for node in source.walk() if isinstance(node, ast.FunctionDef)}
    checked = [statement, *conditions_above(source, statement)]  # a raise: what its `if` tested
    for call in (node for part in checked for made in made_of(source, part, scope) for node in walk(made)
                 if isinstance(node, ast.Call) and call_name(node) in own and own[call_name(node)] is not scope):
        function, at = own[call_name(call)], source.statement_of(call)
        for cut in (node for node in walk(function) if isinstance(node, ast.Subscript)
                    and isinstance(node.slice, ast.Slice) and node.slice.upper is not None and node.slice.step is None):
            lower = value_at_world(source, cut.slice.lower, function, world, [(source, at)]) \
                if cut.slice.lower is not None else 0
            upper = value_at_world(source, cut.slice.upper, function, world, [(source, at)])
            if lower is None or upper is None or lower < upper or upper < 0:
                continue
            more = [value_at_world(source, bound, function, world + 2, [(source, at)]) if bound is not None else 0
                    for bound in (cut.slice.lower, cut.slice.upper)]
            if None in more or more[0] >= more[1]:
                continue  # empty at any world size: nothing to do with the number of ranks
            return Finding(
                "empty-at-this-world-size", f"`{ast.unparse(cut)[:40]}` ({source.name}:{cut.lineno}, in "
                f"{function.name}()) is empty at this run's world size of {world}: its bounds come to "
                f"{lower:g} and {upper:g} there (the job works them out from the number of ranks' parts), so what is "
                f"made of it (a mean of nothing is nan) fails {tb.user_frame().location}", _crash_evidence(tb),
                tb.node, _rank_of(ctx, tb),
                "make the formula hold for the smallest worlds the job may run at: bound what is cut off so that "
                "something is left (e.g. k = min(k, (n - 1) // 2)), fall back to another rule (a plain mean, the "
                "median) below the size it needs, or run with more ranks")
    return None


GLOO_SIZE_REFUSED = re.compile(r"ProcessGroupGloo::(?P<op>\w+): invalid tensor size at index \d+ \(expected "
                               r"\((?P<expected>[\d, ]*)\), got \((?P<got>[\d, ]*)\)\)")


def _gloo_size_refused(ctx: Context, tb) -> Finding | None:
    """gloo's own check of a collective's sizes: an all_gather_into_tensor output made in the stacked layout
    (world, *shape) that gloo splits along dim 0 into pieces of the input's shape; a scatter list of uneven blocks
    (tensor_split of a length the world size does not divide) against one receive size."""
    if (refused := GLOO_SIZE_REFUSED.search(tb.message)) is None or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    expected = [int(part) for part in refused["expected"].replace(" ", "").split(",") if part]
    got = [int(part) for part in refused["got"].replace(" ", "").split(",") if part]
    if refused["op"] == "allgather" and got[1:] == expected and got:
        return Finding(
            "gathered-into-a-stacked-output", f"all_gather_into_tensor at {frame.location} was given an output in the "
            "stacked layout (a leading dim of the ranks), and gloo cuts its output along dim 0 into pieces of the "
            f"input's shape: it expected ({', '.join(map(str, expected))}) and found ({', '.join(map(str, got))})",
            _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
            "make the output in the concatenated layout, torch.empty((world * n, *rest)), and view it as (world, n, "
            "*rest) afterwards; or all_gather into a list of tensors and torch.stack them")
    if refused["op"] == "scatter":
        scope = source.function_of(statement)
        listed = next((argument(call, 1, "scatter_list") for call in walk(statement) if call_name(call) == "scatter"),
                      None)
        split = next((node for made in (made_of(source, listed, scope) if listed is not None else [])
                      for node in walk(made) if call_name(node) in ("tensor_split", "array_split", "chunk", "split")),
                     None)
        if split is not None:
            return Finding(
                "scattered-uneven-blocks", f"`{ast.unparse(split)[:50]}` (line {split.lineno}) cuts the data into "
                f"blocks of different sizes (a length the world size does not divide), and scatter at "
                f"{frame.location} needs every block the size each rank receives ({', '.join(map(str, expected))}, "
                f"got {', '.join(map(str, got))})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                "pad every block to ceil(n / world) (a sentinel such as -1, dropped after receipt) and receive that "
                "size; or broadcast the whole list (or its seed) and let each rank take its own slice; or use "
                "scatter_object_list, which takes uneven lists")
    return None


def _gathered_tensors_compared(ctx: Context, tb) -> Finding | None:
    """Python's max()/min()/sorted() over a list of gathered tensors: they compare whole tensors with `>`, and the
    truth of a tensor of several values is refused. With one rank the list has one item and nothing is compared."""
    if "Boolean value of Tensor with more than one value is ambiguous" not in tb.message \
            or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope = source.function_of(statement)
    compared = next((call for call in walk(statement) if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                     and call.func.id in ("max", "min", "sorted") and call.args
                     and _made_by_a_gather(source, call.args[0], scope)), None)
    if compared is None:
        return None
    return Finding(
        "gathered-tensors-compared", f"`{ast.unparse(compared)[:40]}` ({frame.location}) compares the ranks' gathered "
        f"tensors with Python's {compared.func.id}(): each comparison of two tensors of several values gives a tensor, "
        "whose truth is refused; with one rank there is nothing to compare, so it only fails across ranks",
        _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        f"reduce with tensor operations: torch.stack({ast.unparse(compared.args[0])}).max(dim=0) (values and the "
        "rank of each), or pick by a number (key=lambda t: t.sum().item()); or all_reduce with ReduceOp.MAX")


def _nothing_in_the_buffer(ctx: Context, tb) -> Finding | None:
    """torch.frombuffer of an empty buffer: a rank whose share gave nothing to send (no duplicate found, no record)
    makes an empty payload, which frombuffer refuses."""
    if "buffer length (0)" not in tb.message or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    made = next((call for call in walk(statement) if call_name(call) == "frombuffer"), None)
    if made is None:
        return None
    rank = _rank_of(ctx, tb)
    return Finding(
        "nothing-in-the-buffer", f"`{ast.unparse(made)[:50]}` ({frame.location}) was given an empty buffer on "
        f"{_who_raised(ctx, tb, rank)}, whose share had nothing to send, and torch.frombuffer refuses a buffer of "
        "length 0", _crash_evidence(tb), tb.node, rank,
        "make the empty case a tensor of its own: torch.empty(0, dtype=torch.uint8) when the payload is empty (or "
        "torch.tensor(list(payload), dtype=torch.uint8)), and let that rank still take part in the collectives with "
        "a length of 0")


P2P_CALLS = {*POINT_TO_POINT, "P2POp"}


def _tag_past_an_int(ctx: Context, tb) -> Finding | None:
    """A point-to-point call refused its arguments' types where the tag is packed with a shift of 24 bits or more
    (`(src << 30) | ...`): past 2**31 a tag no longer fits the C int the binding takes, so only higher ranks fail."""
    if not _arguments_refused(tb) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    own = {node.name: node for node in source.walk() if isinstance(node, ast.FunctionDef)}
    for call in (node for node in walk(statement) if isinstance(node, ast.Call) and call_name(node) in P2P_CALLS):
        tag = next((item.value for item in call.keywords if item.arg == "tag"), None)
        if tag is None:
            continue
        packed = [*walk(tag), *(node for called in walk(tag) if call_name(called) in own
                                for node in walk(own[call_name(called)]))]
        shift = next((node for node in packed if isinstance(node, ast.BinOp) and isinstance(node.op, ast.LShift)
                      and isinstance(node.right, ast.Constant) and isinstance(node.right.value, int)
                      and node.right.value >= 24), None)
        if shift is None:
            continue
        return Finding(
            "tag-past-an-int", f"the tag of {call_name(call)} at {frame.location} is packed with "
            f"`{ast.unparse(shift)}` (line {shift.lineno}): once what is shifted is large enough (a rank of 2 or more "
            f"shifted by {shift.right.value}) the tag passes 2**31 and no longer fits the C int that torch's "
            f"point-to-point calls take, so only the higher ranks' calls are refused", _crash_evidence(tb), tb.node,
            _rank_of(ctx, tb),
            "keep tags below 2**31: leave the rank out of the tag (the peer already tells the pair apart) or pack "
            "fewer bits (tag = step * 2 + kind)")
    return None


EXCHANGES = {"all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "reduce", "gather", "scatter",
             "all_to_all_single"}


def _fixed_slot_too_small(ctx: Context, tb) -> Finding | None:
    """The job's own check that a rank's payload fits a slot of a fixed size, in a function that exchanges the slots
    (a buffer of world * max_size bytes, all_reduced or gathered): a payload that grows with the rank's data outgrew
    the constant."""
    if (failed := _failing_statement(ctx, tb)) is None or not isinstance(failed[2], ast.Raise):
        return None
    frame, source, statement = failed
    function = source.function_of(statement)
    if not isinstance(function, ast.FunctionDef) or not any(
            call_name(node) in EXCHANGES | set(GATHERS) for node in walk(function)):
        return None
    defaults = dict(zip([arg.arg for arg in function.args.args][-len(function.args.defaults):] if
                        function.args.defaults else [], function.args.defaults))
    for test in conditions_above(source, statement):
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Gt, ast.GtE))):
            continue
        limit = test.comparators[0]
        fixed = defaults.get(identifier(limit)) if isinstance(limit, ast.Name) else None
        if not (isinstance(fixed, ast.Constant) and isinstance(fixed.value, int)) or not any(
                call_name(node) == "len" for made in made_of(
                source, test.left, function) for node in walk(made)):
            continue
        return Finding(
            "fixed-slot-too-small", f"{function.name}() ({source.name}:{function.lineno}) gives every rank a slot of a "
            f"fixed {identifier(limit)} = {fixed.value} for what it exchanges, and this rank's payload is larger "
            f"({gist(tb.message, 70)}): the payload grows with the rank's data, the slot does not",
            _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
            "size the exchange from the data: all_gather the payloads' lengths first and pad to the largest, or use "
            "dist.all_gather_object; or send the values as a tensor (all_gather of int64 keys padded to the largest "
            "count)")
    return None


def _lock_held_by_a_node_mate(ctx: Context, tb) -> Finding | None:
    """A non-blocking file lock refused (BlockingIOError at flock/lockf) in a job with several ranks on a node: the
    lock file is one per node's disk, and the first rank of the node holds it, as if the job had one process per
    machine."""
    if tb.short_type != "BlockingIOError" or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    locking = next((call for call in walk(statement) if call_name(call) in ("flock", "lockf")), None)
    if locking is None:
        return None
    rank = _rank_of(ctx, tb)
    return Finding(
        "lock-held-by-a-node-mate", f"`{ast.unparse(locking)[:50]}` ({frame.location}) asks for a lock without "
        "waiting, and another rank of the same node already holds it: the lock file is one per node's disk, so with "
        f"several ranks on a node the second one is refused ({gist(tb.message, 50)})",
        _crash_evidence(tb), tb.node, rank,
        "give each rank a lock (or a cache file) of its own, named by its global rank; or take the lock blocking, "
        "only around each write (LOCK_EX without LOCK_NB, released right after); or let local rank 0 alone own it")


REACHING_FAILED = re.compile(r"refused|unreachable|timed? ?out|could not (?:fetch|connect|reach)|not reachable|"
                             r"Connection|gave up|after \d+ (?:attempts|tries|retries)", re.IGNORECASE)


def _failed_before_joining(ctx: Context, tb) -> Finding | None:
    """A rank that gave up reaching a peer before it called init_process_group, while that peer waited in
    init_process_group for it: each waited for the other (a service rank 0 starts only after joining)."""
    rank = _rank_of(ctx, tb)
    mine = next((trace for trace in ctx.evidence.traces if trace.rank == rank and trace.calls), None)
    if rank is None or mine is None or any(call.op == "init_process_group" for call in mine.calls.made):
        return None
    waiting = [trace for trace in ctx.evidence.traces if trace.rank != rank and trace.calls
               and any(call.op == "init_process_group" and call.ended_at is None for call in trace.calls.made)]
    hosts = {f"node{trace.node}" for trace in waiting} | ({ctx.evidence.master_addr} if ctx.evidence.master_addr
                                                         else set())
    named = sorted(host for host in hosts if host and host in tb.message)
    if not waiting or not (named or REACHING_FAILED.search(tb.message)):
        return None
    other = waiting[0]
    entered = next(call for call in other.calls.made if call.op == "init_process_group" and call.ended_at is None)
    return Finding(
        "ranks-wait-for-each-other", f"rank {other.rank} waited in init_process_group ({entered.caller}) for rank {rank} "
        f"to join, while rank {rank} never called it: before joining it waited for something "
        f"{'on ' + named[0] + ' ' if named else ''}that rank {other.rank} was to provide only after joining, and gave "
        f"up{_at(tb)} ({gist(tb.message, 90)})", _crash_evidence(tb), tb.node, rank,
        "order the start-up so that no rank waits for a peer that waits for it: start what the others need (a "
        "config server, a file, a store key) before init_process_group on the rank that provides it, or let every "
        "rank call init_process_group first and then hand the rest over with torch.distributed (broadcast_object_list "
        "after the group exists)")


# Collectives that write into an output buffer of their own: what comes out has no autograd history.
INTO_A_NEW_BUFFER = ("all_to_all_single", "all_to_all", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                     "reduce_scatter_tensor", "gather", "recv", "irecv")


NO_GRAPH = re.compile(r"does not require grad and does not have a grad_fn")


def _grad_mode_left_off(ctx: Context, tb) -> Finding | None:
    """A loss with no graph, in a job that turns autograd off with a bare torch.set_grad_enabled(False) and returns
    from that function on a path that does not turn it back on: every later step of the process runs without it."""
    if not NO_GRAPH.search(tb.message):
        return None
    for source in parsed_files(ctx):
        for off in calls_named(source, {"set_grad_enabled"}):
            if not (off.args and isinstance(off.args[0], ast.Constant) and off.args[0].value is False) or not \
                    isinstance(source.parent(off), ast.Expr):
                continue  # a `with` scopes it
            function = source.function_of(off)
            restores = sorted(call.lineno for call in calls_named(source, {"set_grad_enabled"})
                              if call is not off and source.function_of(call) is function)
            leaving = next((node for node in walk(function) if isinstance(node, ast.Return) and node.lineno > off.lineno
                            and not any(off.lineno < line < node.lineno for line in restores)), None)
            if leaving is None and restores:
                continue
            where = f"returns at line {leaving.lineno} without turning it back on" if leaving is not None else \
                "never turns it back on"
            name = getattr(function, "name", "the script")
            return Finding(
                "grad-mode-left-off", f"`{ast.unparse(off)}` ({source.name}:{off.lineno}) turns autograd off for the "
                f"whole process, and {name}() {where}: every later step of that rank runs without a graph, so its "
                f"loss has none ({gist(tb.message, 60)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                "scope it instead of switching it: `with torch.no_grad():` around the sampling (or @torch.no_grad() "
                "on the helper), or restore it on every path (try/finally: torch.set_grad_enabled(prev))")
    return None


def _no_history_through_a_collective(ctx: Context, tb) -> Finding | None:
    """backward() of a tensor with no grad_fn, on a rank whose values went through a c10d collective into a buffer
    of its own: torch.distributed's collectives are not autograd operations, so the graph ends at the buffer."""
    if "does not require grad and does not have a grad_fn" not in tb.message:
        return None
    rank = _rank_of(ctx, tb)
    calls = _calls_of(ctx, tb.node, rank, INTO_A_NEW_BUFFER)
    if not calls or job_lines(ctx, lambda code: "distributed.nn" in code or "functional_collectives" in code):
        return None
    call = calls[-1]
    where = _called_at(call)
    return Finding(
        "gathered-without-gradient", f"backward{_at(tb)} got a tensor with no autograd history: its values went "
        f"through the {call.op}{where}, which writes into a buffer of its own and is not an autograd operation, so "
        "the graph ends there and nothing before it gets a gradient", _crash_evidence(tb), tb.node, rank,
        f"make the exchange differentiable: wrap the {call.op} in a torch.autograd.Function whose backward runs the "
        "reverse exchange (for all_to_all: all_to_all with the split sizes swapped), or use the autograd-aware "
        "versions (torch.distributed.nn.functional.all_to_all_single, all_gather)")


def _splits_not_per_rank(ctx: Context, tb) -> Finding | None:
    """all_to_all's split sizes with another count of entries than the group has ranks: one size per destination rank
    is what it takes (per-expert counts passed where per-rank ones are meant)."""
    if "Number of tensor splits not equal to group size" not in tb.message:
        return None
    rank = _rank_of(ctx, tb)
    failed = [call for trace in ctx.evidence.traces if trace.rank == rank and trace.calls for call in trace.calls.failed
              if call.op in ("all_to_all_single", "all_to_all")]
    if not failed:
        return None
    call = failed[-1]
    group = len(call.group) if call.group else ctx.evidence.expected_world_size
    counts = {name: len(value.strip("[]").split(",")) for name, value in call.args
              if name.endswith("split_sizes") and value.startswith("[")}
    wrong = {name: count for name, count in counts.items() if count != group}
    if not wrong:
        return None
    shown = ", ".join(f"{name} has {count} entries" for name, count in wrong.items())
    return Finding(
        "shape-mismatch", f"{call.op}{_called_at(call) or ' at ?'}: {shown} for a group of "
        f"{group} ranks: it takes one size per rank of the group (what goes to, or comes from, each rank), so sizes "
        "counted per expert or per item must be summed per owning rank first", _crash_evidence(tb), tb.node, rank,
        f"give {call.op} {group} split sizes, one per rank: sum the per-expert counts by the rank that owns each "
        "expert (counts.view(world, experts_per_rank).sum(1).tolist(), with the tokens sorted by expert so each "
        "rank's part is contiguous), and use the matching per-rank sizes when sending the results back")


OUT_OF_RANGE = re.compile(r"index out of range|out of bounds|index \d+ is out of|list index out of range")


def _index_past_a_rounded_share(ctx: Context, tb) -> Finding | None:
    """An index out of range at a line whose index follows from a floor division by the world size: the division
    drops its remainder (6 experts over 4 ranks: 1 each), so the items past world * share map past the last rank."""
    if not OUT_OF_RANGE.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    worlds = _world_names(source)

    def rounded(expression: ast.AST) -> bool:
        return any(_divides_by(part, worlds) for part in walk(expression))

    chain = origin_of(source, statement, source.function_of(statement), rounded)
    divided = next(((text, line) for text, line in reversed(chain) if text), None)
    if divided is None or len(chain) < 3:  # the division itself, and an index made from it
        return None
    rank = _rank_of(ctx, tb)
    return Finding(
        "split-drops-remainder", f"`{divided[0]}` (line {divided[1]}) divides by the world size and rounds down: with "
        f"{ctx.evidence.expected_world_size} ranks what does not divide evenly has no rank, so an index computed from "
        f"it (`{chain[0][0]}`, line {chain[0][1]}) points past the last one, which `{ast.unparse(statement)[:50]}` "
        f"({frame.location}) refuses ({gist(tb.message, 60)})", _crash_evidence(tb), tb.node, rank,
        "make the division cover every item: require that the count divides by the world size (or choose a group "
        "size that divides it), or place items with ceiling division or an explicit item-to-rank table "
        "(numpy.array_split of the indices); with 1 rank nothing is left over, which is why it passed there")


def _calls_of(ctx: Context, node: int | None, rank: int | None, ops: tuple[str, ...] | None,
              posted: bool = False) -> list[DistCall]:
    """The torch.distributed calls of `ops` (None: any) that the processes of `node` (of `rank` only, where given)
    made, oldest first per process; with `posted`, their async ones too (a DDP comm hook's)."""
    return [call for trace in ctx.evidence.traces if trace.node == node and trace.calls
            and (rank is None or trace.rank == rank)
            for call in (*trace.calls.made, *(trace.calls.posted if posted else ())) if ops is None or call.op in ops]


def _called_at(call: DistCall) -> str:
    """' at train.py:41' for a recorded call, '' where its line is not known."""
    return f" at {call.caller.split(' in ')[0]}" if call.caller else ""


def _divides_by(part: ast.AST, worlds: set[str], ops: tuple[type, ...] = (ast.FloorDiv,)) -> bool:
    """`part` is a division (floor division by default) by something that holds the world size."""
    return isinstance(part, ast.BinOp) and isinstance(part.op, ops) and holds(part.right, worlds, set(), ())


PARSE_ERRORS = {"JSONDecodeError", "UnicodeDecodeError", "Error", "ParserError", "UnpicklingError", "DecodeError"}


def _read_from_a_rank_offset(ctx: Context, tb) -> Finding | None:
    """A record that did not parse, in a function that seeks the file to an offset made from the rank (byte ranges
    of a shared file split by the world size): the offset falls inside a record, and the first line read is its tail."""
    if tb.short_type not in PARSE_ERRORS or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    function = source.function_of(statement)
    seek = next((call for call in walk(function) if isinstance(call, ast.Call) and call_name(call) == "seek"
                 and call.args and holds(call.args[0], source.ranks, set(), ())), None)
    if seek is None:
        return None
    rank = _rank_of(ctx, tb)
    return Finding(
        "split-mid-record", f"rank {rank if rank is not None else '?'} seeks to a byte offset made from its rank "
        f"(`{ast.unparse(seek)[:50]}`, line {seek.lineno}) and parses from there: an offset computed by dividing the "
        f"file's size lands inside a record, so the first thing read is a record's tail, which "
        f"`{ast.unparse(statement)[:40]}` ({frame.location}) cannot parse ({gist(tb.message, 60)})",
        _crash_evidence(tb), tb.node, rank,
        "align each rank's range to record boundaries: after seeking to the offset, unless it is 0, discard the "
        "partial line (one readline()), and let each rank read the record that crosses its end offset; or split by "
        "records (line numbers, an index of offsets) rather than bytes")


def _tail_on_no_rank(ctx: Context, tb) -> Finding | None:
    """The last rank failed with what it computes from a function of the job that gives each rank
    `items[rank * per:(rank + 1) * per]` with `per = n // world`: the last n % world items belong to no rank, and it
    is the last rank's part (a pipeline's last layers: the head) that lacks them."""
    rank = _rank_of(ctx, tb)
    world = ctx.evidence.expected_world_size
    if rank is None or rank != world - 1 or world < 2 or (failed := _failing_statement(ctx, tb)) is None:
        return None
    if set(_ranks_raising(ctx, tb)) - {rank}:
        return None  # the other ranks, whose parts miss nothing, raised it too
    frame, source, statement = failed
    worlds = _world_names(source)
    shares = {name for name, value in assignments(source) if any(_divides_by(part, worlds)
                                                                for part in walk(value))}
    functions = {node.name: node for node in source.walk() if isinstance(node, ast.FunctionDef)}

    def cut(function: ast.FunctionDef) -> ast.Subscript | None:
        return next((node for node in walk(function) if isinstance(node, ast.Subscript)
                     and isinstance(node.slice, ast.Slice) and node.slice.upper is not None
                     and names_in(node.slice.upper) & shares and holds(node.slice.upper, RANK_NAMES, set(), ())), None)

    def shared_out(expression: ast.AST) -> bool:
        return any(isinstance(node, ast.Call) and call_name(node) in functions and cut(functions[call_name(node)])
                   for node in walk(expression))

    chain = origin_of(source, statement, source.function_of(statement), shared_out)
    made = next(((text, line) for text, line in reversed(chain) if text), None)
    if made is None:
        return None
    function = next(functions[call_name(node)] for node in walk(source.statement_at(made[1]))
                    if isinstance(node, ast.Call) and call_name(node) in functions and cut(functions[call_name(node)]))
    sliced = cut(function)
    return Finding(
        "split-drops-remainder", f"rank {rank}, the last, failed with its part from `{made[0][:50]}` (line {made[1]}): "
        f"{function.name}() takes `{ast.unparse(sliced)[:60]}` (line {sliced.lineno}), with a share that divides by "
        f"the world size and rounds down, so the last items are on no rank: with {world} ranks the last rank's part "
        f"lacks the end it should hold ({gist(tb.message, 60)} at {frame.location})", _crash_evidence(tb), tb.node,
        rank,
        "split so that every item is owned once: bounds from the whole count (start = rank * n // world, end = "
        "(rank + 1) * n // world), or let the last rank take the rest (items[rank * per:] when rank == world - 1); "
        "assert that the parts add up to n")


def _splits_by_world(node: ast.AST, worlds: set[str], ranks: set[str]) -> bool:
    """`node` takes one rank's share of something: divides by the world size (n // world), splits into world parts
    (tensor_split(x, world)), strides by it (x[rank::world]) or keeps what `% world == rank` selects."""
    for part in walk(node):
        if _divides_by(part, worlds, (ast.FloorDiv, ast.Div)):
            return True
        if isinstance(part, ast.Call) and call_name(part) in SPLITS and any(
                holds(argument, worlds, set(), ()) for argument in [*part.args, *(k.value for k in part.keywords)]):
            return True
        if _strided_by_world(part, worlds):
            return True
        if isinstance(part, ast.Compare) and isinstance(part.left, ast.BinOp) and isinstance(part.left.op, ast.Mod) \
                and holds(part.left.right, worlds, set(), ()) and any(holds(compared, ranks, set(), ())
                                                                       for compared in part.comparators):
            return True
    return False


def _split_by_world(part: ast.AST, worlds: set[str]) -> bool:
    """`part` takes a rank's share: a division by the world size, or every world-th item."""
    return _divides_by(part, worlds, (ast.FloorDiv, ast.Div)) or _strided_by_world(part, worlds)


def _strided_by_world(part: ast.AST, worlds: set[str]) -> bool:
    """`x[rank::world]`'s slice: every world-th item."""
    return isinstance(part, ast.Slice) and part.step is not None and holds(part.step, worlds, set(), ())


def _ranks_as_read(source: SourceFile) -> set[str]:
    """The rank's names and those assigned straight from get_rank() or RANK (not source.ranks, which follows names
    file-wide: a loop's `start` named like a rank's bound elsewhere)."""
    return set(RANK_NAMES) | {name for name, value in assignments(source)
                              if holds(value, set(), RANK_VARIABLES, RANK_CALLS)}


def _shares(source: SourceFile, contiguous: bool = False) -> tuple[list[tuple[str, int]], set[str]]:
    """Where the job takes a rank's share ((the assignment, its line), in file order) and every name that holds one
    or something made from one: through assignments, the parameters calls pass it to and the functions returning
    it. With `contiguous`, only shares that are blocks, not every world-th item."""
    worlds, ranks = _world_names(source), _ranks_as_read(source)

    def from_rank(bound: ast.AST, scope: ast.AST) -> bool:  # the rank, or a name this function made from it
        return holds(bound, ranks, set(), ()) or any(holds(assign.value, ranks, set(), ()) for name in
                                                     names_in(bound) for assign in source.assignments_to(name, scope))

    def a_share(node: ast.Assign | ast.Return) -> bool:  # a split by the world, or a slice from a rank's bound
        return _splits_by_world(node.value, worlds, ranks) or any(
            isinstance(part, ast.Slice) and part.lower is not None and from_rank(part.lower, source.function_of(node))
            for part in walk(node.value))

    rounded = {name for name, value in assignments(source) if any(rounded_up(part, worlds) for part in walk(value))}
    taken = [node for node in source.walk() if isinstance(node, (ast.Assign, ast.Return))
             and node.value is not None and a_share(node)
             and not any(rounded_up(part, worlds) for part in walk(node.value))  # rounded up: too large a share
             and not names_in(node.value) & rounded and not (contiguous and _interleaved(node.value, worlds))]
    seeds = {name for node in taken if isinstance(node, ast.Assign) for target in node.targets
             for name in names_in(target)} - worlds - set(RANK_NAMES)
    returning = tuple({function.name for node in taken if isinstance(node, ast.Return)
                       and isinstance(function := source.function_of(node), ast.FunctionDef)})  # their calls hold one
    return ([(ast.unparse(node)[:70], node.lineno) for node in sorted(taken, key=lambda node: node.lineno)],
            derived(source, seeds, set(), returning) if seeds or returning else set())


# A size or limit refused: what an operation needs is more than it was given (a window, k, a padding, samples).
TOO_SMALL = re.compile(r"out of range|exceeds?|maximum size|should be (?:less|smaller|at most)|larger than|greater "
                       r"than|bigger than|[Ff]ewer|too (?:small|short|few)|at least|must be (?:<|less|smaller)|"
                       r"cannot be (?:larger|greater|bigger)|but (?:got|is) (?:size )?\d+")

# What to do first, by the operation that refused: the lead of the fix, before the general ways.
SHARE_FIXES = {
    "unfold": "build the windows over the whole data and split the windows (their start indices) across the ranks, "
              "or give each rank an overlapping share extended by the window length - 1",
    "stft": "split on whole blocks (a share a multiple of the block and hop) or merge a short last piece into the "
            "one before it, or pad it (pad_mode='constant')",
    "pad": "split on whole blocks (a share a multiple of the block) or merge a short last piece into the one before "
           "it, or pad it with zeros",
    "choice": "build the distribution from every rank's counts (all_reduce the counts before normalising) and smooth "
              "it (a floor, or a mix with uniform) so it has support enough, or sample with replacement",
    "multinomial": "build the distribution from every rank's counts (all_reduce the counts before normalising) and "
                   "smooth it so it has support enough, or sample with replacement",
}


def _share_too_small(ctx: Context, tb) -> Finding | None:
    """A size refused at a line that works on a rank's share of the data (split by the world size): one process or
    a few ranks pass, and at this world size a share (or its last piece) is smaller than what the operation needs."""
    if not TOO_SMALL.search(tb.message) or re.search(r"\bindex\b", tb.message) or \
            (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    taken, holding = _shares(source)
    read = _what_it_reads(source, statement)
    used = names_in(read) & holding if read is not None else set()
    if not used or not taken:
        return None
    before = [step for step in taken if step[1] <= statement.lineno]
    split = before[-1] if before and source.function_of(source.statement_at(before[-1][1])) is \
        source.function_of(statement) else taken[0]
    operation = next((call_name(node) for node in walk(statement) if call_name(node) in SHARE_FIXES), None)
    lead = f"{SHARE_FIXES[operation]}; " if operation else ""
    rank = _rank_of(ctx, tb)
    who = _who_raised(ctx, tb, rank)
    return Finding(
        "share-smaller-than-needed", f"{who} failed at `{ast.unparse(statement)[:60]}` ({frame.location}): "
        f"{gist(tb.message, 90).rstrip('.')}. What it works on (`{sorted(used)[0]}`) is the rank's share of the "
        "data, taken by "
        f"splitting over the world size (`{split[0][:60]}`, line {split[1]}): with {ctx.evidence.expected_world_size}"
        " ranks a share (or its last piece) is smaller than this operation needs; with fewer ranks it is not",
        _crash_evidence(tb), tb.node, rank,
        f"{lead}size the split by what the operation needs, not by the world size alone: split the units it consumes "
        "(windows, candidates, whole blocks) rather than raw items, ask no more of a share than it holds (min(k, "
        "len(share))), and compute what needs the whole data (counts, vocabularies) from every rank's share "
        "(all_reduce or all_gather) before using it; check at the split that a share is at least what the operation "
        "needs, or run fewer ranks")


JOINS = {"cat", "concatenate", "concat", "hstack", "vstack", "chain", "from_iterable"}
GATHERS = {"all_gather_object": 1, "all_gather": 1, "gather_object": 0}  # the gathered value's argument
POSITIONS = re.compile(r"offset|indptr|ptr\b|cu_seqlens|starts?\b|positions?|ind(?:ex|ices)|idx", re.I)
ORDERING = {"unique", "sort", "sorted", "argsort", "msort", "nsmallest", "nlargest"}


def _gathered_lists(source: SourceFile) -> dict[str, ast.AST]:
    """The lists a gather fills (all_gather_object's, all_gather's output list) -> the value each rank gave."""
    return {filled: call.args[GATHERS[call_name(call)]] for call in calls_named(source, set(GATHERS))
            if len(call.args) > GATHERS[call_name(call)] and (filled := identifier(call.args[0]))}


def _made_by_a_gather(source: SourceFile, expression: ast.AST, scope: ast.AST) -> bool:
    """`expression` is a list a gather filled: named by one, or returned by one of the job's functions that gathers."""
    gathering = {node.name for node in source.walk() if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and any(
        call_name(part) in GATHERS or call_name(part) == "gather" for part in walk(node))}

    def gathers(node: ast.AST) -> bool:  # a gathering function, or an autograd Function's apply that gathers
        return call_name(node) in gathering | set(GATHERS) | {"gather"} or call_name(node) == "apply" and isinstance(
            node.func, ast.Attribute) and identifier(node.func.value) in gathering
    return identifier(expression) in _gathered_lists(source) or any(
        gathers(node) for made in made_of(source, expression, scope) for node in walk(made))


POSITION_CALLS = {"multinomial", "argmax", "argmin", "topk", "nonzero", "argsort", "searchsorted", "argwhere", "where",
                  "randperm", "choice"}
LOOKUPS = {"gather": 1, "index_select": 2, "take_along_dim": 1, "take": 1, "embedding": 0}  # the index's argument


def _made_through_loops(source: SourceFile, expression: ast.AST, scope: ast.AST) -> list[ast.AST]:
    """made_of, also through the loops that bind its names (`for p in preds`, a comprehension's `for part in
    gathered`): what a loop variable is made of is the iterable it walks."""
    made, seen = made_of(source, expression, scope), set()
    for _ in range(3):
        names = {node.id for part in made for node in walk(part) if isinstance(node, ast.Name)} - seen
        seen |= names
        loops = [node for node in walk(scope) if isinstance(node, (ast.For, ast.comprehension))
                 and {part.id for part in walk(node.target) if isinstance(part, ast.Name)} & names]
        made += [found for loop in loops for found in made_of(source, loop.iter, scope)]
    return made


def _index_from_other_ranks(ctx: Context, tb) -> Finding | None:
    """An index past a size, or a key not found, on the rank that received the others' results: the indices or keys
    come from what the other ranks made (a gather's list), and what they look up from what this rank built for itself
    (a tensor sized for its own range, a table of its own share), so what another rank produced is not there."""
    past = OUT_OF_BOUNDS.search(tb.message)
    key = tb.short_type == "KeyError"
    if not (past or key) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope = source.function_of(statement)
    received = set(_gathered_lists(source)) | {
        identifier(call.args[1]) for call in calls_named(source, {"gather", "recv", "irecv", "broadcast"})
        if called_on(call) in ("dist", "torch.distributed") and len(call.args) > 1} - {None}
    lookups = [(node.value, node.slice) for node in walk(statement) if isinstance(node, ast.Subscript)] + [
        (node, index) for node in walk(statement) if isinstance(node, ast.Call) and call_name(node) in LOOKUPS
        and not key and (index := argument(node, LOOKUPS[call_name(node)], "index")) is not None]
    for table, index in lookups:
        made = _made_through_loops(source, index, scope)
        sent = next((name for part in made for name in names_in(part) if name in received), None)
        if sent is None or key and any(name in received for part in _made_through_loops(source, table, scope)
                                        for name in names_in(part)):
            continue
        if key:
            return Finding(
                "key-from-other-ranks", f"`{ast.unparse(index)[:40]}` ({source.name}:{statement.lineno}) is a key "
                f"from what the other ranks sent (through `{sent}`), looked up in `{ast.unparse(table)[:30]}`, which "
                f"this rank filled from its own share: the keys of items another rank held are not in it "
                f"({tb.short_type}: {gist(tb.message, 40)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                f"send what the keys look up along with them (gather `{ast.unparse(table)[:30]}`'s entries too and "
                "merge them before the lookup, or load the whole table on the rank that merges), or have each rank "
                "do its own lookups and send the results")
        drawn = next((node for part in made for node in walk(part) if call_name(node) in POSITION_CALLS), None)
        if drawn is not None:  # a position in the ranks' parts joined, not a value a rank made
            return Finding(
                "global-index-on-shard", f"`{ast.unparse(index)[:40]}` ({source.name}:{statement.lineno}) is a "
                f"position over every rank's parts joined (`{ast.unparse(drawn)[:50]}` over what came through "
                f"`{sent}`), used on this rank's own part of size {past.group(2)}: positions past it belong to other "
                f"ranks ({gist(tb.message, 60)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                "map each position to its owner and its place there (owner = index // part_size, local = index % "
                "part_size) and fetch the items from their owners (all_to_all), or draw the positions from this "
                "rank's own part only")
        return Finding(
            "index-from-other-ranks", f"`{ast.unparse(index)[:40]}` ({source.name}:{statement.lineno}) holds values "
            f"the other ranks sent (through `{sent}`), and one of them, {past.group(1)}, is past the {past.group(2)} "
            f"this rank's own tensor holds: the ranks produce values from a larger range than the one this rank "
            f"sized for ({gist(tb.message, 60)})", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
            "size what the received values index for every rank's range, not this rank's own (the largest over the "
            "ranks: a shared constant, or all_reduce with MAX of each rank's count before building it), or map each "
            "rank's values into the shared range before sending them")
    return None


def _joined_list(statement: ast.AST, names: tuple[str, ...]) -> tuple[ast.Call, ast.AST] | None:
    """The first call of `names` (torch.cat, torch.stack) in `statement` and the list it is given."""
    call = next((node for node in walk(statement) if call_name(node) in names and node.args), None)
    return (call, call.args[0]) if call else None


NOTHING_TO_JOIN = re.compile(r"expected a non-empty list of Tensors|expects a non-empty TensorList|"
                             r"need at least one array to (?:concatenate|stack)")


def _nothing_to_join(ctx: Context, tb) -> Finding | None:
    """torch.cat of a list the job starts empty and fills by `.append` as results come: a rank whose share of the data
    gave none (no detection kept, no item of a class) has an empty list, while the others join theirs."""
    if not NOTHING_TO_JOIN.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed

    def appends_to(listed: ast.AST) -> list[ast.Call]:
        name = identifier(listed)
        return [node for node in source.walk() if call_name(node) == "append" and isinstance(
            node.func, ast.Attribute) and identifier(node.func.value) == name] if name else []

    def starts_empty(listed: ast.AST) -> bool:  # `x = []` (or `a, x = [], []`, `x = list()`) somewhere in the file
        name = identifier(listed)
        for assign in (node for node in source.walk() if isinstance(node, ast.Assign)):
            for target in assign.targets:
                pairs = zip(target.elts, assign.value.elts) if isinstance(target, ast.Tuple) and isinstance(
                    assign.value, ast.Tuple) else [(target, assign.value)]
                if any(identifier(item) == name and (isinstance(value, ast.List) and not value.elts or isinstance(
                        value, ast.Call) and call_name(value) == "list" and not value.args) for item, value in pairs):
                    return True
        return False

    joined = next(((call, call.args[0]) for call in walk(statement) if call_name(call) in JOINS | {
        "stack", "vstack", "hstack"} and call.args and appends_to(call.args[0]) and starts_empty(call.args[0])),
        None)
    if joined is None:
        return None
    appends = appends_to(joined[1])
    rank = _rank_of(ctx, tb)
    who = _who_raised(ctx, tb, rank)
    filler = source.function_of(appends[0])
    loop = next((node for node in walk(filler) if isinstance(node, (ast.For, ast.comprehension))
                 and appends[0] in walk(node)), None) if filler is not None else None
    return Finding(
        "nothing-to-join", f"{who} had nothing to join at `{ast.unparse(statement)[:60]}` ({frame.location}): "
        f"`{ast.unparse(joined[1])}` is filled only by `.append` (line {appends[0].lineno}"
        + (f", in {filler.name}()" if isinstance(filler, ast.FunctionDef) else "") + ")"
        + (f" inside `for {ast.unparse(loop.target)} in {ast.unparse(loop.iter)[:40]}`, which had nothing to go over "
           "there" if isinstance(loop, ast.For) else "") + ", and this rank's share of "
        "the data gave nothing to append, so the list is empty where the other ranks' are not",
        _crash_evidence(tb), tb.node, rank,
        "let a rank with no results still join and take part: start from an empty tensor of the right shape "
        "(torch.cat([torch.empty(0, ...), *parts]) or append an empty tensor per item), send a count of 0 in the "
        "collectives that follow; or split the data so that every rank gets some of each kind (interleaved: "
        "data[rank::world])")


RAGGED_STACK = re.compile(r"stack expects each tensor to be equal size")
RAGGED_TENSOR = re.compile(r"expected sequence of length \d+ at dim \d+ \(got \d+\)")  # torch.tensor of ragged lists


def _ragged_parts_stacked(ctx: Context, tb) -> Finding | None:
    """torch.stack (or torch.tensor, for lists) of what every rank gave a gather, where each rank's part holds its own
    number of items (atoms, detections, tokens, selected rows): both need parts of one size, and the parts are to be
    joined end to end."""
    stacked = RAGGED_STACK.search(tb.message)
    if not (stacked or RAGGED_TENSOR.search(tb.message)) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    lists = _gathered_lists(source)
    joined = _joined_list(statement, ("stack",) if stacked else ("tensor", "as_tensor"))
    if joined is None or not (names_in(joined[1]) & set(lists)):
        return None
    rank = _rank_of(ctx, tb)
    return Finding(
        "ragged-parts-stacked", f"rank {rank if rank is not None else '?'} "
        f"{'stacked' if stacked else 'made one tensor of'} what every rank gave a gather "
        f"(`{ast.unparse(joined[0])[:60]}`, {frame.location}: {gist(tb.message, 80)}): each rank's part holds "
        f"its own number of items, and {'torch.stack' if stacked else 'a tensor of lists'} needs parts of one size",
        _crash_evidence(tb), tb.node, rank,
        "join the parts end to end along the item dimension (torch.cat), or for lists make one list of every "
        "part's items ([item for part in gathered for item in part]); or pad each to the longest with a mask before "
        "stacking (gather the lengths first)")


NO_INF_CHECKS = re.compile(r"No inf checks were recorded")


def _scaler_step_without_gradients(ctx: Context, tb) -> Finding | None:
    """GradScaler.step on a rank where no parameter of the optimizer had a gradient ('No inf checks were recorded'):
    the job drops the gradients of what a rank does not own, and this rank owns nothing."""
    if not NO_INF_CHECKS.search(tb.message):
        return None
    raised = _ranks_raising(ctx, tb)
    dropped = [(source, node) for source in parsed_files(ctx) for node in source.walk() if isinstance(node, ast.Assign)
               and isinstance(node.value, ast.Constant) and node.value.value is None
               and any(isinstance(target, ast.Attribute) and target.attr == "grad" for target in node.targets)]
    where = (f"; the job sets `{ast.unparse(dropped[0][1])}` ({dropped[0][0].name}:{dropped[0][1].lineno}) for what a "
             "rank does not own, and this rank owns nothing" if dropped else "")
    some = raised and len(raised) < ctx.evidence.expected_world_size
    return Finding(
        "scaler-step-without-gradients", f"rank{'s' if len(raised) > 1 else ''} {', '.join(map(str, raised)) or '?'} "
        f"reached GradScaler.step with no gradient on any parameter of the optimizer ({gist(tb.message, 60)})"
        f"{where}{', while the other ranks had some' if some else ''}", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        "give every rank something to own (no more ranks than the layers or shards shared out), or skip "
        "scaler.unscale_ and scaler.step on a rank with no gradients while still calling scaler.update() with the "
        "others (a found-inf agreed over the ranks, as ShardedGradScaler does)")


MISSING_ATTRIBUTE = re.compile(r"'(?P<cls>\w+)' object has no attribute '(?P<name>\w+)'")
OBJECT_SENDERS = ("all_gather_object", "gather_object", "broadcast_object_list", "scatter_object_list",
                  "send_object_list", "recv_object_list")


def _state_dropped_by_getstate(ctx: Context, tb) -> Finding | None:
    """An attribute missing on an object of the job's own class whose __getstate__ leaves it out, in a job that sends
    such objects through an object collective: what arrives is the pickled state, without it (on one process the
    object is never pickled)."""
    missing = MISSING_ATTRIBUTE.search(tb.message) if tb.short_type == "AttributeError" else None
    if missing is None:
        return None
    for source in parsed_files(ctx):
        cls = next((node for node in source.walk() if isinstance(node, ast.ClassDef)
                    and node.name == missing["cls"]), None)
        getstate = next((node for node in cls.body if isinstance(node, ast.FunctionDef)
                         and node.name == "__getstate__"), None) if cls is not None else None
        sent = calls_named(source, set(OBJECT_SENDERS))
        if getstate is None or not sent or not any(
                isinstance(node, ast.Constant) and node.value == missing["name"] for node in walk(getstate)):
            continue
        restored = any(isinstance(node, ast.FunctionDef) and node.name == "__setstate__" for node in cls.body)
        return Finding(
            "state-dropped-by-getstate", f"{missing['cls']}.__getstate__ ({source.name}:{getstate.lineno}) leaves "
            f"`{missing['name']}` out of the pickled state{' and __setstate__ does not make it again' if restored else ''}"
            f", and the job sends {missing['cls']} objects through {call_name(sent[0])} (line {sent[0].lineno}): what "
            f"arrives has no `{missing['name']}`, which {tb.user_frame().location if tb.user_frame() else 'the job'} "
            "then reads (on one process nothing is pickled, so it worked there)", _crash_evidence(tb), tb.node,
            _rank_of(ctx, tb),
            f"keep `{missing['name']}` in the state the object pickles (drop it from __getstate__, or make it again in "
            "__setstate__), or send only what can be combined (counts, sums) and reduce those instead")
    return None


FLOAT_FOR_AN_INT = re.compile(r"invalid combination of arguments.*\bfloat\b|'float' object cannot be interpreted as an "
                              r"integer|must be int(?:eger)?,? not float|expected .*int.* but got float|"
                              r"slice indices must be integers", re.IGNORECASE | re.DOTALL)


def _count_returned_as_float(ctx: Context, tb) -> Finding | None:
    """A float where an integer is needed, whose value is whole, made by .item() of a tensor reduced over the ranks
    (a count summed in a float tensor): a helper that returns the Python ints unchanged on one process returns a
    float with several ranks."""
    check = failed_check_of(ctx, tb) if FLOAT_FOR_AN_INT.search(tb.message) else None
    whole = next((operand for operand in check.operands if operand.type == "float" and operand.number is not None
                  and operand.number == int(operand.number)), None) if check is not None else None
    if whole is None or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    try:
        expression = ast.copy_location(ast.parse(whole.expression, mode="eval").body, statement)
    except SyntaxError:
        return None
    made = [node for part in made_of(source, expression, source.function_of(statement)) for node in walk(part)
            if isinstance(node, ast.Call)]
    helpers = {call_name(node) for node in made}
    reduced = next((function for function in source.walk() if isinstance(function, ast.FunctionDef)
                    and function.name in helpers and any(call_name(node) in ("all_reduce", "reduce")
                                                         for node in walk(function) if isinstance(node, ast.Call))
                    and any(call_name(node) == "item" for node in walk(function) if isinstance(node, ast.Call))), None)
    if reduced is None:
        return None
    return Finding(
        "count-returned-as-float", f"`{whole.expression}` is {whole.text}, a float, where {frame.location} needs an "
        f"integer ({gist(tb.message, 60)}): it comes from {reduced.name}() ({source.name}:{reduced.lineno}), which "
        "sums over the ranks in a float tensor and returns its .item(), a float, which a count must not be",
        _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        f"reduce counts as integers and give back integers: an int64 tensor, and int(t.item()) (or keep counts and "
        f"float sums in separate tensors); make {reduced.name}() return the same type on one process and on many")


def _joined_not_added(ctx: Context, tb) -> Finding | None:
    """Unpacking met world-size times the items it expects: the ranks' tuples (or lists) were joined end to end by
    `+`, which concatenates them, where their items were to be added one by one."""
    expected = re.search(r"too many values to unpack \(expected (\d+)", tb.message)
    check = failed_check_of(ctx, tb) if expected else None
    world = ctx.evidence.expected_world_size
    joined = next((operand for operand in check.operands if operand.type in ("tuple", "list")
                   and operand.length == int(expected[1]) * world), None) if check is not None and world > 1 else None
    if joined is None:
        return None
    adds = [(source, node) for source in parsed_files(ctx) for reducer in calls_named(source, {"reduce"})
            if reducer.args for function in source.walk() if isinstance(function, ast.FunctionDef)
            and function.name == identifier(reducer.args[0]) for node in walk(function)
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)]
    where = f": `{ast.unparse(adds[0][1])}` ({adds[0][0].name}:{adds[0][1].lineno}) joins them" if adds else ""
    return Finding(
        "joined-not-added", f"`{joined.expression}` holds {joined.length} items where {expected[1]} were expected, "
        f"{world} times as many, one set per rank: the ranks' {joined.type}s were joined end to end, not added item by "
        f"item ({joined.type} + {joined.type} concatenates){where}", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        "add them item by item: tuple(x + y for x, y in zip(a, b)), or keep the statistics in a tensor and "
        "all_reduce it with SUM; a merge that runs only with several ranks needs a test with two processes")


JSON_KEYS = re.compile(r"keys must be str, int, float, bool or None, not (\w+)")


ASKS_THE_WORLD = ("get_world_size", "is_initialized")


def _returns_early_on_one_process(source: SourceFile, function: ast.AST, before: int | None = None) -> ast.If | None:
    """The `if <one process>: return ...` of `function` (above line `before`, where given): a test of the world size,
    of whether torch.distributed is initialized, or of a helper of the job that asks (`if not is_dist():`). Only a
    run of several ranks gets past it."""
    if not isinstance(function, ast.FunctionDef):
        return None
    worlds = _world_names(source) | {"world_size", *ASKS_THE_WORLD}
    asks = set(ASKS_THE_WORLD) | {helper.name for helper in source.walk() if isinstance(helper, ast.FunctionDef)
                                  and any(call_name(part) in ASKS_THE_WORLD for part in walk(helper))}
    return next((node for node in walk(function) if isinstance(node, ast.If)
                 and any(isinstance(step, ast.Return) for step in node.body)
                 and (before is None or node.lineno < before)
                 and (names_in(node.test) & worlds or any(call_name(part) in asks for part in walk(node.test)))),
                None)


def _json_of_non_string_keys(ctx: Context, tb) -> Finding | None:
    """json.dumps of a dict keyed by tuples (or other non-strings), on a path the job takes only with several ranks
    (it serialises to send): one process never serialises, so it never failed there."""
    keyed = JSON_KEYS.search(tb.message)
    if keyed is None or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    function = source.function_of(statement)
    alone = _returns_early_on_one_process(source, function, statement.lineno)
    return Finding(
        "json-of-non-string-keys", f"json.dumps at {frame.location} was given a dict keyed by {keyed[1]}s: JSON "
        "keys must be strings" + (f", and {function.name} serialises only with several ranks (it returns early "
                                  f"where `{ast.unparse(alone.test)}`, line {alone.lineno}), so one process never "
                                  "met it" if alone else ""), _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        "send it as an object (broadcast_object_list pickles any key), or make the keys strings where it is "
        "serialised ('a b' for ('a', 'b')) and split them back where it is read")


NARROW_OVERFLOW = re.compile(r"value cannot be converted to type (?P<dtype>u?int(?:8|16|32)) without overflow")
SHIFTS = (ast.LShift, ast.Mult, ast.Pow)


def _rank_packed_past_a_narrow_type(ctx: Context, tb) -> Finding | None:
    """Ids that carry the rank in their high bits (`rank << 32 | i`, `rank * 10**9 + i`) put into a narrow integer
    tensor: rank 0's ids fit, the other ranks' do not."""
    narrow = NARROW_OVERFLOW.search(tb.message)
    if narrow is None or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    packed = next((node for part in made_of(source, statement, source.function_of(statement)) for node in walk(part)
                   if isinstance(node, ast.BinOp) and isinstance(node.op, SHIFTS) and (
                       identifier(node.left) in RANK_NAMES or any(identifier(n) in RANK_NAMES for n in walk(node.left)))),
                  None)
    if packed is None:
        return None
    return Finding(
        "rank-packed-past-a-narrow-type", f"`{ast.unparse(packed)[:40]}` ({source.name}:{packed.lineno}) puts the "
        f"rank in the high part of each id, and {frame.location} stores the ids as {narrow['dtype']}: rank 0's ids "
        f"fit, and every other rank's are past its range ({gist(tb.message, 60)})", _crash_evidence(tb), tb.node,
        _rank_of(ctx, tb),
        "store the ids as int64, or keep the rank and the local index in two columns, or number the items with a "
        "prefix sum of the shards' sizes (all_gather the counts) so that ids stay small")


UNORDERABLE = re.compile(r"'<' not supported between instances of '(\w+)' and '(\w+)'")


def _sorted_ties_reach_unorderable(ctx: Context, tb) -> Finding | None:
    """sorted() of tuples gathered from every rank, without a key: where two ranks hold the same first field (a
    duplicate across shards, which one process never has), the comparison falls through to a field that cannot be
    ordered (a dict)."""
    unorderable = UNORDERABLE.search(tb.message)
    if unorderable is None or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    sort = next((node for node in walk(statement) if isinstance(node, ast.Call) and call_name(node) in ("sorted", "sort")
                 and not any(item.arg == "key" for item in node.keywords)), None)
    gathered = set(_gathered_lists(source))
    behind = {name for part in made_of(source, statement, source.function_of(statement)) for name in names_in(part)}
    if sort is None or not (behind & gathered):
        return None
    return Finding(
        "sorted-ties-reach-unorderable", f"`{ast.unparse(sort)[:50]}` ({frame.location}) sorts tuples gathered from "
        f"every rank without a key: where two ranks hold the same first field (a duplicate across shards, which one "
        f"process never has), Python compares the next fields, {unorderable[1]} against {unorderable[2]}, which have "
        "no order", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        "sort by the field that orders them (sorted(items, key=lambda item: item[0]), or a key of fields that all "
        "compare), or group the items by that field in a dict instead of sorting the tuples")


def _records_run_together(ctx: Context, tb) -> Finding | None:
    """A record that will not parse ('Extra data') in a buffer received from several ranks and split into lines,
    where each rank joins its records with '\n'.join: no newline follows a rank's last record, so it runs into the
    next rank's first."""
    if "Extra data" not in tb.message or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    joined = next((call for call in calls_named(source, {"join"}) if isinstance(call.func, ast.Attribute)
                   and isinstance(call.func.value, ast.Constant) and call.func.value.value == "\n"
                   and not isinstance(source.parent(call), ast.BinOp)), None)
    exchanged = calls_named(source, {"all_to_all_single", "all_to_all", "all_gather", "all_gather_into_tensor",
                                     "gather", "recv"})
    if joined is None or not exchanged:
        return None
    return Finding(
        "records-run-together", f"a line parsed at {frame.location} holds two records: each rank joins its records "
        f"with `{ast.unparse(joined)[:50]}` ({source.name}:{joined.lineno}), which puts no newline after the last "
        f"one, and what arrives from the ranks ({call_name(exchanged[0])}, line {exchanged[0].lineno}) is joined end "
        "to end, so one rank's last record runs into the next rank's first", _crash_evidence(tb), tb.node,
        _rank_of(ctx, tb),
        "end every record with a newline ('\\n'.join(lines) + '\\n', or write each with its own '\\n'), or "
        "split what arrives by sender (with the received counts) and parse each part on its own")


def _received_kept_as_bytes(ctx: Context, tb) -> Finding | None:
    """str and bytes mixed in what the job joins: what a rank keeps for itself stays str, what it received from the
    others comes back as bytes and is never decoded."""
    if not re.search(r"expected str instance, bytes found|can only concatenate str \(not \"bytes\"\)|"
                     r"'<' not supported between instances of '(?:str|bytes)' and '(?:bytes|str)'", tb.message) \
            or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    received = next((call for call in calls_named(source, {"bytes"}) if any(
        call_name(node) == "tolist" for node in walk(call))), None)
    exchanged = calls_named(source, {"all_to_all_single", "all_to_all", "recv", "all_gather", "broadcast"})
    if received is None or not exchanged:
        return None
    return Finding(
        "received-kept-as-bytes", f"{frame.location} mixes str and bytes: what arrives from the other ranks "
        f"({call_name(exchanged[0])}, line {exchanged[0].lineno}) is turned into bytes (`{ast.unparse(received)[:40]}`, "
        f"line {received.lineno}) and never decoded, while what the rank kept for itself stays str (one process "
        "receives nothing, so it never mixed them)", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        "give both the same form: decode what arrives (bytes(row).hex(), or .decode()) where it is received, or send "
        "the rank's own items through the same path as the others' (to itself)")


def _shares_padded_with_empty_items(ctx: Context, tb) -> Finding | None:
    """Shares padded to a multiple of the world size with an empty item (`{'tokens': [], ...}`): the rank that gets
    it meets an item of length 0, which one process, with nothing to pad, never does."""
    if not re.search(r"greater than 0|length 0|zero[- ]length|empty|size 0|non-empty", tb.message, re.IGNORECASE):
        return None
    for source in parsed_files(ctx):
        worlds = _world_names(source)
        for loop in (node for node in source.walk() if isinstance(node, ast.While)
                     and any(identifier(part) in worlds for part in walk(node.test))):
            filler = next((call for call in walk(loop) if isinstance(call, ast.Call) and call_name(call) in
                           ("append", "extend") and call.args and _empty_item(call.args[0])), None)
            if filler is None:
                continue
            return Finding(
                "shares-padded-with-empty-items", f"`{ast.unparse(filler)[:60]}` ({source.name}:{filler.lineno}) pads "
                f"the data to a multiple of the world size (`while {ast.unparse(loop.test)[:30]}`) with an empty item: "
                f"the rank that gets it meets an item of length 0 ({gist(tb.message, 60)}), which one process, with "
                "nothing to pad, never does", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                "pad with real items (repeat items from the start, as DistributedSampler does), or let the shares be "
                "uneven and join them where they meet; or skip or mask items of length 0 before the step that needs "
                "a length")
    return None


def _empty_item(node: ast.AST) -> bool:
    """A literal item with nothing in it: {'tokens': [], ...}, [], (), ''."""
    if isinstance(node, ast.Dict):
        return bool(node.values) and all(isinstance(value, (ast.List, ast.Tuple)) and not value.elts
                                         or isinstance(value, ast.Constant) and value.value in ("", None)
                                         for value in node.values)
    return isinstance(node, (ast.List, ast.Tuple)) and not node.elts or isinstance(node, ast.Constant) and \
        node.value == ""


def _sparse_reduction_refused(ctx: Context, tb) -> Finding | None:
    """A sparse tensor given to all_reduce that gloo's sparse path cannot add up: a bool one (sparse addition has no
    bool kernel), or ones whose sizes differ per rank because torch.sparse_coo_tensor was given no size and took it
    from the largest index each rank's own data touched."""
    bool_sum = "cadd_sparse" in tb.message and "Bool" in tb.message
    dims = "Sparse dimensions do not match" in tb.message or "sparse" in tb.message.lower() and "size" in \
        tb.message.lower() and "match" in tb.message.lower()
    if not (bool_sum or dims) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    if bool_sum:
        return Finding(
            "sparse-reduction-refused", f"all_reduce at {frame.location} was given a sparse bool tensor: gloo reduces "
            "sparse tensors by gathering every rank's and adding them up here, and sparse addition has no bool kernel "
            f"({gist(tb.message, 60)}); one process never reduces, so it never added", _crash_evidence(tb), tb.node,
            _rank_of(ctx, tb),
            "reduce a number type: build the mask with int or float values (or .to(torch.int64) before the "
            "all_reduce), then coalesce() and test values > 0 after it")
    made = next((call for call in calls_named(source, {"sparse_coo_tensor"}) if len(call.args) < 3
                 and not any(item.arg == "size" for item in call.keywords)), None)
    if made is None:
        return None
    return Finding(
        "sparse-reduction-refused", f"all_reduce at {frame.location} met sparse tensors of different sizes: "
        f"`{ast.unparse(made)[:50]}` ({source.name}:{made.lineno}) is given no size, so torch takes it from the "
        "largest index each rank's own data touched, which differs per rank", _crash_evidence(tb), tb.node,
        _rank_of(ctx, tb),
        "give the sparse tensor its full size on every rank: torch.sparse_coo_tensor(indices, values, size=(N, D)) "
        "(the whole table's shape, e.g. the embedding's weight.shape)")


def _rank_made_value_out_of_range(ctx: Context, tb) -> Finding | None:
    """Some ranks only (not rank 0) failed on a value the job makes from the rank (`1 + rank` ops, `BASE * (rank + 1)`
    as a seed, `linspace(0, 1, world)[rank]` as a strength): at this world size the higher ranks' values are past
    what the step takes, while rank 0's is in range."""
    raised = _ranks_raising(ctx, tb)
    world = ctx.evidence.expected_world_size
    if not raised or 0 in raised or len(raised) >= world or tb.short_type not in ("ValueError", "IndexError",
                                                                                    "RuntimeError", "OverflowError") \
            or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope = source.function_of(statement)
    check = failed_check_of(ctx, tb)
    if check is None or not any(operand.number is not None or operand.size == 0 for operand in check.operands):
        return None  # the value the step refused is what this rule is about: without it, nothing says it
    def of_the_rank(node: ast.AST) -> bool:
        return any(identifier(part) in RANK_NAMES or call_name(part) in RANK_CALLS for part in walk(node))

    compared = {operand.expression for operand in check.operands if operand.number is not None or operand.size == 0}
    steps = [(text, line) for text, line in origin_of(source, statement, scope, of_the_rank) if text]
    if not steps:  # a parameter of the failing function, given a value made from the rank by its caller
        parameters = [argument.arg for argument in scope.args.args] if isinstance(scope, ast.FunctionDef) else []
        used = {name for part in made_of(source, statement, scope) for name in names_in(part)}
        order = [position for position in range(len(parameters)) if parameters[position] in compared] or \
            list(range(len(parameters)))  # the values the step refused, where the hooks kept them
        for call in calls_named(source, {getattr(scope, "name", "")}) if set(parameters) & used else ():
            given = next((call.args[position] for position in order if position < len(call.args)
                          and parameters[position] in used and (of_the_rank(call.args[position]) or any(
                              text for text, _ in origin_of(source, call.args[position], source.function_of(call),
                                                            of_the_rank)))), None)
            if given is not None:
                steps = [(ast.unparse(call)[:60], call.lineno)] + [
                    (text, line) for text, line in origin_of(source, given, source.function_of(call), of_the_rank)
                    if text]
                break
        if not steps:
            return None
    shown = next((f"`{operand.expression}` is {operand.text}" for operand in (check.operands if check else ())
                  if operand.text and operand.type != "bool"), "")
    made = " <- ".join(f"`{text}` (line {line})" for text, line in steps[:3])
    return Finding(
        "rank-made-value-out-of-range", f"rank{'s' if len(raised) > 1 else ''} {', '.join(map(str, raised))} "
        f"failed at {frame.location} ({gist(tb.message, 70)}) on a value made from the rank: {made}"
        f"{f'; there {shown}' if shown else ''}: at this world size of {world} the higher ranks' values are past "
        "what the step takes, while rank 0's is in range", _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        "bound what is made from the rank (min(value, limit), max(1, value), a modulus such as % 2**32 for a seed), "
        "or spread it as a fraction of the allowed range rather than by the rank, and check it for the last rank "
        "(world - 1) when the job starts")


def _several_rank_path_only(ctx: Context, tb) -> Finding | None:
    """A failure in, or on a value from, a helper of the job that returns early on one process (`if world == 1:
    return x`): only a run of several ranks takes its other path, and that path gives another kind of value (a tensor
    where one process gets a number, keys sorted, parts joined)."""
    if (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    helpers = {function.name: (function, early) for function in source.walk() if isinstance(function, ast.FunctionDef)
               and (early := _returns_early_on_one_process(source, function)) is not None}
    if not helpers:
        return None
    inside = source.function_of(statement)
    if getattr(inside, "name", None) in helpers:
        function, early = helpers[inside.name]
        through = f"in {function.name}"
    else:
        made = [node for part in made_of(source, statement, inside) for node in walk(part)]
        names = {node.id for node in made if isinstance(node, ast.Name)}
        made += [node for call in calls_named(source, {"append", "extend"}) if isinstance(call.func, ast.Attribute)
                 and root_name(call.func.value) in names for argument in call.args for node in walk(argument)]
        called = next((call_name(node) for node in made if isinstance(node, ast.Call) and call_name(node) in helpers),
                      None)
        attributes = {node.attr for node in walk(statement) if isinstance(node, ast.Attribute)}
        setter = next((name for name, (function, _) in helpers.items() if any(
            isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and node.attr in attributes
            for node in walk(function))), None)
        name = called or setter
        if name is None:
            return None
        function, early = helpers[name]
        through = f"on a value from {function.name}"
    check = failed_check_of(ctx, tb)
    tensor = next((operand for operand in (check.operands if check else ()) if operand.shape is not None
                   and operand.type == "Tensor"), None)
    what = f"; `{tensor.expression}` is a tensor ({tensor.dtype}[{'x'.join(map(str, tensor.shape)) or 'scalar'}])" \
        if tensor is not None and tb.short_type == "TypeError" else ""
    return Finding(
        "several-rank-path-only", f"{frame.location} fails ({gist(tb.message, 70)}) {through}, which returns early "
        f"on one process (`if {ast.unparse(early.test)[:40]}:`, {source.name}:{early.lineno}): only a run of several "
        f"ranks takes its other path, and that path gives another kind of value than one process gets{what}",
        _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        f"make {function.name}'s several-rank path give what its one-process path gives (Python numbers with "
        ".item(), the same shapes, keys of one type), and run that path in a test with two processes on one "
        "machine (torchrun --nproc-per-node 2)")


STACKED_SHAPES = re.compile(r"got (?P<first>\[[^\]]*\]) at entry (?P<at>\d+) and (?P<second>\[[^\]]*\]) at entry "
                            r"(?P<other>\d+)")


def _scalar_stacked_with_a_vector(ctx: Context, tb) -> Finding | None:
    """torch.stack of values meant to be scalars (a dict of losses to reduce as one tensor), one of which is not (a
    per-frame or per-class vector): in a helper that returns early on one process, only runs of several ranks get
    there."""
    shapes = STACKED_SHAPES.search(tb.message) if RAGGED_STACK.search(tb.message) else None
    if shapes is None or "[]" not in (shapes["first"], shapes["second"]) or shapes["first"] == shapes["second"] or \
            (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    odd, position = (shapes["second"], int(shapes["other"])) if shapes["first"] == "[]" else \
        (shapes["first"], int(shapes["at"]))
    joined = _joined_list(statement, ("stack",))
    if joined is None:
        return None
    comprehension = joined[1] if isinstance(joined[1], (ast.ListComp, ast.GeneratorExp)) else None
    over = comprehension.generators[0].iter if comprehension is not None else None
    check = failed_check_of(ctx, tb)
    listed = check.operand(ast.unparse(over)) if check is not None and over is not None else None
    named = listed.items[position].text if listed is not None and position < len(listed.items) and \
        listed.items[position].text else None
    function = source.function_of(statement)
    alone = _returns_early_on_one_process(source, function, statement.lineno)
    rank = _rank_of(ctx, tb)
    return Finding(
        "scalar-stacked-with-a-vector", f"`{ast.unparse(joined[0])[:60]}` ({frame.location}) stacks values meant to be "
        f"scalars, and entry {position}{f' ({named})' if named else ''} is a tensor of shape {odd}, not a scalar"
        + (f"; {getattr(function, 'name', 'it')} returns early when `{ast.unparse(alone.test)}` (line {alone.lineno}), "
           "so only a run of several ranks stacks them" if alone else ""), _crash_evidence(tb), tb.node, rank,
        f"make every entry a scalar where it is made (reduce {named or 'that entry'} with .mean() or .sum()), or "
        "join entries of any shape flattened (torch.cat([v.reshape(-1) for v in values])) and split them back after "
        "the collective; try the several-rank path with two processes on one machine")


def _batches_across_a_strided_shard(ctx: Context, tb) -> Finding | None:
    """The DataLoader's default collate refused items of different sizes, where the job gives each rank every
    world-th item (`range(rank, n, world)`) and no collate_fn: the data's items of one size sit together (bucketed,
    sorted by length), and a strided shard changes which items share a batch."""
    if not RAGGED_STACK.search(tb.message) or not ctx.multi_node or not any(
            "collate" in frame.file or "collate" in frame.function for frame in tb.frames):
        return None
    for source in parsed_files(ctx):
        worlds = _world_names(source)
        strided = next((node for node in source.walk() if _strided_by_world(node, worlds) or isinstance(node, ast.Call)
                        and call_name(node) == "range" and len(node.args) == 3
                        and identifier(node.args[0]) in _ranks_as_read(source) and holds(node.args[2], worlds, set(), ())),
                       None)
        loaders = calls_named(source, {"DataLoader"})
        if strided is None or not loaders or any(argument(loader, 99, "collate_fn") is not None for loader in loaders):
            continue
        return Finding(
            "batches-across-a-strided-shard", f"the DataLoader stacks items of different sizes into one batch: "
            f"`{ast.unparse(strided)[:40]}` ({source.name}:{strided.lineno}) gives each rank every world-th item, so "
            f"the items that shared a batch on one process (stored side by side, one size together) are dealt to "
            f"different ranks and a rank's batch spans sizes ({gist(tb.message, 60)})", _crash_evidence(tb),
            tb.node, _rank_of(ctx, tb),
            "form the batches first and deal whole batches to the ranks (a batch sampler yielding batches[rank::"
            "world]), or pad and mask in a collate_fn so items of any size can share a batch")
    return None


def _assembled_by_a_sum(ctx: Context, tb) -> Finding | None:
    """Checksums (bytes, hashes) that do not match after the job assembles the ranks' parts by writing each into a
    zero buffer and summing the buffers with all_reduce: a sum is no copy. -0.0 + 0.0 is +0.0 (pruned or negative
    zeros), and floating sums can round, so the bytes differ though the values look equal."""
    if not re.search(r"checksum|hash|digest|sha\d*|bytes", tb.message, re.IGNORECASE) or not re.search(
            r"match|differ|disagree|mismatch|corrupt", tb.message, re.IGNORECASE) or not ctx.multi_node:
        return None
    for source in parsed_files(ctx):
        for reduced in (call for call in calls_named(source, {"all_reduce"}) if call.args and identifier(call.args[0])):
            name, scope = identifier(reduced.args[0]), source.function_of(reduced)
            zeroed = any(call_name(node) in ("zeros", "zeros_like", "zero_") for assign in source.assignments_to(
                name, scope, before=reduced.lineno) for node in walk(assign.value))
            placed = next((node for node in walk(scope) if isinstance(node, ast.Assign) and node.lineno < reduced.lineno
                           and any(isinstance(target, ast.Subscript) and identifier(target.value) == name
                                   for target in node.targets)), None)
            if not zeroed or placed is None or not reduced_with(reduced, "SUM"):
                continue
            return Finding(
                "assembled-by-a-sum", f"`{name}` is assembled by writing each rank's part into zeros "
                f"({source.name}:{placed.lineno}) and summing over the ranks (line {reduced.lineno}): a sum is no "
                f"copy, -0.0 + 0.0 comes out +0.0 and floating sums can round, so the bytes differ from the owner's "
                f"though the values look equal ({gist(tb.message, 60)})", _crash_evidence(tb), tb.node,
                _rank_of(ctx, tb),
                "assemble by copying: all_gather (or all_gather_into_tensor of equal, padded parts) and join them, so "
                "each owner's bytes arrive unchanged; or make the values canonical before hashing (x + 0.0 turns -0.0 "
                "into 0.0)")
    return None


def _part_kind(source: SourceFile, gathered: ast.AST, picked: int | None) -> tuple[str, str] | None:
    """What one rank's part is made of ((kind, its text)): positions into the rank's own data or a sorted list, from
    the gathered value (the picked item of a gathered tuple); None for anything else, which joined may be right."""
    if isinstance(gathered, ast.Tuple):
        if picked is None or picked >= len(gathered.elts):
            return None
        gathered = gathered.elts[picked]
    named = identifier(gathered) or ""
    made = [assign.value for assign in source.assignments_to(named, source.function_of(gathered))] if named else []
    called = {call_name(node) for value in [gathered, *made] for node in walk(value)}
    if POSITIONS.search(named) or "cumsum" in called:
        return "positions", ast.unparse(gathered)[:40]
    if called & ORDERING:
        return "sorted", ast.unparse(gathered)[:40]
    return None


def _parts_joined_as_whole(ctx: Context, tb) -> Finding | None:
    """A line failed on what the job made by joining every rank's gathered parts end to end (torch.cat of what
    all_gather_object returned): each part was made from its rank's own data (offsets that start at 0, a list sorted
    on its own), and joined they are not that of the whole data."""
    if (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    lists = _gathered_lists(source)
    joins = []  # (the assignment, the list joined, the item of each part it picks)
    for assign in (node for node in source.walk() if isinstance(node, ast.Assign)):
        for call in (node for node in walk(assign.value) if call_name(node) in JOINS and node.args):
            joined = call.args[0]
            if identifier(joined) in lists:
                joins.append((assign, identifier(joined), None))
            elif isinstance(joined, (ast.ListComp, ast.GeneratorExp)) and identifier(
                    joined.generators[0].iter) in lists and isinstance(item := joined.elt, ast.Subscript) and \
                    isinstance(item.slice, ast.Constant) and isinstance(item.slice.value, int):  # [p[1] for p in parts]
                joins.append((assign, identifier(joined.generators[0].iter), item.slice.value))
    read = _what_it_reads(source, statement)
    reaching = [(assign, kind) for assign, parts, picked in joins if read is not None and (
        kind := _part_kind(source, lists[parts], picked)) and not (kind[0] == "sorted" and any(
            call_name(node) in ORDERING for node in walk(assign.value)))  # sorted again as it is joined
        and names_in(read) & derived(source, {name for target in assign.targets for name in names_in(target)},
                                     set(), ())]
    if not reaching:
        return None
    assign, (kind, part) = min(reaching, key=lambda join: join[1][0] != "positions")
    told = {"positions": (f"each rank's `{part}` are positions into its own part (they start at 0), so joined "
                          "they go back to 0 at every rank's boundary",
                          f"shift each rank's `{part}` by the number of items in the parts before it when joining "
                          "(part r + the total length of parts 0..r-1), or gather lengths instead and rebuild "
                          "the positions with a cumsum over the joined lengths"),
            "sorted": (f"each rank's `{part}` is sorted on its own, so joined they are not sorted (each part "
                       "starts low again), and what assumes order (searchsorted, dropping adjacent duplicates, a "
                       "merge) goes wrong",
                       "sort the joined parts again (torch.unique(torch.cat(parts)) sorts and removes duplicates) "
                       "before anything that relies on order")}[kind]
    rank = _rank_of(ctx, tb)
    return Finding(
        "parts-joined-as-whole", f"rank {rank if rank is not None else '?'} failed at "
        f"`{ast.unparse(statement)[:60]}` ({frame.location}: {gist(tb.message, 80)}) on data joined from every "
        f"rank's gathered parts (`{ast.unparse(assign)[:60]}`, line {assign.lineno}): {told[0]}",
        _crash_evidence(tb), tb.node, rank, told[1])


def _merged_by_local_position(ctx: Context, tb) -> Finding | None:
    """A line failed on a dict merged from every rank's gathered records by a key (`by_id[rec["id"]] = rec`) that each
    rank numbered from 0 in its own part (`for idx, x in enumerate(share)`): the ranks' keys collide, and the merge
    keeps one record per position instead of every record."""
    if (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    lists, read = _gathered_lists(source), _what_it_reads(source, statement)
    if not lists or read is None:
        return None
    for merged, field in _merges_by_field(source, set(lists)):
        if not names_in(read) & derived(source, {merged}, set(), ()):
            continue
        host = _hostname_field(source, field) if (ctx.evidence.nproc_per_node or 1) > 1 else None
        if host is not None:
            rank = _rank_of(ctx, tb)
            return Finding(
                "parts-joined-as-whole", f"rank {rank if rank is not None else '?'} failed at "
                f"`{ast.unparse(statement)[:60]}` ({frame.location}: {gist(tb.message, 80)}) on `{merged}`, merged "
                f"from every rank's gathered parts by their {field!r}, which each rank set to its node's hostname "
                f"(`{host[0]}`, line {host[1]}): the ranks of one node share it, so each node's parts overwrite each "
                f"other and the merge keeps one per node ({ctx.evidence.nproc_per_node or 1} ranks run on each)",
                _crash_evidence(tb), tb.node, rank,
                "key the parts by the global rank (dist.get_rank()), or keep the gathered list as it is (it is "
                "already in rank order); a hostname names a machine, not a process")
        numbered = _numbered_from_zero(source, field)
        if numbered is None:
            continue
        rank = _rank_of(ctx, tb)
        return Finding(
            "parts-joined-as-whole", f"rank {rank if rank is not None else '?'} failed at "
            f"`{ast.unparse(statement)[:60]}` ({frame.location}: {gist(tb.message, 80)}) on `{merged}`, merged from "
            f"every rank's gathered records by their {field!r}; each rank numbered its own records from 0 "
            f"(`{numbered[0]}`, line {numbered[1]}), so the ranks' keys collide and the merge keeps one record per "
            "position, not one per example", _crash_evidence(tb), tb.node, rank,
            f"give each record its global position: the start of the rank's share plus the local one (enumerate(..., "
            f"start={numbered[3]}), or {numbered[3]} + {numbered[2]}), or carry the examples' own ids through the "
            "split, before gathering")
    return None


def _merges_by_field(source: SourceFile, gathered: set[str]) -> list[tuple[str, str]]:
    """(the dict, the field) of each `merged[record["field"]] = ...` in loops over a gathered list (and its parts)."""
    found = []
    for assign in (node for node in source.walk() if isinstance(node, ast.Assign)):
        for target in assign.targets:
            if not isinstance(target, ast.Subscript) or (merged := identifier(target.value)) is None:
                continue
            key = target.slice
            field = key.slice.value if isinstance(key, ast.Subscript) and isinstance(key.slice, ast.Constant) \
                else key.attr if isinstance(key, ast.Attribute) else None
            loops, node = [], assign
            while (node := source.parent(node)) is not None and not isinstance(node, ast.FunctionDef):
                if isinstance(node, ast.For):
                    loops.append(node)
            if field is not None and any(identifier(loop.iter) in gathered for loop in loops):
                found.append((merged, field))
    return found


HOSTNAME_CALLS = {"gethostname", "getfqdn", "node", "uname"}


def _hostname_field(source: SourceFile, field) -> tuple[str, int] | None:
    """(the value, its line) where a record's `field` is set to the machine's name (socket.gethostname(),
    platform.node(), the HOSTNAME variable)."""
    for record in (node for node in source.walk() if isinstance(node, ast.Dict)):
        for key, value in zip(record.keys, record.values):
            if isinstance(key, ast.Constant) and key.value == field and (
                    call_name(value) in HOSTNAME_CALLS or "HOSTNAME" in ast.unparse(value)):
                return ast.unparse(value)[:50], value.lineno
    return None


def _numbered_from_zero(source: SourceFile, field) -> tuple[str, int, str, str] | None:
    """(the loop, its line, the counter, where the share starts) of a loop that numbers records from 0 (`for i, x in enumerate(...)` without
    start=, `for i in range(len(...))`) and puts its counter in a record's `field` as it is."""
    for loop in (node for node in source.walk() if isinstance(node, (ast.For, ast.comprehension))):
        counter = loop.target.elts[0] if call_name(loop.iter) == "enumerate" and isinstance(
            loop.target, ast.Tuple) and not loop.iter.keywords and len(loop.iter.args) == 1 else \
            loop.target if call_name(loop.iter) == "range" and len(loop.iter.args) == 1 and call_name(
                loop.iter.args[0]) == "len" else None
        if not isinstance(counter, ast.Name):
            continue
        body = loop if isinstance(loop, ast.For) else source.parent(loop)
        for record in (node for node in walk(body) if isinstance(node, ast.Dict)):
            if any(isinstance(key, ast.Constant) and key.value == field and isinstance(value, ast.Name)
                   and value.id == counter.id for key, value in zip(record.keys, record.values)):
                lower = next((part.lower for part in walk(loop.iter) if isinstance(part, ast.Slice) and part.lower),
                             None)
                return (ast.unparse(loop.iter)[:50], getattr(loop, "lineno", record.lineno), counter.id,
                        ast.unparse(lower) if lower is not None else "share_start")
    return None


INDEX_REFUSED = re.compile(r"index out of range|out of bounds|index -?\d+ is out of")


def _modulo_world(node: ast.AST, worlds: set[str]) -> bool:
    """`ids % world`: an id's owner when ids are dealt round-robin."""
    return any(isinstance(part, ast.BinOp) and isinstance(part.op, ast.Mod) and holds(part.right, worlds, set(), ())
               for part in walk(node))


def _layouts_disagree(ctx: Context, tb) -> Finding | None:
    """An index refused at a line that subtracts a block's start (`offset = rank * rows`) from ids whose owner was
    chosen by `id % world`: rows dealt round-robin are looked up in contiguous blocks (or the reverse), so most local
    rows fall outside the rank's block."""
    if not INDEX_REFUSED.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    worlds, ranks = _world_names(source), _ranks_as_read(source)
    starts = {}  # a block's start: the rank times a size (`self.offset = rank * self.rows`)
    for assign in (node for node in source.walk() if isinstance(node, ast.Assign)):
        value = assign.value
        if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult) and any(
                holds(side, ranks, set(), ()) for side in (value.left, value.right)) and not _modulo_world(
                value, worlds):
            starts.update({identifier(target): assign for target in assign.targets if identifier(target)})
    subtracted = next((node for node in walk(statement) if isinstance(node, ast.BinOp)
                       and isinstance(node.op, ast.Sub) and identifier(node.right) in starts), None)
    if subtracted is None:
        return None
    functions = [node for node in source.walk() if isinstance(node, ast.FunctionDef)]
    routing = {function.name: node for function in functions for node in walk(function)
               if isinstance(node, ast.Return) and node.value is not None and _modulo_world(node.value, worlds)}
    dealt = {name for name, value in assignments(source) if _modulo_world(value, worlds)}
    owned = derived(source, dealt, set(), tuple(routing)) if dealt or routing else set()
    if not names_in(statement) & owned and not any(call_name(node) in routing for node in walk(statement)):
        return None
    modulo = next(iter(routing.values()), None) or next(node for node in source.walk() if isinstance(
        node, ast.Assign) and _modulo_world(node.value, worlds))
    start = starts[identifier(subtracted.right)]
    rank = _rank_of(ctx, tb)
    return Finding(
        "layouts-disagree", f"rank {rank if rank is not None else '?'} failed at `{ast.unparse(statement)[:60]}` "
        f"({frame.location}: {gist(tb.message, 60)}): the ids it looks up were routed to their owner round-robin "
        f"(`{ast.unparse(modulo)[:50]}`, line {modulo.lineno}), but each rank holds a contiguous block of rows and "
        f"subtracts the block's start (`{ast.unparse(start)[:50]}`, line {start.lineno}): the two layouts disagree, "
        "so most ids a rank owns fall outside its block", _crash_evidence(tb), tb.node, rank,
        "use one layout for routing and storage: blocks (owner = id // rows_per_rank, local row = id - owner * "
        "rows_per_rank) or round-robin (owner = id % world, local row = id // world, each rank's table of ceil(V / "
        "world) rows)")


# What a fit or a statistic says of data that lacks what it needs: one class, no variation, a singular matrix. (A NaN
# or values of two types can come of anything: not read as this.)
DEGENERATE = re.compile(r"only one class|one class present|not positive.definite|singular|ill.conditioned|zero "
                        r"variance|contains? (?:only )?(?:a )?single (?:class|label|value)|no positive|no negative",
                        re.I)


def _share_not_representative(ctx: Context, tb) -> Finding | None:
    """A fit or a statistic that failed on what a rank computed from its own contiguous block of the data: ordered
    data (by time, region, class) puts in one block only part of what the whole holds, and what needs the whole
    (both classes, every category, a varying column) breaks on the block."""
    if not DEGENERATE.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    blocks, holding = _shares(source, contiguous=True)
    # the lists a gather fills with what every rank made of its block hold blocks too
    holding |= {filled for filled, value in _gathered_lists(source).items() if names_in(value) & holding}
    read = _what_it_reads(source, statement)
    if not blocks or read is None or not names_in(read) & holding:
        return None
    # the block the data is taken by (a slice, a split) before a size computed for it, then the nearest
    split = min(blocks, key=lambda step: (not _takes_items(source.statement_at(step[1])),
                                          abs(step[1] - statement.lineno)))
    rank = _rank_of(ctx, tb)
    who = _who_raised(ctx, tb, rank)
    return Finding(
        "share-not-representative", f"{who} failed at `{ast.unparse(statement)[:60]}` ({frame.location}: "
        f"{gist(tb.message, 80)}) on what it computed from its own contiguous block of the data (`{split[0][:60]}`, "
        f"line {split[1]}): where the data is ordered (by time, region, class, file), a block holds only part of "
        "what the whole does (one class, some categories, a column that does not vary there), and a fit or "
        "statistic that needs the whole breaks on it", _crash_evidence(tb), tb.node, rank,
        "compute what needs the whole from every rank's data: all_reduce its sufficient statistics (counts, sums, "
        "min and max, X^T X and X^T y) or all_gather what it reads, and use the global result on every rank; agree "
        "on what each column is across the ranks (an explicit schema, not one inferred per block); or shuffle or "
        "stratify before splitting, or take an interleaved share (data[rank::world]), so each block is like the whole")


def _what_it_reads(source: SourceFile, statement: ast.AST) -> ast.AST | None:
    """What a failing statement computes from: an assignment's value, an assert's test, the test of the `if` that
    led to a `raise` (the job's own check), else the statement."""
    if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return statement.value
    if isinstance(statement, ast.Assert):
        return statement.test
    if isinstance(statement, ast.Raise):
        node = source.parent(statement)
        while node is not None and not isinstance(node, (ast.If, ast.FunctionDef, ast.Module)):
            node = source.parent(node)
        return node.test if isinstance(node, ast.If) else statement
    return statement


def _takes_items(node: ast.AST | None) -> bool:
    """A statement that takes items (a slice, tensor_split, chunk), not one that computes a share's size."""
    return node is not None and any(isinstance(part, ast.Slice) or call_name(part) in SPLITS
                                    for part in walk(node))


def _interleaved(node: ast.AST | None, worlds: set[str]) -> bool:
    """A share taken every world-th item (`x[rank::world]`, `% world == rank`): it samples the whole evenly."""
    return node is not None and (_modulo_world(node, worlds) or any(_strided_by_world(part, worlds)
                                                                    for part in walk(node)))


# A layer given an input of another width than it was built for.
WIDTHS_DIFFER = re.compile(r"shapes cannot be multiplied|size mismatch, m1|Expected input batch_size|expected input "
                           r"with shape|to have \d+ channels, but got \d+ channels")
LAYERS = re.compile(r"layer|block|stage|module|encoder|decoder", re.IGNORECASE)


def _layers_dealt_round_robin(ctx: Context, tb) -> Finding | None:
    """A layer given an input of another width, in a job that gives each rank every world-th layer (`layers[rank::
    world]`) to run as its stage: consecutive layers land on different ranks, and a rank chains layer i into layer
    i + world, whose input is not i's output."""
    if not WIDTHS_DIFFER.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    worlds = _world_names(source)
    dealt = next((node for node in source.walk() if isinstance(node, ast.Subscript)
                  and _strided_by_world(node.slice, worlds) and LAYERS.search(ast.unparse(node.value))), None)
    if dealt is None:
        return None
    seeds = {name for target in getattr(source.statement_of(dealt), "targets", []) for name in names_in(target)}
    held = derived(source, seeds, set(), ())  # through the function that builds the stage from them, to its calls
    if not names_in(_what_it_reads(source, statement) or statement) & held:
        return None  # the failing line does not run the layers dealt out
    rank = _rank_of(ctx, tb)
    return Finding(
        "layers-dealt-round-robin", f"rank {rank if rank is not None else '?'} failed at "
        f"`{ast.unparse(statement)[:60]}` ({frame.location}: {gist(tb.message, 70)}): its stage takes every "
        f"world-th layer (`{ast.unparse(dealt)}`, line {dealt.lineno}), so consecutive layers are on different "
        "ranks and this rank feeds one layer's output into a layer built for another's", _crash_evidence(tb),
        tb.node, rank,
        "give each rank a contiguous block of layers: bounds from the layer count (start = rank * n // world, end = "
        "(rank + 1) * n // world) and layers[start:end], so each stage's input is the previous stage's output")


def _who_raised(ctx: Context, tb, rank: int | None) -> str:
    """'every rank' where every rank raised tb's error at its line, else 'rank R'."""
    raised = {other.rank for other in ctx.tracebacks if other.rank is not None and _same_error(other, tb)}
    return "every rank" if len(raised) == ctx.evidence.expected_world_size else \
        f"rank {rank if rank is not None else '?'}"


def _world_names(source: SourceFile) -> set[str]:
    """The names that hold the world size: so named, or assigned from get_world_size() or WORLD_SIZE."""
    return set(WORLD_NAMES) | {name for name, value in assignments(source)
                               if any(reads_world_size(part) for part in walk(value))}


def _failing_statement(ctx: Context, tb) -> tuple | None:
    """(frame, source, statement) of the job's own line a rank of a multi-node run raised at; None elsewhere."""
    frame = tb.user_frame()
    if frame is None or not ctx.multi_node:
        return None
    source = source_named(parsed_files(ctx), frame.file)
    statement = (source.statement_at(frame.line) or source.statement_spanning(frame.line)) if source else None
    return (frame, source, statement) if statement is not None else None


def _assigned_from(source: SourceFile, names: set[str], call: str) -> dict[str, tuple[str, int]]:
    """Identifiers (names, attributes) the job assigns from an expression that uses one of `names` or calls `call`
    (`start = rank * per_rank`, `self.wk = column_shard(w, rank, world)`): name -> (the assignment, its line)."""
    found = {}
    for assign in (node for node in source.walk() if isinstance(node, ast.Assign)):
        for target in assign.targets:
            # `rank, world = dist.get_rank(), dist.get_world_size()`: each name from its own value
            pairs = zip(target.elts, assign.value.elts) if isinstance(target, ast.Tuple) and isinstance(
                assign.value, ast.Tuple) and len(target.elts) == len(assign.value.elts) else [(target, assign.value)]
            for part, value in pairs:
                chosen = {id(node) for choice in walk(value) if isinstance(choice, ast.IfExp)
                          for node in walk(choice.test)}  # `parts = [...] if rank == 0 else None` picks by the rank
                if not any((isinstance(node, ast.Name) and node.id in names or call_name(node) == call)
                           and id(node) not in chosen for node in walk(value)):
                    continue
                for node in walk(part):
                    name = identifier(node)
                    if name and name not in names and name not in RANK_NAMES and name != "self":
                        found.setdefault(name, (ast.unparse(assign)[:60], assign.lineno))
    return found


DICT_ATTRIBUTE = re.compile(r"'dict' object has no attribute '(?P<name>\w+)'")


def _nested_dataclass_from_dict(ctx: Context, tb) -> Finding | None:
    """A dict where a nested dataclass was meant: the job rebuilds a dataclass from a dict (`Config(**json.loads(s))`,
    after asdict() or a YAML file), and a dataclass's __init__ leaves a field that is itself a dataclass as the dict it
    was given."""
    missing = DICT_ATTRIBUTE.search(tb.message)
    if missing is None or tb.short_type != "AttributeError":
        return None
    for source in parsed_files(ctx):
        classes = {node.name: node for node in source.walk() if isinstance(node, ast.ClassDef)
                   and any("dataclass" in ast.unparse(decorator) for decorator in node.decorator_list)}
        fields = {name: {item.target.id: item.annotation for item in cls.body if isinstance(item, ast.AnnAssign)
                         and isinstance(item.target, ast.Name)} for name, cls in classes.items()}
        for outer, annotated in fields.items():
            nested = [(field, inner) for field, inner in _nested_fields(annotated, classes)
                      if missing["name"] in fields[inner]]
            rebuilt = next((call for call in calls_named(source, {outer})
                            if any(keyword.arg is None for keyword in call.keywords)), None)
            if not nested or rebuilt is None:
                continue
            field, inner = nested[0]
            rank = _rank_of(ctx, tb)
            every = ", ".join(f"'{name}': {kind}(**d['{name}'])" for name, kind in _nested_fields(annotated, classes))
            return Finding(
                "nested-dataclass-from-dict", f"rank {rank if rank is not None else '?'} read `.{missing['name']}` of "
                f"a plain dict where a {inner} was meant: `{ast.unparse(rebuilt)[:70]}` ({source.name}:"
                f"{rebuilt.lineno}) rebuilds {outer} from a dict, and a dataclass's __init__ leaves its field `{field}` "
                f"the dict it was given ({gist(tb.message, 60)})", _crash_evidence(tb), tb.node, rank,
                f"rebuild the nested dataclasses too: {outer}(**{{**d, {every}}}) (or a library that does it, "
                "dacite.from_dict), or send the object itself (broadcast_object_list pickles a dataclass whole)")
    return None


def _nested_fields(annotated: dict[str, ast.AST], classes: dict[str, ast.ClassDef]) -> list[tuple[str, str]]:
    """The fields of a dataclass that are dataclasses of the job: (field, class)."""
    return [(name, kind.id) for name, kind in annotated.items() if isinstance(kind, ast.Name) and kind.id in classes]


HOST_NAME_READS = re.compile(r"\b(?:socket\.gethostname|gethostname|platform\.node|os\.uname\(\)\.nodename)\(|"
                             r"['\"](?:HOSTNAME|SLURMD_NODENAME)['\"]")


def _per_host_settings(ctx: Context, tb) -> Finding | None:
    """An error raised on some nodes only, in a job whose code picks something by the host's name (a profile, a
    config, a path per host): the nodes ran with different settings, and the ones that differ failed."""
    raised_nodes = {other.node for other in ctx.tracebacks if _same_error(other, tb)}
    if not ctx.multi_node or not raised_nodes or len(raised_nodes) >= ctx.evidence.nnodes:
        return None
    for source in parsed_files(ctx):
        for statement in (node for node in source.walk() if isinstance(node, ast.stmt)
                          and not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.If, ast.For, ast.While,
                                                    ast.With, ast.Try))):
            text = ast.unparse(statement)
            if not HOST_NAME_READS.search(text) or not _selects_by(source, statement):
                continue
            nodes = ", ".join(f"node{node}" for node in sorted(raised_nodes))
            frame = tb.user_frame()
            return Finding(
                "settings-per-host", f"{tb.short_type} ({gist(tb.message, 60)}) on {nodes} only"
                + (f", at {frame.location}" if frame else "") + f": the job picks its settings by the host's name "
                f"(`{text[:70]}`, {source.name}:{statement.lineno}), so the nodes ran with different settings and "
                f"the ones {nodes} got do not fit the code",
                _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
                "make what a host's name selects complete and alike in what the code reads: merge per-host overrides "
                "key by key into the defaults (a deep merge, not dict.update of whole sections), or send rank 0's "
                "settings to every rank (broadcast_object_list); keep per-host values to what truly differs "
                "(paths, devices)")
    return None


def _selects_by(source: SourceFile, statement: ast.stmt) -> bool:
    """The host's name read in `statement` selects something: it is a key (`PROFILES[host]`, `.get(host)`), or
    compared (`if host == ...`), there or where the name it is assigned to is used; not a name only printed."""
    names = {target.id for target in getattr(statement, "targets", []) if isinstance(target, ast.Name)}

    def selecting(node: ast.AST, uses) -> bool:
        return (isinstance(node, ast.Subscript) and uses(node.slice)) or (
            isinstance(node, ast.Call) and call_name(node) == "get" and node.args and uses(node.args[0])) or (
            isinstance(node, ast.Compare) and any(uses(part) for part in [node.left, *node.comparators]))

    def names_host(expression: ast.AST) -> bool:
        return bool(HOST_NAME_READS.search(ast.unparse(expression))) or any(
            isinstance(node, ast.Name) and node.id in names for node in walk(expression))

    return any(selecting(node, names_host) for node in source.walk())


def _global_rank(expression: ast.AST) -> bool:
    """The global rank itself: RANK read from the environment, dist.get_rank(), a name `rank` / `global_rank`."""
    return any(isinstance(node, ast.Constant) and node.value == "RANK" or call_name(node) == "get_rank" or
               isinstance(node, ast.Name) and node.id in ("rank", "global_rank") for node in walk(expression))


def _master_address(expression: ast.AST) -> bool:
    return any(isinstance(node, ast.Constant) and node.value == "MASTER_ADDR" for node in walk(expression))


def _node_resource_from_another_node(ctx: Context, tb) -> Finding | None:
    """An OSError on the ranks of the other nodes only, at a call given a per-node resource (CPU cores, a device, an
    address to listen on) computed from something that names node0 or all nodes together: the global rank (which on
    node1 starts past the node's own cores or devices) or MASTER_ADDR (node0's address, which node1 cannot bind)."""
    if not issubclass(_builtin_error(tb.short_type), OSError):
        return None
    same = [other for other in ctx.tracebacks if _same_error(other, tb) and other.rank is not None]
    nodes = {other.node for other in same}
    if not same or 0 in nodes or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    for wanted, named in ((_master_address, "MASTER_ADDR"), (_global_rank, "the global rank")):
        chain = origin_of(source, statement, source.function_of(statement), wanted)
        if not chain:
            continue
        steps = " <- ".join(f"`{text}` (line {line})" for text, line in chain if text)
        why = ("MASTER_ADDR names node0, an address the other nodes do not have, so they cannot listen on it"
               if named == "MASTER_ADDR" else "the global rank counts every node's processes, so on node1 it starts "
               f"past the node's own {ctx.evidence.nproc_per_node} process(es) and picks what the node does not have")
        fix = ("listen on every address of the node (host '0.0.0.0') or on its own name (socket.gethostname()), "
               "not on MASTER_ADDR" if named == "MASTER_ADDR" else
               "pick per-node resources (CPU cores, a GPU, a port offset) with the local rank: LOCAL_RANK "
               "(int(os.environ['LOCAL_RANK'])), or rank % LOCAL_WORLD_SIZE")
        ranks = sorted({other.rank for other in same})
        return Finding(
            "node-resource-from-global-value", f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} "
            f"(on {', '.join(f'node{node}' for node in sorted(nodes))} only) failed with {tb.short_type} "
            f"({gist(tb.message, 60)}) at `{ast.unparse(statement)[:60]}` ({frame.location}), given {named}: "
            + (f"{steps}; " if steps else "") + why,
            _crash_evidence(tb), tb.node, _rank_of(ctx, tb), fix)
    return None


def _builtin_error(name: str) -> type:
    found = getattr(builtins, name, None)
    return found if isinstance(found, type) else Exception


def _open_mode(call: ast.Call) -> str:
    """open()'s mode as written ('r' where it is not a literal)."""
    mode = argument(call, 1, "mode")
    return mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else "r"


def _addresses_loopback(text: str) -> bool:
    """A string that names this host: a URL whose host is loopback, or a host (with a port) that is."""
    host = urlsplit(text).hostname if "://" in text else endpoint_host(text)
    return bool(host) and is_loopback(host)


CONNECT_FAILED = re.compile(r"Errno (?:111|99|113|110)\b|Connection refused|Cannot assign requested address|"
                            r"Failed to establish a new connection|No route to host")


def _service_at_localhost(ctx: Context, tb) -> Finding | None:
    """A connection refused (or no address) in the job's own client code, on some nodes only, where the job's files
    address a service as localhost: on the other nodes localhost is that node itself, where nothing listens."""
    if not ctx.multi_node or not CONNECT_FAILED.search(tb.message) or echoes_a_peer(tb) or tb.collective():
        return None
    failing = {other.node for other in ctx.tracebacks if CONNECT_FAILED.search(other.message)}
    reached = {node.index for node in ctx.evidence.nodes} - failing
    if not reached:
        return None
    candidates = []  # (a URL first, the file, the statement) of each loopback name in the job's strings
    for source in parsed_files(ctx):
        for node in source.walk():
            text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
            if text is None or not _addresses_loopback(text):
                continue
            statement = source.statement_of(node)
            if not re.search(r"MASTER_ADDR|init_process_group|init_method", ast.unparse(statement)):
                candidates.append(("://" not in text, statement.lineno, source, statement))
    if not candidates:
        return None
    _, _, source, statement = min(candidates, key=lambda found: found[:2])
    shown = ast.unparse(statement).splitlines()[0][:100]
    nodes = ", ".join(f"node{index}" for index in sorted(failing))
    return Finding(
        "service-at-localhost", f"the ranks of {nodes} could not connect ({gist(tb.message, 90)}) to a "
        f"service the job addresses as localhost: `{shown}` ({source.name}:{statement.lineno}); on {nodes} "
        f"localhost is that node itself, where nothing listens, while the ranks of "
        f"{', '.join(f'node{index}' for index in sorted(reached))} reached it",
        _crash_evidence(tb), tb.node, _rank_of(ctx, tb),
        "address the service by the host that runs it, the same name on every node: build the address from "
        "MASTER_ADDR where rank 0 serves it (f\"http://{os.environ['MASTER_ADDR']}:PORT/...\"), or "
        "broadcast the serving rank's hostname first; or gather the values to rank 0 with a collective and "
        "let only rank 0 talk to the service")


NON_LEAF_WARNING = "is not a leaf Tensor"
LEAF_MAKING = {"requires_grad_", "detach", "clone", "Parameter", "zeros", "ones", "empty", "randn", "rand", "tensor",
               "zeros_like", "ones_like", "empty_like", "randn_like", "full"}


def _grad_of_non_leaf(ctx: Context, tb) -> Finding | None:
    """None where the user's line reads `X.grad` of a tensor that is not a leaf (a view or a result of a tensor that
    requires grad): backward() fills .grad only for leaves. Known from torch's warning on that rank, or from X's
    assignment in the same function (an operation applied after requires_grad_())."""
    frame = tb.user_frame()
    if frame is None or "NoneType" not in tb.message:
        return None
    source = source_named(parsed_files(ctx), frame.file)
    if source is None:
        return None
    warned = any(NON_LEAF_WARNING in line.text for line in ctx.lines if line.node == tb.node and line.rank == tb.rank)
    for node in source.walk():
        if not (isinstance(node, ast.Attribute) and node.attr == "grad" and isinstance(node.value, ast.Name)
                and node.lineno <= frame.line <= (node.end_lineno or node.lineno)):
            continue
        name = node.value.id
        made = max(source.assignments_to(name, source.function_of(node), before=node.lineno + 1),
                   key=lambda assigned: assigned.lineno, default=None)  # the last above the read, or on its line
        if not warned and not (made is not None and _makes_non_leaf(made.value)):
            continue
        rank = _rank_of(ctx, tb)
        shown = f"`{ast.unparse(made)[:90]}` (line {made.lineno})" if made is not None else f"`{name}`"
        return Finding(
            "grad-of-non-leaf", f"rank {rank if rank is not None else '?'} read {name}.grad at "
            f"{source.name}:{frame.line}, which is None: {name} is not a leaf tensor ({shown}: the result of an "
            "operation on a tensor that requires grad, such as a view), and backward() fills .grad only for "
            "leaves", _crash_evidence(tb) + f" at {frame.location}", tb.node, rank,
            f"make {name} the leaf: do the view or reshape first and then detach it and ask for its gradient "
            f"({name} = ....view(...).detach().requires_grad_()), or call {name}.retain_grad() before backward(), "
            "or read the gradient of the leaf it was made from")
    return None


PARAMETER_LOOPS = {"parameters", "named_parameters"}


def _grad_of_unused_parameter(ctx: Context, tb) -> Finding | None:
    """None where the user's line reads `p.grad` of a parameter it loops over (model.parameters()): a parameter the
    step's forward did not use (an auxiliary head, a warm-up branch) has no gradient, and zero_grad() leaves .grad
    None. A hand-written gradient sync meets it first."""
    frame = tb.user_frame()
    if frame is None or "NoneType" not in tb.message:
        return None
    source = source_named(parsed_files(ctx), frame.file)
    if source is None:
        return None
    for loop in (node for node in source.walk() if isinstance(node, ast.For)):
        if call_name(loop.iter) not in PARAMETER_LOOPS or \
                not loop.body[0].lineno <= frame.line <= (loop.end_lineno or 0):
            continue
        names = {node.id for node in walk(loop.target) if isinstance(node, ast.Name)}
        read = next((node for node in walk(loop) if isinstance(node, ast.Attribute) and node.attr == "grad"
                     and isinstance(node.value, ast.Name) and node.value.id in names
                     and node.lineno <= frame.line <= (node.end_lineno or node.lineno)), None)
        if read is None:
            continue
        name, rank = read.value.id, _rank_of(ctx, tb)
        return Finding(
            "grad-of-unused-parameter", f"rank {rank if rank is not None else '?'} read {name}.grad at "
            f"{source.name}:{frame.line} for a parameter that has none: the loop over `{ast.unparse(loop.iter)[:50]}` "
            f"(line {loop.lineno}) reaches a parameter this step's forward did not use (an auxiliary head, a branch "
            "taken in some steps only), whose .grad zero_grad() left None",
            _crash_evidence(tb) + f" at {frame.location}", tb.node, rank,
            f"skip parameters without a gradient (if {name}.grad is None: continue) where every rank skips the same "
            f"ones, or give them zeros ({name}.grad = torch.zeros_like({name})) so every rank reduces the same "
            "tensors; or let DDP sync the gradients (DistributedDataParallel(model, find_unused_parameters=True))")
    return None


# Where each collective leaves its result: in an argument it is given (it returns None, or a Work handle with
# async_op=True).
RESULT_GIVEN = {**RESULT_ARGUMENT, "all_gather_object": (0, "object_list"), "broadcast_object_list": (0, "object_list"),
                "gather_object": (1, "object_gather_list"), "scatter_object_list": (0, "scatter_object_output_list")}


def _collective_return_used(ctx: Context, tb) -> Finding | None:
    """The failing line reads a name assigned what a collective returns (`parts = dist.all_gather_object([None] * n,
    x)`): None, or a Work handle, as the result is written into the argument the call was given."""
    frame = tb.user_frame()
    if frame is None or not re.search(r"NoneType|'Work'", tb.message):
        return None
    source = source_named(parsed_files(ctx), frame.file)
    if source is None or (statement := source.statement_at(frame.line)) is None:
        return None
    own = {node.name for node in source.walk() if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    scope = source.function_of(statement)
    for name in sorted({node.id for node in walk(statement) if isinstance(node, ast.Name)
                        and isinstance(node.ctx, ast.Load) and node.lineno == frame.line}):
        assigned = source.assignments_to(name, scope, before=frame.line)
        call = assigned[-1].value if assigned else None
        op = call_name(call)
        if op not in RESULT_GIVEN or op in own:
            continue
        position, keyword = RESULT_GIVEN[op]
        given = argument(call, position, keyword)
        kept = ast.unparse(given) if given is not None else keyword
        rest = ", ".join(ast.unparse(arg) for index, arg in enumerate(call.args) if index != position)
        rank = _rank_of(ctx, tb)
        returned, read = ("a Work handle (async_op=True)", "a Work handle") if "Work" in tb.message else ("None", "None")
        keep = f"{name} = {kept}; {called_on(call) + '.' if called_on(call) else ''}{op}(" + ", ".join(
            part for part in ((name, rest) if position == 0 else (rest, name)) if part) + ")" \
            if isinstance(given, (ast.List, ast.ListComp, ast.BinOp, ast.Call)) else \
            f"{op}({kept}, ...) and then read {kept}"
        return Finding(
            "collective-return-used", f"{name} = {ast.unparse(call)[:70]} ({source.name}:{assigned[-1].lineno}) keeps "
            f"what {op} returns, {returned}: {op} writes its result into the {keyword} it is given, so line "
            f"{frame.line} reads {read}, not the result", _crash_evidence(tb) + _at(tb), tb.node, rank,
            f"keep the {keyword} you give the call and read the result from it: {keep}; the collectives of "
            "torch.distributed fill their arguments in place and return nothing to use")
    return None


def _result_into_a_tuple(ctx: Context, tb) -> Finding | None:
    """A collective that writes what it receives into the list it is given (broadcast_object_list on the ranks that
    receive, all_gather_object, ...) was given a tuple, which cannot be written into."""
    if "'tuple' object does not support item assignment" not in tb.message:
        return None
    op = _call_that_raised(ctx, tb)
    if op not in RESULT_GIVEN:
        return None
    position, keyword = RESULT_GIVEN[op]
    frame, rank = tb.user_frame(), _rank_of(ctx, tb)
    source = source_named(parsed_files(ctx), frame.file) if frame else None
    call = next((node for node in calls_named(source, {op}) if node.lineno <= frame.line <= (
        node.end_lineno or node.lineno)), None) if source else None
    given = argument(call, position, keyword) if call else None
    made = ""
    if isinstance(given, ast.Name):
        scope = source.function_of(call)
        tuples = [assign for assign in source.assignments_to(given.id, scope, before=call.lineno)
                  if any(isinstance(value, ast.Tuple) for part in made_of(source, assign.value, scope)
                         for value in _alternatives(part))]
        made = f" `{given.id}` ({ast.unparse(tuples[-1].value)[:70]}, line {tuples[-1].lineno})" if tuples else \
            f" `{given.id}`"
    elif isinstance(given, ast.Tuple):
        made = f" `{ast.unparse(given)[:40]}`"
    where = f" at {source.name}:{call.lineno}" if call else ""
    name = given.id if isinstance(given, ast.Name) else "objects"
    return Finding(
        "collective-output-immutable", f"{op}{where} writes the objects it receives into the {keyword} it is given, "
        f"in place, and rank {rank if rank is not None else '?'} gave it a tuple{made}, which cannot be written into "
        f"(a rank that only sends never writes, so one process, or the source rank, does not fail)",
        _crash_evidence(tb) + _at(tb), tb.node, rank,
        f"give {op} a list on every rank: {name} = list(...) on the source rank and [None] * n on the others (not a "
        f"tuple such as (None, None)), call {op}({name}, ...), and unpack {name} after the call")


def _alternatives(expression: ast.AST) -> list[ast.AST]:
    """The values an expression can take: both branches of `a if c else b`, each operand of `a or b`."""
    if isinstance(expression, ast.IfExp):
        return _alternatives(expression.body) + _alternatives(expression.orelse)
    if isinstance(expression, ast.BoolOp):
        return [value for operand in expression.values for value in _alternatives(operand)]
    return [expression]


# load_state_dict refusing what it was given: another architecture's tensors, another optimizer's groups.
LOAD_REFUSED = re.compile(r"Error\(s\) in loading state_dict|size mismatch for|different number of parameter groups|"
                          r"parameter group that doesn't match")
OBJECT_FILLS = {"broadcast_object_list", "all_gather_object", "scatter_object_list", "gather_object"}


def _received_state_built_otherwise(ctx: Context, tb) -> Finding | None:
    """load_state_dict refused state this rank received from another (a state_dict through broadcast_object_list):
    the sender's model or optimizer was built from its own settings (a config sampled per rank), and this rank's was
    built from others, so their tensors or parameter groups differ."""
    if not LOAD_REFUSED.search(f"{tb.exc_type}: {tb.message}") or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    load = next((node for node in walk(statement) if call_name(node) == "load_state_dict" and node.args
                 and isinstance(node.func, ast.Attribute)), None)
    if load is None:
        return None
    scope = source.function_of(statement)
    filled = {}  # the list an object collective filled before this line -> that call
    for call in calls_named(source, OBJECT_FILLS):
        position = RESULT_GIVEN[call_name(call)][0]
        if len(call.args) > position and call.lineno <= frame.line:
            filled[identifier(call.args[position])] = call
    made = {node.id for expression in made_of(source, load.args[0], scope) for node in walk(expression)
            if isinstance(node, ast.Name)}
    received = next((filled[name] for name in made if name in filled), None)
    if received is None:
        return None
    loader = ast.unparse(load.func.value)
    built = next((assign for assign in reversed(source.assignments_to(loader, scope, before=frame.line))), None)
    ranks = _ranks_as_read(source)
    chain = origin_of(source, built.value, scope, lambda node: holds(node, ranks, set(), ())) if built else []
    rank = _rank_of(ctx, tb)
    what = "optimizer" if "group" in tb.message or _an_optimizer(source, load) else "model"
    how = (f"; this rank built its {what} as `{ast.unparse(built)[:70]}` (line {built.lineno})" if built else "") + (
        f", from settings that follow from the rank (`{chain[0][0]}`, line {chain[0][1]})"
        if len(chain) > 1 else "")
    article = "an" if what == "optimizer" else "a"
    return Finding(
        "received-state-built-otherwise", f"rank {rank if rank is not None else '?'} loaded {article} {what}'s state "
        f"that another rank sent it ({call_name(received)} at {source.name}:{received.lineno}) into its own {what} "
        f"(`{ast.unparse(load)[:60]}`, line {load.lineno}), and load_state_dict refused it ({gist(tb.message, 80)}): "
        f"the sender built its {what} from other settings{how}", _crash_evidence(tb), tb.node, rank,
        f"send the settings the {what} is built from with its state, and rebuild this rank's {what} from them before "
        "load_state_dict (or keep what decides the structure, such as layer widths or parameter groups, the same "
        "on every rank and vary only values such as learning rates)")


SIZES_DIFFER = re.compile(r"size of tensor a \(\d+\) must match|shape mismatch|size mismatch|sizes? (?:do not|don't) "
                          r"match|not broadcastable|must match the size")


def _comm_hook_state_per_bucket(ctx: Context, tb) -> Finding | None:
    """A size error inside the job's DDP communication hook that keeps state per bucket.index() (an error-feedback
    residual, a PowerSGD-like matrix): DDP rebuilds its buckets after the first iteration, in the order the gradients
    became ready, so an index then holds other parameters and the state kept for it no longer fits."""
    frame = tb.user_frame()
    if frame is None or not SIZES_DIFFER.search(tb.message):
        return None
    for source in parsed_files(ctx):
        for register in calls_named(source, {"register_comm_hook"}):
            given = argument(register, 1, "hook")
            hook = next((node for node in source.walk() if isinstance(node, ast.FunctionDef)
                         and node.name == identifier(given) == frame.function), None)
            index = next((node for node in walk(hook) if call_name(node) == "index" and not node.args), None) \
                if hook else None
            if index is None:
                continue
            rank = _rank_of(ctx, tb)
            return Finding(
                "comm-hook-state-per-bucket", f"the DDP communication hook {hook.name} ({source.name}:{hook.lineno}, "
                f"registered at line {register.lineno}) keeps state per bucket (`{ast.unparse(index)}`, line "
                f"{index.lineno}), but DDP rebuilds its buckets after the first iteration, in the order the "
                "gradients became ready: the same index then holds other parameters, of another size, and the state "
                f"kept for it no longer fits ({gist(tb.message, 80)})", _crash_evidence(tb) + _at(tb), tb.node,
                rank, "keep state only once the buckets are rebuilt: run a plain all_reduce for the first two "
                "iterations (as PowerSGD's start_powerSGD_iter does) and only then start the state, or drop a "
                "state whose shape differs from the bucket's buffer; torch's own powerSGD_hook does both")
    return None


# torch comparing a number the job gave it with the world size ("group_size (4) must not exceed the world size (2)").
AGAINST_WORLD = re.compile(r"world[ _]size|world_size|number of (?:ranks|processes)", re.IGNORECASE)
# A constant's name that says it counts processes or devices (not a period, a width or a seed of the same value).
COUNTS_PROCESSES = re.compile(r"gpu|device|rank|proc|node|worker|server|host|world|size|per_|replica|shard|group|"
                              r"(?:^|_)[tpd]p(?:_|$)", re.IGNORECASE)


def _sized_for_another_world(ctx: Context, tb) -> Finding | None:
    """torch refused a number measured against the world size, and the job took it from a constant written for
    another cluster (`GPUS_PER_SERVER = 4`), not from the launch it runs in."""
    world = ctx.evidence.expected_world_size
    if not world or not AGAINST_WORLD.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    numbers = {int(number) for number in re.findall(r"\b\d+\b", tb.message)} - {world}
    made = {node.id for expression in made_of(source, statement, source.function_of(statement))
            for node in walk(expression) if isinstance(node, ast.Name)}
    constant = next((assign for assign in source.walk() if isinstance(assign, ast.Assign)
                     and isinstance(assign.value, ast.Constant) and type(assign.value.value) is int
                     and assign.value.value in numbers and any(identifier(target) in made and COUNTS_PROCESSES.search(
                         identifier(target)) for target in assign.targets)
                     and source.function_of(assign) is source.tree), None)
    if constant is None:
        return None
    rank = _rank_of(ctx, tb)
    per_node = ctx.evidence.nproc_per_node or 1
    return Finding(
        "sized-for-another-world", f"`{ast.unparse(constant)}` ({source.name}:{constant.lineno}) is a size written for "
        f"another cluster, and `{ast.unparse(statement)[:60]}` (line {frame.line}) gives it to torch, which measured it "
        f"against this launch's world size of {world} ({ctx.evidence.nnodes} nodes x {per_node} per node) and refused "
        f"it ({gist(tb.message, 80)})", _crash_evidence(tb) + _at(tb), tb.node, rank,
        "take sizes from the launch, not from constants: the processes per node are int(os.environ["
        "\"LOCAL_WORLD_SIZE\"]) and the world size dist.get_world_size(); a group size must divide the world size "
        "(leave out a level of a hierarchy that this launch does not have)")


SIZE_REFUSED_ON_LOAD = re.compile(r"size mismatch for (?P<name>[\w.]+): copying a param with shape torch\.Size\(\[("
                                  r"?P<saved>\d+)[^\]]*\]\) from checkpoint, the shape in current model is "
                                  r"torch\.Size\(\[(?P<model>\d+)")


def _padding_for_the_world_kept(ctx: Context, tb) -> Finding | None:
    """load_state_dict refused tensors larger than the model's along their first dimension, in a job that rounds a
    size up to a multiple of the world size (a vocabulary padded so that tensor-parallel ranks get equal shards):
    the shards were joined with their padding, and the model loading them has the real size."""
    if not LOAD_REFUSED.search(f"{tb.exc_type}: {tb.message}"):
        return None
    refused = next((match for line in ctx.lines if line.node == tb.node and (match := SIZE_REFUSED_ON_LOAD.search(
        line.text)) and int(match["saved"]) > int(match["model"])), None)
    if refused is None:
        return None
    for source in parsed_files(ctx):
        padded = next((node for node in source.walk() if rounded_up(node, source.worlds)), None)
        if padded is None:
            continue
        rank = _rank_of(ctx, tb)
        saved, real = int(refused["saved"]), int(refused["model"])
        return Finding(
            "padding-for-the-world-kept", f"{refused['name']} has {saved} rows where the model loading it has {real}: "
            f"the job pads that size up to a multiple of the world size (`{ast.unparse(padded)[:60]}`, "
            f"{source.name}:{padded.lineno}) so that every rank gets an equal shard, and the shards were joined with "
            f"their padding ({saved - real} rows that hold nothing); with one process the padding can be 0",
            _crash_evidence(tb) + _at(tb), tb.node, rank,
            f"cut the padding off where the shards are joined: joined[:{real}] (the real size), before "
            "load_state_dict; or build the model that loads them with the padded size and keep the real one beside it")
    return None


def _written_lists(source: SourceFile) -> dict[str, ast.Assign]:
    """Name -> the assignment of each list or tuple written out in the code (`STRIDES = [1, 2]`)."""
    return {identifier(target): assign for assign in source.walk() if isinstance(assign, ast.Assign)
            and isinstance(assign.value, (ast.List, ast.Tuple)) for target in assign.targets if identifier(target)}


def _per_rank_list_too_short(ctx: Context, tb) -> Finding | None:
    """An index error at a line that picks a per-rank setting from a list written out in the code (`STRIDES[rank]`
    with `STRIDES = [1, 2]`): the list has fewer entries than this launch has ranks, so the ranks past its end fail."""
    if tb.short_type != "IndexError" or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    world = ctx.evidence.expected_world_size
    ranks = _ranks_as_read(source)
    lists = _written_lists(source)
    for node in walk(statement):
        if not (isinstance(node, ast.Subscript) and identifier(node.value) in lists and node.lineno == frame.line
                and holds(node.slice, ranks, set(), RANK_CALLS)):
            continue
        listed = lists[identifier(node.value)]
        count = len(listed.value.elts)
        if world and count >= world:
            continue
        rank = _rank_of(ctx, tb)
        raised = sorted({other.rank for other in ctx.tracebacks if _same_error(other, tb) and other.rank is not None})
        return Finding(
            "per-rank-list-too-short", f"`{ast.unparse(node)}` ({source.name}:{frame.line}) picks a per-rank setting "
            f"from `{ast.unparse(listed)[:60]}` (line {listed.lineno}), which has {count} entries for the "
            f"{world or 'several'} ranks of this launch: " + (f"ranks {', '.join(map(str, raised))} index past its "
            "end" if raised else "the ranks past its end fail"), _crash_evidence(tb) + _at(tb), tb.node, rank,
            f"give {identifier(node.value)} an entry for every rank, or derive the setting from a rule that covers "
            f"any world size ({identifier(node.value)}[rank % len({identifier(node.value)})], or a value computed from "
            "the rank), and check len(...) >= world_size at start-up")
    return None


# Collectives whose output is sized by the number of ranks of the group they run on (its argument's position).
SIZED_BY_GROUP = {"all_gather_into_tensor": 0, "all_gather": 0, "reduce_scatter_tensor": 1, "reduce_scatter": 1,
                  "all_to_all_single": 0, "gather": 1, "all_gather_object": 0, "scatter": 1}


def _sized_by_world_for_a_group(ctx: Context, tb) -> Finding | None:
    """A collective on a group (group=...) refused a size, where the job sized what it passes by the world's ranks
    (dist.get_world_size() without the group): a subgroup has fewer."""
    if not re.search(r"size|length|expected|mismatch", tb.message, re.IGNORECASE) or \
            (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    scope = source.function_of(statement)
    for call in (node for node in walk(statement) if call_name(node) in SIZED_BY_GROUP):
        group = next((item.value for item in call.keywords if item.arg == "group"), None)
        position = SIZED_BY_GROUP[call_name(call)]
        if group is None or isinstance(group, ast.Constant) or "WORLD" in ast.unparse(group) or \
                len(call.args) <= position:
            continue  # the default group (group=None, group.WORLD) has every rank
        world = next((node for made in made_of(source, call.args[position], scope) for node in walk(made)
                      if call_name(node) == "get_world_size" and not node.args and not node.keywords), None)
        if world is None:
            continue
        rank = _rank_of(ctx, tb)
        return Finding(
            "sized-by-world-not-group", f"`{ast.unparse(call)[:70]}` ({source.name}:{call.lineno}) runs on the group "
            f"`{ast.unparse(group)}`, but what it is given was sized by `{ast.unparse(world)}` (line {world.lineno}), "
            f"the number of ranks in the whole world, and the group has fewer: {call_name(call)} refused it "
            f"({gist(tb.message, 80)})", _crash_evidence(tb) + _at(tb), tb.node, rank,
            f"size it by the group it runs on: dist.get_world_size(group={ast.unparse(group)}) (and "
            f"dist.get_rank(group=...) for positions in it)")
    return None


def _group_rank_of_a_non_member(ctx: Context, tb) -> Finding | None:
    """An error about a rank or size of -1 at a line that reads dist.get_rank(group) or dist.get_world_size(group):
    both return -1 on a rank that is not in the group, which the job did not check before using them."""
    if not re.search(r"(?<![\w.])-1\b|-2\]", tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    asked = next((node for node in walk(statement) if call_name(node) in ("get_rank", "get_world_size")
                  and (node.args or any(item.arg == "group" for item in node.keywords))), None)
    if asked is None:
        return None
    rank = _rank_of(ctx, tb)
    group = ast.unparse(asked.args[0] if asked.args else next(item.value for item in asked.keywords
                                                                if item.arg == "group"))
    return Finding(
        "group-non-member", f"rank {rank if rank is not None else '?'} is not in the group `{group}`: "
        f"`{ast.unparse(asked)}` ({source.name}:{asked.lineno}) returns -1 on a rank outside it, and the line used "
        f"that -1 ({gist(tb.message, 80)})", _crash_evidence(tb) + _at(tb), tb.node, rank,
        f"check membership before using the group: `if dist.get_rank({group}) >= 0:` (or the rank is in the list the "
        "group was made from) around what only its members do, and let the other ranks skip to the next point "
        "every rank reaches")


RESIZES = {"interpolate", "resize", "Resize", "rand", "randn", "zeros", "ones", "empty", "full", "reshape", "view",
           "RandomResizedCrop", "CenterCrop", "crop"}


def _inputs_sized_per_rank(ctx: Context, tb) -> Finding | None:
    """A layer refused an input of another width on some ranks only, in a job that gives each rank its own input
    size from a list of settings (`SCALES[rank % len(SCALES)]`): the model was built for one size, and the ranks
    with another fail at their first forward."""
    if not WIDTHS_DIFFER.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    world = ctx.evidence.expected_world_size
    raised = {other.rank for other in ctx.tracebacks if _same_error(other, tb)}
    if world and len(raised) >= world:
        return None  # every rank failed alike: not a size one rank chose
    source = failed[1]
    ranks = _ranks_as_read(source)
    lists = {name: assign for name, assign in _written_lists(source).items()
             if source.function_of(assign) is source.tree}  # settings of the module, not a function's own lists
    picked = next((node for node in source.walk() if isinstance(node, ast.Subscript) and identifier(node.value) in
                   lists and holds(node.slice, ranks, set(), RANK_CALLS)), None)
    if picked is None or not any(call_name(node) in RESIZES and any(holds(argument, source.ranks, set(), ())
                                                                   for argument in [*node.args, *(
                                                                       item.value for item in node.keywords)])
                                 for node in source.walk()):
        return None
    listed = lists[identifier(picked.value)]
    rank = _rank_of(ctx, tb)
    return Finding(
        "inputs-sized-per-rank", f"each rank makes its inputs at its own size, picked by `{ast.unparse(picked)}` "
        f"({source.name}:{picked.lineno}) from `{ast.unparse(listed)[:50]}`, but the model was built for one size: "
        f"rank {rank if rank is not None else '?'}'s inputs do not fit it ({gist(tb.message, 80)})",
        _crash_evidence(tb) + _at(tb), tb.node, rank,
        "make the model take any input size (adaptive pooling, nn.AdaptiveAvgPool2d(1), before the Linear layers), "
        "or give every rank the same size at each step (pick it once, on rank 0 or from the step number, and share "
        "it with broadcast_object_list)")


NEGATIVE_REFUSED = re.compile(r"non-?negative|index -\d+ is out of bounds|negative (?:dimension|value|index)|"
                              r"must be (?:>= ?0|positive)|Invalid rank -", re.IGNORECASE)


def _fmod_keeps_the_sign(ctx: Context, tb) -> Finding | None:
    """A negative value refused (bincount, an index, a rank) at a line computed with fmod (torch.fmod, math.fmod,
    np.fmod): fmod keeps the sign of the dividend, so a signed hash or id gives negative owners and buckets."""
    if not NEGATIVE_REFUSED.search(tb.message) or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    fmod = next((node for made in made_of(source, statement, source.function_of(statement)) for node in walk(made)
                 if call_name(node) == "fmod"), None)
    if fmod is None:
        return None
    rank = _rank_of(ctx, tb)
    return Finding(
        "fmod-keeps-the-sign", f"`{ast.unparse(fmod)[:60]}` ({source.name}:{fmod.lineno}) keeps the sign of what it "
        f"divides: a negative hash or id gives a negative remainder, and line {frame.line} refused it "
        f"({gist(tb.message, 80)}); with one process every remainder of a division by 1 is 0", _crash_evidence(tb)
        + _at(tb), tb.node, rank,
        f"use a floor modulo, which is never negative for a positive divisor: torch.remainder("
        f"{', '.join(map(ast.unparse, fmod.args))}) (or `%` on tensors and Python ints), or make the hash unsigned "
        "before dividing")


def _divided_by_no_gpus(ctx: Context, tb) -> Finding | None:
    """A division or modulo by zero at a line whose divisor is the number of GPUs (torch.cuda.device_count(), or a
    name assigned from it): the node has none, so `rank % torch.cuda.device_count()` fails where it ran on GPUs."""
    if tb.short_type != "ZeroDivisionError" or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    divisions = [node.right for node in walk(statement) if isinstance(node, ast.BinOp)
                 and isinstance(node.op, (ast.Mod, ast.Div, ast.FloorDiv))]
    counted = next((part for divisor in divisions for made in made_of(source, divisor, source.function_of(statement))
                    for part in walk(made) if call_name(part) == "device_count"), None)
    if counted is None:
        return None
    rank = _rank_of(ctx, tb)
    return Finding(
        "no-gpu-on-node", f"`{ast.unparse(statement)[:60]}` ({source.name}:{frame.line}) divides by the number of GPUs "
        f"(`{ast.unparse(counted)}`), which is 0 on node{tb.node}: the node has no GPU, and the code assumed one "
        "(it picks a device from the rank)", _crash_evidence(tb) + _at(tb), tb.node, rank,
        "take the local rank from the launcher (int(os.environ['LOCAL_RANK'])) rather than rank % device_count(), "
        "and touch CUDA only where torch.cuda.is_available(): on CPU nodes use the gloo backend and the CPU device "
        "(`lab up --gpus` gives the nodes GPUs where the host has them)")


def _builtin_replaced_narrower(ctx: Context, tb) -> Finding | None:
    """A TypeError about an argument at a call of a builtin the job replaced on some ranks (`builtins.print = lambda
    *args: None` to quiet the ranks that are not rank 0): the stand-in takes fewer arguments than the builtin
    (print's flush=, end=), so only the quieted ranks fail."""
    if tb.short_type != "TypeError" or not re.search(r"unexpected keyword argument|positional argument", tb.message) \
            or (failed := _failing_statement(ctx, tb)) is None:
        return None
    frame, source, statement = failed
    for assign in (node for node in source.walk() if isinstance(node, ast.Assign)):
        replaced = next((target for target in assign.targets if isinstance(target, ast.Attribute)
                         and identifier(target.value) in ("builtins", "__builtin__", "__builtins__")), None)
        if replaced is None or not any(call_name(node) == replaced.attr for node in walk(statement)):
            continue
        stand_in = assign.value
        if isinstance(stand_in, ast.Lambda) and stand_in.args.kwarg is not None:
            continue  # it takes any keyword: not this
        rank = _rank_of(ctx, tb)
        return Finding(
            "builtin-replaced-narrower", f"the job replaces {replaced.attr}() on some ranks (`{ast.unparse(assign)[:60]}`"
            f", {source.name}:{assign.lineno}) with a stand-in that takes fewer arguments than {replaced.attr}: the "
            f"call at line {frame.line} passes one it refuses ({gist(tb.message, 80)}), so only the ranks where it "
            "was replaced fail", _crash_evidence(tb) + _at(tb), tb.node, rank,
            f"give the stand-in {replaced.attr}'s whole signature (def quiet(*args, **kwargs): pass), or rather leave "
            f"{replaced.attr} alone and log through the logging module with a level set per rank "
            "(logging.WARNING where the rank is not 0)")
    return None


# DDP copies rank 0's parameters and buffers into every other rank's, in place: when it is built, and the buffers
# again before each forward (broadcast_buffers=True). A job run alone never does.
DDP_STATE_COPIES = {"_sync_module_states", "_sync_params_and_buffers", "_sync_buffers", "_sync_module_buffers",
                    "_broadcast_coalesced", "_distributed_broadcast_coalesced"}
# Tensors such a copy cannot write into: (what it is, the calls that make one, the calls that undo it, the message's
# words for it, the fix).
UNCOPYABLE_STATE = (
    ("a sparse tensor", {"sparse_coo_tensor", "sparse_csr_tensor", "to_sparse", "to_sparse_coo", "to_sparse_csr"},
     {"to_dense"}, "sparse", "store it dense (.to_dense()), or keep it out of DDP's copies as a plain attribute that "
     "every rank builds the same way"),
    ("an expanded view, whose elements share one memory location", {"expand", "expand_as", "broadcast_to"},
     {"clone", "contiguous", "copy", "ascontiguousarray"}, "memory location", "register a tensor that owns its "
     "memory: .clone() (or .contiguous()) the view, np.ascontiguousarray on NumPy's side, or keep the small tensor "
     "and expand it where forward uses it"),
)
# What a refused in-place write says (not a size or a connection, which the other rules tell).
WRITE_REFUSED = re.compile(r"in-?place|memory location|inference tensor|sparse|version counter|\bviews?\b|layout",
                           re.IGNORECASE)
INFERENCE_STATE = ("a tensor made under torch.inference_mode(), which cannot be written outside it", "nference tensor",
                   "make it outside inference mode: torch.no_grad() instead of torch.inference_mode() where it is "
                   "computed, or .clone() it outside inference mode before registering it")


def _ddp_state_uncopyable(ctx: Context, tb) -> Finding | None:
    """An error raised inside DDP's copy of rank 0's parameters and buffers to the other ranks: the tensor that
    cannot be written in place, read from where the job registers it (a view, a sparse or an inference tensor)."""
    copying = next((frame for frame in tb.frames if frame.in_torch and frame.function in DDP_STATE_COPIES), None)
    if copying is None or not WRITE_REFUSED.search(tb.message):
        return None
    when = "before each forward (broadcast_buffers=True)" if "buffers" in copying.function and \
        "module" not in copying.function and "params" not in copying.function else "when DistributedDataParallel " \
        "is built"
    rank = _rank_of(ctx, tb)
    evidence = _crash_evidence(tb) + _at(tb)
    said = f"{tb.short_type}: {tb.message}"
    refused = [(source, call, name, kind, fix) for source in parsed_files(ctx)
               for call, name, value in _registered_state(source)
               for kind, fix in _state_kinds(source, value) if kind[1] in said]
    if refused:
        source, call, _, (kind, _), fix = refused[0]
        names = ", ".join(dict.fromkeys(f"{name} at {place.name}:{at.lineno}" for place, at, name, same, _ in refused
                                        if same[0] == kind))
        return Finding(
            "ddp-state-uncopyable", f"DistributedDataParallel copies rank 0's parameters and buffers into every other "
            f"rank's, in place, {when}; {names} {'is' if ',' not in names else 'are each'} {kind}, so the copy fails "
            "on every rank. A job run as one process never makes this copy", evidence, tb.node, rank,
            f"{fix}: {names}; or leave buffers out of the copies: DistributedDataParallel(model, "
            "broadcast_buffers=False) where every rank computes them the same")
    return Finding(
        "ddp-state-uncopyable", f"DistributedDataParallel copies rank 0's parameters and buffers into every other "
        f"rank's, in place, {when}, and one of the model's tensors refused the copy ({said[:160]}). A job run as one "
        "process never makes this copy", evidence, tb.node, rank,
        "register plain tensors that own their memory: dense, not a view (.clone() an expand or a broadcast), made "
        "outside torch.inference_mode(); or keep constants out of the copies (DistributedDataParallel(model, "
        "broadcast_buffers=False), or plain attributes every rank builds the same way)")


def _registered_state(source: SourceFile):
    """(call, name, value) of each register_buffer("name", value) and nn.Parameter(value) in the file."""
    for call in calls_named(source, {"register_buffer", "Parameter"}):
        if call_name(call) == "register_buffer":
            value = argument(call, 1, "tensor")
            named = call.args[0] if call.args else None
            name = repr(named.value) if isinstance(named, ast.Constant) else "a buffer"
        else:
            value = call.args[0] if call.args else None
            target = source.parent(call)
            name = ast.unparse(target.targets[0]) if isinstance(target, ast.Assign) else "a parameter"
        if value is not None:
            yield call, f"the buffer {name}" if call_name(call) == "register_buffer" else name, value


def _state_kinds(source: SourceFile, value: ast.AST):
    """Which of UNCOPYABLE_STATE (and INFERENCE_STATE) `value` is, from what it is made of: the names it is assigned
    from and the returns of the file's functions it calls, a few steps back."""
    made = made_of(source, value, source.function_of(value))
    calls = {call_name(node) for expression in made for node in walk(expression) if isinstance(node, ast.Call)}
    for kind, makers, undoers, words, fix in UNCOPYABLE_STATE:
        if calls & makers and not calls & undoers:
            yield (kind, words), fix
    if any(_under_inference_mode(source, expression) for expression in made):
        yield INFERENCE_STATE[:2], INFERENCE_STATE[2]


def _under_inference_mode(source: SourceFile, node: ast.AST) -> bool:
    """`node` runs under torch.inference_mode(): inside its with-block, or in a function it decorates."""
    while (node := source.parent(node)) is not None:
        marks = [item.context_expr for item in node.items] if isinstance(node, ast.With) else \
            node.decorator_list if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        if any(call_name(mark) == "inference_mode" or "inference_mode" in names_in(mark) for mark in marks):
            return True
    return False


def _makes_non_leaf(value: ast.AST) -> bool:
    """An operation applied after requires_grad_() (`buf.requires_grad_().view(...)`), or arithmetic on one."""
    if isinstance(value, ast.Call) and call_name(value) not in LEAF_MAKING:
        inner = value.func.value if isinstance(value.func, ast.Attribute) else None
        return any(isinstance(part, ast.Call) and call_name(part) == "requires_grad_" for part in walk(inner)) \
            if inner is not None else False
    if isinstance(value, ast.BinOp):
        return any(isinstance(part, ast.Call) and call_name(part) == "requires_grad_" for part in walk(value))
    return False


def _json_int_keys(ctx: Context, tb) -> Finding | None:
    """KeyError of a number where the job's code passes data through JSON, which makes every key a string."""
    if tb.short_type != "KeyError" or not re.fullmatch(r"-?\d+", tb.message.strip()):
        return None
    texts = [text for trace in ctx.evidence.traces for text in trace.sources.values()]
    if not any(JSON_CALLS.search(text) for text in texts):
        return None
    rank = _rank_of(ctx, tb)
    key = tb.message.strip()
    return Finding(
        "json-int-keys", f"KeyError: {key}{_at(tb)}: the dict's keys are numbers where it was made, but it went "
        f"through JSON (json.dumps/json.loads in the job's code), which turns every key into a string ('{key}')",
        _raised(tb, rank)[:400], tb.node, rank,
        "turn the keys back after loading ({int(k): v for k, v in d.items()}), or index with str(key); to send a "
        "dict between ranks with its types, use broadcast_object_list (pickle) instead of JSON")


LAUNCHER_FILE = re.compile(r"/torch/distributed/(?:run|launch)\.py$|/torch/distributed/elastic/|/bin/torchrun$|^<frozen")


def _launcher_refused(ctx: Context, tb) -> Finding | None:
    """torchrun itself failed before it started a worker: every frame is the launcher's, and no rank is known."""
    if not tb.frames or not all(LAUNCHER_FILE.search(frame.file) for frame in tb.frames) \
            or "ChildFailedError" in tb.exc_type or not tb.frames[-1].file.endswith(("/run.py", "/launch.py")):
        return None  # raised while torchrun read its own arguments (not in its rendezvous or agent)
    said = " ".join(f"{other.short_type}: {other.message}" for other in ctx.tracebacks if other.node == tb.node)
    step = tb.frames[-1].function
    option = LAUNCHER_STEPS.get(step)
    hint = (f" ({option})" if option else "")
    fix = ("on CPU nodes give --nproc-per-node a number (the processes per node, e.g. 2): 'gpu' and 'auto' count "
           "CUDA devices" if step == "determine_local_world_size" and re.search(r"Cuda|cuda|gpu", said) else
           f"correct torchrun's own arguments{hint} as its message says; they come before the script, and every "
           "node needs the same ones but --node-rank")
    return Finding(
        "launcher-refused", f"torchrun on node{tb.node} failed in {step}{hint} before it started any worker: "
        f"{gist(said, 160)}", _raised(tb, None)[:400], tb.node, None, fix)


LAUNCHER_STEPS = {"determine_local_world_size": "--nproc-per-node", "parse_min_max_nnodes": "--nnodes",
                  "get_rdzv_endpoint": "--rdzv-endpoint", "_get_addr_and_port": "--master-addr/--master-port"}
PROMPTS = ("getpass", "input", "readline", "raw_input", "prompt")


def _prompted(ctx: Context, tb) -> Finding | None:
    """EOFError under getpass or input(): the job asked for something on a terminal it does not have."""
    if tb.short_type != "EOFError" or not any(frame.function in PROMPTS or frame.file.endswith("getpass.py")
                                                for frame in tb.frames):
        return None
    rank = _rank_of(ctx, tb)
    unset = sorted({name for trace in ctx.evidence.traces if trace.calls is not None
                    for name, value in trace.calls.env_read.items() if value is None and SECRET.search(name)})
    named = f" ({', '.join(unset)} read from the environment and not set)" if unset else ""
    return Finding(
        "prompt-without-terminal", f"rank {rank if rank is not None else '?'} asked for input{_at(tb, True)} (a "
        f"password or key prompt, input()), but a job's processes have no terminal: the read met end of input"
        f"{named}", _raised(tb, rank)[:400], tb.node, rank,
        f"give the job what it asks for without a prompt: set {unset[0] if unset else 'the key or setting'} in the "
        f"job's environment (`lab exec --env {unset[0] if unset else 'NAME'}=...`, `lab torchrun --env`) or a config "
        "file on every node, and prompt only where sys.stdin.isatty()")


SECRET = re.compile(r"KEY|TOKEN|PASSW|SECRET|CREDENTIAL|AUTH", re.IGNORECASE)


def _rank_of(ctx: Context, tb) -> int | None:
    """The rank that raised tb: its log's prefix, else torchrun's report of its node's first failure."""
    return tb.rank if tb.rank is not None else report_root_rank(ctx, tb.node)


def _at(tb, with_function: bool = False) -> str:
    """' at train.py:41' (and ' in step'): the user's line that raised tb, for a finding's title; '' when none."""
    frame = tb.user_frame()
    return f" at {frame.location}" + (f" in {frame.function}" if with_function else "") if frame else ""


def _raised(tb, rank: int | None) -> str:
    """The evidence of a finding made from one traceback: where, and what it raised."""
    return f"node{tb.node}" + (f" rank {rank}" if rank is not None else "") + f": {tb.exc_type}: {tb.message}"


def _output_pipe_closed(ctx: Context, tb) -> Finding:
    rank = _rank_of(ctx, tb)
    at = _at(tb, with_function=True)
    return Finding("rank-crashed", f"rank {rank if rank is not None else '?'} died writing its output{at}: the pipe "
                                   "it wrote to was closed by its reader (BrokenPipeError)",
                   _raised(tb, rank),
                   tb.node, rank,
                   "the program reading the job's output (`| head`, `| grep -m`, a log collector) exited before the "
                   "job did: write the output to a file (or through `tee`), or let the reader read to the end; the "
                   "other ranks' lost connections follow from this rank's end")


ADDRESS_IN_USE = re.compile(r"Address already in use|EADDRINUSE")
# torch.load of a file that ends early: an empty or truncated pickle, or a zip whose directory is not written yet
READ_PAST_END = re.compile(r"^EOFError|Ran out of input|pickle data was truncated|failed finding central directory"
                           r"|PytorchStreamReader failed")


def _thread_died(ctx: Context, tb) -> Finding:
    """An exception that ended one thread of a rank: the process lives on without it (threading prints it and goes
    on), so what hangs or fails next is the rank waiting for that thread's work."""
    rank = _rank_of(ctx, tb)
    at = _at(tb, with_function=True)
    process = next((process for process in ctx.evidence.processes if process.node == tb.node and process.rank == rank
                    and process.role == "worker"), None)
    blocked = ""
    if process is not None and process.threads:
        frames = process.threads[0].frames  # outermost first
        own = next((index for index in range(len(frames) - 1, -1, -1) if not LIBRARY_FILE.search(frames[index].file)),
                   None)
        waits = frames[own + 1] if own is not None and own + 1 < len(frames) else None  # the call it made and waits in
        own = frames[own] if own is not None else None
        if waits is not None and own is not None:
            blocked = (f"; its main thread then blocked in {waits.function} at {own.location}, waiting for what the "
                       "dead thread would have done")
    return Finding("thread-died", f"rank {rank if rank is not None else '?'}'s thread '{tb.thread}' died of "
                                  f"{tb.short_type}: {gist(tb.message, 100)}{at}; the rank lived on without it"
                                  f"{blocked}",
                   _raised(tb, rank),
                   tb.node, rank,
                   f"fix the thread's error ({gist(tb.message, 80)}), and make a thread's failure reach the main "
                   "thread: catch and log inside its loop, or hand the exception back (concurrent.futures, a "
                   "sentinel on the queue), and give queue.put/join a timeout so the rank fails instead of hanging")


RELATIVE_MISSING = re.compile(r"No such file or directory: '(?P<path>[^'/][^']*)'")


def _directory_changed(ctx: Context, tb) -> Finding | None:
    """A relative path not found by a rank that had changed its working directory since it started (os.chdir, Hydra's
    run folder): the path was meant from where the job started."""
    missing = RELATIVE_MISSING.search(tb.message) if tb.short_type in ("FileNotFoundError", "OSError") else None
    trace = next((trace for trace in ctx.evidence.traces if trace.calls and trace.node == tb.node
                  and (tb.rank is None or trace.rank == tb.rank)), None)
    calls = trace.calls if trace else None
    if missing is None or calls is None or not calls.started_in or not calls.cwd or calls.cwd == calls.started_in:
        return None
    rank = _rank_of(ctx, tb)
    at = _at(tb)
    return Finding("working-directory-changed",
                   f"rank {rank if rank is not None else '?'} opened the relative path {missing['path']}{at} after "
                   f"changing its working directory from {calls.started_in} to {calls.cwd} (os.chdir, or a framework's "
                   "run folder): the path was meant from where the job started", _raised(tb, rank), tb.node, rank,
                   "build paths from a fixed base, not the working directory: the launch folder saved before any chdir "
                   "(base = os.getcwd() at start; with Hydra, hydra.utils.get_original_cwd() or hydra.job.chdir=False), "
                   "or Path(__file__).parent; or open the file before changing directory")


RENAMED = re.compile(r"No such file or directory: '(?P<source>[^']+)' -> '(?P<target>[^']+)'")


def _renamed_away(ctx: Context, tb, moved: re.Match) -> Finding:
    """os.rename/os.replace of a temporary file that was gone: in a job of several ranks writing one path, another
    rank's rename moved it first."""
    raised = _ranks_raising(ctx, tb)
    rank = _rank_of(ctx, tb)
    at = _at(tb)
    several = len(raised) > 1
    who = f"ranks {', '.join(map(str, raised))}" if several else f"rank {rank}"
    why = ("every rank writes and renames the same temporary file on a folder they share, and the first rename moves "
           "it away from the others" if several else
           "another rank renamed it first (every rank writing and renaming the same temporary file on a folder they "
           "share), or no rank wrote it")
    return Finding("rename-race", f"{who} found {moved['source']} gone when renaming it to {moved['target']}{at}: {why}",
                   _raised(tb, rank),
                   tb.node, rank,
                   "write the shared file from one rank only (if dist.get_rank() == 0: save, then os.replace; a "
                   "barrier after it before anyone reads), or give each rank its own temporary name "
                   "(f'{path}.tmp.{rank}') if each must write")


def _reads_a_checkpoint(tb) -> bool:
    return any(frame.file.endswith("/torch/serialization.py") and frame.function in ("load", "_load", "_legacy_load")
               for frame in tb.frames)


def _own_port_taken(ctx: Context, tb) -> Finding:
    """A port the job's own code binds (a metrics server, a socket of its own), not the rendezvous store's."""
    rank = _rank_of(ctx, tb)
    frame = tb.user_frame()
    source = quoted_source(ctx, tb, frame) if frame else ""
    number = re.search(r"(?<![\w.])(\d{2,5})(?![\w.])", source)
    port = f"port {number[1]}" if number else "a port"
    at = _at(tb)
    per_node = ctx.evidence.nproc_per_node
    again = _bound_again(ctx, tb)
    if again is not None:
        return Finding("port-in-use", f"{port} that the job's own code binds{at} ({source[:80] or tb.short_type}) is "
                                      f"taken on node{tb.node}: the job binds it again and again (the loop at line "
                                      f"{again}) without SO_REUSEADDR, so the port its own earlier socket closed is "
                                      "still held in TIME_WAIT (up to 60 s after a close)", _raised(tb, rank),
                       tb.node, rank,
                       "set SO_REUSEADDR on the listening socket before bind (srv.setsockopt(socket.SOL_SOCKET, "
                       "socket.SO_REUSEADDR, 1)), or make the listening socket once and keep it open across the loop; "
                       "or send what it serves with a collective (broadcast_object_list) instead of a socket")
    who = (f"the job runs {per_node} processes per node and each binds the same port, so all but the first fail"
           if per_node > 1 else "another process on the node holds it")
    return Finding("port-in-use", f"{port} that the job's own code binds{at} ({source[:80] or tb.short_type}) is "
                                  f"taken on node{tb.node}: {who}; the rendezvous port is not involved",
                   _raised(tb, rank),
                   tb.node, rank,
                   "bind it in one process per node (if int(os.environ['LOCAL_RANK']) == 0), or give each process its "
                   "own port (BASE + LOCAL_RANK), or bind port 0 and report the port the system chose")


def _bound_again(ctx: Context, tb) -> int | None:
    """The line of the loop that runs the failing bind more than once (around it, or around a call of the function
    that holds it), where the job never sets SO_REUSEADDR; None otherwise."""
    failed = _failing_statement(ctx, tb)
    if failed is None or ctx.evidence.nproc_per_node > 1:
        return None
    _, source, statement = failed
    if "SO_REUSEADDR" in names_in(source.tree) or "SO_REUSEPORT" in names_in(source.tree):
        return None
    if (loop := source.loop_of(statement)) is not None:
        return loop.lineno
    function = source.function_of(statement)
    name = getattr(function, "name", None)
    return next((loop.lineno for call in calls_named(source, {name}) if (loop := source.loop_of(call)) is not None),
                None) if name else None


def _checkpoint_cut_short(ctx: Context, tb) -> Finding:
    rank = _rank_of(ctx, tb)
    at = _at(tb)
    others = ctx.multi_node or ctx.evidence.nproc_per_node > 1
    return Finding("checkpoint-read-while-written",
                   f"rank {rank if rank is not None else '?'}'s torch.load{at} read a file that ends early "
                   f"({tb.short_type}: {gist(tb.message, 80)}): "
                   + ("a checkpoint another rank was still writing (it exists from its first byte), or a write cut "
                      "short" if others else "a write cut short, or a file still being written"),
                   _raised(tb, rank),
                   tb.node, rank,
                   "let readers in only once the writer is done: dist.barrier() after rank 0's torch.save and before "
                   "any torch.load (polling for the file's existence is not enough), or save to a temporary name in "
                   "the same folder and os.replace() it into place")


def _own_log(ctx: Context, tb):
    """The hooks' record of the process that raised tb."""
    rank = _rank_of(ctx, tb)
    return next((trace for trace in ctx.evidence.traces if trace.calls is not None and trace.node == tb.node
                 and (trace.rank == rank or rank is None)), None)


def _stale_copy(ctx: Context, tb) -> Finding | None:
    """The file a failed torch.load read predates the process and nobody saved it during the run: a broken copy left
    on that node's own disk, not one another rank was writing."""
    trace = _own_log(ctx, tb)
    failed = next((op for op in reversed(trace.calls.files) if op.op == "load" and op.error), None) if trace else None
    if failed is None or failed.mtime is None or trace.started_at is None or failed.mtime >= trace.started_at:
        return None
    probes = ctx.evidence.probes
    shared = probes is not None and probes.on_shared_folder(failed.path)
    if any(op.op == "save" and op.path == failed.path for other in ctx.evidence.traces if other.calls is not None
           and (other.node == tb.node or shared) for op in other.calls.files):
        return None  # written during the run where this rank reads it: that write may be what it read
    loaded = sorted({(other.node, op.size) for other in ctx.evidence.traces if other.calls is not None
                     and other.node != tb.node for op in other.calls.files
                     if op.op == "load" and op.path == failed.path and not op.error and op.size is not None})
    rank = _rank_of(ctx, tb)
    elsewhere = (f"; node{loaded[0][0]}'s copy ({_bytes(loaded[0][1])}) loaded" if loaded else "")
    return Finding(
        "stale-file-on-node", f"rank {rank if rank is not None else '?'}'s torch.load{_at(tb)} read {failed.path} on "
        f"node{tb.node}: {_bytes(failed.size)}, written before the run began and by nobody during it, and it could "
        f"not be read ({tb.short_type}: {gist(tb.message, 60)}){elsewhere}: a broken file left on that node's own "
        "disk (a cache from an earlier run, cut short)",
        _raised(tb, rank)[:400], tb.node, rank,
        f"delete {failed.path} on node{tb.node} (the bad copy), and make the code check what it reuses: write the "
        "cache to a temporary name and os.replace() it into place when complete, and check its size or a checksum "
        "(or catch the load's error and rebuild it) before trusting a cached file")


def _bytes(size: int | None) -> str:
    if size is None:
        return "size unknown"
    return f"{size} bytes" if size < 1 << 20 else f"{size / (1 << 20):.1f} MiB"


WRITE_FAILED = re.compile(r"File too large|EFBIG|\[Errno 27\]|iostream error|unexpected pos")


def _write_limited(ctx: Context, tb) -> Finding | None:
    """A write that failed in a process whose file-size limit (ulimit -f) is finite."""
    trace = _own_log(ctx, tb)
    limit = trace.calls.limits.get("fsize", -1) if trace else -1
    if limit < 0 or not WRITE_FAILED.search(tb.message):
        return None
    others = sorted({other.node: other.calls.limits.get("fsize", -1) for other in ctx.evidence.traces
                     if other.calls is not None and other.node != tb.node}.items())
    compared = "; " + ", ".join(f"node{node}: {'unlimited' if value < 0 else _bytes(value)}"
                                for node, value in others) if others else ""
    saved = next((op for op in reversed(trace.calls.files) if op.op == "save" and op.error), None)
    what = f"torch.save of {saved.path} stopped at {_bytes(saved.size)}" if saved else f"its write{_at(tb)} failed"
    rank = _rank_of(ctx, tb)
    return Finding(
        "file-size-limit", f"node{tb.node} limits the size of a file its processes may write to {_bytes(limit)} "
        f"(ulimit -f{compared}), and rank {rank if rank is not None else '?'}'s {what} ({gist(tb.message, 80)})",
        _raised(tb, rank)[:400], tb.node, rank,
        f"lift the file-size limit on node{tb.node} as on the others: drop the `ulimit -f` from its launch script "
        "or shell profile (ulimit -f unlimited), or the container's or scheduler's file-size limit "
        "(docker run --ulimit fsize=-1)")


WORKER_RERAISED = re.compile(r"Caught (?P<type>\w+) in (?P<where>DataLoader worker process \d+|pin memory thread)")
COLLATE_FUNCTIONS = {"default_collate", "collate", "collate_tensor_fn"}


def _worker_error(ctx: Context, tb) -> tuple[str, list[str]] | None:
    """The error a DataLoader worker raised, as the rank re-raised it ('Caught X in DataLoader worker process N',
    then 'Original Traceback'): its last line, and the functions of that traceback, innermost last."""
    if not WORKER_RERAISED.search(tb.message):
        return None
    lines = [line.text for line in ctx.lines if line.node == tb.node and line.rank in (tb.rank, None)]
    start = next((index for index, text in enumerate(lines) if "Original Traceback" in text), None)
    if start is None:
        return None
    functions = []
    for text in lines[start + 1:]:
        if frame := TRACEBACK_FRAME.match(text):
            functions.append(frame["function"])
            # where the worker was: its start-up hook, not a sample, when the loop's line calls init_fn
            if frame["function"] == "_worker_loop" and len(functions) == 1:
                code = lines[lines.index(text) + 1].strip() if lines.index(text) + 1 < len(lines) else ""
                if code.startswith("init_fn("):
                    functions[0] = "worker_init_fn"
        elif EXCEPTION_LINE.match(text.strip()):
            return text.strip(), functions
    return None


def _worker_finding(ctx: Context, tb, rank, worker: tuple[str, list[str]], evidence: str, at: str) -> Finding:
    error, functions = worker
    where = WORKER_RERAISED.search(tb.message)["where"]
    collating = bool(COLLATE_FUNCTIONS & set(functions[-4:]))
    inside = f" in {functions[-1]}" if functions else ""
    if collating and "NoneType" in error:
        returned = _none_returned(ctx)
        return Finding(
            "sample-is-none", f"rank {rank if rank is not None else '?'}'s {where} could not batch a sample that is "
            f"None ({gist(error)}): the dataset's __getitem__ returns None" + (f" at {returned}" if returned else "")
            + " for some samples (a record it skips), and the default collate_fn batches every sample it is given",
            evidence + f"; the worker's error: {error[:200]}", tb.node, rank,
            "do not hand None to the collate_fn: drop such samples in a collate_fn of your own (`batch = [s for s in "
            "batch if s is not None]`, then `default_collate(batch)`), or take the bad records out of the index "
            "before the DistributedSampler splits it, so every rank still has the same number of batches")
    if error.startswith("IndexError") and functions and functions[-1] == "__getitem__" and (
            told := _length_not_indexed(ctx)):
        return Finding(
            "dataset-length-mismatch", f"rank {rank if rank is not None else '?'}'s {where} raised {gist(error)} in "
            f"__getitem__: {told[0]}", evidence + f"; the worker's error: {error[:200]}", tb.node, rank, told[1])
    if functions[:1] == ["worker_init_fn"]:
        hook = functions[1] if len(functions) > 1 else "worker_init_fn"
        seeding = "2**32" in error
        from_torch = seeding and any(isinstance(node, ast.Attribute) and node.attr in ("initial_seed", "seed")
                                     for source in parsed_files(ctx) for node in source.walk())
        return Finding(
            "worker-init-failed", f"rank {rank if rank is not None else '?'}'s {where} raised {gist(error)} in "
            f"{hook}, the DataLoader's worker_init_fn, as the worker started (re-raised{at}): no sample was read"
            + (f"; {_NUMPY_SEED_RANGE}" if from_torch else "; NumPy's legacy seeding takes a seed below 2**32"
               if seeding else ""), evidence + f"; the worker's error: {error[:200]}",
            tb.node, rank,
            f"fix {hook}: " + ("seed NumPy with a 32-bit value, np.random.seed(torch.initial_seed() % 2**32) (or "
                               "torch.utils.data.get_worker_info().seed % 2**32)" if seeding else
                               "it runs once in each worker before any sample; num_workers=0 would not run it at all, "
                               "so it hides the error rather than showing it"))
    fix = ("the samples of one batch differ in shape and the default collate_fn cannot stack them: pad them in a "
           "collate_fn (torch.nn.utils.rnn.pad_sequence, or cut/pad to one length in the dataset), or batch_size=1"
           if collating else
           "the dataset's __getitem__ or its transform raised in the worker, on the sample it was given: run the "
           "DataLoader with num_workers=0 to see it where it happens; the error says what was wrong")
    return Finding("rank-crashed", f"rank {rank if rank is not None else '?'}'s {where} raised {gist(error)}{inside}"
                                   f" (re-raised{at})", evidence + f"; the worker's error: {error[:200]}", tb.node,
                   rank, fix)


def _sharded_weight_outside_forward(ctx: Context) -> tuple[str, str] | None:
    """A sharded submodule's weight read directly (`self.lm_head.weight`) in a method other than forward: fully_shard
    all-gathers a unit's parameters only around that unit's own forward, so there the weight is still the rank's
    shard, a DTensor."""
    for tb in (tb for tb in ctx.tracebacks if "mixed torch.Tensor and DTensor" in tb.message):
        if (failed := _failing_statement(ctx, tb)) is None or failed[0].function == "forward":
            continue
        frame, source, statement = failed
        units = {identifier(call.args[0]) for call in calls_named(source, {"fully_shard"}) if call.args}
        read = next((node for node in walk(statement) if isinstance(node, ast.Attribute) and node.attr in
                     ("weight", "bias") and identifier(node.value) in units
                     and isinstance(node.value, ast.Attribute) and identifier(node.value.value) == "self"), None)
        if read is None:
            continue
        unit = identifier(read.value)
        return (f"`{ast.unparse(read)}` is read in {frame.function}() ({frame.location}), outside {unit}'s forward: "
                f"fully_shard made {unit} a unit of its own and gathers its parameters only around its forward, so "
                "here the weight is still this rank's shard (a DTensor) and meets a plain tensor",
                f"go through the unit's forward (call self.{unit}(h) per chunk), or register the method so FSDP "
                f"gathers around it too: torch.distributed.fsdp.register_fsdp_forward_method(model, "
                f"'{frame.function}'); or do not make {unit} a unit of its own")
    return None


def _module_added_after_sharding(ctx: Context) -> tuple[str, str] | None:
    """A module put on the model (`model.head = nn.Linear(...)`) after fully_shard sharded it, directly or in a
    function of the job's that the same function called before: its parameters stay plain tensors."""
    for source in parsed_files(ctx):
        sharding = {function.name for function in map(source.function_of, calls_named(source, {"fully_shard"}))
                    if isinstance(function, ast.FunctionDef)}  # the job's functions that shard
        for scope in (node for node in source.walk() if isinstance(node, (ast.FunctionDef, ast.Module))):
            sharded_at = None
            for statement in scope.body:
                calls = {call_name(call) for call in walk(statement) if isinstance(call, ast.Call)}
                if "fully_shard" in calls or calls & sharding:
                    sharded_at = sharded_at or statement.lineno
                elif sharded_at and isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call) and \
                        any(isinstance(target, ast.Attribute) for target in statement.targets) and \
                        ast.unparse(statement.value.func).startswith(("nn.", "torch.nn.")):
                    return (f"`{ast.unparse(statement)[:60]}` ({source.name}:{statement.lineno}) puts a new module on "
                            f"the model after fully_shard sharded it (line {sharded_at}): its parameters stay plain "
                            "tensors among the model's DTensors, so an operation over every parameter "
                            "(clip_grad_norm_, the optimizer's step) gets both",
                            "change the model before sharding it: build it, replace the module, then fully_shard "
                            "(the new module too, if it is a unit of its own); build the optimizer after sharding")
    return None


def _root_not_sharded(ctx: Context) -> tuple[str, str] | None:
    """fully_shard applied to submodules in a loop and never to the model itself: the parameters outside those
    submodules (embeddings, the head) stay plain tensors among the DTensors."""
    for source in parsed_files(ctx):
        calls = calls_named(source, {"fully_shard"})
        loops = [source.loop_of(call) for call in calls]
        if not calls or None in loops:
            continue  # some fully_shard outside a loop: the root (or a unit of its own) is sharded
        loop = loops[0]
        return (f"fully_shard is applied to each of `{ast.unparse(loop.iter)[:50]}` ({source.name}:{calls[0].lineno}) "
                "but never to the model itself: the parameters outside those submodules (embeddings, the head) stay "
                "plain tensors among the DTensors, so an operation over every parameter (clip_grad_norm_, the "
                "optimizer's step) gets both",
                "shard the root too: fully_shard(model) after the submodules (FSDP2's own examples do), before the "
                "optimizer is built")
    return None


def _made_half(ctx: Context) -> str:
    """ (`model = model.half()`, FILE:LINE): where the job turned a module's weights to float16, if it says."""
    for source in parsed_files(ctx):
        for call in (node for node in source.walk() if isinstance(node, ast.Call)):
            if call_name(call) == "half" or (call_name(call) == "to" and "float16" in ast.unparse(call)):
                return f" (`{ast.unparse(source.statement_of(call))[:60]}`, {source.name}:{call.lineno})"
    return ""


# What asks the process's terminal, and what to use where there may be none.
TERMINAL_CALLS = {"get_terminal_size": "shutil.get_terminal_size(fallback=(80, 24)), which falls back where there is "
                                       "no terminal",
                  "getlogin": "getpass.getuser() (it reads the environment, then the password database)",
                  "ttyname": "a check of sys.stdout.isatty() first", "tcgetattr": "a check of sys.stdin.isatty() first",
                  "setraw": "a check of sys.stdin.isatty() first", "setcbreak": "a check of sys.stdin.isatty() first"}


def _needs_a_terminal(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """A call that asks the controlling terminal (os.get_terminal_size, os.getlogin): a launched rank has none."""
    for source in parsed_files(ctx):
        for call in calls_named(source, set(TERMINAL_CALLS)):
            if call_name(call) == "get_terminal_size" and called_on(call) == "shutil":
                continue  # shutil's falls back by itself
            return (f"`{ast.unparse(call)[:50]}` ({source.name}:{call.lineno}) asks the process's terminal, and a "
                    "launched rank has none: its output goes to a pipe or a file (torchrun's workers, ssh without a "
                    "tty, a scheduler), so the call fails" + (" on the ranks that make it" if ctx.multi_node else ""),
                    f"replace {ast.unparse(call.func)}() with {TERMINAL_CALLS[call_name(call)]}")
    return None


def _workers_given(ctx: Context) -> str:
    """ (num_workers=EXPR at FILE:LINE): what the job's DataLoader was given as its number of workers."""
    for source in parsed_files(ctx):
        for call in calls_named(source, {"DataLoader"}):
            given = next((keyword.value for keyword in call.keywords if keyword.arg == "num_workers"), None)
            if given is not None and any(keyword.arg == "timeout" for keyword in call.keywords):
                return f" (num_workers={ast.unparse(given)[:40]} at {source.name}:{call.lineno}, 0 here)"
    return ""


def _temporary_folder(ctx: Context) -> str:
    """ (TMPDIR is '...', N characters): the temporary folder the job's processes read, where one was read."""
    value = next((trace.calls.env_read.get("TMPDIR") for trace in ctx.evidence.traces
                  if trace.calls and trace.calls.env_read.get("TMPDIR")), None)
    return f" (TMPDIR is '{value[:60]}...', {len(value)} characters, before the socket's own name)" if value else ""


def _stream_replaced(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """sys.stdout (or stderr) replaced by an object of the job's own that lacks a method a stream has."""
    for source in parsed_files(ctx):
        for node in source.walk():
            if isinstance(node, ast.Assign) and any(ast.unparse(target) in ("sys.stdout", "sys.stderr")
                                                    for target in node.targets) and match["cls"] in ast.unparse(node):
                stream = ast.unparse(node.targets[0])
                return (f"`{ast.unparse(node)[:50]}` ({source.name}:{node.lineno}) replaces {stream} with an object "
                        f"that has no {match['attr']}(): whatever then flushes or asks {stream} for it (print(..., "
                        "flush=True), logging, a progress bar, torch's warnings) raises on the ranks that replaced it",
                        f"silence a rank with a real stream: {stream} = open(os.devnull, 'w') (or contextlib."
                        "redirect_stdout(io.StringIO())), or make the class a stream (subclass io.TextIOBase and "
                        "override write)")
    return None


def _drawn_outside_torch(ctx: Context) -> str:
    """ (`random.random() < self.p`, FILE:LINE): a draw from Python's or NumPy's generator in the job's code."""
    for source in parsed_files(ctx):
        for call in (node for node in source.walk() if isinstance(node, ast.Call)):
            owner = called_on(call)
            if owner in ("random", "np.random", "numpy.random") and call_name(call) != "seed":
                statement = source.statement_of(call)
                shown = ast.unparse(statement.test if isinstance(statement, (ast.If, ast.While)) else statement)
                return f" (`{shown[:60]}`, {source.name}:{call.lineno}, draws from {owner}'s generator)"
    return ""


# NumPy's legacy seeding takes 32 bits; torch's seeds are 64 (a worker's: base seed + worker id).
_NUMPY_SEED_RANGE = ("np.random.seed takes a seed below 2**32, and torch.initial_seed() in a DataLoader worker is a "
                     "64-bit number (the loader's base seed plus the worker's id)")


def _length_not_indexed(ctx: Context) -> tuple[str, str] | None:
    """A Dataset whose __len__ returns something else than the length of the list __getitem__ indexes: (title, fix)."""
    for source in parsed_files(ctx):
        for cls in (node for node in source.walk() if isinstance(node, ast.ClassDef)):
            methods = {item.name: item for item in cls.body if isinstance(item, ast.FunctionDef)}
            if "__len__" not in methods or "__getitem__" not in methods:
                continue
            indexed = next((ast.unparse(node.value) for node in walk(methods["__getitem__"])
                            if isinstance(node, ast.Subscript) and self_attribute(node.value)), None)
            returned = next((node.value for node in walk(methods["__len__"])
                             if isinstance(node, ast.Return) and node.value is not None), None)
            if indexed is None or returned is None or ast.unparse(returned) == f"len({indexed})":
                continue
            return (f"{cls.name}.__len__ returns `{ast.unparse(returned)[:60]}` ({source.name}:{returned.lineno}), not "
                    f"len({indexed}), the list __getitem__ indexes: the sampler hands out indices up to that count, "
                    f"past the end of {indexed} (which holds fewer: records left out as it was filled)",
                    f"return len({indexed}) from __len__, so the dataset's length is what __getitem__ can index "
                    "(count after filtering, not the manifest's or the file's number)")
    return None


def _none_returned(ctx: Context) -> str | None:
    """Where a dataset's __getitem__ returns None in the job's own files (file:line)."""
    for source in parsed_files(ctx):
        for function in source.walk():
            if isinstance(function, ast.FunctionDef) and function.name == "__getitem__":
                for node in walk(function):
                    if isinstance(node, ast.Return) and (node.value is None or (
                            isinstance(node.value, ast.Constant) and node.value.value is None)):
                        return f"{source.name}:{node.lineno}"
    return None


def _set_where(ctx: Context) -> str:
    """ (at file:line in F, which the job calls at lines ...) for the job's set_start_method call."""
    for source in parsed_files(ctx):
        for call in calls_named(source, {"set_start_method"}):
            function = source.function_of(call)
            if not isinstance(function, ast.FunctionDef):
                return f" (at {source.name}:{call.lineno})"
            callers = sorted(other.lineno for other in calls_named(source, {function.name}))
            also = f", which the job calls at lines {', '.join(map(str, callers))}" if len(callers) > 1 else ""
            return f" (at {source.name}:{call.lineno} in {function.name}{also})"
    return ""


def _inference_where(ctx: Context) -> str:
    """ (in F, under @torch.inference_mode() at file:line) for the job's inference-mode function or block."""
    for source in parsed_files(ctx):
        for node in source.walk():
            if isinstance(node, ast.FunctionDef) and any("inference_mode" in ast.unparse(item)
                                                         for item in node.decorator_list):
                return f" (in {node.name}, under @torch.inference_mode() at {source.name}:{node.lineno})"
            if isinstance(node, ast.With) and any("inference_mode" in ast.unparse(item.context_expr)
                                                  for item in node.items):
                return f" (under `with torch.inference_mode():` at {source.name}:{node.lineno})"
    return ""


# A sentence of an error message that tells what to do (torch's and most libraries' errors end with one).
ADVICE = re.compile(r"\b(?:hint|please|consider|try|you can|you may|you should|you need|make sure|did you mean|"
                    r"to fix|to resolve|instead|set \w+ to|pass \w+=|use \w+)\b", re.IGNORECASE)


# Advice that does not change the job: how to debug it, a page to visit, a bug to report.
NOT_A_FIX = re.compile(r"debug|https?://|\bvisit\b|file an issue|report(?:ing)? (?:a|this|the) (?:bug|issue)",
                       re.IGNORECASE)


def message_advice(message: str) -> str:
    """The parts of `message` that advise (a sentence after the first, or a clause after the first one's comma; at
    most two, 240 characters; tips for debugging left out): '' when none do."""
    # sentences and clauses, also where the message leaves out the space after a full stop or comma ("available.If
    # your ... CUDA,please pass ...")
    sentences = [part.strip() for part in re.split(r"(?<=[.!?])\s+|(?<=[a-z][.!?])(?=[A-Z])", message) if part.strip()]
    if not sentences:
        return ""
    parts = re.split(r"[,;]\s+|(?<=[a-z]),(?=[a-z])", sentences[0])[1:] + sentences[1:]
    advice = [part for part in parts if ADVICE.search(part) and not NOT_A_FIX.search(part)][:2]
    return " ".join(advice)[:240]


def _crash_fix(ctx: Context, tb, frame) -> str:
    """What to change: the line, and, where only some ranks raised it, that what differs on those ranks is the cause;
    for a crash inside a torch.distributed call, what the ranks passed to it differently; and what the message itself
    advises, where it does."""
    advice = message_advice(tb.message)
    fix = f"as the message advises: {advice}; " + _what_to_change(ctx, tb, frame) if advice else \
        _what_to_change(ctx, tb, frame)
    warned = last_warning(ctx, tb.node, tb.rank, tb.line)
    return f"{fix}; start from what the rank was warned of first: {warned}" if warned else fix


# Warnings about what a program did (not that an API will change): printed by a rank before it crashed, they often
# name the cause that the crash's own message only shows the end of.
NOT_ABOUT_THE_RUN = re.compile(r"Deprecation|Future|PendingDeprecation", re.IGNORECASE)


def last_warning(ctx: Context, node: int, rank: int | None, before: LogLine | None = None) -> str:
    """'"TEXT" (FILE:LINE)': the last UserWarning-like warning a rank printed (before `before`, its traceback)."""
    warned = ""
    for line in ctx.lines:
        if line is before:
            return warned
        if line.node == node and line.rank == rank and (match := WARNING_LINE.search(line.text)) and not (
                NOT_ABOUT_THE_RUN.search(match["category"]) or "deprecat" in match["text"].lower()):
            warned = f"\"{match['text'][:200]}\" ({match['file'].rsplit('/', 1)[-1]}:{match['line']})"
    return warned if before is None else ""


def _what_to_change(ctx: Context, tb, frame) -> str:
    line = f" at {frame.location}" if frame else ""
    if "NoneType" in tb.message and (filled := _filled_in_place(ctx, tb)):
        return (f"{filled.op} at {filled.caller} filled the list it was given, in place, and this rank then read None "
                f"from elsewhere{line}: read the received objects from that very list (objs = [None]; "
                f"dist.{filled.op}(objs, ...); config = objs[0]), not from the variable that was put into a "
                "temporary list")
    op = _call_that_raised(ctx, tb)
    if op and ctx.multi_node and (differs := arguments_that_differ(last_calls_of(ctx, op))):
        return (f"make what the ranks pass to {op}{line} agree; they passed {' | '.join(differs)}, which {op} "
                f"rejected ({gist(tb.message, 100)}): compute these the same way on every rank (from the world size "
                "or a value agreed first, e.g. an all_reduce(MAX) of the counts), not from each rank's own data")
    raised = {other.rank for other in ctx.tracebacks if _same_error(other, tb)}
    ranks = ctx.evidence.expected_world_size
    alone = (f"; only {' and '.join(f'rank {rank}' for rank in sorted(raised, key=str))} raised it: what differs there "
             "is the cause (its data shard, a file or a variable on its node, a branch on the rank)"
             if ctx.multi_node and len(raised) < ranks and None not in raised else "")
    if ctx.multi_node and ranks and len(raised) >= ranks and None not in raised:
        return (f"every rank raised it at the same place{line} ({gist(tb.message, 100)}): no rank is the odd one "
                "out, so the cause is in what they all run or read (the code that computes what this line checks, "
                "a file or setting every node has), not in one rank's data or node; fix that, then the other ranks' "
                f"errors go with it{_compared(ctx, tb)}")
    return (f"make the call{line} get what it needs: the message says what was wrong ({gist(tb.message, 100)})"
            f"{alone}; the other ranks' connection errors and timeouts follow from it")


def _compared(ctx: Context, tb) -> str:
    """'; rank 0 checked `a == b` with a = 3, b = 4': what the failing statement worked with, where the hooks kept it."""
    check = failed_check_of(ctx, tb)
    shown = [f"{operand.expression} = {operand.text if operand.text is not None else _shape_of(operand)}"
             for operand in (check.operands if check else ()) if operand.type != "bool"][:4]
    return f"; rank {tb.rank} checked `{check.statement[:80]}` with {', '.join(shown)}"[:400] if shown else ""


def _shape_of(operand) -> str:
    if operand.shape is not None:
        return f"{operand.dtype or operand.type}[{'x'.join(map(str, operand.shape)) or 'scalar'}]"
    return f"{operand.type} of {operand.length}" if operand.length is not None else operand.type


def _ranks_raising(ctx: Context, tb) -> list[int]:
    """The ranks whose traceback is the same error as `tb` (type and line)."""
    return sorted({other.rank for other in ctx.tracebacks if _same_error(other, tb) and other.rank is not None})


def _crash_evidence(tb) -> str:
    return f"node{tb.node}: {tb.exc_type}: {tb.message}"[:300]


def _same_error(one, other) -> bool:
    """The same exception: one message, or one type raised at one line of the user's code (messages that carry a
    rank's own path, time or sizes still differ)."""
    if one.exc_type != other.exc_type:
        return False
    if one.message == other.message:
        return True
    mine, theirs = one.user_frame(), other.user_frame()
    return mine is not None and theirs is not None and mine.location == theirs.location


FILLED_IN_PLACE = ("broadcast_object_list", "scatter_object_list", "recv_object_list")


def _filled_in_place(ctx: Context, tb) -> DistCall | None:
    """The object collective this rank returned from last, when the list it passed held only None (to be filled)."""
    trace = next((trace for trace in ctx.evidence.traces if trace.rank == tb.rank and trace.calls), None)
    last = trace.calls.recent[-1] if trace and trace.calls.recent else None
    if last is None or last.op not in FILLED_IN_PLACE:
        return None
    return last if last.fills_a_list else None


def _call_that_raised(ctx: Context, tb) -> str | None:
    """The torch.distributed call the user made that raised tb: as the hooks recorded it, else from its frames."""
    for trace in ctx.evidence.traces:
        if trace.rank == tb.rank and trace.calls is not None:
            for call in reversed(trace.calls.failed):
                if call.error and tb.message[:60] in call.error:
                    return call.op
    return tb.collective(outermost=True)


def last_calls_of(ctx: Context, op: str) -> dict[int, DistCall]:
    """Each rank's last call of `op` as the jobs' hooks recorded it (pending, raised or returned)."""
    found = {}
    for trace in ctx.evidence.traces:
        if trace.rank is None or trace.calls is None:
            continue
        calls = [call for call in trace.calls.made if call.op == op]
        if calls:
            found[trace.rank] = max(calls, key=lambda call: call.entered_at or 0)
    return found


# What a module of another version says: a name it does not have (an import, or an attribute of the module).
NOT_IN_MODULE = re.compile(r"cannot import name '(?P<name>[^']+)' from '(?P<module>[^'.]+)[^']*'"
                           r"|module '(?P<module2>[^'.]+)[^']*' has no attribute '(?P<name2>[^']+)'")


def _version_difference(ctx: Context, tb) -> tuple[str, str, str] | None:
    """(module, missing name, 'node1, ...') when a name is missing from a module on some nodes only, at an import
    or at the script's top level (code every rank runs alike, so the others got past it); None otherwise."""
    found = NOT_IN_MODULE.search(tb.message) if tb.short_type in ("ImportError", "AttributeError") else None
    if found is None or not ctx.multi_node:
        return None
    frame = tb.user_frame()
    if tb.short_type == "AttributeError" and (frame is None or frame.function != "<module>"):
        return None  # inside a function the ranks may take different paths: not evidence of different versions
    module, name = found["module"] or found["module2"], found["name"] or found["name2"]
    failing = {other.node for other in ctx.tracebacks if f"'{module}" in other.message and f"'{name}'" in other.message}
    if failing >= {node.index for node in ctx.evidence.nodes}:
        return None  # no node has it: a plain error, not a difference
    return module, name, ", ".join(f"node{index}" for index in sorted(failing))


def _nodes_lacking(ctx: Context, module: str) -> set[int]:
    """The nodes where some process could not import `module` (in a traceback, or `python -m`'s one line)."""
    return ({tb.node for tb in ctx.tracebacks if f"No module named '{module}" in tb.message}
            | {line.node for line in ctx.lines if (found := RUN_MODULE_MISSING.search(line.text))
               and (found["missing"] or found["bare"]).split(".")[0] == module})


# Object collectives that fill a list the caller made, one entry per member of the group.
OBJECT_GATHERS = ("all_gather_object", "gather_object")


def object_list_findings(ctx: Context) -> list[Finding]:
    """An object collective given a list of another length than its group has ranks: torch fills one entry per member,
    so a longer list keeps None in the rest (which the code then reads), and a shorter one fails inside torch."""
    for trace in ctx.evidence.traces:
        for call in reversed(trace.calls.made if trace.calls else ()):
            length, members = call.object_list_length, len(call.group) if call.group else trace.world_size
            if call.op not in OBJECT_GATHERS or length is None or not members or length == members:
                continue
            failed = next((tb for tb in ctx.tracebacks if tb.rank == trace.rank), None) or next(iter(ctx.tracebacks),
                                                                                             None)
            if failed is None or (length > members and "NoneType" not in failed.message) or (
                    length < members and failed.collective() not in OBJECT_GATHERS):
                continue
            group = f"its group of {members} ranks {list(call.group)}" if call.group else f"the {members} ranks"
            left = (f"fills the first {members} entries and leaves the other {length - members} None, which the code "
                    "then read" if length > members else f"has no entry for ranks past the {length}th")
            return [Finding(
                "collective-list-length", f"rank {trace.rank} gave {call.op} a list of {length} on {group}"
                f"{f' ({call.caller})' if call.caller else ''}: it {left} ({failed.short_type}: {failed.message})",
                f"rank {trace.rank}: {call.op}(object_list={call.argument('object_list')}, group of {members})"
                f"{f' at {call.caller}' if call.caller else ''}; then {failed.short_type}: {failed.message}",
                trace.node, trace.rank,
                f"size the list by the group the call runs on: [None] * dist.get_world_size({'group' if call.group else ''})"
                " (a subgroup's size, not the world's), and read only the entries of its members")]
    return []


# `python -m NAME` when NAME cannot be found: one line, no traceback.
RUN_MODULE_MISSING = re.compile(
    r"python[\d.]*: (?:Error while finding module specification for '(?P<asked>[^']+)' \(ModuleNotFoundError: "
    r"No module named '(?P<missing>[^']+)'\)|No module named (?P<bare>[\w.]+)$)")


def run_module_findings(ctx: Context) -> list[Finding]:
    """`python -m pkg.module` whose package is not importable where it ran: the project is not on that node's path."""
    for line in ctx.lines:
        if found := RUN_MODULE_MISSING.search(line.text):
            module = (found["missing"] or found["bare"]).split(".")[0]
            lacking = _nodes_lacking(ctx, module)
            nodes = ", ".join(f"node{index}" for index in sorted(lacking))
            rank = line.rank if line.rank is not None else report_root_rank(ctx, line.node)
            elsewhere = ctx.multi_node and lacking < {node.index for node in ctx.evidence.nodes}
            fix = (f"put the project on every node and run from it: `lab up --workspace DIR` mounts it on a lab's "
                   f"nodes (lab_workspace=DIR in an inventory copies it to real hosts); or install '{module}' on "
                   "them (`lab up --pip ...`)")
            if elsewhere:
                return [Finding("package-missing-on-nodes", f"'{module}' cannot be found on {nodes} only: the nodes' "
                                "Python paths differ", quote(line), line.node, rank,
                                fix + f"; on real hosts, check {nodes}'s copy of the project")]
            return [Finding("import-error", f"python -m cannot find '{module}' on {nodes}", quote(line), line.node,
                            rank, fix)]
    return []


def _not_initialized(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    in_worker = next((other for other in ctx.lines if other.node == line.node and other.rank == line.rank
                      and WORKER_RERAISED.search(other.text) and "DataLoader worker" in other.text), None)
    if in_worker is not None:
        return ("a torch.distributed call ran inside a DataLoader worker process (its worker_init_fn, or the "
                "dataset's code): a worker is a process of its own, and one started with multiprocessing_context="
                "'spawn' (or forkserver) has no process group",
                "ask torch.distributed in the main process and hand the value to the workers "
                "(worker_init_fn=functools.partial(seed_worker, rank=dist.get_rank()), or keep it on the dataset); "
                "for seeding, torch gives each worker its own seed (torch.initial_seed() inside it)")
    destroyed = next((call for trace in ctx.evidence.traces if trace.node == line.node and trace.calls
                      for call in trace.calls.recent if call.op == "destroy_process_group"), None)
    if destroyed is not None or any(trace.node == line.node and trace.reached for trace in ctx.evidence.traces):
        at = f" at {destroyed.caller}" if destroyed and destroyed.caller else ""
        return (f"the process group was destroyed{at} while the job still used it: a torch.distributed call came "
                "after destroy_process_group", "call destroy_process_group once, at the very end of the program "
                "(not in a helper such as an evaluation or checkpoint function that the training loop calls)")
    for tb in ctx.tracebacks:
        for frame in tb.frames if tb.node == line.node else ():
            source = quoted_source(ctx, tb, frame)
            if source.startswith(("def ", "async def ")) and DIST_DEFAULT.search(source):
                call = DIST_DEFAULT.search(source)[0]
                return (f"`{call}` is a default argument of {frame.function}'s `{source.split('(')[0][4:].strip()}` "
                        f"({frame.location}): Python evaluates it once, when the `def` runs (at import), before "
                        "init_process_group was called",
                        f"make the default None and ask torch.distributed inside the function, once the group exists "
                        f"(def __init__(self, ..., num_replicas=None): num_replicas = num_replicas or "
                        f"dist.get_world_size())")
    return ("a torch.distributed call before init_process_group (or after destroy_process_group)",
            "call dist.init_process_group(...) first on every rank, and guard clean-up with "
            "`if dist.is_initialized(): dist.destroy_process_group()`")


# A default argument that asks torch.distributed: `world_size=dist.get_world_size()` in a def line.
DIST_DEFAULT = re.compile(r"\w+\s*=\s*(?:torch\.)?(?:dist|distributed)\.get_\w+\(\)")


def _watchdog(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """faulthandler.dump_traceback_later(T, exit=True) fired: it dumps every thread, then _exit(1)s."""
    after = [other for other in ctx.lines if other.node == line.node and other.rank == line.rank]
    start = next((index for index, other in enumerate(after) if other is line), 0)
    own = next((found for other in after[start:start + 80] if (found := FAULTHANDLER_FRAME.match(other.text))
                and not LIBRARY_FILE.search(found["file"])), None)
    where = f" while it was in {own['function']} ({own['file'].rsplit('/', 1)[-1]}:{own['line']})" if own else ""
    who = f"rank {line.rank}" if line.rank is not None else f"a process on node{line.node}"
    return (f"the job's own watchdog ended {who}: faulthandler.dump_traceback_later({match['limit']}, exit=True) fired "
            f"after {match['limit']} without being reset{where}, dumped every thread and exited with status 1",
            "give the watchdog a limit above the slowest step it guards (the first steps build caches and compile), "
            "or re-arm it each step (faulthandler.cancel_dump_traceback_later() then dump_traceback_later(T, "
            "exit=True)); if that step should be fast, what it was doing above is why it was not")


def _script_not_found(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    if moved := _looked_for_after_chdir(match["path"], line, ctx):
        started_in, cwd = moved
        return (f"the script {match['path']} is not where it was looked for: a process of the job changed directory "
                f"(from {started_in} to {cwd}) and then started `{match['path'].rsplit('/', 1)[-1]}` by a relative "
                "path (sys.argv[0], a bare file name), which now resolves inside the new folder",
                "start child processes with an absolute path (os.path.abspath(sys.argv[0]) or __file__, taken before "
                "any chdir) or with cwd= the launch folder; or do not chdir: write outputs under the run folder by "
                "path")
    return (f"the script {match['path']} is not on node{line.node}",
            "copy it to every node (lab exec --copy FILE, or a path under the lab's shared folder /lab/shared)")


def _looked_for_after_chdir(path: str, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """(launch folder, folder changed to) where a process of the node moved into the folder the missing script was
    looked for in, and the script is a file of the job's own (it exists in the folder the process started in)."""
    folder, _, name = path.rpartition("/")
    for trace in ctx.evidence.traces:
        calls = trace.calls
        if trace.node != line.node or not calls or not calls.cwd or not calls.started_in:
            continue
        if calls.cwd != calls.started_in and folder == calls.cwd and any(
                source.rsplit("/", 1)[-1] == name for source in trace.sources):
            return calls.started_in, calls.cwd
    return None


def _bad_arguments(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    if re.search(r"--local[_-]rank", match["why"]):  # torch.distributed.launch's --local_rank, which torchrun never passes
        return (f"the script asks for --local_rank on its command line, which torchrun does not pass (torch.distributed"
                f".launch did): {match['why']}",
                "read the local rank from the environment torchrun sets: local_rank = int(os.environ['LOCAL_RANK']) "
                "(keep --local_rank optional, default from LOCAL_RANK, if the old launcher must work too)")
    if launcher := sorted(set(LAUNCHER_OPTION.findall(match["why"]))):
        return (f"the script was given torchrun's own options ({', '.join(launcher)}): they were written after the "
                f"script's name, so torchrun passed them on to the script ({match['why'][:160]})",
                "put the launcher's options before the script: torchrun --nnodes N --node-rank R --nproc-per-node P "
                "--master-addr A --master-port PORT script.py [the script's own arguments]; everything after the "
                "script's name is the script's")
    return (f"the script rejected its command-line arguments: {match['why']}",
            "pass the arguments the script's usage line asks for (lab exec fills {rank}, {world_size}, ... per node)")


# torchrun's (and torch.distributed.launch's) own options, in either spelling.
LAUNCHER_OPTION = re.compile(r"--(?:nnodes|nproc[_-]per[_-]node|node[_-]rank|master[_-]addr|master[_-]port|"
                             r"rdzv[_-](?:backend|endpoint|id|conf)|standalone|max[_-]restarts|monitor[_-]interval|"
                             r"role|start[_-]method|log[_-]dir|redirects|tee)\b")


def _initialized_twice(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return ("init_process_group was called twice in one process (the default group exists already)",
            "call it once per process: guard it with `if not dist.is_initialized():`, and look for a second call in a "
            "helper, a framework that initialises it itself (Accelerate, Lightning) or a retry loop")


def _descriptors(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return (f"node{line.node} ran out of open file descriptors (the process's limit, ulimit -n)",
            "hold fewer files at once, or raise the limit (ulimit -n 65536 in the job, `--ulimit nofile=...` for a "
            "container); tensors passed between DataLoader workers each hold a descriptor: "
            "torch.multiprocessing.set_sharing_strategy('file_system') or fewer workers")


def _no_compiler(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return (f"code is compiled while the job runs and node{line.node} has no compiler (or build tool) for it",
            "give the nodes a compiler (an image with gcc/g++ and ninja: `lab up --image ...`, or `--pip ninja` for "
            "ninja), or avoid the build: use the prebuilt form of the extension (prebuilt ops, a non-fused optimizer, "
            "torch.compile off)")


def _read_only(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return (f"the job writes into a read-only folder on node{line.node}",
            "write outputs (checkpoints, logs, caches) to a writable folder: the lab's shared folder /lab/shared "
            "(seen by every node) or a temporary folder; the lab mounts the workspace read-only on purpose, so "
            "nodes cannot change your project")


OBJECT_COLLECTIVES = {"broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list",
                      "send_object_list", "recv_object_list"}


def _not_picklable(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    if match["attribute"]:
        return (f"an object sent between ranks names {match['attribute']!r}, which the receiving process does not "
                "define: the ranks run different code (a class defined under `if rank == 0`, or another version of "
                "the script on one node)",
                "define every class and function you send through *_object collectives at the top level of a module "
                "that every rank imports, and give every node the same code")
    sending = next(((tb, frame.function) for tb in ctx.tracebacks if tb.line is line for frame in tb.frames
                    if frame.in_torch and frame.function in OBJECT_COLLECTIVES), None)
    if sending is not None and (match["scripted"] or match["parametrized"]):
        user = sending[0].user_frame()
        kind = "a TorchScript module (torch.jit.script or trace)" if match["scripted"] else \
            "a module with a parametrization (weight_norm, spectral_norm, parametrize)"
        return (f"{sending[1]}{' at ' + user.location if user else ''} pickles the object it sends, and it was given "
                f"{kind}, which torch refuses to pickle",
                "send the module's state_dict() and build the module on every rank from code (load_state_dict)"
                + (", or torch.jit.save it into an io.BytesIO, send those bytes and torch.jit.load them on each rank"
                   if match["scripted"] else ", or remove the parametrization before sending"))
    saving = next((tb for tb in ctx.tracebacks if tb.line is line
                   and any(frame.file.endswith("/torch/serialization.py") and frame.function in ("save", "_save")
                           for frame in tb.frames)), None)
    if saving is not None:
        what = re.search(r"local object '([^']+)'", line.text)
        user = saving.user_frame()
        at = f" at {user.location}" if user else ""
        handle = re.search(r"cannot pickle '?(?:[\w.]*\.)?(?P<type>ProcessGroup\w*|Work|_?thread\.\w+|\w*[Ll]ock|socket|"
                           r"TextIOWrapper|BufferedWriter|BufferedReader|Store|TCPStore|FileStore|Generator)'? object",
                           line.text)
        if handle:
            return (f"torch.save{at} pickles everything it is given, and that includes a live {handle['type']} "
                    "object (a process group, a store, a lock, a file or a thread a process holds), which has no "
                    "meaning outside the process that made it",
                    "save only the state (tensors, numbers, state_dict()s): build the dict to save yourself, or give "
                    "the class a __getstate__ that leaves the handle out, and create the handle again (new_group, "
                    "open) when the state is restored")
        return (f"torch.save{at} pickles the whole object it is given, and {what[1] if what else 'something in it'} "
                "cannot be pickled (a lambda or a function defined inside another)",
                "save the weights, not the module: torch.save(model.state_dict(), path) (and load_state_dict into a "
                "model built by code); or make the lambda a module-level function")
    starting_workers = any(other.node == line.node and ("_MultiProcessingDataLoaderIter" in other.text
                                                         or "start a worker Process" in other.text)
                           for other in ctx.lines)
    if starting_workers:
        what = re.search(r"local object '([^']+)'", line.text)
        return (f"the DataLoader could not start its worker processes: {what[1] if what else 'an object they need'} "
                "cannot be pickled, and workers started with spawn or forkserver get the dataset, collate_fn and "
                "worker_init_fn pickled",
                "make collate_fn, worker_init_fn and what the dataset holds module-level functions and classes (not "
                "lambdas or functions defined inside another), or start the workers with fork "
                "(DataLoader(..., multiprocessing_context='fork')), or num_workers=0")
    return ("an object passed to a *_object collective (or to a DataLoader worker) cannot be pickled",
            "send plain data: tensors, numbers, strings, lists and dicts of them; leave out lambdas, locks, open "
            "files, sockets and generators (or convert them first)")


def _batch_of_one(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return (f"a batch of one sample reached BatchNorm in training ({match['size']}): the last batch of an epoch is "
            "what is left over (each rank's share modulo the batch size), and BatchNorm cannot take statistics of one",
            "drop the incomplete last batch: DataLoader(..., drop_last=True) (and DistributedSampler(drop_last=True) "
            "so every rank has as many), or a batch size that divides each rank's share")


NAN = re.compile(r"\bnan\b", re.IGNORECASE)


def _statistic_of_one(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """torch's warning that std()/var() had no degrees of freedom (one value, with the default correction of 1: nan),
    in a run that then reported nan: a batch of one sample, the last of an epoch."""
    if not any(NAN.search(other.text) for other in ctx.lines):
        return None
    where = f" at {match['file'].rsplit('/', 1)[-1]}:{match['line']}" if match["file"] else ""
    return (f"{match['op']}() of a single value{where} gives nan (torch warned: degrees of freedom is <= 0), and the "
            "run then reported nan: a batch of one sample (the smaller last batch of an epoch, each rank's share "
            "modulo the batch size) has no spread with the default correction (n - 1)",
            f"drop the last, smaller batch: DataLoader(..., drop_last=True); or compute it so one sample is defined: "
            f"{match['op']}(correction=0) (unbiased=False, the population formula); or skip batches of one "
            "(if x.shape[0] > 1)")


def _meta_tensors(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return (f"rank {line.rank if line.rank is not None else '?'} computed with tensors on the meta device (shapes "
            "without data): its model was built on meta (device='meta', init_empty_weights) and never materialised, "
            "so nothing a broadcast or a load sent was kept",
            "materialise the model before any collective or load touches it: model.to_empty(device='cpu') (or "
            "'cuda'), then broadcast or load the weights into it")


def _not_contiguous(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    tb = next((tb for tb in ctx.tracebacks if tb.line is line), None)
    frame = tb.user_frame() if tb else None
    call = (tb.collective(outermost=True) or "a collective") if tb else "a collective"
    at = f" at {frame.location}" if frame else ""
    return (f"{call}{at} was given a tensor that is not contiguous in memory (a transpose, permute or strided "
            "slice of another): the backend sends a buffer, not a view",
            "pass t.contiguous() (a copy laid out in order) to the collective, and allocate its output contiguous; "
            "transpose back after the call if the layout matters")


def _non_member(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return (f"global rank {match['rank']} ran {match['op']} on a group it is not a member of: torch skips the call "
            "there (a warning, no error), so that rank never gets the data and goes on with what it had",
            "create the groups so every rank belongs to the one it uses (dist.new_subgroups(), or one new_group per "
            "node built from the world size on every rank), or skip the collective on the ranks outside it (and "
            "give them the data another way)")


def _cross_device(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return (f"os.rename/os.replace cannot move {match['source']} to {match['target']}: they are on two filesystems "
            "(a node's own /tmp and the job's folder, which the lab shares between nodes as a volume, are two)",
            "create the temporary file in the destination folder (tempfile.NamedTemporaryFile(dir=<that folder>, "
            "delete=False)) and os.replace it there, or use shutil.move, which copies across filesystems")


def _output_size(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    check = match["check"] or match["python"] or ""
    scatter = check.startswith("output") and "* worldSize ==" in check or check.lower().startswith("input tensor size")
    sizes = f" ({match['left']} vs. {match['right']})" if match["left"] else ""
    world = ctx.evidence.expected_world_size or 0
    if scatter and match["left"] and world > 1 and int(match["right"]) % world and \
            int(match["left"]) == int(match["right"]) // world * world:
        total, shard = int(match["right"]), int(match["right"]) // world
        return (f"reduce_scatter's input ({total} elements) does not divide by the world size ({world}): a shard of "
                f"{total} // {world} = {shard} on each rank covers {shard * world}, and {total % world} element(s) "
                "belong to no rank",
                "pad the flat buffer to a multiple of the world size (padded = -(-n // world) * world, the padding "
                "zeroed and left out when the shards are put back), as ZeRO and FSDP do; or reduce_scatter a list "
                "of uneven shards")
    if scatter:
        return (f"reduce_scatter's output is not one shard of its input{sizes}: the output must hold input size / "
                "world size elements, and it was given the input's whole size",
                "allocate the output as one shard: torch.empty(t.numel() // dist.get_world_size()) (reduce_scatter_"
                "tensor), with the input's length divisible by the world size; all_reduce if every rank needs the "
                "whole sum")
    return (f"all_gather_into_tensor's output is not world size times its input{sizes}: it must hold every rank's "
            "input, end to end",
            "allocate the output as torch.empty(dist.get_world_size() * t.numel()) (or torch.empty((world_size, *t."
            "shape)) for all_gather_into_tensor's stacked form)")


def _reduce_op_dtype(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return (f"ReduceOp.{match['op']} cannot reduce a {match['what']} tensor: the bitwise ops (BOR, BAND, BXOR) take "
            "integer tensors only",
            f"reduce an integer tensor (torch.tensor([int(flag)], dtype=torch.int32)) with ReduceOp.{match['op']}, or "
            "keep the float and use ReduceOp.MAX (any rank's 1 wins) or MIN (every rank must agree)")


RANK_ZERO_DECORATOR = re.compile(r"rank_?zero|main_process|master_only|zero_only|on_main|only_main", re.IGNORECASE)


def _rank_zero_result_in_collective(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """A collective given None on the ranks where a function decorated to run on rank 0 only (the job's own
    rank_zero_only) returned nothing: the value it passes was that function's result."""
    tb = next((tb for tb in ctx.tracebacks if tb.line is line), None)
    for source in parsed_files(ctx):
        decorated = {node.name: decorator for node in source.walk() if isinstance(node, ast.FunctionDef)
                     for decorator in node.decorator_list if RANK_ZERO_DECORATOR.search(ast.unparse(decorator))}
        if not decorated:
            continue
        for frame in (tb.frames if tb else ()):
            if source_named([source], frame.file) is None or (statement := source.statement_at(frame.line)) is None:
                continue
            scope = source.function_of(statement)
            for name in {node.id for node in walk(statement) if isinstance(node, ast.Name)}:
                made = source.assignments_to(name, scope, before=frame.line)
                called = call_name(made[-1].value) if made else None
                if called in decorated:
                    return (f"`{name}` (line {made[-1].lineno}) is the result of {called}, decorated with "
                            f"@{ast.unparse(decorated[called])} (it runs on rank 0 only): on every other rank it "
                            f"returned None, and the collective at {source.name}:{frame.line} was given that None",
                            f"compute {name} on every rank (it is the same computation), or give the other ranks a "
                            f"tensor of the right shape to receive into (torch.empty(shape) where rank != 0) before "
                            "the collective fills it; keep rank-zero-only decorators for logging and saving")
    return None


def _order_op_on_complex(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """MAX, MIN (and other orderings) asked of a complex tensor, which has no order."""
    return (f"ReduceOp.{match['op']} was asked of a complex tensor: complex numbers have no order, so torch refuses "
            "MAX and MIN on them",
            f"reduce something that has an order: the magnitude (t.abs()) with ReduceOp.{match['op']}, then take the "
            "complex value of the rank that won (all_gather torch.view_as_real(t) and pick it by the magnitude); SUM "
            "works on complex tensors as they are")


def _op_not_in_backend(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """The backend has no such reduction: say which line of the job asked for it, or which library call did."""
    op, backend = match["op"], match["backend"]
    for source in parsed_files(ctx):
        if op == "PREMUL_SUM" and (divide := next(iter(calls_named(source, {"set_gradient_divide_factor"})), None)):
            return (f"{backend} has no ReduceOp.{op}: FSDP2 reduces the gradients with PREMUL_SUM (NCCL's pre-multiplied "
                    f"sum) once a custom divide factor is set (`{ast.unparse(divide)[:60]}`, {source.name}:"
                    f"{divide.lineno})", "have FSDP reduce with a plain sum and scale apart: "
                    "model.set_force_sum_reduction_for_comms(True) after fully_shard (or drop the divide factor and "
                    "scale the loss instead: loss * world_size / total_count with FSDP's default averaging)")
        for node in source.walk():
            if isinstance(node, ast.Attribute) and node.attr == op and "ReduceOp" in ast.unparse(node.value):
                return (f"{backend} has no ReduceOp.{op}, which the job passes at {source.name}:{node.lineno}",
                        f"reduce with an op {backend} has (SUM, then divide by the group's size for an average; MAX, "
                        f"MIN, PRODUCT) or run that collective on a backend that has {op} (nccl on GPUs)")
    return (f"{backend} has no ReduceOp.{op}: a library the job calls asked for it (the traceback shows which)",
            f"configure that library to reduce with SUM (and scale apart), or run it on a backend that has {op}")


def _sampler_rank(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """A DistributedSampler given a rank of the whole world and a count of fewer replicas (a data-parallel group)."""
    replicas = int(match["last"]) + 1
    raised_at = {(frame.file.rsplit("/", 1)[-1], frame.line) for tb in ctx.tracebacks if "Invalid rank" in tb.message
                 for frame in tb.frames}
    for source in parsed_files(ctx):
        for sampler in sorted(calls_named(source, {"DistributedSampler"}), key=lambda call: not any(
                (source.name, line) in raised_at for line in range(call.lineno, (call.end_lineno or call.lineno) + 1))):
            given = {keyword.arg: ast.unparse(keyword.value) for keyword in sampler.keywords}
            if "num_replicas" not in given and "rank" not in given:
                continue
            within = re.search(r"mesh|group|dp|data_parallel|replica", given.get("num_replicas", ""), re.I)
            return (f"DistributedSampler ({source.name}:{sampler.lineno}) was given num_replicas="
                    f"{given.get('num_replicas', 'the world size')} ({replicas} here) and rank="
                    f"{given.get('rank', 'the global rank')} ({match['rank']} on this rank): the two count different "
                    "ranks" + (", the replicas of one group and the whole world" if within else ""),
                    "give it the rank within the group it counts: rank=mesh['dp'].get_local_rank() with a DeviceMesh, "
                    "or dist.get_rank(group=dp_group), so the ranks of one replica (its tensor- or pipeline-parallel "
                    "peers) read the same shard; or both from the world (dist.get_world_size(), dist.get_rank())"
                    if within else "pass num_replicas and rank that count the same ranks: dist.get_world_size() and "
                    "dist.get_rank() (the whole world), or a group's size and the rank within that group")
    return (f"a DistributedSampler got rank {match['rank']} with only {replicas} replicas: its rank and num_replicas "
            "count different ranks", "pass num_replicas and rank that count the same ranks: the world's size and "
            "rank, or a group's size and the rank within that group")


def _device_mismatch(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return ("a collective got tensors on a device its backend cannot use (CUDA tensors with gloo, CPU tensors with "
            "NCCL, or tensors on two devices)",
            "put the tensors where the backend works: .cpu() for gloo, .cuda(local_rank) for NCCL (or "
            "init_process_group('cuda:nccl,cpu:gloo') for both), and keep every tensor of one call on one device")


def _disk_full(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    if re.search(r"/dev/shm|torch_\d|shared memory", line.text):
        return None  # shared memory: its own cause
    return (f"the disk node{line.node} writes to is full",
            "write less (fewer or smaller checkpoints, keep the last N), or write to a folder with room; `df -h` on "
            "the node shows which")


def _list_length(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    sizes = f" ({match['got']} tensors for a group of {match['expected']})" if match["expected"] else ""
    return (f"a collective's list of tensors has another length than the group has ranks{sizes}: it was sized with a "
            "count of this node's processes (LOCAL_WORLD_SIZE) or a number of its own, not the world's",
            "size the list from the group: [torch.empty_like(t) for _ in range(dist.get_world_size(group))] "
            "(WORLD_SIZE across nodes, not LOCAL_WORLD_SIZE)")


def _dataloader_worker_died(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    how = match["how"]
    if "Killed" in how:
        return (f"a DataLoader worker on node{line.node} was killed (SIGKILL): the kernel's OOM killer or a kill from "
                "outside", "give the workers less to hold (fewer num_workers, a smaller prefetch_factor or batch, no "
                "dataset copy per worker) or the node more memory (`lab up --memory`); `lab doctor` shows the limits")
    return (f"a DataLoader worker on node{line.node} died of {how.strip()}: native code in the dataset or its "
            "transforms crashed", "run the dataset with num_workers=0 in the rank to see the crash where it happens "
                                  "(a C extension, a decoder, a file read through mmap)")


def _backend_missing(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    backend = match["backend"].lower()
    others = sorted({other.node for other in ctx.lines if other.node != line.node} - {
        other.node for other in ctx.lines if match.re.search(other.text)})
    differs = (f"; node{line.node} chose it while {', '.join(f'node{node}' for node in others)} did not: the backend "
               "is read from something that differs between the nodes (a variable, a config file)") if others else ""
    return (f"node{line.node} asked for the {backend} backend, which this torch was built without{differs}",
            "use a backend this torch has on every node (gloo on CPU, nccl with GPUs), and the same one everywhere: "
            "name it in the code or pass it to every node alike (lab exec/torchrun --env), not from a node's own "
            "environment")


def _alltoall_splits(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    for source in parsed_files(ctx):
        for call in calls_named(source, {"all_to_all_single"}):
            output, given = argument(call, 0, "output"), argument(call, 1, "input")
            if output is None or given is None or argument(call, 2, "output_split_sizes") is None:
                continue
            like = next((made for made in made_of(source, output, source.function_of(call)) if isinstance(made, ast.Call)
                         and call_name(made) in ("empty_like", "zeros_like", "ones_like", "clone") and (
                             root_name(made.args[0] if made.args else made.func) == root_name(given))), None)
            if like is not None:
                return (f"`{ast.unparse(call)[:70]}` ({source.name}:{call.lineno}) receives into "
                        f"`{ast.unparse(output)}`, made the size of what this rank sends (`{ast.unparse(like)}`, line "
                        f"{like.lineno}), while output_split_sizes says how much it receives: where the ranks send "
                        "each other different amounts the two differ",
                        f"size the receiving tensor from the counts received: torch.empty(int(sum(output_split_sizes)), "
                        f"*{root_name(given)}.shape[1:], dtype={root_name(given)}.dtype)")
    return ("all_to_all's split sizes disagree between the ranks: what one rank sends to another is not what that "
            "rank expects from it", "compute the splits consistently: exchange the counts first (all_to_all_single "
            "of a tensor of counts) and use the counts received as output_split_sizes; every rank's "
            "input_split_sizes must sum to its input's first dimension")


def _scatter_source(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    if "gather_list" in match[0]:
        return ("gather's list is passed on another rank than its destination (dst): only the destination receives, "
                "so only it may pass gather_list" if match["gather"] else
                "gather's destination (dst) has no gather_list to receive into",
                "pass gather_list on the rank given as dst only, None on every other rank: gather_list=[torch.empty_"
                "like(t) for _ in range(world_size)] if rank == dst else None (all_gather gives every rank the list)")
    return ("scatter's list is built on another rank than the one passed as its source (src): the source has no list, "
            "or another rank has one", "build scatter_list / scatter_object_input_list on the rank you pass as src, "
            "and pass None on every other rank (or pass as src the rank that builds it)")


def _state_dict_keys(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    keys = [other.text for other in ctx.lines if other.node == line.node and "key(s) in state_dict" in other.text]
    if any('"module.' in text or "'module." in text for text in keys + [line.text]):
        return ("a state dict saved from a DistributedDataParallel-wrapped model (every key starts with 'module.') is "
                "loaded into the bare model, or the reverse", "save model.module.state_dict() from DDP (or load into "
                "the wrapped model), or strip the prefix when loading: torch.nn.modules.utils."
                "consume_prefix_in_state_dict_if_present(state, 'module.')")
    return (f"the checkpoint's keys differ from the model's on node{line.node}: another architecture, config or code "
            "version than the one that saved it", "load the checkpoint into the model that saved it (the same code "
            "and config on every node), or load with strict=False only for keys you mean to skip")


def _checkpoint_keys_differ(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """torch.distributed.checkpoint loads the keys of the dict it is given, flattened ('model.layer.weight' for
    {'model': {...}}): a dict shaped otherwise than the one saved asks for keys the checkpoint does not have."""
    saved, loaded = _checkpoint_calls(ctx, "save"), _checkpoint_calls(ctx, "load")
    said = f"the state dict given to load asks for '{match['key']}', which the checkpoint does not hold"
    if saved and loaded:
        said += (f": it was saved from {saved[0]} and is loaded into {loaded[0]}, and load looks each key up by "
                 "its path through the nested dicts, so the two must be shaped alike")
    else:
        said += (": load looks each key up by its path through nested dicts, so a dict nested otherwise than the one "
                 "saved ({'model': ...} against a bare state_dict()), or keys with another prefix ('module.' from "
                 "DDP, '_orig_mod.' from torch.compile), asks for keys the checkpoint lacks")
    return said, ("give dcp.load a dict shaped like the one saved: for dcp.save({'model': model.state_dict()}), "
                  "state = {'model': fresh.state_dict()}; dcp.load(state, checkpoint_id=...); "
                  "fresh.load_state_dict(state['model']); and the same module wrapping (DDP, compile) on both sides")


def _checkpoint_calls(ctx: Context, verb: str) -> list[str]:
    """The first argument of each torch.distributed.checkpoint save (or load) call in the job's code, with its line."""
    found = []
    for source in parsed_files(ctx):
        for call in calls_named(source, {verb}):
            if checkpoint_call(call) and (call.args or call.keywords):
                argument = call.args[0] if call.args else call.keywords[0].value
                found.append(f"`{ast.unparse(argument)[:60]}` ({source.name}:{call.lineno})")
    return found


def _rank_not_in_group(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    return (f"a collective on a subgroup was given rank {match['rank']} as its source or destination, and global rank "
            f"{match['rank']} is not in that group: src= and dst= are global ranks even with group=",
            "pass the member's global rank (dist.get_global_rank(group, 0) for the group's first member), or the "
            "group-relative one as group_src= / group_dst= (torch 2.6 and later)")


def _allocation_too_large(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    size = int(match["bytes"])
    return (f"a tensor of {size / 2**30:,.1f} GiB was asked for on node{line.node}: far more than a node holds, so its "
            "shape is not what was meant",
            "find the shape that makes it (an N x N matrix over the whole dataset or vocabulary, a size taken from the "
            "wrong variable, a broadcast that expanded) and compute it in chunks (torch.split over rows, a running "
            "top-k) or over the rank's own shard")


def _weights_only(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    what = next((found["what"] for other in ctx.lines if other.node == line.node
                 and (found := re.search(r"Unsupported global: GLOBAL (?P<what>[\w.]+)", other.text))), None)
    held = f" holds {what}, which" if what else " holds an object that"
    return (f"torch.load refused the checkpoint: it{held} weights_only=True (torch.load's default since torch 2.6) "
            "does not allow",
            f"save plain data in checkpoints (tensors, numbers, dicts: vars(args) instead of the Namespace); for a file "
            f"you trust, torch.load(path, weights_only=False) or torch.serialization.add_safe_globals([{what or 'Type'}])")


def _weights_only_forced(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """A weights-only refusal from a torch.load called with weights_only=False: only the environment
    (TORCH_FORCE_WEIGHTS_ONLY_LOAD) overrides the argument, and nodes that loaded the file without it differ."""
    call = next((other.text.strip() for other in ctx.lines if other.node == line.node
                 and other.rank == line.rank and "load(" in other.text
                 and re.search(r"weights_only\s*=\s*False", other.text)), None)
    if call is None:
        return None
    refused = sorted({other.node for other in ctx.lines if "Weights only load failed" in other.text})
    others = [node.index for node in ctx.evidence.nodes if node.index not in refused]
    where = f"node{'s ' if len(refused) > 1 else ''}{', '.join(map(str, refused))}"
    alone = f" (node{'s' if len(others) > 1 else ''} {', '.join(map(str, others))} ran the same code)" if others else ""
    return (f"`{call[:80]}` passes weights_only=False, yet torch.load on {where} loaded weights-only{alone}: only the "
            f"environment overrides that argument - TORCH_FORCE_WEIGHTS_ONLY_LOAD is set on {where}",
            f"unset TORCH_FORCE_WEIGHTS_ONLY_LOAD on {where} (a shell profile, the launch script, the image's ENV, "
            "`lab exec --env`), so the argument holds there as on the other nodes; or save plain data (tensors, "
            "numbers, dicts) so that weights-only loading works everywhere")


# An in-place layer or option (inplace=True, inplace=cfg_value, "relu_inplace": True), or a method ending in `_`.
IN_PLACE_LINE = re.compile(r"inplace\w*['\"]?\s*[=:]\s*(?!False)\w+"
                           r"|\.(?!zero_grad|requires_grad_|manual_seed|clip_grad|_)\w*[a-z0-9]_\(")


# Collectives that write their result into the tensor they were given.
WRITES_ITS_TENSOR = ("all_reduce", "broadcast", "reduce")
# torch's legacy tensor type names in autograd's messages ('torch.FloatTensor [8, 1]') -> the hooks' dtype names.
LEGACY_DTYPES = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64",
                 "Int": "int32"}


def _collective_on_saved_tensor(shape: str, line: LogLine, ctx: Context) -> DistCall | None:
    """The last in-place collective the failed node's ranks returned from, on a tensor of the kind autograd names
    (`torch.FloatTensor []`): a loss all_reduced for logging before its backward."""
    kind = re.fullmatch(r"(?:torch\.)?(\w+?)Tensor \[([\d, ]*)\]", shape.strip())
    if not kind or kind[1] not in LEGACY_DTYPES:
        return None
    dims = tuple(int(dim) for dim in kind[2].replace(" ", "").split(",") if dim)
    calls = [call for call in _calls_of(ctx, line.node, None, WRITES_ITS_TENSOR) if call.ended_at and call.tensors
             and call.tensors[0].shape == dims and call.tensors[0].dtype == LEGACY_DTYPES[kind[1]]]
    return max(calls, key=lambda call: call.ended_at) if calls else None


def _changed_in_place(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """Autograd kept a tensor for backward and something changed it in place: a collective the hooks saw on such a
    tensor, else the code's in-place operations (an `inplace=True` layer, a method ending in `_`), are where to
    look."""
    collective = _collective_on_saved_tensor(match["shape"], line, ctx)
    if collective:
        where = _called_at(collective)
        return (f"the {collective.op}{where} wrote its result into a tensor ({collective.tensors[0]}) that backward "
                f"still needs (the output of {match['op']}): collectives change the tensor they are given in place, "
                f"so backward found it at version {match['version']}",
                f"give the {collective.op} a copy and keep the rank's own tensor for backward (e.g. logged = "
                f"loss.detach().clone(); dist.{collective.op}(logged); call backward on loss): DDP already averages "
                "the gradients; or run the collective after backward")
    places = []
    for trace in ctx.evidence.traces:
        for path, text in trace.sources.items():
            for number, source in enumerate(text.splitlines(), 1):
                code = source.split("#", 1)[0]
                if IN_PLACE_LINE.search(code) and "init." not in code and len(places) < 3 and \
                        (place := f"`{code.strip()[:70]}` ({path.rsplit('/', 1)[-1]}:{number})") not in places:
                    places.append(place)
    seen = f"; in-place operations in the code: {', '.join(places)}" if places else ""
    return (f"backward needs the output of {match['op']} ({match['shape']}), which was then changed in place (it is "
            f"at version {match['version']}): autograd would compute gradients from the changed values",
            f"make the operation that changes {match['op']}'s output out-of-place (inplace=False on the layer after "
            f"it, x = x + y instead of x += y, clamp instead of clamp_){seen}; "
            "torch.autograd.set_detect_anomaly(True) names the line")


def _quantile_too_large(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """torch.quantile takes at most 2**24 elements: a tensor gathered from every rank passes it as the world grows."""
    gathers = [call for call in _calls_of(ctx, line.node, None, ("all_gather", "all_gather_into_tensor"))
               if call.tensors]
    grown = ""
    if gathers:
        call = gathers[-1]
        share = math.prod(call.tensors[-1].shape)
        world = ctx.evidence.expected_world_size
        where = _called_at(call)
        grown = (f", and the tensor it got holds what the {call.op}{where} gathered from {world} ranks ({world} x "
                 f"{share:,} = {world * share:,} elements): one rank's share fits, the whole world's does not")
    return (f"torch.quantile takes at most 16,777,216 (2**24) elements{grown or ' and was given more'}",
            "compute the quantile without one tensor of everything: gather a random sample from each rank "
            "(local[torch.randperm(local.numel())[:k]]) and take its quantile, or sort the gathered tensor and index it "
            "(torch.sort / torch.kthvalue have no such limit), or numpy.quantile on it; a size that grows with the "
            "world size outgrows such limits")


CUT_SOMEWHERE = (": it was cut at a byte count (a fixed-width buffer, a slice of encoded text) or read before its "
                 "writer finished")


def _text_cut_at_bytes(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """UTF-8 that ends inside a character was cut at a byte count: a fixed-width byte buffer (how strings travel in a
    tensor collective), a slice of encoded text, or a file read before its writer finished."""
    carried = [call for call in _calls_of(ctx, line.node, None, None) if call.tensors
               and call.tensors[-1].dtype in ("uint8", "int8") and call.op not in ("init_process_group", "barrier")]
    width = ""
    if carried:
        call = carried[-1]
        where = _called_at(call)
        width = (f": the text came through the {call.op}{where} as fixed-width bytes ({call.tensors[-1]}), and a "
                 f"string longer than the width, once encoded, was cut inside a character")
    return (f"a UTF-8 text ends inside a multi-byte character (the one that starts at byte {match['position']} lost its "
            f"last bytes){width or CUT_SOMEWHERE}",
            "cut and size text by its encoded bytes, not its characters: make the buffer as wide as the longest "
            "encoded string (all_reduce MAX of len(text.encode())) and send each string's byte length with it, or cut "
            "on a character boundary (text.encode()[:n].decode(errors='ignore')); for strings between ranks, "
            "all_gather_object / broadcast_object_list carry them whole")


LOCAL_RANK_IN_A_NAME = re.compile(r"""f["'][^"']*\{[^}]*\blocal_rank\b[^}]*\}|\bLOCAL_RANK\b.*\+|\+.*\bLOCAL_RANK\b""",
                                 re.IGNORECASE)


def _name_not_unique(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """Two processes registered one RPC name: a name made from the local rank, which starts at 0 on every node."""
    made = job_lines(ctx, LOCAL_RANK_IN_A_NAME.search)
    how = (f": the name is made from the local rank (`{made[0][2][:60]}`, {made[0][0]}:{made[0][1]}), which starts "
           "at 0 again on every node" if made and ctx.multi_node else
           ": names must be unique across every process of every node")
    return (f"two processes registered the RPC name {match['name']}{how}",
            "name each worker by its global rank (f'worker{rank}' with rank = dist.get_rank() or int(os.environ['RANK'])"
            "), or add the hostname to it; the local rank is unique on one node only")


CONSOLIDATED_TO = re.compile(r"consolidate_state_dict\((?:to\s*=\s*)?(?P<to>[^)]*)\)")


def _consolidated_elsewhere(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """ZeroRedundancyOptimizer.state_dict() on a rank its state was not consolidated to: only that rank holds it."""
    consolidated = job_lines(ctx, CONSOLIDATED_TO.search)
    who = f"rank {line.rank}" if line.rank is not None else f"a rank on node{line.node}"
    if not consolidated:
        return (f"{who} called state_dict() of a ZeroRedundancyOptimizer that nothing consolidated: each rank holds "
                "its own shard of the optimizer's state",
                "call optimizer.consolidate_state_dict(to=0) on every rank (it is a collective) before the save, then "
                "optimizer.state_dict() and the save on rank 0 only")
    name, number, text = consolidated[0]
    to = CONSOLIDATED_TO.search(text)["to"].strip() or "0"
    return (f"{who} called state_dict() of a ZeroRedundancyOptimizer whose state was consolidated to rank {to} (`"
            f"{text[:60]}`, {name}:{number}): each rank holds its own shard of the state, and only the rank it was "
            "gathered to has the whole",
            f"keep consolidate_state_dict(to={to}) on every rank (it is a collective), then call optimizer.state_dict() "
            f"and build and save the checkpoint on rank {to} only (if dist.get_rank() == {to}); the other ranks skip it "
            "(torch's message asks for another `to`, which would only move the failure to another rank)")


def _norm_of_mixed(line: LogLine) -> tuple[str, str] | None:
    """One norm over a model's gradients where some parameters are DTensors and some plain tensors (a model sharded in
    part): clip_grad_norm_ computes them with one foreach operation, which refuses the mix."""
    if not re.search(r"_foreach_norm|clip_grad_norm|get_total_norm", line.text):
        return None
    return ("clip_grad_norm_ (or another norm over every gradient at once) got plain tensors and DTensors together: "
            "only part of the model is sharded (tensor parallelism or fully_shard on some layers), and its foreach "
            "norm takes one kind at a time",
            "compute the global norm per kind and combine: the norm of the DTensor gradients (their full_tensor(), or "
            "their local shards' squared norms all_reduced over the mesh) and of the plain ones, total = sqrt(a**2 + "
            "b**2), then scale every gradient by max_norm / total; or make every parameter a DTensor (shard or "
            "replicate the rest on the same mesh) so one clip_grad_norm_ covers them")


# The dtypes gloo's collectives have kernels for (ProcessGroupGloo's GENERATE_ALL_TYPES); any other raises
# "Invalid scalar type" when the collective runs.
GLOO_TAKES = {"float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "bool"}


def _dtype_gloo_lacks(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """gloo's "Invalid scalar type": a collective given a dtype gloo has no kernel for, as the hooks recorded it
    (the call that failed first, else the rank's last call with such a tensor)."""
    calls = [call for call in _calls_of(ctx, line.node, line.rank, None) if call.tensors
             and any(tensor.dtype not in GLOO_TAKES for tensor in call.tensors)]
    if not calls:
        return None
    call = next((call for call in calls if call.error and "Invalid scalar type" in call.error), calls[-1])
    dtype = next(tensor.dtype for tensor in call.tensors if tensor.dtype not in GLOO_TAKES)
    where = _called_at(call)
    cause = f"the {call.op}{where} was given {dtype} tensors, which gloo's collectives have no kernel for"
    if dtype.startswith("uint"):
        signed = dtype.replace("uint", "int")
        return (f"{cause} (its unsigned types stop at uint8)",
                f"send them as a type gloo takes: view them as {signed} (tensor.view(torch.{signed}): the same bits, "
                f"no copy) before the {call.op} and view the result back as {dtype}; or cast to int64 where the "
                "values fit")
    if dtype.startswith("complex"):
        return (cause, "send torch.view_as_real(tensor) (two floats per value) and torch.view_as_complex the result")
    wider = "int32" if dtype.startswith("int") else "float32"
    return (f"{cause} (it takes int8, uint8, int32, int64, float16, bfloat16, float32, float64 and bool)",
            f"cast to a type gloo takes before the {call.op} (tensor.to(torch.{wider}), or int64/float32) and back "
            f"after it where {dtype} is needed; or do the arithmetic in that type from the start")


# What DistributedDataParallel refuses to be: copied or pickled (bound to a group other than the default), exported.
WRAPPER_REFUSED = re.compile(r"DDP Pickling/Unpickling are only supported|Non-recursive torch\.compiler\.disable is "
                             r"not supported with torch\.export")
TAKES_A_MODULE = {"deepcopy", "AveragedModel", "export", "dumps", "dump", "save", "trace", "script"}


def _ddp_wrapper_passed_on(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """The DDP wrapper given where the model inside is meant: copied (an EMA or SWA copy, deepcopy), pickled or
    exported. DDP copies only with the default group, and its forward is hidden from torch.export."""
    exporting = "export" in match.group(0)
    given = [(source, call) for source in parsed_files(ctx) for call in calls_named(source, TAKES_A_MODULE)
             if call.args and holds(call.args[0], derived(source, set(), set(), ("DistributedDataParallel", "DDP")),
                                    set(), ())
             and not any(isinstance(node, ast.Attribute) and node.attr == "module" for node in walk(call.args[0]))]
    raised_at = {(frame.file.rsplit("/", 1)[-1], frame.line) for tb in ctx.tracebacks if tb.node == line.node
                 for frame in tb.frames}  # the call the traceback passed through comes first
    given = min(given, key=lambda found: (found[0].name, found[1].lineno) not in raised_at, default=None)
    if given:
        source, call = given
        made = next((node for node in source.walk() if call_name(node) in ("DistributedDataParallel", "DDP")),
                    None)
        where = f"`{ast.unparse(call)[:60]}` ({source.name}:{call.lineno}) was given the DistributedDataParallel " + \
            "wrapper" + (f" (`{ast.unparse(made)[:40]}`, line {made.lineno})" if made else "")
        inner = ast.unparse(call.args[0])
    else:
        where, inner = "the DistributedDataParallel wrapper was given where the model inside it is meant", "model"
    what = ("torch.export cannot trace its forward (DDP hides it from the compiler)" if exporting else
            "it cannot be copied or pickled (DDP allows that only on the default process group)")
    return (f"{where}: {what}",
            f"give it the module inside: {inner}.module (AveragedModel({inner}.module), copy.deepcopy({inner}.module), "
            f"torch.export.export({inner}.module.eval(), ...), torch.save({inner}.module.state_dict(), ...)), or keep "
            "the model from before DDP wrapped it")


def _comm_hook_registered_twice(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """A second communication hook registered on one DDP wrapper (switching hooks between training phases)."""
    calls = [(source, call) for source in parsed_files(ctx)
             for call in calls_named(source, {"register_comm_hook", "_register_builtin_comm_hook"})]
    lines = ", ".join(f"{source.name}:{call.lineno}" for source, call in calls)
    return (f"a DDP wrapper was given a second communication hook ({lines or 'register_comm_hook'}): DDP takes one "
            "hook per wrapper, for its whole life, so switching hooks between phases of a job fails there",
            "register one hook per DDP wrapper: for a new phase with another hook, wrap the module again "
            "(DDP(model.module, ...)) and register the new hook on that wrapper; or register one hook whose state "
            "says which compression the phase uses")


def _double_backward_under_ddp(ctx: Context) -> tuple[SourceFile, ast.Call] | None:
    """(the file, the call) of a backward or autograd.grad with create_graph=True in a job that wraps a model in DDP."""
    for source in parsed_files(ctx):
        if not calls_named(source, {"DistributedDataParallel", "DDP"}):
            continue
        for call in calls_named(source, {"backward", "grad"}):
            if any(item.arg == "create_graph" and not (isinstance(item.value, ast.Constant) and not item.value.value)
                   for item in call.keywords):
                return source, call
    return None


def _ddp_double_backward(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    """DDP under a backward that builds a graph of the gradients (create_graph=True, for Hessian-vector products):
    DDP's reducer writes the averaged gradients into .grad in place, which a gradient that requires grad refuses."""
    if (found := _double_backward_under_ddp(ctx)) is None:
        return None
    source, call = found
    return (f"`{ast.unparse(call)[:60]}` ({source.name}:{call.lineno}) builds a graph of the gradients "
            "(create_graph=True) in a model wrapped in DistributedDataParallel: DDP's reducer writes the averaged "
            "gradients into .grad in place, and a gradient that requires grad refuses that. DDP does not support "
            "double backward",
            "keep the bare module for a second-order method: broadcast the initial parameters once, compute the "
            "gradients and Hessian-vector products locally (torch.autograd.grad(..., create_graph=True)), then "
            "all_reduce the first-order gradients (and the Hessian estimates) yourself and divide by the world size")


def _marked_ready_twice(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """DDP saw a parameter's gradient twice in one backward: a forward rerun in backward (reentrant activation
    checkpointing), or, where the job checkpoints nothing, a second backward through one forward (retain_graph=True)
    or a parameter the code uses outside forward through the wrapper (`model.module.weighted_loss(...)`), which
    find_unused_parameters=True marked unused at forward."""
    files = parsed_files(ctx)
    if any(calls_named(source, {"checkpoint", "checkpoint_sequential"}) for source in files) or not files:
        return ("DDP saw a parameter's gradient twice in one backward: activation checkpointing that reruns the "
                "forward in backward (torch.utils.checkpoint's reentrant mode), with find_unused_parameters=True or a "
                "parameter used twice, marks it ready again",
                "pass use_reentrant=False to torch.utils.checkpoint.checkpoint (the non-reentrant mode works with "
                "DDP), or build DDP with static_graph=True, or drop find_unused_parameters=True if every parameter "
                "gets a gradient")
    retained = next(((source, node) for source in files for node in calls_named(source, {"backward"})
                     if any(item.arg == "retain_graph" for item in node.keywords)), None)
    if retained:  # a second backward through the same forward: the shared parameters' gradients come twice
        source, call = retained
        return (f"two backward passes ran through one DDP forward (`{ast.unparse(call)[:60]}`, {source.name}:"
                f"{call.lineno}, then another): DDP's hooks fire again for the parameters both losses share, and a "
                "parameter is marked ready twice",
                "run one backward per DDP forward: add the losses (loss_a + c * loss_b).backward() and step each "
                "optimizer after it; or give each loss its own forward")
    outside = next(((source, node) for source in files for node in source.walk()
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "module"), None)
    where = (f": `{ast.unparse(outside[1])[:60]}` ({outside[0].name}:{outside[1].lineno}) uses the wrapped model's "
             "parameters outside forward") if outside else ""
    return (f"DDP saw a parameter's gradient twice in one backward, and the job checkpoints no activations{where}; "
            "DDP (find_unused_parameters=True) marked such a parameter unused when forward ended, then its gradient "
            "came in backward all the same",
            "use every parameter of the wrapped model inside its forward (pass forward what it needs and return the "
            "total loss), or keep parameters used outside it (loss weights) in a module of their own that DDP does "
            "not wrap, averaging their gradients by hand")


def _locale_missing(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    named = sorted({f"{name}={value}" for trace in ctx.evidence.traces if trace.node == line.node and trace.calls
                    for name, value in trace.calls.locale.items()})
    said = f" ({', '.join(named)} there)" if named else ""
    return (f"locale.setlocale() asked node{line.node} for a locale it does not have{said}: the name comes from the "
            "environment (LC_ALL, LC_CTYPE, LANG: often forwarded by ssh from a laptop) or from the code",
            f"use a locale every node has (LC_ALL=C.UTF-8), or unset LC_ALL/LANG on node{line.node} (stop ssh "
            "forwarding LC_*: SendEnv/AcceptEnv), or install it on every node (locale-gen); and make the code fall "
            "back when setlocale raises locale.Error")


# torch's ways of saying that an operation got tensors of two dtypes (matmul, a layer, a loss), old and new wordings.
DTYPES_DIFFER = re.compile(
    r"must have the same dtype, but got (?P<a>\w+) and (?P<b>\w+)|expected scalar type (?P<c>\w+) but found (?P<d>\w+)"
    r"|Found dtype (?P<e>\w+) but expected (?P<f>\w+)|Input type \((?P<g>\w+)\) and (?:bias|weight) type "
    r"\((?P<h>\w+)\) should be the same|to have the same dtype, but got:? (?P<i>\w+) != (?P<j>\w+)")
WIDE_FLOATS = {"double", "float64"}
INTEGERS = {"long", "int", "int64", "int32", "short", "byte", "char", "bool"}


def _dtypes_differ(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    """Which fix depends on the pair: float64 is NumPy's default, integers are labels read as values, half types
    come from a model cast or autocast on one side only."""
    pair = [value for value in match.groups() if value]
    lowered = {value.lower() for value in pair}
    shown = " and ".join(pair)
    if lowered & WIDE_FLOATS:
        return (f"an operation got {shown} tensors: the data is float64 (NumPy's default dtype, which "
                "torch.from_numpy and torch.tensor(array) keep) and the model's weights are float32",
                "convert the data where it is made: torch.from_numpy(x).float() or x.astype(np.float32) (in the "
                "Dataset, or torch.tensor(x, dtype=torch.float32)); keep the model in float32 rather than .double()")
    if lowered & INTEGERS:
        return (f"an operation got {shown} tensors: integer values (labels, indices, counts) went where floats are "
                "computed with (a regression target, a layer's input), or the reverse",
                "give each its dtype where it is made: .float() for values a layer or a regression loss computes with, "
                ".long() for class indices (cross_entropy targets)")
    return (f"an operation got {shown} tensors: one side was cast (model.half(), .to(torch.bfloat16), autocast) and "
            "the other not",
            "cast the input to the model's dtype (x.to(next(model.parameters()).dtype)), or run the forward under "
            "torch.autocast for both, rather than casting one side by hand")


PATTERNS = [
    PatternRule("dtype-mismatch", DTYPES_DIFFER, _dtypes_differ),
    PatternRule("tensor-sender-gone", re.compile(r"in rebuild_storage_(?:fd|filename)\b"), lambda match, line, ctx: (
        "a tensor taken from a multiprocessing Queue (or Pipe) could not be rebuilt: torch sends a tensor between "
        "processes as a handle to the sender's shared memory, and the process that put it there had already ended "
        "(or freed it) when this one took it",
        "keep the sending process alive until every tensor it sent has been taken: q.get() before p.join() (or an "
        "Event the receiver sets when it is done); or send what needs no sender, a copy as bytes or a NumPy array "
        "(tensor.numpy().copy())") if near(ctx, line, r"ConnectionRefusedError|FileNotFoundError|EOFError") else None),
    PatternRule("authkey-differs", re.compile(r"AuthenticationError: digest (?:sent was rejected|received was wrong)"),
                lambda match, line, ctx: (
                    "a multiprocessing connection (a Manager, Listener or Client) was refused: the two sides hold "
                    "different authkeys. Each process started on its own (every node's launcher) draws a random "
                    "authkey, so a Manager reached from another node must be given one explicitly",
                    "pass the same authkey to both sides (BaseManager(address, authkey=KEY) on the server and the "
                    "clients, KEY bytes from a variable every node gets, e.g. `lab torchrun --env`), or share the "
                    "work across nodes with torch.distributed (a store, broadcast_object_list) instead")),
    PatternRule("cast-into-integer-tensor", re.compile(
        r"result type (?P<result>\w+) can't be cast to the desired output type (?P<output>\w+)"), _cast_in_place),
    PatternRule("static-graph-changed", re.compile(r"not compatible with static_graph set to True"
                                                   r"|expect_autograd_hooks_ INTERNAL ASSERT FAILED"), _static_graph),
    PatternRule("daemon-with-children", re.compile(r"daemonic processes are not allowed to have children"),
                lambda match, line, ctx: (
                    f"a daemon process on node{line.node} (multiprocessing.Process(daemon=True), or a DataLoader "
                    "worker) tried to start processes of its own (a DataLoader with num_workers > 0, a Pool), and "
                    "died; whoever waits for its results waits on",
                    "start that process with daemon=False (and join() it when done), or give the work it does "
                    "num_workers=0 (no children); for a background evaluation, a thread or a process started by "
                    "the rank itself")),
    PatternRule("locale-missing", re.compile(r"locale\.Error: unsupported locale setting"), _locale_missing),
    PatternRule("ddp-without-trainable-parameters", re.compile(
        r"DistributedDataParallel is not needed when a module doesn't have any parameter that requires a gradient"),
        lambda match, line, ctx: (
            "DistributedDataParallel was given a module none of whose parameters requires a gradient (a frozen "
            "encoder, a momentum / EMA target network, a teacher): DDP only averages gradients, and refuses a module "
            "that has none",
            "wrap only the modules that train: keep the frozen or EMA-updated one unwrapped (it stays the same on every "
            "rank when it is updated from the wrapped model, or broadcast it once from rank 0), and build DDP for the "
            "online network alone")),
    PatternRule("tensor-kind-unsupported", re.compile(r"RuntimeError: Invalid scalar type"), _dtype_gloo_lacks),
    PatternRule("numpy-value-in-json", re.compile(
        r"Object of type (?P<kind>u?int\d+|float\d+|bool_|ndarray) is not JSON serializable"), lambda match, line, ctx: (
        f"json refused a NumPy {match['kind']}: a value computed with NumPy (a sum, a cumsum, an index from argmax, "
        "counts gathered with all_gather_object) is a NumPy scalar, not a Python number",
        "convert NumPy values to Python ones before json.dump: int(x) / float(x), array.tolist(), or .item(); or "
        "json.dump(obj, f, default=lambda v: v.item() if hasattr(v, 'item') else str(v))")),
    PatternRule("state-consolidated-elsewhere", re.compile(r"Optimizer state has not been consolidated on this rank"),
                _consolidated_elsewhere),
    PatternRule("duplicate-rank", re.compile(r"RPC worker name (?P<name>\S+) is not unique"), _name_not_unique),
    PatternRule("text-cut-at-bytes", re.compile(
        r"UnicodeDecodeError: 'utf-?8' codec can't decode byte 0x[0-9a-f]{2} in position (?P<position>\d+): "
        r"unexpected end of data"), _text_cut_at_bytes),
    PatternRule("input-over-size-limit", re.compile(r"quantile\(\) input tensor is too large"), _quantile_too_large),
    PatternRule("changed-in-place-for-backward", re.compile(
        r"one of the variables needed for gradient computation has been modified by an inplace operation: "
        r"\[(?P<shape>.+?)\], which is output \d+ of (?P<op>\w+?)(?:Backward\d*)?, is at version (?P<version>\d+)"),
        _changed_in_place),
    PatternRule("scheduler-stepped-past-total", re.compile(
        r"Tried to step (?P<stepped>\d+) times\. The specified number of total steps is (?P<total>\d+)"),
        lambda match, line, ctx: (
            f"OneCycleLR was stepped {match['stepped']} times, past the {match['total']} steps it was built for: its "
            "total (epochs x steps_per_epoch, or total_steps) is smaller than the steps the training loop takes",
            "build it from the loop itself: OneCycleLR(optimizer, max_lr, epochs=EPOCHS, steps_per_epoch=len("
            "train_loader)), with the loader each rank iterates (after its DistributedSampler, whose length rounds "
            "up, not dataset // world // batch), and step it once per optimizer step (fewer with gradient "
            "accumulation)")),
    PatternRule("ddp-device-ids-on-cpu", re.compile(
        r"device_ids and output_device arguments only work with single-device/multiple-device GPU modules or CPU "
        r"modules, but got device_ids \[(?P<ids>[^\]]*)\]"), lambda match, line, ctx: (
        f"DistributedDataParallel was given device_ids [{match['ids']}] for a model on the CPU: device_ids names GPUs",
        "on CPU (gloo) build DDP without device_ids and output_device: DistributedDataParallel(model); pass "
        "device_ids=[local_rank] only when the model is on that GPU")),
    PatternRule("method-not-called", re.compile(r"'method' object is not (?:iterable|subscriptable)"),
                lambda match, line, ctx: (
                    "a method was passed where its result was meant (`model.parameters` without the call)",
                    "call it: model.parameters() (clip_grad_norm_(model.parameters(), max_norm), "
                    "optimizer(model.parameters()))")),
    PatternRule("rank-zero-result-in-collective", re.compile(r"Expected parameter `?tensor`? of type torch\.Tensor"),
                _rank_zero_result_in_collective),
    PatternRule("collective-given-a-number", re.compile(r"Expected parameter `?tensor`? of type torch\.Tensor"),
                lambda match, line, ctx: (
                    "a collective was given a Python number (or another object), not a tensor: collectives work "
                    "in place on tensors",
                    "put the value in a tensor and read it back: t = torch.tensor([value]); dist.all_reduce(t); "
                    "value = t.item() (for arbitrary objects, all_gather_object)")
                if _rank_zero_result_in_collective(match, line, ctx) is None else None),
    PatternRule("ddp-wrapper-passed-on", WRAPPER_REFUSED, _ddp_wrapper_passed_on),
    PatternRule("comm-hook-registered-twice", re.compile(r"register_comm_hook or register_builtin_comm_hook can only "
                                                         r"be called once"), _comm_hook_registered_twice),
    PatternRule("ddp-attribute", re.compile(r"'DistributedDataParallel' object has no attribute '(?P<name>\w+)'"),
                lambda match, line, ctx: (
                    f"the code reaches the model's '{match['name']}' through the DistributedDataParallel wrapper, "
                    "which does not have it",
                    f"reach the wrapped model through .module: model.module.{match['name']} (keep a reference to the "
                    "bare model before wrapping, or unwrap with getattr(model, 'module', model))")),
    PatternRule("autograd-gradient-count", re.compile(
        r"returned an incorrect number of gradients \(expected (?P<expected>\d+), got (?P<got>\d+)\)"),
        lambda match, line, ctx: (
            f"a custom autograd Function's backward returned {match['got']} gradient(s) for {match['expected']} "
            "inputs of its forward",
            f"return one gradient per input of forward, in order, {match['expected']} in all: None for inputs that "
            "need none (a threshold, a flag), e.g. return grad_input, None")),
    PatternRule("backward-twice", re.compile(r"Trying to backward through the graph a second time"),
                lambda match, line, ctx: (
                    "a second backward() ran through a graph whose buffers the first backward freed (a tensor "
                    "computed once and used by two losses, as a generator's output in a GAN)",
                    "compute what the second loss needs after the first backward (a fresh forward), or detach it "
                    "for the first loss (fake.detach() for the discriminator); retain_graph=True only where both "
                    "backward passes must go through the same graph")),
    PatternRule("half-weights-with-scaler", re.compile(r"Attempting to unscale FP16 gradients"), lambda match, line,
                ctx: (
                    "GradScaler was given an optimizer whose parameters are float16" + _made_half(ctx) + ": the "
                    "scaler keeps float32 weights' gradients in range and refuses to unscale float16 ones (their "
                    "gradients are float16 too)",
                    "keep the model's weights in float32 and run its forward under torch.autocast(device_type, "
                    "dtype=torch.float16) with the GradScaler (mixed precision); for weights meant to be float16 "
                    "or bfloat16 throughout, drop the GradScaler")),
    PatternRule("socket-path-too-long", re.compile(r"AF_UNIX path too long"), lambda match, line, ctx: (
        "a Unix socket's path is longer than the 107 bytes the system allows" + _temporary_folder(ctx) + ": "
        "multiprocessing makes its sockets in the temporary folder (a DataLoader's workers, a Manager, torch's "
        "shared tensors between processes), so a long TMPDIR breaks them on every node alike",
        "point TMPDIR at a short folder for the job (TMPDIR=/tmp, or tempfile.tempdir = '/tmp' before the "
        "DataLoader starts), and keep the long scratch folder for the job's own files")),
    PatternRule("stream-replaced-incompletely", re.compile(
        r"'(?P<cls>\w+)' object has no attribute '(?P<attr>flush|write|fileno|isatty|encoding|buffer|writable|"
        r"readable|errors|closed)'"), _stream_replaced),
    PatternRule("needs-a-terminal", re.compile(r"\[Errno (?:25|6)\] (?:Inappropriate ioctl for device|"
                                               r"No such device or address)"), _needs_a_terminal),
    PatternRule("loader-timeout-without-workers", re.compile(r"_SingleProcessDataLoaderIter requires timeout == 0"),
                lambda match, line, ctx: (
                    "a DataLoader was given a timeout with no worker processes" + _workers_given(ctx) + ": its timeout "
                    "bounds the wait for a worker's batch, and a loader that reads in the rank itself refuses one",
                    "give the timeout only with workers (timeout=120 if num_workers > 0 else 0), or keep at least one "
                    "worker where the count is computed (max(..., 1))")),
    PatternRule("recomputation-took-another-path", re.compile(
        r"A different number of tensors was saved during the original forward and recomputation|"
        r"Recomputed values for the following tensors have different metadata"), lambda match, line, ctx: (
        "activation checkpointing reran the forward during backward and it took another path than the first time"
        + _drawn_outside_torch(ctx) + ": torch.utils.checkpoint restores torch's random state for the rerun, not "
        "Python's or NumPy's, nor anything else the forward reads that changed",
        "make the checkpointed forward come out the same when it is rerun: draw from torch's generator "
        "(torch.rand(()) < p, which checkpoint restores), or take the decision outside the checkpointed function and "
        "pass it in")),
    PatternRule("unscaled-twice", re.compile(r"unscale_\(\) has already been called on this optimizer"),
                lambda match, line, ctx: (
                    "GradScaler.unscale_ was called twice for one optimizer in one step (a helper, such as a "
                    "gradient clipping function, calls it again)",
                    "call scaler.unscale_(optimizer) once per step, right before clipping, and not in the helper "
                    "too; then scaler.step(optimizer) and scaler.update()")),
    PatternRule("gloo-on-loopback", re.compile(r"local=\[127\.0\.0\.1\]:\d+, remote=\[127\.0\.0\.1\]"),
                lambda match, line, ctx: (
                    "gloo connects to 127.0.0.1: the ranks advertised their loopback address (GLOO_SOCKET_IFNAME=lo, "
                    "or a hostname that resolves to 127.0.0.1), which no other node can reach",
                    "let gloo use the interface that reaches the other nodes: unset GLOO_SOCKET_IFNAME (or set it "
                    "to that interface, eth0 on the lab's nodes), and make each node's hostname resolve to its own "
                    "address, not 127.0.x.x") if ctx.multi_node else None),
    PatternRule("ddp-double-backward", re.compile(
        r"a leaf Variable that requires grad is being used in an in-place operation"), _ddp_double_backward),
    PatternRule("parameter-changed-in-place", re.compile(
        r"a leaf Variable that requires grad is being used in an in-place operation"), lambda match, line, ctx: (
        "a parameter (a leaf tensor that requires grad) was changed in place while autograd records (`p /= world`, "
        "`p.add_(...)` on a parameter, outside torch.no_grad())",
        "change parameters under `with torch.no_grad():` (as optimizers do), e.g. with torch.no_grad(): for p in "
        "model.parameters(): dist.all_reduce(p); p /= world_size; or work on p.data; to average gradients instead, "
        "all_reduce p.grad") if not _double_backward_under_ddp(ctx) else None),
    PatternRule("database-locked", re.compile(r"OperationalError: database is locked"), lambda match, line, ctx: (
        "several processes write one SQLite database at once and it stayed locked past the wait (a file on a shared "
        "folder, written by every rank, where SQLite's locks are weakest)",
        "write the database from one rank only (if dist.get_rank() == 0), or give each rank its own file "
        "(metrics-rank{rank}.db) and merge them afterwards; sqlite3.connect(path, timeout=60) only waits longer")),
    PatternRule("watchdog-fired", re.compile(r"^Timeout \((?P<limit>\d+:\d\d:\d\d(?:\.\d+)?)\)!$"), _watchdog),
    PatternRule("sampler-with-shuffle", re.compile(r"sampler option is mutually exclusive with shuffle"),
                lambda match, line, ctx: (
                    "the DataLoader got both sampler= and shuffle=True, which it refuses: a DistributedSampler already "
                    "shuffles (shuffle=True is its default)",
                    "drop shuffle=True from the DataLoader (keep DataLoader(ds, sampler=DistributedSampler(ds), "
                    "...)), and call sampler.set_epoch(epoch) at the start of each epoch so the order changes")),
    PatternRule("start-method-set-twice", re.compile(r"context has already been set"), lambda match, line, ctx: (
        "multiprocessing's start method was set a second time" + _set_where(ctx) + ": set_start_method may be "
        "called once per process, and a second call (a function that sets it run twice, or after a library set "
        "it) raises",
        "set the start method once, at the top of `if __name__ == '__main__':`, or do not set the global at all: "
        "give what starts processes its own context (multiprocessing.get_context('spawn').Pool(...), "
        "DataLoader(..., multiprocessing_context='spawn'))")),
    PatternRule("inference-tensor-updated", re.compile(r"Inplace update to inference tensor outside InferenceMode"),
                lambda match, line, ctx: (
                    "a tensor made under torch.inference_mode()" + _inference_where(ctx) + " was changed in place "
                    "outside it (a collective writing its result into it, +=, an optimizer): an inference tensor "
                    "may not be changed once inference mode has ended",
                    "make that tensor outside inference mode (create the buffer before the @torch.inference_mode() "
                    "function runs, or use torch.no_grad(), which makes ordinary tensors), or .clone() it outside "
                    "inference mode before changing it")),
    PatternRule("plain-tensor-into-dtensor", re.compile(r"got mixed torch\.Tensor and DTensor"),
                lambda match, line, ctx: _sharded_weight_outside_forward(ctx) or _module_added_after_sharding(ctx)
                or _root_not_sharded(ctx) or _norm_of_mixed(
                    line) or (
                    ("a full (unsharded) state dict was loaded with load_state_dict into a model whose parameters are "
                     "DTensors, sharded by fully_shard (FSDP2) or tensor parallelism: copying a plain tensor into a "
                     "DTensor is refused" if "While copying the parameter" in line.text else
                     "an operation got a plain tensor and a DTensor (a parameter sharded by fully_shard (FSDP2) or "
                     "tensor parallelism): a DTensor only meets other DTensors"),
                    "load a full state dict into a sharded model with torch.distributed.checkpoint.state_dict."
                    "set_model_state_dict(model, state, options=StateDictOptions(full_state_dict=True)), or load it "
                    "before fully_shard() wraps the model; to mix tensors in an operation, turn the plain one into a "
                    "DTensor (distribute_tensor) or the DTensor into a plain one (.full_tensor())")),
    PatternRule("sync-batchnorm-on-cpu", re.compile(r"SyncBatchNorm layers only work with GPU modules"),
                lambda match, line, ctx: (
                    "the model has SyncBatchNorm layers and lives on the CPU: DDP refuses SyncBatchNorm outside CUDA",
                    "convert to SyncBatchNorm only on GPUs (if torch.cuda.is_available(): model = "
                    "nn.SyncBatchNorm.convert_sync_batchnorm(model)); on CPU nodes (gloo) keep BatchNorm, or use "
                    "GroupNorm/LayerNorm, which need no synchronisation")),
    PatternRule("reentrant-checkpoint-ddp", re.compile(r"Expected to mark a variable ready only once"),
                _marked_ready_twice),
    PatternRule("rank-not-in-group", re.compile(r"Global rank (?P<rank>\d+) is not part of group"), _rank_not_in_group),
    PatternRule("allocation-too-large", re.compile(
        r"can't allocate memory: you tried to allocate (?P<bytes>\d{11,}) bytes"), _allocation_too_large),
    PatternRule("weights-only-forced", re.compile(r"Weights only load failed"), _weights_only_forced),
    PatternRule("checkpoint-weights-only", re.compile(r"Weights only load failed"), _weights_only),
    PatternRule("backend-unavailable", re.compile(
        r"Distributed package doesn't have (?P<backend>MPI|UCC|NCCL) built in"), _backend_missing),
    PatternRule("shape-mismatch", re.compile(
        r"alltoallv?\.cc.*(?:LengthPerRank|length)|Split sizes doesn't match total dim 0 size"), _alltoall_splits),
    PatternRule("root-mismatch", re.compile(
        r"source rank must provide non-None scatter_object_input_list|(?:``?)?scatter_list(?:``?)? must NOT be specified on non-source"
        r"|Argument ``?scatter_list``? must be specified on source rank"
        r"|``?gather_list``? must (?P<gather>NOT )?be specified on (?:non-)?destination rank"), _scatter_source),
    PatternRule("checkpoint-keys-differ", re.compile(r"Missing key in checkpoint state_dict: (?P<key>\S+?)\.?$"),
                _checkpoint_keys_differ),
    PatternRule("state-dict-mismatch", re.compile(
        r"(?:Missing|Unexpected) key\(s\) in state_dict"), _state_dict_keys),
    PatternRule("collective-list-length", re.compile(
        r"invalid (?:output|input) tensor list at index \d+ \(expected length (?P<expected>\d+), got (?P<got>\d+)\)"
        r"|must match number of collective participants|tensor list must (?:have|be) (?:the )?(?:same )?(?:length|size) "
        r"(?:as|of) (?:the )?world"), _list_length),
    PatternRule("dataloader-worker-died", re.compile(
        r"DataLoader worker \(pid\(?s?\)? ?[\d, ]+\)? (?:is|exited) (?:killed by signal|unexpectedly)(?P<how>.*)"),
        _dataloader_worker_died),
    PatternRule("initialized-twice", re.compile(r"trying to initialize the default process group twice"),
                _initialized_twice),
    PatternRule("file-descriptors-exhausted", re.compile(r"Too many open files|received \d+ items of ancdata"),
                _descriptors),
    PatternRule("compiler-missing", re.compile(
        r"\b(?:gcc|g\+\+|c\+\+|cc|x86_64-linux-gnu-gcc|ninja|nvcc)['\"]?: (?:command )?not found"
        r"|command '(?:gcc|x86_64-linux-gnu-gcc|c\+\+|g\+\+)' failed|No such file or directory: '(?:gcc|c\+\+|g\+\+|ninja)'"
        r"|Failed to find C compiler|Ninja is required to load C\+\+ extensions|InvalidCxxCompiler"), _no_compiler),
    PatternRule("read-only-filesystem", re.compile(r"Read-only file system"), _read_only),
    PatternRule("object-not-picklable", re.compile(
        r"Can't pickle|cannot pickle|Can't get attribute '(?P<attribute>[^']+)' on <module|Tried to serialize object "
        r"(?P<scripted>[\w.]+) which does not have a __getstate__|Serialization of (?P<parametrized>parametrized) "
        r"modules is only supported through state_dict"), _not_picklable),
    PatternRule("device-mismatch", re.compile(
        r"No backend type associated with device type|Tensors must be CUDA and dense|Expected all tensors to be on "
        r"the same device|Tensor list must be nonempty and all tensors on the same device"), _device_mismatch),
    PatternRule("disk-full", re.compile(r"No space left on device"), _disk_full),
    PatternRule("batch-of-one", re.compile(
        r"Expected more than 1 value per channel when training, got input size (?P<size>torch\.Size\(\[[^\]]*\]\))"),
        _batch_of_one),
    PatternRule("statistic-of-one-sample", re.compile(
        r"(?:(?P<file>\S+\.py):(?P<line>\d+): \w*Warning: )?(?P<op>std|var|std_mean|var_mean)\(\): degrees of freedom "
        r"is <= 0"), _statistic_of_one),
    PatternRule("rpc-handler-blocked", re.compile(r"RPC ran for more than set timeout \((?P<ms>\d+) ms\)"),
                _rpc_handler_blocked),
    PatternRule("tensor-not-contiguous", re.compile(
        r"(?:[Tt]ensors?|input|output)(?: tensors?)? (?:must|has to|have to|should) be contiguous"), _not_contiguous),
    PatternRule("meta-tensors", re.compile(r"Tensor on device meta is not on the expected device"
                                           r"|cannot be called on meta tensors"), _meta_tensors),
    PatternRule("group-non-member", re.compile(r"_verify_params_across_processes\(\): incompatible function "
                                               r"arguments"), lambda match, line, ctx: (
        f"DDP was built on {f'rank {line.rank}' if line.rank is not None else f'node{line.node}'} with a process group "
        "this rank is not a member of: on non-members new_group returns a placeholder "
        "(GroupMember.NON_GROUP_MEMBER), which DDP cannot check its parameters over",
        "let only the group's members build and run that DDP: test `rank in ranks` (or `group != "
        "dist.GroupMember.NON_GROUP_MEMBER`) and have the other ranks skip that phase, meeting the members again at "
        "a barrier of the default group")),
    PatternRule("tensor-from-strings", re.compile(r"too many dimensions 'str'|new\(\): invalid data type 'str'"),
                lambda match, line, ctx: (
                    "torch.tensor() was given strings (ids, names, text): a tensor holds numbers only, so strings "
                    "cannot travel between ranks in a tensor collective",
                    "send strings with all_gather_object / broadcast_object_list, or map each to an integer id (its "
                    "index in the dataset) and send the ids in a tensor")),
    PatternRule("int64-overflow", re.compile(r"Overflow when unpacking long long|value cannot be converted to type "
                                             r"int64 without overflow"), lambda match, line, ctx: (
        "a Python integer outside int64's range (2**63 or more: 64 bits of a hash, an unsigned seed, a nanosecond "
        "product) was put into an int64 tensor, which a collective needs to send it",
        "keep it within int64 before it goes into the tensor (value % 2**63, or 63 bits of the hash), or send it with "
        "broadcast_object_list / through the store, which carry any Python integer")),
    PatternRule("group-non-member", re.compile(
        r"Running (?P<op>\w+) on global rank (?P<rank>\d+) which does not belong to the given group"), _non_member),
    PatternRule("cross-device-rename", re.compile(
        r"Invalid cross-device link: '(?P<source>[^']+)' -> '(?P<target>[^']+)'"), _cross_device),
    PatternRule("collective-output-size", re.compile(
        r"Check failed: (?P<check>output\w*\[0\] \* worldSize == input\w*\[0\]|output\w*\[0\] == input\w*\[0\] \* "
        r"worldSize|input\w*\[0\] \* worldSize == output\w*\[0\]) \((?P<left>\d+) vs\. (?P<right>\d+)\)"
        r"|(?P<python>[Oo]utput tensor size must be equal to world_size times input tensor size"
        r"|[Ii]nput tensor size must be equal to world_size times output tensor size)"), _output_size),
    PatternRule("reduce-op-dtype", re.compile(
        r"Cannot use ReduceOp\.(?P<op>\w+) with (?P<what>non-integral|boolean|complex) dtype"), _reduce_op_dtype),
    PatternRule("reduce-op-dtype", re.compile(
        r"does not support RedOpType\.(?P<op>\w+) on (?P<what>complex) tensors"), _order_op_on_complex),
    PatternRule("reduce-op-not-in-backend", re.compile(
        r"Cannot use ReduceOp\.(?P<op>\w+) with (?P<backend>(?!non-integral|boolean|complex)\w+)"), _op_not_in_backend),
    PatternRule("sampler-rank-outside-replicas", re.compile(
        r"Invalid rank (?P<rank>\d+), rank should be in the interval \[0, (?P<last>-?\d+)\]"), _sampler_rank),
    PatternRule("process-group-not-initialized", re.compile(
        r"Default process group has not been initialized|Process group cannot be None"), _not_initialized),
    PatternRule("script-not-found", re.compile(
        r"can't open file '(?P<path>[^']+)': \[Errno 2\]"), _script_not_found),
    PatternRule("bad-arguments", re.compile(r"^(?:usage: )?\S+\.py: error: (?P<why>.+)$"), _bad_arguments),
]


# What an exception's own evidence can tell (the source around it, each rank's node, the calls before it), in the order
# they are asked: the first that returns a finding names the cause. Each returns None where its mechanism is not
# what happened.
EXCEPTION_MECHANISMS = (
    _warning_raised, _shadowed_module, _prompted, _launcher_refused, _output_encoding, _spawn_unguarded,
    _json_int_keys, _debugger_quit, _optimizer_state_mismatch, _grad_of_non_leaf, _created_by_every_rank,
    _service_at_localhost, _length_from_data, _grad_of_unused_parameter, _node_resource_from_another_node,
    _shared_memory_of_another_node, _global_index_on_shard, _view_of_a_split, _nested_dataclass_from_dict,
    _empty_share, _per_host_settings, _integer_sum_wrapped, _partial_recv, _lazy_sized_on_some_ranks,
    _split_drops_remainder, _global_k_on_shard, _restored_another_ranks_state,
    _half_sum_overflowed, _ratio_of_a_share, _failed_before_joining,
    _grad_mode_left_off, _no_history_through_a_collective, _splits_not_per_rank, _index_past_a_rounded_share,
    _read_from_a_rank_offset, _tail_on_no_rank, _sized_by_own_longest, _shares_padded_with_empty_items, _share_too_small, _parts_joined_as_whole,
    _layouts_disagree, _nothing_to_join, _ragged_parts_stacked, _scalar_stacked_with_a_vector, _scaler_step_without_gradients,
    _sparse_reduction_refused, _state_dropped_by_getstate, _count_returned_as_float, _joined_not_added, _json_of_non_string_keys,
    _rank_packed_past_a_narrow_type, _sorted_ties_reach_unorderable, _records_run_together, _received_kept_as_bytes,
    _share_not_representative,
    _layers_dealt_round_robin, _ddp_state_uncopyable, _collective_return_used,
    _result_into_a_tuple, _merged_by_local_position, _received_state_built_otherwise,
    _comm_hook_state_per_bucket, _sized_for_another_world, _padding_for_the_world_kept,
    _per_rank_list_too_short, _sized_by_world_for_a_group,
    _group_rank_of_a_non_member, _inputs_sized_per_rank, _fmod_keeps_the_sign,
    _divided_by_no_gpus, _builtin_replaced_narrower, _share_over_a_global_total,
    _slice_to_minus_zero, _rate_over_a_share, _module_name_rebound,
    _split_size_is_the_world, _optimizer_state_not_made, _decided_on_the_root_from_its_own,
    _padded_from_the_front_of_an_order, _split_sizes_of_floats,
    _zero_at_this_world_size, _joined_along_the_wrong_dim, _group_ranks_repeated,
    _bucketized_to_the_rank_before, _owner_product_wrapped, _owner_index_reaches_world, _pairs_of_an_absent_rank,
    _share_at_this_world_size, _sum_of_nothing, _squeezed_to_a_scalar, _whole_beside_a_part,
    _distributions_summed, _statistic_of_a_small_share, _columns_sharded_differently,
    _labels_offset_past_the_logits, _joined_into_the_features, _padding_index_of_the_whole, _stream_cut_mid_record,
    _gathered_vector_read_as_a_number, _entry_made_by_its_owner_only, _sentinel_wins_the_merge,
    _saved_view_of_the_whole, _node_budget_over_the_world, _length_of_the_whole, _replicated_counted_per_rank,
    _renormalized_by_forward, _batches_across_a_strided_shard, _assembled_by_a_sum,
    _empty_at_this_world_size,
    _gloo_size_refused, _gathered_tensors_compared, _nothing_in_the_buffer, _tag_past_an_int,
    _fixed_slot_too_small, _lock_held_by_a_node_mate, _index_from_other_ranks, _rank_made_value_out_of_range,
    _several_rank_path_only,
)
