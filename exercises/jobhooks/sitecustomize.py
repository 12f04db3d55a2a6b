"""What the lab adds to every Python process of a job: whole lines on the output, and torch's Flight Recorder written
out. The lab puts this folder first on every job's PYTHONPATH (lab/jobs/exercises.py, readable_output_env); a
sitecustomize it shadows (the system's, or one on the user's PYTHONPATH) still runs, after it. Standard library only:
it runs on every node, in every Python the job starts.

Whole lines: the processes of one node (torchrun workers, mp.spawn children, anything a script starts) share the
node's output pipe. Unbuffered Python (PYTHONUNBUFFERED=1) writes a print's parts and its newline in separate write()
calls, so two processes' text merges into one line; fully buffered Python cuts lines at 8 KiB blocks and holds them
back. Line buffering sends each line at once, in one write(), which a pipe never splits (up to PIPE_BUF = 4096 bytes).

Flight Recorder (when LAB_FLIGHT_DIR is set, lab/jobs/flight.py): torch keeps every process's last collectives (on by
default for gloo and NCCL: sequence number, operation, sizes, when it was entered, whether it completed) but writes
them nowhere unless asked. This writes them, with when the process started, as JSON into LAB_FLIGHT_DIR when the
process ends, and when the lab asks a hung run before stopping it: a thread waits for the request, as a Python signal
handler would only run once the hung collective returned. torch is never imported here: a process that does not use
torch.distributed writes nothing.

Stack at SIGTERM (torchrun's workers, which have RANK): when one rank fails, torchrun ends the node's other ranks with
SIGTERM at once, before the lab could take their stacks, yet where a rank was then (still in its own code, while the
others timed out waiting for it) is the evidence of a late rank. faulthandler writes every thread's stack as the signal
comes (in C, even from inside a long call) into a file opened at start, removed again when the process ends otherwise.
"""

import atexit
import importlib.machinery
import importlib.util
import json
import os
import signal
import sys
import threading
import time


def _line_buffered() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True, write_through=False)


KEPT_ENTRIES = 64
STARTED = time.time()  # when this process started: a process started after a collective cannot have been late to it


def _record_collectives(folder: str) -> None:
    # The rank as torch.distributed says it while the group lives (a job that ends with destroy_process_group
    # before this thread looked falls back on torchrun's RANK).
    identity = {"node": os.environ.get("LAB_NODE"), "pid": os.getpid(), "rank": None, "world_size": None}
    request = os.path.join(folder, "dump-request")

    def distributed():
        module = sys.modules.get("torch.distributed")
        return module if module is not None and hasattr(module, "get_world_size") else None

    def learn_rank() -> None:
        module = distributed()
        try:
            if module is not None and module.is_initialized():
                identity["rank"], identity["world_size"] = module.get_rank(), module.get_world_size()
        except Exception:  # torch half imported, or a group being torn down: try again later
            pass

    def dump(reason: str) -> None:
        if distributed() is None:
            return
        learn_rank()
        if identity["rank"] is None and os.environ.get("RANK", "").isdigit():
            identity["rank"], identity["world_size"] = int(os.environ["RANK"]), os.environ.get("WORLD_SIZE")
        try:
            from torch._C._distributed_c10d import _dump_fr_trace_json
            trace = json.loads(_dump_fr_trace_json(True, False))  # collectives, not only the active ones
        except Exception:
            return
        if not trace.get("entries"):
            return
        trace["entries"] = trace["entries"][-KEPT_ENTRIES:]  # the last ones say where it is; the recorder holds 2000
        path = os.path.join(folder, f"{reason}-node{identity['node']}-pid{identity['pid']}.json")
        try:
            os.makedirs(folder, exist_ok=True)
            # At exit: whether an exception ended the process (the interpreter keeps it in sys.last_value), so the
            # lab tells a rank that finished its work from one that failed.
            failed = getattr(sys, "last_value", None) if reason == "exit" else None
            with open(path + ".tmp", "w") as out:
                json.dump({**identity, "reason": reason, "time": time.time(), "started": STARTED,
                           "exception": type(failed).__name__ if failed is not None else None, "trace": trace}, out)
            os.replace(path + ".tmp", path)
        except OSError:
            pass

    def watch() -> None:
        answered = None
        while True:
            time.sleep(0.25)
            if identity["rank"] is None:
                learn_rank()
            try:
                asked = os.stat(request).st_mtime_ns
            except OSError:
                continue
            if asked != answered:
                answered = asked
                dump("live")

    threading.Thread(target=watch, name="lab-flight-recorder", daemon=True).start()
    atexit.register(dump, "exit")


def _stack_when_terminated(folder: str) -> None:
    import faulthandler

    path = os.path.join(folder, f"term-node{os.environ.get('LAB_NODE')}-pid{os.getpid()}.txt")
    try:
        os.makedirs(folder, exist_ok=True)
        out = open(path, "w")
        out.write(json.dumps({"node": os.environ.get("LAB_NODE"), "pid": os.getpid(), "rank": os.environ.get("RANK"),
                              "local_rank": os.environ.get("LOCAL_RANK"), "argv": sys.argv,
                              "main_thread": f"0x{threading.main_thread().ident:016x}"}) + "\n")
        out.flush()
        faulthandler.register(signal.SIGTERM, file=out, all_threads=True, chain=True)
    except (OSError, ValueError, RuntimeError, AttributeError):
        return

    def ended_otherwise() -> None:
        try:
            faulthandler.unregister(signal.SIGTERM)
            out.close()
            os.remove(path)
        except (OSError, ValueError):
            pass

    atexit.register(ended_otherwise)


def _profile_steps(folder: str) -> None:
    """A few steady steps profiled for `lab forecast` (lab_profile.py beside this file; LAB_PROFILE_DIR)."""
    try:
        import lab_profile
    except ImportError:
        return
    lab_profile.install(folder)


def _run_shadowed_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_line_buffered()
if os.environ.get("LAB_FLIGHT_DIR"):
    _record_collectives(os.environ["LAB_FLIGHT_DIR"])
    if os.environ.get("RANK"):
        _stack_when_terminated(os.environ["LAB_FLIGHT_DIR"])
if os.environ.get("LAB_PROFILE_DIR"):
    _profile_steps(os.environ["LAB_PROFILE_DIR"])
_run_shadowed_sitecustomize()
