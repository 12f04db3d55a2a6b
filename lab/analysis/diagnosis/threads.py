"""A rank held up by its own threads, read from the stacks the lab took of a hung run:

- the main thread in `threading._shutdown`: the script's code is done, and the interpreter waits at exit for a
  thread that was not started as a daemon and that nothing stops (a queue consumer, an uploader);
- the main thread at a `with LOCK:` (or `LOCK.acquire()`) line while an outer frame of the same thread is inside a
  `with` of the same lock: a threading.Lock taken twice by one thread never comes free;
- the main thread in `Popen.wait` for a child that does not end: with its output on a pipe nobody reads, the child
  blocks once the pipe is full;
- a rank waiting for a child it forked after its process group was set up, which hangs on the group it copied;
- a collective inside a `with` block of a lock that other ranks wait to take;
- an asyncio event loop stuck in the job's own code: a blocking call inside a coroutine.
"""

from __future__ import annotations

import ast
import re

from lab.analysis.diagnosis.context import Context
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.logs import LIBRARY_FILE, collective_in
from lab.analysis.diagnosis.waits import WORKER_LOOP
from lab.analysis.stacks import MAIN_THREAD, Frame, ProcessStack, ThreadStack
from lab.analysis.diagnosis.sources import walk

LAB_THREADS = ("lab-flight-recorder",)


def thread_findings(ctx: Context) -> list[Finding]:
    sources = {path: text for trace in ctx.evidence.traces for path, text in trace.sources.items()}
    if (held := _collective_under_lock(ctx, sources)) is not None:
        return [held]
    if (frozen := _event_loop_blocked(ctx, sources)) is not None:
        return [frozen]
    for process in ctx.evidence.processes:
        main = next((thread for thread in process.threads if thread.name == MAIN_THREAD), None)
        if process.role == "agent" or main is None or not main.frames:
            continue
        if main.frames[-1].function == "_shutdown" and main.frames[-1].file.endswith("threading.py"):
            return [_exit_waits(ctx, process)]
        if (twice := _lock_taken_twice(main, sources)) is not None:
            return [_self_deadlock(process, main, *twice)]
        if (forked := _lock_copied_by_fork(ctx, process, main, sources)) is not None:
            return [forked]
        if (forked := _forked_child_wait(ctx, process, main, sources)) is not None:
            return [forked]
        if any(frame.function in CHILD_WAITS and frame.file.endswith("subprocess.py") for frame in main.frames) and \
                not any(other.ppid == process.pid and other.rank is not None for other in ctx.evidence.processes):
            return [_child_wait(ctx, process, main, sources)]  # a child that is a rank: the ranks' own rules speak
    return []


def _forked_child_wait(ctx: Context, process: ProcessStack, main: ThreadStack,
                       sources: dict[str, str]) -> Finding | None:
    """A rank waits for a child it forked (the same command line: no new program) after its process group was set
    up, and the child does not end: a fork copies the group's state but not gloo's or NCCL's threads, so the child's
    copy can neither work nor be torn down, and the child hangs, often as it exits."""
    if process.rank is None:
        return None
    children = [other for other in ctx.evidence.processes if other.ppid == process.pid and other.node == process.node
                and other.cmdline == process.cmdline]
    own = [frame for frame in main.frames if not LIBRARY_FILE.search(frame.file)]
    frame = own[-1] if own else None
    code = _line(sources, frame) if frame else ""
    waits = "wait" in code or any(frame.file.endswith("popen_fork.py") for frame in main.frames)
    trace = next((trace for trace in ctx.evidence.traces if trace.rank == process.rank and trace.calls), None)
    if not children or frame is None or not waits or trace is None or "init_process_group" not in trace.calls.counts:
        return None
    child = children[0]
    child_main = next((thread for thread in child.threads if thread.name == MAIN_THREAD), None)
    doing = (f"it waits at {_own(child_main)}" if child_main and child_main.frames else
             "it runs no Python code any more: it hangs as it exits, tearing down the process group it inherited")
    forks = sorted({f"{path.rsplit('/', 1)[-1]}:{node.lineno}" for path, text in sources.items()
                    for node in walk(_tree(text)) if isinstance(node, ast.Call) and ast.unparse(node.func) in FORKS})
    return Finding(
        "forked-after-process-group", f"{_who(process)} waits at {frame.function} ({frame.location}: "
        f"`{code.strip()[:60]}`) for its child {child.pid}, which it forked"
        + (f" ({', '.join(forks)})" if forks else "") + f" after init_process_group; the child does not end: "
        f"{doing}; a fork copies the process group but not gloo's or NCCL's threads",
        f"{_who(process)}: MainThread " + " <- ".join(f"{item.function} ({item.location})"
                                                      for item in reversed(main.frames))[:300]
        + f"; child {child.pid}: " + (_own(child_main) if child_main and child_main.frames else "no Python frame"),
        process.node, process.rank,
        "do not fork a process whose process group is set up: do the work in a thread, or start the helper with "
        "multiprocessing.get_context('spawn') (it starts afresh and inherits no group); a forked child that must "
        "stay should make no torch.distributed call and end with os._exit(0), which runs no destructor")


