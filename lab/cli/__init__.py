"""The `lab` command: parses options, calls the library, prints. No logic lives here."""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lab import paths
from lab.nodes import lifecycle
from lab.bench import PARTS as BENCH_PARTS
from lab.errors import LabError, SpecError, host_error
from lab.model.spec import DEFAULT_NAME, LabSpec, format_bytes, parse_memory

# Wide enough for tables when piped (rich assumes 80 columns without a terminal).
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
errors = Console(stderr=True, highlight=False, soft_wrap=True)
NODE_COLOURS = ["cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta"]
RANK_PATTERN = re.compile(r"^\[rank (\d+)\]\s?")


def name_option(func):
    return click.option("--name", default=DEFAULT_NAME, show_default=True, metavar="NAME",
                        help="Which lab (several can run side by side).")(func)


def master_port_option(func):
    return click.option("--master-port", type=click.IntRange(1024, 65535), default=None, metavar="PORT",
                        help="Rendezvous port on node0 (default: 29500, or a free one if that is taken).")(func)


def json_option(func):
    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of a table.")(func)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="lab")
def cli():
    """A multi-node PyTorch distributed lab on one machine.

    \b
    Simulated nodes are Docker containers (node0, node1, ...) on their own network,
    provisioned with ansible, so you can rehearse multi-node jobs before you get a cluster.

    \b
    Typical session:
      lab up --nodes 2          start two nodes (builds the node image the first time)
      lab status                see them
      lab exercises             list the exercises
      lab run exercise03        torchrun across both nodes, then check the results
      lab down                  remove everything the lab created

    Files (keys, logs, run records) live under .lab/ at the repo root (LAB_HOME overrides).
    """


class StatusLine:
    """Progress callback for long work: a spinner line on a terminal, timestamped lines in a log.

    Without a terminal (CI, `| tee`) a line is printed when the phase changes or every LOG_EVERY seconds,
    so a build log shows it is alive without copying every line of pip and docker. A line waits GRACE
    seconds before it is printed (sooner if the next one arrives), so work that fails at once ends
    with its one-line error alone.
    """

    LOG_EVERY = 10.0
    GRACE = 2.0

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.status = None
        self.last_phase, self.last_time = "", 0.0
        self.started = time.monotonic()
        self.pending_line: str | None = None
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None

    def __enter__(self):
        if not self.quiet and errors.is_terminal:
            self.status = errors.status("starting", spinner="dots")
            self.status.__enter__()
        return self

    def __call__(self, message: str) -> None:
        if self.quiet:
            return
        if self.status is not None:
            self.status.update(escape(message[:150]))
            return
        phase, now = message.split(":", 1)[0], time.monotonic()
        if phase != self.last_phase or now - self.last_time >= self.LOG_EVERY:
            if self.timer is not None:
                self.timer.cancel()  # its line is printed just below; it must not fire early on the next one
            self._print_pending()  # a next phase means the work is under way: show the last one now
            with self.lock:
                self.pending_line = f"[{now - self.started:6.1f} s] {message[:200]}"
            self.timer = threading.Timer(self.GRACE, self._print_pending)
            self.timer.daemon = True
            self.timer.start()
            self.last_phase, self.last_time = phase, now

    def _print_pending(self) -> None:
        with self.lock:
            line, self.pending_line = self.pending_line, None
            if line is not None:
                errors.print(line, markup=False, highlight=False)

    def __exit__(self, *exc):
        with self.lock:
            self.pending_line = None
        if self.timer is not None:
            self.timer.cancel()
        if self.status is not None:
            self.status.__exit__(*exc)


@cli.command()
@click.option("--nodes", type=int, default=2, show_default=True, help="How many nodes (containers).")
@click.option("--nproc-per-node", type=int, default=None, help="Processes per node for every run (default: each exercise's own).")
@name_option
@click.option("--cpus", type=float, default=None, help="CPU limit per node, e.g. 1 or 0.5.")
@click.option("--memory", default=None, metavar="SIZE", help="Memory limit per node, e.g. 2g or 768m.")
@click.option("--net-admin", is_flag=True, help="Give nodes NET_ADMIN (needed by `lab fault delay`).")
@click.option("--gpus", default="auto", show_default=True, metavar="auto|none|all|N",
              help="NVIDIA GPUs for the nodes: auto (all when there are any), none, all (split across nodes), N per node.")
