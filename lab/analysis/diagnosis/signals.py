"""How each process ended, told apart: a fatal signal from native code (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL)
named with where it happened, rather than the peers' lost connections that follow it.

The signal is read from torchrun's failure report (`exitcode: -11`), a shell's status (139 = 128 + 11) or the lines
faulthandler writes as the process dies (the jobs' sitecustomize enables it in every job process): 'Fatal Python
error: Segmentation fault' and the Python stack of every thread, most recent call first.
"""

from __future__ import annotations

import ast
import re
import signal

from lab.analysis.diagnosis.context import SYMPTOM, Context, explained_by_rule, job_lines, quote
from lab.analysis.diagnosis.crashes import last_warning, message_advice
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.logs import EXCEPTION_LINE, WARNING_LINE, LogLine, last_own_line
from lab.analysis.diagnosis.sources import parsed_files, walk
from lab.analysis.stacks import FAULTHANDLER_FRAME, FAULTHANDLER_THREAD, LIBRARY_FILE as LIBRARY, MAIN_THREAD, Frame

FATAL = {signal.SIGSEGV: "a segmentation fault", signal.SIGBUS: "a bus error", signal.SIGABRT: "an abort",
         signal.SIGFPE: "a floating-point exception", signal.SIGILL: "an illegal instruction"}
FATAL_ERROR = re.compile(r"Fatal Python error: (?P<what>Segmentation fault|Bus error|Aborted|Floating point exception"
                         r"|Illegal instruction)")
FATAL_BY_WORDS = {"Segmentation fault": signal.SIGSEGV, "Bus error": signal.SIGBUS, "Aborted": signal.SIGABRT,
                  "Floating point exception": signal.SIGFPE, "Illegal instruction": signal.SIGILL}
# What native code printed as it aborted: a C++ exception nobody caught, an assertion.
ABORT_REASON = re.compile(r"terminate called after throwing an instance of '(?P<type>[^']+)'|^\s*what\(\):\s*(?P<what>.+)"
                          r"|Assertion `(?P<assertion>[^`]+)' failed|(?P<check>Check failed: .+)")

FIXES = {
    signal.SIGSEGV: "the native code reached from that line read memory it does not own: a C extension or ctypes call "
                    "given a bad pointer or length, a tensor freed or resized while native code used it, or an "
                    "extension built against another torch or Python than the node has (check the versions on every "
                    "node: `lab doctor --package NAME`); run that call alone on the node, under `python -X "
                    "faulthandler`, to reproduce it",
    signal.SIGBUS: "memory-mapped data went away under the process: a file that was truncated or replaced while mapped "
                   "(a checkpoint or dataset rewritten during the run), or shared memory (/dev/shm) too small for what "
                   "was put there",
    signal.SIGABRT: "native code aborted on purpose: read the lines it printed just before (an uncaught C++ exception's "
                    "what(), a failed assertion); a library built for another version, or an invalid argument to a "
                    "native op, are the usual causes",
    signal.SIGFPE: "native code divided an integer by zero: look for a size, a count or a world size that is 0 on this "
                   "rank (an empty shard, a batch of zero elements) reaching an integer division",
    signal.SIGILL: "the process ran an instruction this CPU lacks: a binary or extension built for a newer CPU "
                   "(AVX-512, another architecture) than the node's; build it for the nodes' CPU or pick a wheel "
                   "made for it",
}


# Signals whose default action ends a process without native code at fault: who sends them says the cause. SIGTERM
# and SIGKILL are left to the rules that know their senders (torchrun, the lab, the OOM killer).
SENT = {
    signal.SIGALRM: ("a timer of its own ran out (signal.alarm or setitimer, with no handler)",
                     "the job's own alarm (signal.alarm/setitimer, a watchdog) fired before the work it guards "
                     "finished: give it a budget above what that work takes on these nodes (measure one step or "
                     "epoch), install a handler that raises with a message, or drop the alarm"),
    signal.SIGPIPE: ("its output pipe was closed by the reader", "the program it writes to (`| head`, a log "
                     "collector) exited first: write training output to a file (or `tee`) rather than a pipe that "
                     "stops reading"),
    signal.SIGHUP: ("its terminal or session went away", "start the job detached from the terminal (nohup, "
                    "setsid, a scheduler) or handle SIGHUP"),
    signal.SIGXCPU: ("it went over its CPU-time limit (ulimit -t)", "raise or lift the CPU-time limit (ulimit -t, "
                     "the scheduler's) on every node, or do less per process"),
    signal.SIGXFSZ: ("it wrote a file over the size limit (ulimit -f)", "raise the file-size limit (ulimit -f) on "
                     "the nodes, or write smaller files (shard the checkpoint)"),
    signal.SIGUSR1: ("something sent it SIGUSR1 (a scheduler's warning before a time limit)", "handle SIGUSR1 "
                     "(save a checkpoint, then exit) or find who sends it"),
    signal.SIGUSR2: ("something sent it SIGUSR2", "handle SIGUSR2 or find who sends it"),
    signal.SIGVTALRM: ("a virtual timer of its own ran out (setitimer)", "give the timer a handler or a longer "
                       "interval"),
    signal.SIGPROF: ("a profiling timer ran out (setitimer)", "give the profiler's timer a handler"),
}