FORKS = ("os.fork", "fork", "os.forkpty")


# A line that takes a lock: a file lock (fcntl, the filelock package), a threading or multiprocessing lock.
TAKES_A_LOCK = re.compile(r"\b(?:flock|lockf)\(|\.acquire\(|FileLock\(|SoftFileLock\(")


def _collective_under_lock(ctx: Context, sources: dict[str, str]) -> Finding | None:
    """Ranks wait to take a lock while another rank waits in a collective inside a `with` block of a lock: the
    holder cannot leave the block before the others join the collective, and they cannot join before it leaves."""
    holders, waiters = [], []
    for process in ctx.evidence.processes:
        main = next((thread for thread in process.threads if thread.name == MAIN_THREAD), None)
        if process.rank is None or process.role == "agent" or main is None or not main.frames:
            continue
        collective, _ = collective_in(main.frames)
        own = [frame for frame in main.frames if frame.file in sources and not LIBRARY_FILE.search(frame.file)]
        if collective:
            held = next(((frame, lock) for frame in reversed(own) for lock in sorted(_locks_held(
                _tree(sources[frame.file]), frame.line)) if "lock" in lock.lower()), None)
            if held:
                holders.append((process, collective, held))
        elif own and TAKES_A_LOCK.search(_line(sources, own[-1])):
            waiters.append((process, own[-1]))
    if not holders or not waiters:
        return None
    holder, collective, (frame, lock) = holders[0]
    waiting = waiters[0][1]
    ranks = ", ".join(str(process.rank) for process, _ in waiters)
    return Finding(
        "collective-under-lock", f"rank {holder.rank} waits in {collective} while it holds `with {lock}` "
        f"({frame.location}); rank(s) {ranks} wait to take a lock at {waiting.location} (`{_line(sources, waiting)}`), "
        f"so they never reach the {collective}: the holder leaves the block only after they join, and they join only "
        "after it leaves", "; ".join(f"rank {process.rank}: {frame.function} ({frame.location})"
                                     for process, frame in waiters) + f"; rank {holder.rank}: {collective} inside "
        f"`with {lock}` ({frame.location})", holder.node, holder.rank,
        "release the lock before any collective: do the locked work, leave the `with` block, then meet the others "
        "(barrier, all_reduce) outside it; or let one rank per node do the work without a lock and have every rank "
        "wait at a barrier afterwards")


EVENT_LOOP = ("BaseEventLoop._run_once", "_run_once", "Handle._run")


def _event_loop_blocked(ctx: Context, sources: dict[str, str]) -> Finding | None:
    """An asyncio event loop's thread standing in the job's own code when the lab stopped the run: a coroutine that
    awaits gives the thread back to the loop (it would wait in select), so one found running user code called
    something blocking (time.sleep, a lock, a socket, a file) and holds every other task and connection."""
    for process in ctx.evidence.processes:
        if process.role == "agent":
            continue
        for thread in process.threads:
            looping = [index for index, frame in enumerate(thread.frames) if frame.function in EVENT_LOOP]
            if not looping:
                continue
            inner = thread.frames[looping[-1] + 1:]
            own = [frame for frame in inner if not LIBRARY_FILE.search(frame.file)]
            if not own:
                continue
            frame = own[-1]
            code = _line(sources, frame)
            return Finding(
                "event-loop-blocked", f"{_who(process)}'s asyncio event loop (thread '{thread.name}') is stuck inside "
                f"{frame.function} at {frame.location}" + (f" (`{code[:60]}`)" if code else "") + ": a blocking call "
                "in a coroutine holds the loop's only thread, so no other task or connection runs until it returns "
                "(the ranks that wait for that service wait with it)",
                f"{_who(process)}: {thread.name} " + " <- ".join(f"{item.function} ({item.location})"
                                                               for item in reversed(thread.frames))[:300],
                process.node, process.rank,
                "await instead of blocking inside coroutines: await asyncio.sleep(...) for time.sleep, asyncio.Event "
                "or asyncio.Condition for waits on other tasks, asyncio streams for sockets; run blocking work off the "
                "loop with await asyncio.to_thread(fn, ...) (or loop.run_in_executor)")
    return None