@click.option("--image", type=click.Choice(["auto", "host"]), default="auto", show_default=True,
              help="host: no image build; nodes mount this host's /usr and Python (with its torch) read-only.")
@click.option("--recreate", is_flag=True, help="Replace a running lab whose spec differs.")
@click.option("--rebuild", is_flag=True, help="Rebuild the node image even if one is cached.")
@json_option
def up(nodes, nproc_per_node, name, cpus, memory, net_admin, gpus, image, recreate, rebuild, as_json):
    """Start a lab of NODES containers and wait until every node answers.

    Running it again with the same options does nothing; with different options it
    refuses unless --recreate is given. The first run builds the node image (a minute
    or two, see README); later runs start in seconds.

    \b
    Examples:
      lab up --nodes 2
      lab up --nodes 4 --cpus 0.5 --memory 1g --name big
      lab up --nodes 2 --image host --gpus auto
    """
    spec = LabSpec(name=name, nodes=nodes, nproc_per_node=nproc_per_node, cpus=cpus,
                   memory=parse_memory(memory) if memory else None, image=image, gpus=gpus, net_admin=net_admin)
    with StatusLine(as_json) as progress:
        result = lifecycle.up(spec, recreate=recreate, rebuild=rebuild, progress=progress)
    if as_json:
        print(json.dumps({"name": name, "changed": result.changed, "seconds": round(result.seconds, 2),
                          "notices": result.notices, "nodes": [node.to_dict() for node in result.nodes]}, indent=2))
        return
    verb = f"up in {result.seconds:.1f} s" if result.changed else "already up, nothing to do"
    console.print(f"lab '{name}' {verb}: {lifecycle.describe(result.spec)}")
    for notice in result.notices:
        console.print(f"[yellow]note:[/] {notice}")
    _print_nodes(result.nodes)
    if result.provision:
        _print_provision(result.provision)


def _print_provision(result) -> None:
    for node in result.nodes:
        console.print(("[green]ok[/] " if node.ok else "[red]FAILED[/] ") + node.summary(), highlight=False)
    console.print(f"[dim]provisioned in {result.seconds:.1f} s; ansible log: {result.log}[/]")


@cli.command()
@name_option
@json_option
def provision(name, as_json):
    """Rerun the ansible provisioning playbook on every node of the lab.

    It checks python/torch, backends and GPUs, that every peer resolves, and writes
    /etc/lab/env (MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK, NPROC_PER_NODE) on each node.
    """
    with StatusLine(as_json) as progress:
        progress("provisioning with ansible")
        result = lifecycle.provision(name)
    if as_json:
        print(json.dumps({"log": str(result.log), "seconds": round(result.seconds, 2),
                          "nodes": [{"host": n.host, "ok": n.ok, "facts": n.facts, "error": n.error} for n in result.nodes]}, indent=2))
        return
    _print_provision(result)


def _print_nodes(nodes) -> None:
    table = Table(box=None, pad_edge=False)
    for column in ("node", "hostname", "ip", "state", "cpus", "memory", "gpus", "ssh", "faults"):
        table.add_column(column)
    for node in nodes:
        node = node if isinstance(node, dict) else node.to_dict()
        table.add_row(f"node{node['index']}", node["hostname"], node["ip"] or "-", node["state"],
                      f"{node['cpus']:g}" if node["cpus"] else "host", format_bytes(node["memory"]) if node["memory"] else "host",
                      ",".join(node["gpus"]) or "none", f"127.0.0.1:{node['ssh_port']}" if node["ssh_port"] else "-",
                      ",".join(node["faults"]) or "-")
    console.print(table)