def sent_signal_findings(ctx: Context) -> list[Finding]:
    """A process ended by a signal sent to it (an alarm of its own, a closed pipe, a limit): named with who sends
    such a signal, not as an exit code without a Python error."""
    found = []
    for node, rank, number, line in _endings(ctx, SENT):
        meaning, fix = _sent_by_the_job(ctx, signal.Signals(number).name) or SENT[number]
        who = f"rank {rank}" if rank is not None else f"a process on node{node}"
        said = last_own_line([other.text for other in ctx.lines if other.node == node and other.rank in (rank, None)])
        found.append(Finding(
            "killed-by-signal", f"{who} was killed by {signal.Signals(number).name}: {meaning}"
                                + (f", after printing: {said}" if said else "")
                                + "; the other ranks' errors follow from it",
            quote(line), node, rank, fix))
    return found


# A line that installs a handler for a signal: signal.signal, faulthandler.register.
INSTALLS_HANDLER = re.compile(r"\b(?:signal\.)?signal\s*\(|\bregister\s*\(")


def _sent_by_the_job(ctx: Context, name: str) -> tuple[str, str] | None:
    """(meaning, fix) where the job's own code sends signal `name` (a watchdog's os.kill(os.getpid(), SIGUSR1)): the
    process it ended had no handler for it, though the job may install one elsewhere (on some ranks only)."""
    lines = job_lines(ctx, lambda code: name in code)
    sender = next((line for line in lines if SENDS_SIGNAL.search(line[2])), None)
    if sender is None:
        return None
    handler = next((line for line in lines if INSTALLS_HANDLER.search(line[2])), None)
    installed = (f"; the job installs its handler at {handler[0]}:{handler[1]} (`{handler[2][:60]}`), which this "
                 "process had not run (a rank-0 branch, a function that returns early, a later line)") if handler else \
        "; the job installs no handler for it, and its default action ends the process"
    return (f"the job's own code sends it (`{sender[2][:60]}`, {sender[0]}:{sender[1]}){installed}",
            f"install the {name} handler in every process before anything can send it (at the start, outside any "
            f"rank condition{f', as at {handler[0]}:{handler[1]}' if handler else ''}), or send {name} only to a "
            "process that handles it")


# A line of the job's own code that sends signals: os.kill/killpg, a Popen's terminate/kill/send_signal, a shell's
# kill, pkill or killall, signal.raise_signal.
SENDS_SIGNAL = re.compile(r"\b(?:killpg|kill)\s*\(|\.(?:terminate|send_signal)\s*\(|\b(?:pkill|killall)\b"
                          r"|\braise_signal\s*\(|[\"'\s]kill\s+-")


