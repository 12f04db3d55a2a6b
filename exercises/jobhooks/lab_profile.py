"""A few steady training steps of this process, written out for `lab forecast` (when LAB_PROFILE_DIR is set).

What a forecast needs and torch's Flight Recorder alone does not give on gloo (measured, torch 2.13: its entries
carry `time_created_ns`, the moment a collective was issued, but `time_discovered_started_ns` and
`time_discovered_completed_ns` stay 0 and there is no duration): when each collective ran, and when the training
thread computed or waited. torch's profiler (CPU activity only) has both: `gloo:<op>` on gloo's worker threads from
start to end, and every op of the training thread, whose gaps while a collective is in flight are the waits.

Steps are found without help in a plain training loop: torch.optim's global step hooks mark the end of each step
(DDP's bucket all_reduces and FSDP's all_gather/reduce_scatter then fall inside the step they serve). A loop without
a torch optimizer marks its steps itself: `import lab_profile; lab_profile.mark_step()` at the end of each step (this
folder is on every job's PYTHONPATH); once a mark came, only marks count.

The profiler runs for LAB_PROFILE_STEPS steps after LAB_PROFILE_SKIP warm-up steps, is then stopped, and one JSON
file per process is written into LAB_PROFILE_DIR: every step's start and end (up to MAX_STEPS) with the CPU time of
the training thread, the process and the node at each, and for the profiled
window the collectives (issued, started, ended; operation, bytes and group from the Flight Recorder) and the
training thread's busy intervals: its operators' (a framework's own spans, FSDP's all_gather or DDP's forward, can
hold a wait inside). A process that ends before the window closes writes its steps at exit. Standard
library at import; torch only once the job imported torch.optim.
"""

import atexit
import json
import os
import sys
import threading
import time

MAX_STEPS = 2000  # step boundaries kept
# Unprofiled steps kept after the window (the profiler slows what it watches): the step time is their mean, and on a
# node throttled by its CPU quota a step either fits in the quota's period or waits for the next one (exercise04 at
# 0.2 CPU: 40 or 95 ms), so a few of them say little. A job that ends sooner writes what it saw at exit.
STEPS_AFTER_WINDOW = 30
MERGE_NS = 50_000  # the training thread's ops closer than this are one busy interval (Python between ops)
COLLECTIVE_PREFIXES = ("gloo:", "nccl:")  # how the backends' worker threads name a collective in the profiler
OPERATOR_SCOPE = 0  # at::RecordScope::FUNCTION: a dispatcher operator (aten::, c10d::), not a record_function span

_state = {"bounds": [], "cpu": [], "source": "optimizer", "profiler": None, "window": None, "written": False,
          "folder": None, "skip": 4, "steps": 6, "pid": None}
# The node's CPU time (its container's cgroup, every process in it): what a node with a CPU limit has to spend a step
# against its quota. cgroup v2, then v1's cpuacct; None where neither is readable.
NODE_CPU_FILES = (("/sys/fs/cgroup/cpu.stat", 1000), ("/sys/fs/cgroup/cpuacct/cpuacct.usage", 1),
                  ("/sys/fs/cgroup/cpu,cpuacct/cpuacct.usage", 1))
_lock = threading.Lock()


def mark_step() -> None:
    """End of one training step, for loops without a torch optimizer (or with several steps per optimizer step)."""
    if _state["source"] != "mark":
        _state["source"], _state["bounds"], _state["cpu"] = "mark", [], []
    _boundary()


def _optimizer_stepped(optimizer, args, kwargs) -> None:
    if _state["source"] == "optimizer":
        _boundary()