@cli.command()
@click.option("--name", default=None, metavar="NAME", help="Only this lab (default: every lab).")
@json_option
def status(name, as_json):
    """Show labs and their nodes: hostnames, IPs, state, limits, GPUs, SSH ports."""
    report = lifecycle.status(name)
    if as_json:
        print(json.dumps(report, indent=2))
        return
    if not report:
        console.print("no lab is up (start one with `lab up --nodes 2`)")
        return
    for lab_name, lab in report.items():
        spec = LabSpec.from_dict(lab["spec"]) if lab["spec"] else None
        console.print(f"[bold]lab '{lab_name}'[/]: " + (lifecycle.describe(spec) if spec else "leftovers only (run `lab down`)"))
        _print_nodes(lab["nodes"])


@cli.command()
@name_option
@json_option
def doctor(name, as_json):
    """Check each node from inside: torch, CUDA, GPUs, gloo/nccl, NCCL version, peers.

    Exits 1 when a node has a problem (torch missing, a peer that does not resolve, GPUs the
    lab gave a node that torch cannot see).
    """
    from lab.nodes.doctor import diagnose

    result = diagnose(name)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        table = Table(box=None, pad_edge=False)
        for column in ("node", "python", "torch", "cuda", "gpus", "backends", "nccl", "peers", "problems"):
            table.add_column(column)
        for node in result.nodes:
            probe = node.probe
            peers = probe.get("peers") or {}
            gpus = probe.get("gpus") or []
            table.add_row(node.hostname, escape(str(probe.get("python", "?"))),
                          escape(f"{probe.get('torch')}" + (f" (CUDA {probe['cuda_build']})" if probe.get("cuda_build") else "")),
                          "yes" if probe.get("cuda") else "no", escape(f"{len(gpus)}" + (f": {', '.join(gpus)}" if gpus else "")),
                          "/".join(probe.get("backends") or []) or "-", probe.get("nccl") or "-",
                          f"{sum(1 for a in peers.values() if a)}/{len(peers)} resolve",
                          "[green]ok[/]" if node.ok else "[red]" + escape("; ".join(node.problems)) + "[/]")
        console.print(table)
        console.print(f"`lab run --backend auto` on lab '{name}' uses {result.backend} (1 process per node)")
    if not result.ok:
        sys.exit(1)


@cli.command()
@click.option("--name", default=DEFAULT_NAME, show_default=True, metavar="NAME", help="Which lab to remove.")
@click.option("--all", "every", is_flag=True, help="Remove every lab on this engine.")
@json_option
def down(name, every, as_json):
    """Remove a lab's containers, network and volume (found by label, also after a crash).

    Run records under .lab/runs stay.
    """
    removed = lifecycle.down(None if every else name)
    if as_json:
        print(json.dumps(removed))
        return
    target = "every lab" if every else f"lab '{name}'"
    if not any(removed.values()):
        console.print(f"nothing to remove for {target}")
        return
    console.print(f"removed {target}: {removed['containers']} container(s), {removed['networks']} network(s), "
                  f"{removed['volumes']} volume(s)")


@cli.command()
@click.argument("action", type=click.Choice(["kill", "stop", "pause", "unpause", "partition", "heal", "delay"]))
@click.argument("node")
@name_option
@click.option("--ms", type=click.IntRange(0, 60000), default=None, help="delay: added latency in milliseconds.")
@click.option("--jitter", type=click.IntRange(0, 60000), default=None, help="delay: +/- jitter in milliseconds.")
@click.option("--rate", default=None, metavar="RATE", help="delay: bandwidth limit, e.g. 100mbit.")
def fault(action, node, name, ms, jitter, rate):
    """Inject a fault into NODE (node1 or 1) of a running lab; `heal` undoes them all.

    
    kill       SIGKILL the node's container (like pulling the plug)
    stop       stop it gracefully
    pause      freeze every process (unpause to continue)
    partition  disconnect it from the lab network
    delay      tc netem latency/jitter/rate on its interface (needs `lab up --net-admin`)
    heal       start, unpause, reconnect and clear delays

    Faults show in `lab status`.
    """
    from lab.nodes.faults import inject

    console.print(inject(name, action, node, ms=ms, jitter=jitter, rate=rate))


@cli.group()
def image():
    """Build or inspect the node image."""


