"""Interruption and repetition trials for `lab`: does anything of a lab outlive Ctrl-C, a crash, or many runs?

  python bench/trials.py                                # every part, full counts (15-30 min on a loaded machine)
  python bench/trials.py --only sigint,sigkill --trials 3 --seed 7
  python bench/trials.py --write RELIABILITY.md         # also rewrite the reliability matrix with what was measured

Parts (each trial is printed as it ends; the table at the end sums them up):
  sigint   `lab up --nodes 2` gets Ctrl-C (SIGINT to its process group) at a random moment within the shortest
           `lab up` seen so far (a warm one first, then every trial's that ended before its signal): it exits 130 and leaves nothing: no container, network or volume with the lab's
           label, no lab folder, no host process of it
  sigkill  `lab up` is SIGKILLed at a random moment (a crash: no clean-up at all), then `lab down` must leave
           nothing with the lab's label, no lab folder, and no host process of it (after a short grace)
  cycles   `lab up` then `lab down`, again and again: nothing left after each `down`
  runs     `lab run exercise01` again and again on one 2-node lab: after each run, no process and no listening
           port in any node that was not there before the first run; `--run-timeout 300` on a loaded machine, so
           that only a hang times out (`python bench/trials.py --only runs --run-timeout 300 --write RELIABILITY.md`)
  tests    the integration tests the reliability matrix cites (tests/integration/test_reliability.py,
           test_bad_input.py, test_faults.py), each test one trial; RELIABILITY.md shows each one's outcome
  faults   `lab fault ACTION node1 --for 3s` for kill, stop, pause and partition, the `lab` process killed right
           after: the node must be back by itself (no fault in `lab status`) within the duration + 20 s; then
           `lab fault clear` twice (the second says nothing was left)

Moments are drawn from a seeded generator (the seed is printed; `--seed` replays it). Objects are counted with
the `docker` CLI by the labels `lab` puts on them, and node processes with `docker exec`, so the counts do not
depend on the code under test. Everything runs under its own LAB_HOME with lab names of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run import load, table  # noqa: E402

DEFAULT_TRIALS = {"sigint": 30, "sigkill": 30, "cycles": 20, "runs": 100, "faults": 3, "tests": 1}
MATRIX_TESTS = ("tests/integration/test_reliability.py", "tests/integration/test_bad_input.py",
                "tests/integration/test_faults.py")
TIMED_ACTIONS = ("kill", "stop", "pause", "partition")
FAULT_SECONDS = 3
FAULT_GRACE_SECONDS = 20  # a timed fault must be gone within its duration and this
RESULTS = BENCH / "results" / "trials.json"  # default of --results: every part's latest result, for RELIABILITY.md
PROCESS_GRACE_SECONDS = 15  # host processes of a killed `lab` (ansible, ssh) get this long to end
LAB_PYTHON = "/opt/lab-venv/bin/python"
# Prints "pid comm" of every process in the node but itself, then "port N" for every listening TCP port.
NODE_SNAPSHOT = (
    "import os\n"
    "me = str(os.getpid())\n"
    "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        comm = open(f'/proc/{pid}/comm').read().strip()\n"
    "    except OSError:\n"
    "        continue\n"
    "    if pid != me:\n"
    "        print(pid, comm)\n"
    "for table in ('/proc/net/tcp', '/proc/net/tcp6'):\n"
    "    for line in open(table).readlines()[1:]:\n"
    "        fields = line.split()\n"
    "        if fields[3] == '0A':\n"
    "            print('port', int(fields[1].rsplit(':', 1)[1], 16))\n"
)


@dataclass
class PartResult:
    """One part's counts; `failures` lists every trial that did not behave as expected, with why."""

    part: str
    expected: str
    trials: int = 0
    objects_left: int = 0
    folders_left: int = 0
    processes_left: int = 0
    completed_first: int = 0  # `lab up` finished before the signal came: nothing was interrupted
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    outcomes: dict[str, str] = field(default_factory=dict)  # the tests part: test id -> passed/failed/skipped
    note: str = ""  # how the part was run, when not as by default (RELIABILITY.md prints it under the counts)

    def to_dict(self) -> dict:
        return self.__dict__.copy()

    def row(self) -> list:
        return [self.part, self.trials, self.completed_first, self.objects_left, self.folders_left,
                self.processes_left, len(self.failures), f"{self.seconds:.0f}"]