def _boundary() -> None:
    if _state["folder"] is None:  # not a profiled run: marks cost nothing
        return
    now = time.time_ns()
    bounds = _state["bounds"]
    if len(bounds) < MAX_STEPS:
        bounds.append(now)
        # the training thread's CPU (its computation, at full speed however long the quota held it off), the
        # process's (gloo's threads too) and the node's
        _state["cpu"].append([time.thread_time_ns(), time.process_time_ns(), _node_cpu_ns()])
    steps = len(bounds) - 1  # whole steps seen: from one boundary to the next
    if steps == _state["skip"] and _state["profiler"] is None and not _state["written"]:
        _start_profiler(now)
    elif _state["profiler"] is not None and steps == _state["skip"] + _state["steps"]:
        _stop_profiler(now)
    elif _state["window"] is not None and steps >= _state["skip"] + _state["steps"] + STEPS_AFTER_WINDOW:
        _write()


def _node_cpu_ns():
    if "node_cpu_file" not in _state:  # looked for once: a boundary is in the training loop
        _state["node_cpu_file"] = next(((path, scale) for path, scale in NODE_CPU_FILES if os.access(path, os.R_OK)),
                                       None)
    if _state["node_cpu_file"] is None:
        return None
    path, scale = _state["node_cpu_file"]
    try:
        with open(path) as stat:
            text = stat.read()
    except OSError:
        return None
    if path.endswith("cpu.stat"):
        text = next((line.split()[1] for line in text.splitlines() if line.startswith("usage_usec ")), "")
    return int(text) * scale if text.strip().isdigit() else None


def _start_profiler(now: int) -> None:
    try:
        import torch.profiler
        profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        profiler.start()
    except Exception:  # no profiler in this build, or one already running (the user's): steps only
        return
    _state["profiler"], _state["window"] = profiler, {"first_step": _state["skip"], "start_ns": now}


def _stop_profiler(now: int) -> None:
    profiler, _state["profiler"] = _state["profiler"], None
    window = _state["window"]
    window["end_ns"], window["steps"] = now, _state["steps"]
    try:
        profiler.stop()
        results = profiler.profiler.kineto_results
        events = [(event.name(), event.start_thread_id(), event.start_ns(), event.end_ns(),  # wall clock, ns
                   event.scope() == OPERATOR_SCOPE) for event in results.events()]
        window.update(_window_activity(window, events))
    except Exception as error:  # noqa: BLE001 - the job must go on whatever the profiler does
        window["error"] = f"{type(error).__name__}: {error}"
    window["processed_ns"] = time.time_ns()


def _write() -> None:
    with _lock:
        if _state["written"]:
            return
        _state["written"] = True
    bounds = _state["bounds"]
    data = {"node": os.environ.get("LAB_NODE"), "pid": os.getpid(), "rank": _env_int("RANK"),
            "world_size": _env_int("WORLD_SIZE"), "local_world_size": _env_int("LOCAL_WORLD_SIZE"),
            "step_source": _state["source"], "steps": [[start, end] for start, end in zip(bounds, bounds[1:])],
            "cpu": _state["cpu"],
            "window": _state["window"] if _state["profiler"] is None else None, "written_ns": time.time_ns()}
    folder = _state["folder"]
    path = os.path.join(folder, f"profile-node{data['node']}-pid{data['pid']}.json")
    try:
        os.makedirs(folder, exist_ok=True)
        with open(path + ".tmp", "w") as out:
            json.dump(data, out)
        os.replace(path + ".tmp", path)
    except OSError:
        pass


def _window_activity(window, events) -> dict:
    """The window's collectives (profiler run times joined with the Flight Recorder's issue times and sizes, in
    order) and the training thread's busy intervals."""
    runs = sorted((start, end, name.split(":", 1)[1], thread) for name, thread, start, end, _ in events
                  if name.startswith(COLLECTIVE_PREFIXES))
    issued = [(start, thread) for name, thread, start, _, _ in events if name.startswith("c10d::")]
    threads = {}
    for _, thread, _, _, _ in events:
        threads[thread] = threads.get(thread, 0) + 1
    collective_threads = {thread for *_, thread in runs}
    main = min(issued)[1] if issued else max((t for t in threads if t not in collective_threads),
                                              key=threads.get, default=None)
    busy = []
    # Operators only: a framework's own spans (FSDP::all_gather, DDP's forward, Optimizer.step) may hold a wait.
    for start, end in sorted((start, end) for _, thread, start, end, operator in events
                             if thread == main and operator):
        if busy and start <= busy[-1][1] + MERGE_NS:
            busy[-1][1] = max(busy[-1][1], end)
        else:
            busy.append([start, end])
    entries = _flight_entries(window["start_ns"], window["end_ns"])
    collectives = []
    for index, (start, end, operation, _) in enumerate(runs):
        entry = entries[index] if index < len(entries) else {}
        collectives.append({"op": entry.get("op", operation), "started_ns": start, "ended_ns": end,
                            "issued_ns": entry.get("issued_ns"), "bytes": entry.get("bytes"),
                            "dtype": entry.get("dtype"), "group": entry.get("group"),
                            "group_size": entry.get("group_size"), "seq": entry.get("seq")})
    return {"collectives": collectives, "busy": busy, "flight_entries": len(entries)}