@image.command("build")
@click.option("--rebuild", is_flag=True, help="Build even if an image with the same inputs exists.")
def image_build(rebuild):
    """Build the node image (base: local image, else pull, else debootstrap)."""
    from lab.nodes.driver import DockerDriver
    from lab.nodes.image import ensure_node_image

    driver = DockerDriver()
    with StatusLine(False) as progress:
        tag = ensure_node_image(driver.client, progress, rebuild=rebuild)
    console.print(f"node image: {tag}")


@cli.command("exercises")
@json_option
def exercises_command(as_json):
    """List the exercises, one line each."""
    from lab.jobs.exercises import discover

    found = discover()
    if as_json:
        print(json.dumps([{"name": e.name, "title": e.title, "summary": e.summary, "nodes": e.nodes,
                           "nproc_per_node": e.nproc_per_node, "steps": [s.name for s in e.steps]} for e in found], indent=2))
        return
    # Plain aligned lines, not a table: a table wraps long summaries; these are cut at the terminal's width.
    title_width = max((len(exercise.title) for exercise in found), default=0)
    for exercise in found:
        console.print(f"{exercise.name}  {exercise.title:<{title_width}}  {exercise.summary}", markup=False,
                      no_wrap=True, overflow="ellipsis", crop=True)


class LiveReporter:
    """Prints each node's output with a coloured node (and rank) prefix."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def line(self, node: int, text: str) -> None:
        if self.quiet:
            return
        colour = NODE_COLOURS[node % len(NODE_COLOURS)]
        match = RANK_PATTERN.match(text)
        prefix = f"node{node}"
        if match:
            prefix += f" r{match.group(1)}"
            text = text[match.end():]
        console.print(f"[{colour}]{prefix:>9} |[/] ", end="")
        console.print(text, markup=False, highlight=False)

    def event(self, text: str) -> None:
        """Events (timeouts, faults, OOM kills) are shown even when quiet: on stderr, so --json stays clean."""
        (errors if self.quiet else console).print(f"[bold]>> {escape(text)}[/]", highlight=False)


def _print_checks(record) -> None:
    table = Table(title=f"{record.exercise} ({record.run_id})", title_justify="left", box=None, pad_edge=False)
    table.add_column("result")
    table.add_column("check")
    table.add_column("detail")
    for check in record.checks:
        table.add_row("[green]PASS[/]" if check.passed else "[red]FAIL[/]", escape(check.name), escape(check.detail))
    console.print(table)
    verdict = "[green]PASSED[/]" if record.passed else f"[red]{record.status.upper()}[/]"
    console.print(f"{record.exercise}: {verdict} in {record.seconds:.1f} s; record: {record.path}")


@cli.command()
@click.argument("exercise", required=False)
@click.option("--all", "run_all", is_flag=True, help="Run every exercise in order.")
@name_option
@click.option("--nproc-per-node", type=click.IntRange(1, 64), default=None, help="Override processes per node.")
@click.option("--backend", type=click.Choice(["auto", "gloo", "nccl"]), default="auto", show_default=True,
              help="auto: nccl where every rank has its own GPU, else gloo.")
@click.option("--timeout", type=click.IntRange(1, 86400), default=None, help="Seconds per step (default: the exercise's).")
@click.option("--driver", type=click.Choice(["docker", "local"]), default="docker", show_default=True,
              help="local runs the 'nodes' as plain processes on this host (a native baseline).")
@click.option("--nodes", type=click.IntRange(1, 64), default=2, show_default=True, help="Node count for --driver local.")
@click.option("--quiet", is_flag=True, help="Do not stream the nodes' output.")
@click.option("--inventory", type=click.Path(path_type=Path), default=None, metavar="HOSTS.INI",
              help="Run on the real machines of this ansible inventory, over ssh (see lab/inventory.py).")
@master_port_option
@json_option
def run(exercise, run_all, name, nproc_per_node, backend, timeout, driver, nodes, quiet, inventory, master_port, as_json):
    """Run EXERCISE (exercise03, or just 3) across every node and check its results.

    Output of every node streams live with a node/rank prefix. A record (per-node logs,
    per-rank JSON, checks, timings) is kept under .lab/runs/<id>/. Exits 0 only if every
    check passes.
    """
    from lab.jobs import targets

    if not exercise and not run_all:
        raise SpecError("name an exercise or pass --all", "see `lab exercises`")
    if exercise and run_all:
        raise SpecError("name an exercise or pass --all, not both")
    reporter = LiveReporter(quiet or as_json)
    if inventory and driver == "local":
        raise SpecError("--inventory runs on the inventory's hosts; it does not go with --driver local")
    if inventory:
        from lab.provision import inventory as real_hosts

        records = real_hosts.run_exercises(None if run_all else exercise, inventory, nproc_per_node, backend, timeout,
                                           reporter, master_port)
    else:
        records = targets.run_exercises(None if run_all else exercise, name, driver, nodes, nproc_per_node, backend,
                                        timeout, reporter, master_port)
    if as_json:
        print(json.dumps([record.to_dict() for record in records], indent=2))
    else:
        for record in records:
            _print_checks(record)
        if len(records) > 1:
            console.print(", ".join(f"{r.exercise} {'PASS' if r.passed else 'FAIL'}" for r in records))
    if not all(record.passed for record in records):
        sys.exit(1)


def _finish_adhoc(record, as_json) -> None:
    if as_json:
        print(json.dumps(record.to_dict(), indent=2))
    else:
        codes = ", ".join(f"node{node}={code}" for node, code in record.steps[0]["exit_codes"].items())
        console.print(f"{record.exercise}: {record.status.upper()} in {record.seconds:.1f} s ({codes}); record: {record.path}")
    if not record.passed:
        sys.exit(1)


@cli.command()
@click.option("--only", default=",".join(BENCH_PARTS), show_default=True, metavar="PARTS",
              help=f"Comma-separated parts: {', '.join(BENCH_PARTS)}.")
@click.option("--max-nodes", type=click.IntRange(2, 64), default=16, show_default=True,
              help="Largest lab timed by the `up` part (2, 4, 8, ... up to this).")
@click.option("--cold", is_flag=True, help="Also time a full node image rebuild (a minute or more).")
@click.option("--rounds", type=click.IntRange(1, 20), default=2, show_default=True,
              help="Alternating container/native rounds; the best of each is compared.")
@click.option("--name", default="bench", show_default=True, metavar="NAME", help="Lab the benchmarks use.")
@click.option("--keep", is_flag=True, help="Leave the bench lab up afterwards.")
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="Folder for latest.json and allreduce.png (default: bench/results).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout (tables go to stderr).")
def bench(only, max_nodes, cold, rounds, name, keep, results, as_json):
    """Measure what the containers cost against the same work done natively, side by side.

    Prints nccl-tests style all_reduce tables (containers vs native processes on this host),
    `lab up` times, exercise03 wall times and idle node memory, each with its ratio and target.
    Raw results: bench/results/latest.json, plot: bench/results/allreduce.png. Method and the
    last measured numbers: bench/RESULTS.md.

    \b
    Examples:
      lab bench                              every part (about 5 minutes on 2 cores)
      lab bench --only allreduce --rounds 3  the bandwidth comparison only
      lab bench --only up --max-nodes 4      lab up of 2 and 4 nodes
    """
    from lab.bench import bench_argv, run_bench

    parts = [part.strip() for part in only.split(",") if part.strip()]
    run_bench(bench_argv(parts, max_nodes, cold, rounds, name, keep, as_json, results))


@cli.command("exec", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--node", "node_list", multiple=True, type=click.IntRange(0, 63), metavar="I",
              help="Run on node I (repeatable). Default: every node.")
@click.option("--all", "every", is_flag=True, help="Run on every node (the default).")
@click.option("--env", "env_pairs", multiple=True, metavar="K=V", help="Extra environment variable (repeatable).")
@click.option("--copy", type=click.Path(path_type=Path), default=None,
              help="Copy this file or folder into the run's working directory on the shared folder first.")
@click.option("--timeout", type=click.IntRange(1, 86400), default=None, help="Seconds before every process is stopped.")
@name_option
@master_port_option
@json_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def exec_command(node_list, every, env_pairs, copy, timeout, name, master_port, as_json, command):
    """Run COMMAND on the nodes, with placeholders filled in per node.

    
    Placeholders: {node_rank} {nnodes} {rank} {world_size} {master_addr} {master_port}
    (one process per node, so rank = node_rank). MASTER_ADDR/MASTER_PORT/NODE_RANK/NNODES
    are set too. The working directory is this run's folder on the shared mount.

    
    A script written for two terminals (--rank/--world-size + MASTER_ADDR/PORT):
      lab exec --copy train.py -- python train.py --rank {rank} --world-size {world_size}
    """
    from lab.jobs import adhoc
    from lab.jobs import targets

    if command and command[0] == "--":
        command = command[1:]
    transport, nnodes = targets.transport_for(name, "docker", 0)
    nodes = sorted(set(node_list)) if node_list and not every else list(range(nnodes))
    if any(index >= nnodes for index in nodes):
        raise SpecError(f"lab '{name}' has nodes 0..{nnodes - 1}", "see `lab status`")
    record = adhoc.run_exec(transport, name, nnodes, nodes, list(command), adhoc.parse_env(env_pairs), copy, timeout,
                            LiveReporter(as_json), master_port)
    _finish_adhoc(record, as_json)


@cli.command("torchrun", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--nproc-per-node", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--rdzv", type=click.Choice(["static", "c10d"]), default="static", show_default=True,
              help="static: exact --node-rank placement; c10d: elastic rendezvous on node0.")
@click.option("--env", "env_pairs", multiple=True, metavar="K=V", help="Extra environment variable (repeatable).")
@click.option("--timeout", type=click.IntRange(1, 86400), default=None, help="Seconds before every process is stopped.")
@name_option
@master_port_option
@json_option
@click.argument("script", type=click.Path(path_type=Path))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def torchrun_command(nproc_per_node, rdzv, env_pairs, timeout, name, master_port, as_json, script, args):
    """Run an unmodified training SCRIPT with torchrun on every node.

    The script's folder is copied to the run's folder on the shared mount and the job runs
    from there, so checkpoints written to relative paths are shared by all nodes.

    
    Example:
      lab torchrun --nproc-per-node 2 my_project/train.py --epochs 3
    """
    from lab.jobs import adhoc
    from lab.jobs import targets

    transport, nnodes = targets.transport_for(name, "docker", 0)
    record = adhoc.run_torchrun(transport, name, nnodes, nproc_per_node, rdzv, script, list(args),
                                adhoc.parse_env(env_pairs), timeout, LiveReporter(as_json), master_port)
    _finish_adhoc(record, as_json)


@cli.group()
def export():
    """Write the lab or an exercise in formats a real setup uses (compose, Slurm)."""


def _write(text: str, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text)
    errors.print(f"wrote {output}")


@export.command("compose")
@name_option
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="File to write (default: stdout).")
def export_compose(name, output):
    """A docker-compose.yml equivalent to the running lab (same image, mounts, labels, network)."""
    from lab.nodes.compose import compose_yaml

    lifecycle.require(name)
    _write(compose_yaml(name), output)


@export.command("slurm")
@click.argument("exercise")
@click.option("--nodes", type=click.IntRange(1, 4096), default=None, help="Nodes to ask for (default: the exercise's).")
@click.option("--nproc-per-node", type=click.IntRange(1, 64), default=None, help="Processes per node (default: the exercise's).")
@click.option("--gpus-per-node", type=click.IntRange(0, 64), default=0, show_default=True)
@click.option("--partition", default=None, help="Slurm partition.")
@click.option("--time", "time_limit", default="00:30:00", show_default=True, help="Slurm time limit.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="File to write (default: stdout).")
def export_slurm(exercise, nodes, nproc_per_node, gpus_per_node, partition, time_limit, output):
    """An sbatch script running EXERCISE with srun + torchrun (head node = rendezvous)."""
    from lab.jobs.exercises import find
    from lab.jobs.slurm import slurm_script

    found = find(exercise)
    _write(slurm_script(found, nodes or found.nodes, nproc_per_node or found.nproc_per_node, gpus_per_node,
                        partition, time_limit), output)


@cli.command("runs")
@json_option
def runs_command(as_json):
    """List recorded runs (newest last)."""
    from lab.jobs.records import list_runs

    runs = list_runs()
    if as_json:
        print(json.dumps(runs, indent=2))
        return
    if not runs:
        console.print("no runs recorded yet (try `lab run exercise01`)")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("run", "exercise", "lab", "status", "seconds", "checks"):
        table.add_column(column)
    for record in runs:
        checks = record.get("checks", [])
        passed = sum(1 for check in checks if check.get("passed"))
        table.add_row(record["run_id"], record.get("exercise", "?"), record.get("lab", "?"), record.get("status", "?"),
                      f"{record.get('seconds', 0):.1f}", f"{passed}/{len(checks)}")
    console.print(table)


@cli.command("show")
@click.argument("run", default="latest")
@json_option
def show_command(run, as_json):
    """Print one recorded RUN (id, id prefix, exercise name, or 'latest')."""
    from lab.jobs.records import load_run

    record = load_run(run)
    if as_json:
        print(json.dumps(record, indent=2))
        return
    console.print(f"[bold]{record['run_id']}[/]: {record.get('exercise')} on lab '{record.get('lab')}', "
                  f"{record.get('status')} in {record.get('seconds', 0):.1f} s")
    for step in record.get("steps", []):
        codes = ", ".join(f"node{node}={code}" for node, code in step.get("exit_codes", {}).items())
        extra = " (timed out)" if step.get("timed_out") else ""
        console.print(f"  step {step['step']} (expect {step.get('expect')}): {codes}{extra}, {step.get('seconds')} s")
        if step.get("problem"):
            console.print(f"    {step['problem']}", markup=False)
        if step.get("oom_killed"):
            console.print(f"    OOM-killed on node(s) {', '.join(map(str, step['oom_killed']))}")
    if record.get("error"):
        console.print(f"  error: {record['error']}", markup=False)
    table = Table(box=None, pad_edge=False)
    for column in ("result", "check", "detail"):
        table.add_column(column)
    for check in record.get("checks", []):
        table.add_row("[green]PASS[/]" if check["passed"] else "[red]FAIL[/]", escape(check["name"]),
                      escape(check.get("detail") or ""))
    console.print(table)
    console.print(f"record: {record.get('path')}" + (f"; curves: {record['curves']}" if record.get("curves") else ""))


def main() -> None:
    try:
        cli.main(standalone_mode=False, prog_name="lab")
    except LabError as error:
        _fail(error)
    except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        errors.print("interrupted: whatever this command had started on the nodes was stopped")
        sys.exit(130)
    except click.UsageError as error:
        command = error.ctx.command_path if error.ctx else "lab"
        errors.print(f"[red]error:[/] {escape(error.format_message())}")
        errors.print(f"[dim]hint:[/] see `{command} --help`")
        sys.exit(2)
    except click.ClickException as error:
        errors.print(f"[red]error:[/] {escape(error.format_message())}")
        sys.exit(error.exit_code)
    except click.exceptions.Exit as exit_:
        sys.exit(exit_.exit_code)
    except OSError as error:  # disk full, permission denied: the host's problem, said in one line
        _fail(host_error(error))
    except Exception as error:  # a bug: keep the traceback in a log, show one line
        log = _crash_log()
        errors.print(f"[red]internal error:[/] {escape(type(error).__name__)}: {escape(str(error))}")
        errors.print(f"[dim]hint:[/] this is a bug in lab; the traceback is in {log}")
        sys.exit(70)


def _fail(error: LabError) -> None:
    errors.print(f"[red]error:[/] {escape(error.message)}")
    if error.hint:
        errors.print(f"[dim]hint:[/] {escape(error.hint)}")
    sys.exit(error.exit_code)


def _crash_log() -> Path:
    import traceback

    log = paths.logs_dir() / "crash.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as handle:
        handle.write(traceback.format_exc() + "\n")
    return log


if __name__ == "__main__":
    main()