def _tree(text: str) -> ast.Module:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return ast.Module(body=[], type_ignores=[])


def _line(sources: dict[str, str], frame: Frame) -> str:
    lines = sources.get(frame.file, "").splitlines()
    return lines[frame.line - 1].strip() if 0 < frame.line <= len(lines) else ""


CHILD_WAITS = ("Popen.wait", "Popen._wait", "Popen._try_wait", "wait", "_wait", "_try_wait")


def _child_wait(ctx: Context, process: ProcessStack, main: ThreadStack, sources: dict[str, str]) -> Finding:
    own = [frame for frame in main.frames if not LIBRARY_FILE.search(frame.file)]
    frame = own[-1] if own else main.frames[-1]
    children = [other for other in ctx.evidence.processes if other.ppid == process.pid and other.node == process.node]
    child = (f" {children[0].pid} (`{' '.join(' '.join(children[0].cmdline).split())[:80]}`)"
             if children and children[0].cmdline else "")
    piped = "PIPE" in sources.get(frame.file, "")
    why = (": its output goes to a pipe (stdout=PIPE) that nobody reads while wait() waits, so once the pipe is "
           "full (64 KiB) the child blocks writing and both wait for ever" if piped else
           ": whatever the child waits for (its input, a pipe, a lock, a server) never comes")
    return Finding(
        "child-never-ends", f"{_who(process)} waits in Popen.wait at {frame.function} ({frame.location}) for its child "
        f"process{child}, which does not end{why}", f"{_who(process)}: MainThread "
        + " <- ".join(f"{item.function} ({item.location})" for item in reversed(main.frames))[:400],
        process.node, process.rank,
        "read the child's output while waiting: out, err = proc.communicate() (or subprocess.run(..., "
        "capture_output=True)), or send it to a file or subprocess.DEVNULL; and give the wait a timeout "
        "(communicate(timeout=...), wait(timeout=...)) so a stuck child fails the rank with its own error")


def _who(process: ProcessStack) -> str:
    return (f"rank {process.rank}" if process.rank is not None else f"the process {process.pid}") + \
        f" on node{process.node}"


def _exit_waits(ctx: Context, process: ProcessStack) -> Finding:
    waiting = [thread for thread in process.threads if thread.name not in (MAIN_THREAD, *LAB_THREADS)]
    described = "; ".join(f"'{thread.name}' at {_own(thread)}" for thread in waiting) or "(no stack of it)"
    names = ", ".join(f"'{thread.name}'" for thread in waiting) or "its other threads"
    return Finding(
        "exit-waits-for-thread", f"{_who(process)} finished its code but cannot exit: the interpreter waits at exit "
        f"for its thread {names}, which was not started as a daemon and which nothing stops", f"{_who(process)}: "
        f"MainThread in threading._shutdown; {described}", process.node, process.rank,
        f"end the thread before the script ends: tell it to stop (a sentinel in its queue, an Event) and join() it, "
        "in a `finally:` so an error path does it too, or start it with daemon=True if its work may be dropped; "
        "torchrun's agents wait for every rank to exit, so the other nodes wait with it")


def _own(thread: ThreadStack) -> str:
    own = [frame for frame in thread.frames if not LIBRARY_FILE.search(frame.file)]
    frame = (own or thread.frames)[-1]
    inner = thread.frames[-1]
    return f"{frame.location} in {frame.function}" + (f", waiting in {inner.function}" if inner is not frame else "")