def self_signalled_findings(ctx: Context) -> list[Finding]:
    """A rank ended by SIGTERM while its own code was sending a signal (the stack it wrote as the signal came): it
    signalled a group or a pattern it belongs to itself, and the others' errors follow."""
    sources = {path: text for trace in ctx.evidence.traces for path, text in trace.sources.items()}
    ended = {(node, rank) for node, rank, _, _ in _endings(ctx, {signal.SIGTERM: ""})}
    for process in ctx.evidence.processes:
        if not process.at_sigterm or not any(node == process.node and rank in (process.rank, None)
                                             for node, rank in ended):
            continue
        main = next((thread for thread in process.threads if thread.name == MAIN_THREAD), None)
        own = next((frame for frame in reversed(main.frames) if not LIBRARY.search(frame.file)), None) if main else None
        text = sources.get(own.file, "").splitlines() if own else []
        line = text[own.line - 1].strip() if own and 0 < own.line <= len(text) else ""
        if not line or not SENDS_SIGNAL.search(line):
            continue
        who = f"rank {process.rank}" if process.rank is not None else f"a process on node{process.node}"
        at = f"{own.file.rsplit('/', 1)[-1]}:{own.line} in {own.function}"
        return [Finding(
            "killed-by-the-job", f"{who} on node{process.node} was ended by SIGTERM while its own code sent a signal, "
            f"at {at} (`{line[:100]}`): the signal reached the sender itself (its own process group, kill(0, ...), or "
            "a pattern that matches its own command line), and the other ranks' errors follow",
            f"stack at SIGTERM of {who}: {at}: {line[:160]}", process.node, process.rank,
            "signal only the processes this one started, by their own pids (p.terminate() or p.kill() for each Popen, "
            "then p.wait()); never killpg its own group, kill(0, ...) or pkill/killall a pattern the job's command "
            "matches: the rank is in that group too. To stop a tree of helpers at once, start them with "
            "start_new_session=True and os.killpg(p.pid, signal.SIGTERM) their own group")]
    return []


def signal_findings(ctx: Context) -> list[Finding]:
    """A process that died of a fatal signal, earliest first as the logs show it; what it was doing from faulthandler's
    stack."""
    found = []
    for node, rank, number, line in _endings(ctx, FATAL):
        if number == signal.SIGABRT and any(explained_by_rule(ctx, other, read_only=True) for other in ctx.lines
                                            if other.node == node):
            continue  # an abort whose message a rule already reads (gloo's checks on sizes, NCCL's errors)
        if number == signal.SIGABRT and any(tb.node == node and tb.rank in (rank, None) for tb in ctx.tracebacks):
            continue  # gloo aborting in its teardown after the process had raised: the exception is the story
        frames, reason = faulthandler_stack(ctx, node, rank)
        name = signal.Signals(number).name
        own = next((frame for frame in frames if not LIBRARY.search(frame.file)), None)
        native = next((frame for frame in frames if LIBRARY.search(frame.file)), None) if frames else None
        where = (f" in native code called from {own.function} ({own.file.rsplit('/', 1)[-1]}:{own.line})" if own
                 else f" in {frames[0].function}" if frames else " in native code")
        via = f" through {native.function}" if native and own and frames.index(native) < frames.index(own) else ""
        why = f": {reason}" if reason else ""
        who = f"rank {rank}" if rank is not None else f"a process on node{node}"
        warned = _warned_before(ctx, line)
        if warned:
            place, category, text = warned
            said = " ".join(dict.fromkeys((_sentence(text, ""), _sentence(text, "undefined"))))
            why += f", after the {category} it printed at {place}: \"{said}\" - the crash is what it warned of"
        fix = (f"do what the warning at {place} says ({message_advice(text) or _sentence(text, 'undefined')}): "
               "the crash comes from what it warned of, not from torch or an extension" if warned
               else (number == signal.SIGSEGV and _pickling_fix(frames)) or FIXES[number])
        found.append(Finding(
            "fatal-signal", f"{who} was killed by {name} ({FATAL[number]}){where}{via}{why}; the other ranks' lost "
                            "connections and timeouts follow from it",
            quote(line) + (f"; faulthandler: {frames[0].function} ({frames[0].file.rsplit('/', 1)[-1]}:"
                           f"{frames[0].line})" if frames else ""),
            node, rank, fix))
    return found


# The words of a warning a library prints when it lets a program do what may crash it later (torch on a read-only
# NumPy array, a tensor shared without a copy, ...): printed by the same process before a fatal signal, it names the
# cause.
UNDEFINED = re.compile(r"undefined behaviou?r|not writable|non-writable|unsafe|out of bounds|dangling|"
                       r"use after free", re.IGNORECASE)


def _warned_before(ctx: Context, fatal: LogLine) -> tuple[str, str, str] | None:
    """The last warning of undefined behaviour the dying process printed before `fatal`: (file:line, category,
    text)."""
    warned = None
    for line in ctx.lines:
        if line is fatal:
            return warned
        if line.node == fatal.node and line.rank == fatal.rank and (match := WARNING_LINE.search(line.text)) \
                and UNDEFINED.search(match["text"]):
            warned = (f"{match['file'].rsplit('/', 1)[-1]}:{match['line']}", match["category"], match["text"])
    return warned