ELEMENT_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Byte": 1, "Char": 1,
                 "Bool": 1, "Short": 2}


def _flight_entries(start_ns: int, end_ns: int) -> list:
    """The Flight Recorder's collectives issued within the window, oldest first: operation, bytes, group."""
    try:
        from torch._C._distributed_c10d import _dump_fr_trace_json
        trace = json.loads(_dump_fr_trace_json(True, False))
    except Exception:  # noqa: BLE001
        return []
    groups = {}
    for name, config in (trace.get("pg_config") or {}).items():
        try:
            groups[name] = len(json.loads(config.get("ranks", "[]")))
        except (ValueError, AttributeError):
            pass
    only = next(iter(groups.values())) if len(groups) == 1 else None
    entries = []
    for entry in trace.get("entries", []):
        created = int(entry.get("time_created_ns") or 0)
        if entry.get("is_p2p") or not start_ns <= created <= end_ns:
            continue
        size = 0
        for shape, dtype in zip(entry.get("input_sizes") or [], entry.get("input_dtypes") or []):
            count = 1
            for dim in shape:
                count *= int(dim)
            size += count * ELEMENT_BYTES.get(dtype, 4)
        group = entry.get("process_group") or ["0", ""]
        entries.append({"op": str(entry.get("profiling_name", "?")).split(":", 1)[-1], "issued_ns": created,
                        "bytes": size, "dtype": (entry.get("input_dtypes") or ["?"])[0], "group": str(group[0]),
                        "group_size": groups.get(str(group[1])) or groups.get(str(group[0])) or only,
                        "seq": entry.get("collective_seq_id")})
    return sorted(entries, key=lambda entry: entry["issued_ns"])


def _env_int(name: str):
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


def _at_exit() -> None:
    # a child forked mid-training (a DataLoader worker) holds a copy of the parent's steps: not its own to write
    if len(_state["bounds"]) > 1 and _state["pid"] == os.getpid():
        _write()


def _exit_now(status: int) -> None:
    """os._exit, after this process's steps are written: a job that ends with os._exit (the lab's exercises do, to
    skip gloo's teardown) runs no atexit."""
    try:
        _at_exit()
    finally:
        _os_exit(status)


_os_exit = os._exit


def install(folder: str) -> None:
    """Watch for torch.optim and hook its step; write what was seen into `folder`."""
    _state["folder"] = folder
    _state["skip"] = int(os.environ.get("LAB_PROFILE_SKIP") or _state["skip"])
    _state["steps"] = int(os.environ.get("LAB_PROFILE_STEPS") or _state["steps"])

    def hook_optimizer() -> None:
        while True:
            module = sys.modules.get("torch.optim.optimizer")
            register = getattr(module, "register_optimizer_step_post_hook", None)
            if register is not None:
                try:
                    register(_optimizer_stepped)
                    return
                except Exception:  # noqa: BLE001 - half imported: try again
                    pass
            time.sleep(0.05 if time.monotonic() - watching < 10 else 0.5)  # a process without torch: rarely

    watching = time.monotonic()
    threading.Thread(target=hook_optimizer, name="lab-profile", daemon=True).start()
    atexit.register(_at_exit)
    _state["pid"] = os.getpid()
    os._exit = _exit_now