def _lock_taken_twice(main: ThreadStack, sources: dict[str, str]) -> tuple[Frame, Frame, str] | None:
    """(the outer frame holding the lock, the inner frame taking it again, the lock's expression)."""
    inner = main.frames[-1]
    if LIBRARY_FILE.search(inner.file) or inner.file not in sources:
        return None
    tree = _tree(sources[inner.file])
    taken = _lock_at(tree, inner.line)
    if taken is None:
        return None
    for outer in main.frames[:-1]:
        if outer.file == inner.file and taken in _locks_held(tree, outer.line):
            return outer, inner, taken
    return None


def _lock_at(tree: ast.Module, line: int) -> str | None:
    """The lock a statement at `line` takes: `with self.lock:` or `self.lock.acquire()`."""
    for node in walk(tree):
        if isinstance(node, ast.With) and node.lineno == line:
            return next((ast.unparse(item.context_expr) for item in node.items), None)
        if (isinstance(node, ast.Call) and node.lineno == line and isinstance(node.func, ast.Attribute)
                and node.func.attr == "acquire"):
            return ast.unparse(node.func.value)
    return None


def _locks_held(tree: ast.Module, line: int) -> set[str]:
    """The locks of the `with` blocks whose body holds `line`."""
    return {ast.unparse(item.context_expr) for node in walk(tree) if isinstance(node, ast.With) and node.body
            and node.body[0].lineno <= line <= (node.end_lineno or 0) for item in node.items}


def _lock_copied_by_fork(ctx: Context, process: ProcessStack, main: ThreadStack,
                         sources: dict[str, str]) -> Finding | None:
    """A rank's child process (a Pool's worker, a forked helper) waiting for a lock of the job's own code: a fork
    copies each lock as it is at that moment, and a lock another thread of the parent held then stays held in the
    child, where that thread does not exist to release it."""
    parent = next((other for other in ctx.evidence.processes if other.pid == process.ppid and other.rank is not None),
                  None)
    inner = main.frames[-1]
    if parent is None or process.rank is not None or LIBRARY_FILE.search(inner.file) or inner.file not in sources:
        return None
    if any(frame.function == WORKER_LOOP for frame in main.frames):
        return None  # a DataLoader worker: its rank waits for the batch, which dataloader-worker-stuck tells
    lock = _lock_at(_tree(sources[inner.file]), inner.line)
    if lock is None:
        return None
    waiting = sum(1 for other in ctx.evidence.processes if other.ppid == process.ppid and other.threads
                  and other.threads[0].frames and other.threads[0].frames[-1].location == inner.location)
    return Finding(
        "lock-copied-by-fork", f"rank {parent.rank}'s child processes ({waiting} of them, forked: a Pool's workers) "
        f"wait forever for {lock} at {inner.location} in {inner.function}: a fork copies every lock as it is at that "
        "moment, and another thread of rank " f"{parent.rank} held this one then; in the child that thread does not "
        "exist, so nobody ever releases it", f"{_who(process)}: MainThread "
        + " <- ".join(f"{frame.function} ({frame.location})" for frame in reversed(main.frames)),
        process.node, parent.rank,
        "do not fork while other threads hold locks: create the Pool (or start the processes) before starting "
        "threads, or use another start method, which starts the child afresh and copies no lock: "
        "multiprocessing.get_context('spawn').Pool(...) (or 'forkserver'; the function and its arguments must "
        "then be picklable)")


def _self_deadlock(process: ProcessStack, main: ThreadStack, outer: Frame, inner: Frame, lock: str) -> Finding:
    return Finding(
        "lock-taken-twice", f"{_who(process)} waits forever for {lock}, which its own thread already holds: "
        f"{outer.function} ({outer.location}) took it and then called {inner.function} ({inner.location}), which "
        "takes it again; a threading.Lock does not let its holder in twice", f"{_who(process)}: MainThread "
        + " <- ".join(f"{frame.function} ({frame.location})" for frame in reversed(main.frames)),
        process.node, process.rank,
        f"take the lock once: call {inner.function.rsplit('.', 1)[-1]} after leaving the `with {lock}:` block (or "
        f"split it into a version that expects the lock held), or make it a threading.RLock(), which its holder may "
        "take again")