def _sentence(text: str, word: str) -> str:
    """The first sentence of `text` that holds `word` (else its first), at most 200 characters."""
    sentences = [part.strip() for part in re.split(r"(?<=[.!?])\s+", text) if part.strip()] or [text]
    return next((part for part in sentences if word in part.lower()), sentences[0])[:200]


PICKLERS = ("serialization.py", "pickle.py", "copy.py", "copyreg.py", "distributed_c10d.py")


def _pickling_fix(frames: list[Frame]) -> str | None:
    """A segfault in a pickler (torch.save, pickle, deepcopy, an object collective) is most often the C stack running
    out on a deeply nested object, past a raised recursion limit."""
    inner = next((frame for frame in frames[:3] if frame.file.endswith(PICKLERS)), None)
    if inner is None:
        return None
    return (f"the process crashed inside the pickler ({inner.function}): an object nested thousands deep (a long "
            "linked structure, lists in lists, a history appended into itself) ran the C stack out, which a raised "
            "sys.setrecursionlimit lets happen instead of a RecursionError; keep the default recursion limit (the "
            "error then names the object) and save the object flat (a list of records, tensors rather than nested "
            "Python lists)")


def _endings(ctx: Context, kinds: dict) -> list[tuple[int, int | None, int, LogLine]]:
    """(node, rank, signal number, the line that says so) per process that died of a signal among `kinds`."""
    endings: dict[tuple[int, int | None], tuple[int, LogLine]] = {}
    for line in ctx.lines:
        if (match := FATAL_ERROR.search(line.text)) and _among(FATAL_BY_WORDS[match["what"]], kinds):
            endings.setdefault((line.node, line.rank), (FATAL_BY_WORDS[match["what"]], line))
        elif match := re.search(r"exitcode\s*:\s*-(?P<number>\d+)", line.text):
            number = int(match["number"])
            if _among(number, kinds):
                rank = _report_rank(ctx, line.node, -number)
                if not any(key[0] == line.node and key[1] in (rank, None) for key in endings):
                    endings[(line.node, rank)] = (number, line)
    for node in ctx.evidence.nodes:
        code = node.exit_code
        number = -code if code is not None and code < 0 else code - 128 if code is not None and code > 128 else None
        if number and _among(number, kinds) and not any(key[0] == node.index for key in endings):
            last = next((line for line in reversed(ctx.lines) if line.node == node.index), None)
            rank = node.index if ctx.evidence.nproc_per_node == 1 else None
            endings[(node.index, rank)] = (number, last or LogLine(node.index, rank, f"exit code {code}"))
    return [(node, rank, number, line) for (node, rank), (number, line) in endings.items()]


def _among(number: int, kinds: dict) -> bool:
    try:
        return signal.Signals(number) in kinds
    except ValueError:
        return False


def _report_rank(ctx: Context, node: int, code: int) -> int | None:
    return next((rank for rank, exit_code in ctx.reports.get(node, []) if exit_code == code),
                node if ctx.evidence.nproc_per_node == 1 else None)


def faulthandler_stack(ctx: Context, node: int, rank: int | None) -> tuple[list[Frame], str | None]:
    """The crashing thread's frames (most recent call first) faulthandler wrote for that process, and what native
    code printed before it (an abort's reason)."""
    lines = [line for line in ctx.lines if line.node == node and (rank is None or line.rank in (rank, None))]
    start = next((index for index, line in enumerate(lines) if FATAL_ERROR.search(line.text)), None)
    if start is None:
        return [], None
    reason = None
    for line in lines[max(0, start - 6):start]:
        if match := ABORT_REASON.search(line.text):
            reason = (match["what"] or match["assertion"] or match["check"] or match["type"]).strip()[:200]
    blocks: list[tuple[bool, list[Frame]]] = []  # (the crashing thread, its frames) per thread faulthandler wrote
    for line in lines[start + 1:]:
        if header := FAULTHANDLER_THREAD.match(line.text.strip()):
            blocks.append((header.group(0).startswith("Current thread"), []))
        elif (frame := FAULTHANDLER_FRAME.match(line.text)) and blocks:
            blocks[-1][1].append(Frame(frame["function"], frame["file"], int(frame["line"])))
        elif blocks and line.text.strip() and not line.text.strip().startswith(("<", "Extension modules")):
            break
    # Without a "Current thread" the signal came in a thread Python does not run (a library's own native thread):
    # the main thread's frames (it ends in <module>) say what the job had asked for, not the lab's watcher thread.
    main = next((frames for _, frames in blocks if frames and frames[-1].function == "<module>"),
                blocks[0][1] if blocks else [])
    crashing = next((frames for current, frames in blocks if current), main)
    return crashing, reason