HEADERS = ["part", "trials", "finished before the signal", "objects left", "lab folders left", "processes left",
           "failed trials", "seconds"]


class Trials:
    """The `lab` command under its own LAB_HOME, and the counters that look at what it left."""

    def __init__(self, home: Path, token: str, prefix: str = "tr"):
        self.home, self.token, self.prefix = home, token, prefix  # lab names: prefix + token + part
        self.up_seconds = 0.0  # the shortest `lab up` seen: interruptions are drawn from 0 to it
        self.env = {**os.environ, "LAB_HOME": str(home)}

    def name(self, part: str, index: int) -> str:
        return f"{self.prefix}{self.token}{part[:3]}{index}"

    def lab(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True,
                              timeout=timeout, env=self.env)

    def start(self, *args: str) -> subprocess.Popen:
        """`lab ARGS` in its own process group (as a shell's foreground job is), with Ctrl-C armed even when
        this script runs in the background (where SIGINT arrives ignored)."""
        return subprocess.Popen([sys.executable, "-m", "lab.cli", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def objects(self, name: str) -> int:
        """Containers, networks and volumes that carry lab `name`'s label."""
        label = f"label=io.lab.lab={name}"
        commands = (["docker", "ps", "-aq", "--filter", label], ["docker", "network", "ls", "-q", "--filter", label],
                    ["docker", "volume", "ls", "-q", "--filter", label])
        return sum(len(subprocess.run(command, capture_output=True, text=True, check=True).stdout.split())
                   for command in commands)

    def folder_left(self, name: str) -> bool:
        return (self.home / "labs" / name).exists()

    def host_processes(self, seconds: float = 0) -> list[str]:
        """Host processes started under this LAB_HOME (ansible, ssh, fault timers), waiting up to `seconds`
        for them to end."""
        deadline = time.monotonic() + seconds
        while True:
            found = []
            needle = f"LAB_HOME={self.home}".encode()
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    if needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                        found.append(f"{pid} {Path(f'/proc/{pid}/comm').read_text().strip()}")
                except OSError:
                    continue
            if not found or time.monotonic() >= deadline:
                return found
            time.sleep(0.5)

    def node_snapshot(self, name: str, index: int) -> tuple[dict[str, str], set[int]]:
        """(pid -> command name, listening ports) inside one node."""
        result = subprocess.run(["docker", "exec", f"lab-{name}-node{index}", LAB_PYTHON, "-c", NODE_SNAPSHOT],
                                capture_output=True, text=True, check=True)
        processes, ports = {}, set()
        for line in result.stdout.splitlines():
            key, value = line.split(maxsplit=1)
            if key == "port":
                ports.add(int(value))
            else:
                processes[key] = value
        return processes, ports

    def node_faults(self, name: str) -> dict[int, list[str]]:
        result = self.lab("status", "--name", name, "--json")
        if result.returncode != 0:
            return {}
        return {node["index"]: node["faults"] for node in json.loads(result.stdout)[name]["nodes"]}

    def down(self, name: str) -> None:
        self.lab("down", "--name", name)


def warm_up_seconds(trials: Trials) -> float:
    """One timed `lab up` (image present): the first window the interruptions are drawn from."""
    name = trials.name("warm", 0)
    started = time.monotonic()
    result = trials.lab("up", "--nodes", "2", "--name", name)
    seconds = time.monotonic() - started
    trials.down(name)
    if result.returncode != 0:
        raise SystemExit(f"lab up failed before any trial: {result.stderr.strip()[-2000:]}")
    return seconds


def interrupt_trials(trials: Trials, part: str, count: int, rng: random.Random) -> PartResult:
    """`lab up` interrupted at a random moment by SIGINT (to its group) or SIGKILL (to it alone)."""
    crash = part == "sigkill"
    result = PartResult(part, "after `lab down`, 0 objects, no lab folder, no process" if crash
                        else "exit 130; 0 objects, no lab folder, no process")
    for index in range(count):
        name = trials.name(part, index)
        moment = rng.random() * trials.up_seconds
        process = trials.start("up", "--nodes", "2", "--name", name)
        time.sleep(moment)
        finished_first = process.poll() is not None
        if not finished_first:
            if crash:
                process.kill()
            else:
                os.killpg(process.pid, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=300)
        code = process.returncode
        # The signal can land after `lab up` printed its summary, while Python exits: no bytecode runs any more to
        # raise KeyboardInterrupt, so it exits 0 with the lab up. The command finished first; its lab is whole.
        finished_first = finished_first or (code == 0 and f"lab '{name}' up in" in stdout)
        if finished_first and code == 0:  # `lab up` is quicker now (less load): later moments come from a shorter window
            trials.up_seconds = min(trials.up_seconds, moment)
        if crash or finished_first:
            trials.down(name)
        objects, folder = trials.objects(name), trials.folder_left(name)
        processes = trials.host_processes(PROCESS_GRACE_SECONDS)
        result.trials += 1
        result.completed_first += finished_first
        result.objects_left += objects
        result.folders_left += folder
        result.processes_left += len(processes)
        problems = []
        if finished_first and code != 0:
            problems.append(f"`lab up` failed by itself, exit {code}: {stderr.strip()[-300:]}")
        if not crash and not finished_first and code not in (130, -signal.SIGINT):  # -2: before Python's handler
            problems.append(f"exit {code}: {stderr.strip()[-300:]}")
        if objects or folder or processes:
            problems.append(f"{objects} object(s), folder {'left' if folder else 'gone'}, processes {processes}")
        if problems:
            result.failures.append(f"{part} {index} at {moment:.2f} s: {'; '.join(problems)}")
        print(f"{part} {index + 1}/{count} at {moment:.2f} s: "
              f"{'finished first, ' if finished_first else ''}exit {code}, {objects} object(s), "
              f"folder {'left' if folder else 'gone'}, {len(processes)} process(es)"
              + (f"  FAILED: {'; '.join(problems)}" if problems else ""), flush=True)
        trials.down(name)  # whatever a failed trial left must not weigh on the next one
        if folder:
            shutil.rmtree(trials.home / "labs" / name, ignore_errors=True)
    return result


def cycle_trials(trials: Trials, count: int) -> PartResult:
    result = PartResult("cycles", "`lab up` then `lab down`: 0 objects, no lab folder, no process")
    name = trials.name("cycles", 0)
    for index in range(count):
        up = trials.lab("up", "--nodes", "2", "--name", name)
        down = trials.lab("down", "--name", name)
        objects, folder, processes = trials.objects(name), trials.folder_left(name), trials.host_processes()
        result.trials += 1
        result.objects_left += objects
        result.folders_left += folder
        result.processes_left += len(processes)
        problems = [f"{command} exit {outcome.returncode}: {outcome.stderr.strip()[-300:]}"
                    for command, outcome in (("up", up), ("down", down)) if outcome.returncode]
        if objects or folder or processes:
            problems.append(f"{objects} object(s), folder {'left' if folder else 'gone'}, processes {processes}")
        if problems:
            result.failures.append(f"cycle {index}: {'; '.join(problems)}")
        print(f"cycle {index + 1}/{count}: {objects} object(s), folder {'left' if folder else 'gone'}"
              + (f"  FAILED: {'; '.join(problems)}" if problems else ""), flush=True)
    trials.down(name)
    return result


def run_trials(trials: Trials, count: int, step_timeout: int | None = None) -> PartResult:
    """exercise01 again and again; after each run, count what is in the nodes that was not there before.

    `step_timeout` (`--run-timeout`) replaces the exercise's own 60 s, so that on a loaded machine a slow start is not
    taken for a hang; a run that still times out after every rank reported is a hang in the ending
    (labkit.finish), and its failure says so."""
    result = PartResult("runs", "every run passes; 0 new processes, 0 new listening ports in any node",
                        note=f"each run with `--timeout {step_timeout}`" if step_timeout else "")
    name = trials.name("runs", 0)
    trials.lab("up", "--nodes", "2", "--name", name)
    try:
        before = {index: trials.node_snapshot(name, index) for index in (0, 1)}
        for index in range(count):
            run = trials.lab("run", "exercise01", "--name", name, "--quiet",
                             *(["--timeout", str(step_timeout)] if step_timeout else []))
            left, ports = [], []
            for node, (processes, listening) in before.items():
                now_processes, now_ports = trials.node_snapshot(name, node)
                left += [f"node{node}:{pid} {comm}" for pid, comm in now_processes.items() if pid not in processes]
                ports += [f"node{node}:{port}" for port in sorted(now_ports - listening)]
            result.trials += 1
            result.processes_left = max(result.processes_left, len(left) + len(ports))
            output = (run.stderr or run.stdout).strip()
            kind = ("hang after every rank reported: " if "timed out" in output and "never reported" not in output
                    else "slow: ranks never reported: " if "never reported" in output else "")
            problems = ([f"exit {run.returncode}: {kind}{output[-300:]}"] if run.returncode else [])
            if left or ports:
                problems.append(f"left processes {left}, ports {ports}")
            if problems:
                result.failures.append(f"run {index}: {'; '.join(problems)}")
            print(f"run {index + 1}/{count}: exit {run.returncode}, {len(left)} process(es), {len(ports)} port(s) left"
                  + (f"  FAILED: {'; '.join(problems)}" if problems else ""), flush=True)
    finally:
        trials.down(name)
    result.objects_left, result.folders_left = trials.objects(name), int(trials.folder_left(name))
    return result


def fault_trials(trials: Trials, count: int) -> PartResult:
    """Timed faults that must end by themselves, though the `lab` that set them is killed at once."""
    result = PartResult("faults", f"`--for {FAULT_SECONDS}s` reverts by itself within {FAULT_SECONDS}+"
                                  f"{FAULT_GRACE_SECONDS} s; `clear` twice: 2nd has nothing left")
    name = trials.name("faults", 0)
    trials.lab("up", "--nodes", "2", "--name", name)
    try:
        for index in range(count):
            for action in TIMED_ACTIONS:
                process = trials.start("fault", action, "node1", "--for", f"{FAULT_SECONDS}s", "--name", name)
                _, stderr = process.communicate(timeout=120)
                process.kill()  # gone already: nothing of the timer may depend on it
                started = time.monotonic()
                while trials.node_faults(name).get(1) and time.monotonic() - started < FAULT_SECONDS + FAULT_GRACE_SECONDS:
                    time.sleep(0.5)
                left = trials.node_faults(name).get(1, [])
                seconds = time.monotonic() - started
                trials.lab("fault", "partition", "node1", "--for", "60s", "--name", name)
                first, second = trials.lab("fault", "clear", "--name", name), trials.lab("fault", "clear", "--name", name)
                result.trials += 1
                problems = []
                if process.returncode:
                    problems.append(f"`lab fault {action}` exit {process.returncode}: {stderr.strip()[-300:]}")
                if left:
                    problems.append(f"still {left} after {seconds:.1f} s")
                if first.returncode or second.returncode or "nothing" not in second.stdout:
                    problems.append(f"clear twice: exit {first.returncode}/{second.returncode}, {second.stdout.strip()!r}")
                if trials.node_faults(name).get(1):
                    problems.append("clear left a fault")
                if problems:
                    result.failures.append(f"{action} {index}: {'; '.join(problems)}")
                print(f"fault {action} {index + 1}/{count}: back after {seconds:.1f} s"
                      + (f"  FAILED: {'; '.join(problems)}" if problems else ""), flush=True)
    finally:
        trials.down(name)
    result.objects_left, result.folders_left = trials.objects(name), int(trials.folder_left(name))
    result.processes_left = len(trials.host_processes(PROCESS_GRACE_SECONDS))
    return result


def store(result: PartResult, seed: int, path: Path) -> None:
    """Keep the part's latest result (the other parts' stay), so RELIABILITY.md can be written from all of them."""
    stored = json.loads(path.read_text()) if path.exists() else {}
    stored[result.part] = {**result.to_dict(), "seed": seed, "load": load(), "date": time.strftime("%Y-%m-%d %H:%M")}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(stored, indent=2) + "\n")


def test_outcomes(trials: Trials) -> PartResult:
    """Run the integration tests RELIABILITY.md cites, and keep each one's outcome."""
    result = PartResult("tests", "every cited integration test passes")
    junit = trials.home / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", *MATRIX_TESTS, "-q", "-p", "no:cacheprovider",
                    f"--junit-xml={junit}"], cwd=BENCH.parent, env=trials.env, timeout=3600)
    for case in ElementTree.parse(junit).iter("testcase"):
        test = f"{case.get('classname').rsplit('.', 1)[-1]}::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcome = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        result.outcomes[test] = outcome
        result.trials += 1
        if outcome == "failed":
            result.failures.append(f"{test} failed")
        print(f"{test}: {outcome}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(DEFAULT_TRIALS), help=f"parts: {','.join(DEFAULT_TRIALS)}")
    parser.add_argument("--trials", type=int, default=None, help="trials per part (default: each part's own)")
    parser.add_argument("--seed", type=int, default=None, help="replay the moments of an earlier run")
    parser.add_argument("--results", type=Path, default=RESULTS, metavar="FILE",
                        help=f"keep each part's latest result here (default {RESULTS.relative_to(BENCH.parent)})")
    parser.add_argument("--run-timeout", type=int, default=None, metavar="SECONDS",
                        help="runs part: each run's step timeout (default: exercise01's own 60 s); more on a loaded "
                             "machine, so that only a hang times out")
    parser.add_argument("--prefix", default="tr", help="lab names start with this (on a shared engine: your own)")
    parser.add_argument("--write", type=Path, default=None, metavar="FILE", help="write the reliability matrix here")
    args = parser.parse_args()
    parts = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = sorted(set(parts) - set(DEFAULT_TRIALS))
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; use {','.join(DEFAULT_TRIALS)}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    rng = random.Random(seed)
    home = Path(tempfile.mkdtemp(prefix="lab-trials-home-"))
    trials = Trials(home, uuid.uuid4().hex[:4], args.prefix)
    print(f"seed {seed}; LAB_HOME {home}; {load()}", flush=True)
    started = time.monotonic()
    results = []
    if {"sigint", "sigkill"} & set(parts):
        trials.up_seconds = warm_up_seconds(trials)
        print(f"interruptions drawn from 0..{trials.up_seconds:.1f} s (one warm `lab up`) at first", flush=True)
    for part in parts:
        count = args.trials or DEFAULT_TRIALS[part]
        part_started = time.monotonic()
        if part in ("sigint", "sigkill"):
            outcome = interrupt_trials(trials, part, count, rng)
        elif part == "cycles":
            outcome = cycle_trials(trials, count)
        elif part == "runs":
            outcome = run_trials(trials, count, args.run_timeout)
        elif part == "tests":
            outcome = test_outcomes(trials)
        else:
            outcome = fault_trials(trials, count)
        outcome.seconds = time.monotonic() - part_started
        results.append(outcome)
        store(outcome, seed, args.results)
    shutil.rmtree(home, ignore_errors=True)
    summary = table(HEADERS, [result.row() for result in results])
    print(f"\n{summary}\n\nseed {seed}; {time.monotonic() - started:.0f} s in all; {load()}")
    for result in results:
        for failure in result.failures:
            print(f"FAILED {failure}")
    if args.write:
        from reliability_matrix import render

        args.write.write_text(render(json.loads(args.results.read_text()), HEADERS))
        print(f"wrote {args.write} (parts not run now: their latest results from {args.results})")
    sys.exit(1 if any(result.failures for result in results) else 0)


if __name__ == "__main__":
    main()