def exit_findings(ctx: Context) -> list[Finding]:
    """A rank that ended itself with a non-zero status and no Python error (sys.exit(N), os._exit, a command it ran
    failing): the line it printed last says why, and the others' lost connections follow from it."""
    found = []
    if (wrapped := _timeout_wrapper(ctx)) is not None:
        return [wrapped]
    for node, rank, code in _own_exits(ctx):
        own = [line for line in ctx.lines if line.node == node and line.rank in (rank, None)]
        if any(tb.node == node and tb.rank in (rank, None) for tb in ctx.tracebacks) or any(
                (EXCEPTION_LINE.match(line.text.strip()) and "ChildFailedError" not in line.text)  # torchrun's own
                or explained_by_rule(ctx, line, read_only=True) for line in own) or any(
                trace.rank == rank and (trace.exception or (trace.calls and trace.calls.failed))
                for trace in ctx.evidence.traces):
            continue  # an exception or an error a rule reads ended it: those rules say which
        said = last_own_line([line.text for line in own])
        who = f"rank {rank}" if rank is not None else f"the process on node{node}"
        warned = last_warning(ctx, node, rank)
        warned = f"; start from what the rank was warned of first: {warned}" if warned else ""
        if exited_alike(ctx) == code:
            found.append(Finding(
                "rank-exited", f"every rank ended itself alike, with exit status {code} and no Python error"
                + (f", after printing: {said}" if said else "") + ": the job's own check failed on all of them",
                f"node{node}" + (f" rank {rank}" if rank is not None else "") + f": exit {code}"
                + (f"; its last output: {said}" if said else ""), node, rank,
                "no rank is the odd one out, so nothing differs between the nodes: the cause is in what every rank "
                "computes (the training or evaluation the check tests: a step left out such as model.eval() or "
                "optimizer.zero_grad(), a setting, a dtype, a loaded state); find the sys.exit the check reached and "
                "fix what it measures" + warned))
            break
        found.append(Finding(
            "rank-exited", f"{who} ended itself with exit status {code} and no Python error"
                           + (f", after printing: {said}" if said else "") + "; the other ranks' errors follow from it",
            f"node{node}" + (f" rank {rank}" if rank is not None else "") + f": exit {code}"
            + (f"; its last output: {said}" if said else "; it printed nothing"), node, rank,
            "find the sys.exit / os._exit (or the failing command) that this rank reached: its last output names the "
            "check that failed; make what that check reads the same on every node (a file, a variable, a count), or "
            "let every rank take the same decision (all_reduce the flag) so no rank leaves alone" + warned))
    return found


def swallowed_error_findings(ctx: Context) -> list[Finding]:
    """A rank whose own distributed call failed (a peer lost, a timeout) and that then ended without an error: the
    job caught the error and exited 0, so its launcher counts the worker as finished. torchrun then neither restarts
    the group (--max-restarts) nor stops the other nodes: it waits for them in its exit barrier."""
    if not ctx.multi_node:
        return []
    for trace in ctx.evidence.traces:
        calls = trace.calls
        if trace.rank is None or calls is None or not calls.failed or not trace.ended_without_error:
            continue
        failed = calls.failed[-1]
        if not (failed.error and SYMPTOM.search(failed.error)) or any(
                (call.entered_at or 0) > (failed.ended_at or 0) for call in calls.recent):
            continue  # an error of its own, or it went on with more calls (it recovered, re-initialised)
        if _exit_status(ctx, trace.node, trace.rank) not in (0, None):
            continue  # sys.exit(1) after the error: the launcher sees the failure
        waiting = any(process.node == trace.node and process.role == "agent" and any(
            "exit_barrier" in frame.function for thread in process.threads for frame in thread.frames)
            for process in ctx.evidence.processes)
        restarts = re.search(r"--max[-_]restarts[= ](?P<count>\d+)", " ".join(ctx.evidence.command))
        exits = _exits_cleanly(ctx)
        agent = (f"; node{trace.node}'s torchrun took it as finished and waits for the other nodes in its exit "
                 "barrier" + (f" instead of restarting the workers (--max-restarts {restarts['count']})"
                              if restarts else "")) if waiting else ""
        return [Finding(
            "error-swallowed-exit-0", f"rank {trace.rank} caught the error of its {failed.op} at {failed.caller} "
            f"({failed.error.split(':', 1)[0]}: {_peer_words(failed.error)}) and ended without an error"
            + (f" ({exits})" if exits else "") + agent,
            f"node{trace.node} rank {trace.rank}: {failed.op} failed: {failed.error[:200]}; the process then ended "
            "with no exception", trace.node, trace.rank,
            "let a distributed error fail the worker: re-raise it (or exit non-zero) where the job catches it, so "
            "the launcher sees a failed worker and restarts every worker together from the last checkpoint "
            "(--max-restarts) or stops the job; exit 0 only when the training has finished")]
    return []


def _exit_status(ctx: Context, node: int | None, rank: int) -> int | None:
    """The rank's status from torchrun's failure report, else its node's where the node ran it alone."""
    reported = {reported_rank: code for codes in ctx.reports.values() for reported_rank, code in codes}
    if rank in reported:
        return reported[rank]
    alone = ctx.evidence.nproc_per_node == 1 and not ctx.reports
    return next((each.exit_code for each in ctx.evidence.nodes if each.index == node), None) if alone else None


def _peer_words(error: str) -> str:
    found = SYMPTOM.search(error)
    return found.group(0) if found else error[:60]


def _exits_cleanly(ctx: Context) -> str:
    """'the except at train.py:52 calls sys.exit(0)': a handler of the job's code that ends the process with 0."""
    for source in parsed_files(ctx):
        for handler in source.walk():
            if not isinstance(handler, ast.ExceptHandler):
                continue
            for call in walk(handler):
                if isinstance(call, ast.Call) and ast.unparse(call.func) in ("sys.exit", "exit", "os._exit", "quit") \
                        and (not call.args or (isinstance(call.args[0], ast.Constant) and call.args[0].value in (
                            0, None))):
                    return f"the except at {source.name}:{handler.lineno} calls {ast.unparse(call)}"
    return ""


TIMEOUT_COMMAND = re.compile(r"(?:^|[\s;&|(])timeout\s+(?:-\S+\s+)*(?P<limit>\d+(?:\.\d+)?[smhd]?)\s")


def _timeout_wrapper(ctx: Context) -> Finding | None:
    """The job's command runs under coreutils' `timeout N`, and processes ended with its status 124 (or 137 after
    -s KILL / -k): the wrapper's time limit ended the job, not the job itself."""
    command = " ".join(ctx.evidence.command) + " "
    wrapper = TIMEOUT_COMMAND.search(command)
    ended = [(node, code) for node, _, code in _own_exits(ctx) if code in (124, 137)] + [
        (node.index, node.exit_code) for node in ctx.evidence.nodes if node.exit_code in (124, 137)]
    if wrapper is None or not ended:
        return None
    nodes = sorted({node for node, _ in ended})
    return Finding(
        "command-timeout", f"the job's command runs under `timeout {wrapper['limit']}`, and "
        f"{', '.join(f'node{node}' for node in nodes)} ended with its status {ended[0][1]}: that time limit stopped the "
        "job while it was still working, not an error of the job", f"command: {command.strip()[:200]}; exit status "
        + ", ".join(f"node{node} {code}" for node, code in sorted(set(ended))), nodes[0], None,
        f"give `timeout` more than the job needs (or drop it and use the lab's own --timeout, which keeps every "
        "rank's stack when it stops a run); for a job that must stop in time, save a checkpoint before the limit")


def exited_alike(ctx: Context) -> int | None:
    """The status every rank ended itself with, where all of them did so alike (a check that sys.exit()s on every
    rank); None otherwise."""
    exits = _own_exits(ctx)
    statuses = {code for _, _, code in exits}
    return statuses.pop() if len(exits) >= max(2, ctx.evidence.expected_world_size) and len(statuses) == 1 else None


def _own_exits(ctx: Context) -> list[tuple[int, int | None, int]]:
    """(node, rank, status) of processes that exited by themselves with 0 < status <= 128: torchrun's report per
    rank, or the node's own status where the lab ran one process per node."""
    exits = [(node, rank, code) for node, reported in ctx.reports.items() for rank, code in reported if 0 < code <= 128]
    if not ctx.reports and ctx.evidence.nproc_per_node == 1:
        oom = {node.index for node in ctx.evidence.nodes if node.oom_killed}
        exits += [(node.index, node.index, node.exit_code) for node in ctx.evidence.nodes
                  if node.exit_code is not None and 0 < node.exit_code <= 128 and node.index not in oom]
    return exits
