"""Commands that make, inspect, change and remove a lab: up, provision, status, doctor, down, fault, image."""

from __future__ import annotations

import json
import sys

import click
from rich.markup import escape
from rich.table import Table

from lab.cli.console import StatusLine, UntilDone, console, print_nodes, print_provision
from lab.cli.options import json_option, master_port_option, name_option, target_options
from lab.model.requirements import requirement_lines
from lab.model.spec import DEFAULT_NAME, LabSpec, format_bytes, parse_memory
from lab.nodes import lifecycle
from lab.nodes.labels import GPUS_LABEL


@click.command()
@click.option("--nodes", type=int, default=2, show_default=True, help="How many nodes (containers).")
@click.option("--nproc-per-node", type=int, default=None, help="Processes per node for every run (default: each exercise's own).")
@name_option
@click.option("--cpus", type=float, default=None, help="CPU limit per node, e.g. 1 or 0.5.")
@click.option("--memory", default=None, metavar="SIZE", help="Memory limit per node, e.g. 2g or 768m.")
@click.option("--net-admin", is_flag=True, help="Give nodes NET_ADMIN (needed by `lab fault delay`).")
@click.option("--gpus", default="auto", show_default=True, metavar="auto|none|all|N",
              help="NVIDIA GPUs for the nodes: auto (all when there are any), none, all (split across nodes), N per node.")
@click.option("--image", default="auto", show_default=True, metavar="auto|host|IMAGE",
              help="auto: the lab's node image; host: no image build, nodes mount this host's /usr and Python (with "
                   "its torch) read-only; IMAGE: your own local image with Python 3 and torch (the lab adds sshd to "
                   "a copy of it and never changes it).")
@click.option("--python", "image_python", default=None, metavar="PATH",
              help="With --image IMAGE: the image's interpreter that has torch (default: found by the lab).")
@click.option("--link", default=None, metavar="PROFILE",
              help="Shape traffic between nodes: RATE[:DELAY[:JITTER]][:LOSS%], e.g. 10gbit, 1gbit:200us, "
                   "1gbit:200us:20us:0.1%, or ethernet-1g|ethernet-10g|ethernet-100g (delays need netem in the kernel).")
@click.option("--scheduler", type=click.Choice(["none", "slurm"]), default="none", show_default=True,
              help="slurm: the nodes form a Slurm cluster (slurmctld on node0; `lab sbatch`, `lab ssh node0`).")
@click.option("--requirements", "requirement_files", multiple=True, metavar="FILE",
              help="Extra packages for the nodes, in pip's requirements syntax (pins, ranges, extras, local .whl files); "
                   "resolved and downloaded on this host, installed offline as a layer on the node image. Repeatable.")
@click.option("--pip", "pip_specs", multiple=True, metavar="SPEC",
              help="One extra package for the nodes, e.g. --pip lightning==2.5.1 (repeatable; with --requirements too). "
                   "torch==VERSION builds the nodes with that torch.")
@click.option("--workspace", type=click.Path(exists=True, file_okay=False, resolve_path=True), default=None,
              metavar="DIR", help="Your project folder, mounted read-only at the same path on every node and the "
                                  "working directory of `lab exec`/`lab torchrun` (nothing copied per run).")
@click.option("--recreate", is_flag=True, help="Replace a running lab whose spec differs.")
@click.option("--rebuild", is_flag=True, help="Rebuild the node image even if one is cached.")
@click.option("--dry-run", is_flag=True, help="Print the plan (every container setting; all of it with --json) and create nothing.")
@json_option
def up(nodes, nproc_per_node, name, cpus, memory, net_admin, gpus, image, image_python, link, scheduler,
       requirement_files, pip_specs, workspace, recreate, rebuild, dry_run, as_json):
    """Start a lab of NODES containers and wait until every node answers.

    Running it again with the same options does nothing; with different options it
    refuses unless --recreate is given. The first run builds the node image (a minute
    or two, see README); later runs start in seconds.

    \b
    Examples:
      lab up --nodes 2
      lab up --nodes 4 --cpus 0.5 --memory 1g --name big
      lab up --nodes 2 --image host --gpus auto
      lab up --nodes 2 --image my-team/train:2.13   your team's image (local), as it is
      lab up --nodes 2 --link 1gbit            nodes talk over a 1 Gbit/s link (nodes stay unprivileged)
      lab up --nodes 2 --dry-run --json
      lab up --nodes 2 --scheduler slurm       a Slurm cluster: `lab sbatch job.sh`
      lab up --nodes 2 --pip lightning==2.5.1  nodes with Lightning (resolved here, no registry in the nodes)
      lab up --nodes 2 --requirements requirements.txt --recreate
      lab up --nodes 2 --workspace .           then: lab torchrun -m mypkg.train
    """
    spec = LabSpec(name=name, nodes=nodes, nproc_per_node=nproc_per_node, cpus=cpus,
                   memory=parse_memory(memory) if memory else None, image=image, gpus=gpus, net_admin=net_admin,
                   link=link, scheduler=scheduler, requirements=requirement_lines(requirement_files, pip_specs), workspace=workspace,
                   python=image_python)
    if dry_run:
        plan, notes = lifecycle.plan_up(spec)
        if as_json:
            print(json.dumps({"plan": plan.to_dict(), "notes": notes}, indent=2, sort_keys=True))
        else:
            _print_plan(plan, notes)
        return
    with UntilDone() as command:
        with StatusLine(as_json) as progress:
            result = lifecycle.up(spec, recreate=recreate, rebuild=rebuild, progress=progress, whole=command.done)
        _print_up(result, name, as_json)


def _print_up(result: lifecycle.UpResult, name: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"name": name, "changed": result.changed, "seconds": round(result.seconds, 2),
                          "phases": result.phases, "notices": result.notices, "nodes": [node.to_dict() for node in result.nodes]}, indent=2))
        return
    verb = f"up in {result.seconds:.1f} s" if result.changed else "already up, nothing to do"
    console.print(f"lab '{name}' {verb}: {lifecycle.describe(result.spec)}")
    if result.phases:
        console.print("  " + ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in result.phases.items()),
                      markup=False, style="dim")
    for notice in result.notices:
        console.print(f"[yellow]note:[/] {notice}")
    print_nodes(result.nodes)
    if result.provision:
        print_provision(result.provision)


def _print_plan(plan, notes: list[str]) -> None:
    """The readable summary of `lab up --dry-run`: the objects and, per node, its image, limits, GPUs and mounts."""
    console.print(f"[bold]lab '{plan.lab}'[/] would be: {escape(lifecycle.describe(plan.spec))} (dry run: nothing created)")
    options = ", ".join(f"{key.rsplit('.', 1)[-1]} {value}" for key, value in plan.network.options.items())
    console.print(f"network {plan.network.name} ({plan.network.driver}{', ' + options if options else ''})")
    console.print(f"volume  {plan.volume.name} -> {escape(plan.volume.host_dir)}")
    if plan.spec.requirements:
        console.print(f"packages {escape(' '.join(plan.spec.requirements))} (resolved on this host, a layer on the node image)")
    if plan.spec.link:
        console.print(f"links   {plan.spec.link} between nodes, shaped with tc on each node's host-side veth "
                      "(into the node) and an IFB device (out of it); traffic inside a node is not shaped")
    table = Table(box=None, pad_edge=False)
    for column in ("node", "container", "image", "cpus", "memory", "gpus", "caps", "mounts"):
        table.add_column(column)
    for container in plan.containers:
        gpus = container.labels.get(GPUS_LABEL) or "none"
        mounts = ", ".join(f"{m.target}{' (ro)' if m.read_only else ''}" for m in container.mounts)
        table.add_row(container.hostname, container.name, container.image, f"{container.cpus:g}" if container.cpus else "-",
                      format_bytes(container.memory), gpus, ",".join(container.cap_add) or "-", escape(mounts))
    console.print(table)
    for note in [*plan.notices, *notes]:
        console.print(f"[yellow]note:[/] {escape(note)}")


@click.command()
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
    print_provision(result)


@click.command()
@click.option("--name", default=None, metavar="NAME", help="Only this lab (default: every lab).")
@json_option
def status(name, as_json):
    """Show labs and their nodes: hostnames, IPs, state, limits, GPUs, SSH ports."""
    from lab.nodes.faults import timed_faults

    report = lifecycle.status(name)
    for lab_name, lab in report.items():  # timed faults, with the time they have left
        pending = timed_faults(lab_name)
        for node in lab["nodes"]:
            node["faults"] += pending.get(node["index"], [])
    if as_json:
        print(json.dumps(report, indent=2))
        return
    if not report:
        console.print("no lab is up (start one with `lab up --nodes 2`)")
        return
    for lab_name, lab in report.items():
        spec = LabSpec.from_dict(lab["spec"]) if lab["spec"] else None
        console.print(f"[bold]lab '{lab_name}'[/]: " + (lifecycle.describe(spec) if spec else "leftovers only (run `lab down`)"))
        print_nodes(lab["nodes"])


@click.command()
@name_option
@target_options
@master_port_option
@click.option("--env", "env_pairs", multiple=True, metavar="K=V",
              help="Check with this variable set, as a job would have it (repeatable), e.g. GLOO_SOCKET_IFNAME=eth0.")
@click.option("--package", "package_names", multiple=True, metavar="NAME",
              help="A package every node must have at the same version (repeatable; default: those the lab's "
                   "--pip/--requirements name). Python and torch are always compared.")
@json_option
def doctor(name, on, nodes, inventory, master_port, env_pairs, package_names, as_json):
    """Check each node from inside: torch, CUDA, GPUs, gloo/nccl, NCCL version, peers; and before a job:
    /dev/shm, the interface (and MTU) gloo and NCCL would use, node0's rendezvous port reached from every
    node (round trip), hostnames on loopback, clock offsets. Python, torch and the lab's requested
    packages are compared across nodes: a node that differs, or lacks one, is named.

    Exits 1 when a node has a problem (torch missing, versions that differ between nodes, a peer that does not resolve, GPUs the lab gave a
    node that torch cannot see, a rendezvous port that cannot be reached, a hostname on loopback);
    warnings (small /dev/shm, MTU mismatch, clock offset) keep exit 0.
    """
    from lab.jobs import targets
    from lab.jobs.adhoc import parse_env
    from lab.jobs.doctor import diagnose

    env = parse_env(env_pairs)
    target = targets.resolve(on, name, inventory, nodes)
    with StatusLine(as_json) as progress:
        progress(f"checking {target.nnodes} node(s)")
        result = diagnose(target, master_port, env, package_names)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        _print_diagnosis(result)
    if not result.ok:
        sys.exit(1)


def _print_diagnosis(result) -> None:
    """The node table, then the pre-job table and its problem and warning lines."""
    table = Table(box=None, pad_edge=False)
    columns = ["node", "python", "torch", "cuda", "gpus", "backends", "nccl", "peers", "problems"]
    with_packages = any(node.probe.get("packages") for node in result.nodes)
    if with_packages:
        columns.insert(3, "packages")
    for column in columns:
        table.add_column(column)
    for node in result.nodes:
        probe = node.probe
        peers = probe.get("peers") or {}
        gpus = probe.get("gpus") or []
        cells = [node.hostname, escape(str(probe.get("python", "?"))),
                 escape(f"{probe.get('torch')}" + (f" (CUDA {probe['cuda_build']})" if probe.get("cuda_build") else ""))]
        if with_packages:
            cells.append(escape(" ".join(f"{name} {version or 'missing'}"
                                         for name, version in (probe.get("packages") or {}).items())))
        table.add_row(*cells,
                      "yes" if probe.get("cuda") else "no", escape(f"{len(gpus)}" + (f": {', '.join(gpus)}" if gpus else "")),
                      "/".join(probe.get("backends") or []) or "-", probe.get("nccl") or "-",
                      f"{sum(1 for a in peers.values() if a)}/{len(peers)} resolve",
                      "[green]ok[/]" if not node.problems else "[red]" + escape("; ".join(node.problems)) + "[/]")
    console.print(table)
    console.print(f"[bold]before a job[/] (rendezvous {escape(result.master_addr)}:{result.master_port}):")
    checks = Table(box=None, pad_edge=False)
    for column in ("node", "/dev/shm", "gloo", "nccl", "rendezvous (rtt)", "clock vs node0", "verdict"):
        checks.add_column(column)
    lines = []
    for node in result.nodes:
        preflight = node.preflight
        shm = preflight.facts.get("shm_bytes")
        verdict = ("[red]problem[/]" if preflight.problems else "[yellow]warning[/]" if preflight.warnings
                   else "[green]ok[/]")
        checks.add_row(f"node{node.node}", format_bytes(shm) if shm is not None else "?",
                       escape(preflight.interface_text("gloo_interface")),
                       escape(preflight.interface_text("nccl_interface")),
                       preflight.reach_text(), preflight.clock_text(), verdict)
        lines += [f"[red]problem[/]: {escape(text)}" for text in preflight.problems]
        lines += [f"[yellow]warning[/]: {escape(text)}" for text in dict.fromkeys(preflight.warnings)]
    console.print(checks)
    for line in dict.fromkeys(lines):  # a warning about every node (an MTU mismatch) is printed once
        console.print(line)
    if result.backend:
        console.print(f"`lab run --backend auto` on lab '{result.lab}' uses {result.backend} (1 process per node)")


@click.command()
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


@click.command()
@click.argument("action", type=click.Choice(["kill", "stop", "pause", "unpause", "partition", "heal", "delay", "clear"]))
@click.argument("node", required=False)
@name_option
@click.option("--for", "duration", default=None, metavar="DURATION",
              help="End the fault by itself after this long, e.g. 30s, 2m (even if this command is killed).")
@click.option("--ms", type=click.IntRange(0, 60000), default=None, help="delay: added latency in milliseconds.")
@click.option("--jitter", type=click.IntRange(0, 60000), default=None, help="delay: +/- jitter in milliseconds.")
@click.option("--rate", default=None, metavar="RATE", help="delay: bandwidth limit, e.g. 100mbit.")
def fault(action, node, name, duration, ms, jitter, rate):
    """Inject a fault into NODE (node1 or 1) of a running lab; `heal`/`clear` undo them.

    \b
    kill       SIGKILL the node's container (like pulling the plug)
    stop       stop it gracefully
    pause      freeze every process (unpause to continue)
    partition  disconnect it from the lab network
    delay      tc netem latency/jitter/rate on its interface (needs `lab up --net-admin` and a kernel with netem)
    heal       start, unpause, reconnect and clear delays
    clear      heal NODE (every node when none is named) and cancel its pending `--for` timers

    With --for DURATION a helper process on this host reverts the fault when the time is up, also when this
    command has been killed. Faults, and the time left on timed ones, show in `lab status`.

    \b
    Examples:
      lab fault partition node1 --for 30s
      lab fault clear
    """
    from lab.nodes.faults import inject

    console.print(inject(name, action, node, ms=ms, jitter=jitter, rate=rate, duration=duration), markup=False)


@click.group()
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


@image.command("base")
def image_base():
    """Make the Debian image the node image builds on: a local one, else a pull, else debootstrap.

    `lab image build` does this too; alone it needs no torch on this host, so `make` runs it
    while torch installs.
    """
    from lab.nodes.driver import DockerDriver
    from lab.nodes.image import ensure_base

    driver = DockerDriver()
    with StatusLine(False) as progress:
        base = ensure_base(driver.client, progress)
    console.print(f"base image: {base}")


@click.command()
@json_option
def home(as_json):
    """Print the folder that holds the state (keys, logs, run records) and why it is that one.

    LAB_HOME when set; else the nearest .lab/ in this folder or a parent; else ./.lab, made on first use.
    """
    from lab.paths import locate_state

    state = locate_state()
    if as_json:
        print(json.dumps({"path": str(state.path), "source": state.source, "exists": state.path.is_dir()}, indent=2))
        return
    why = {"LAB_HOME": "set by LAB_HOME", "found": "the nearest .lab/ in this folder or one of its parents",
           "new": "no .lab/ in this folder or its parents: this one is made on first use"}[state.source]
    console.print(str(state.path), markup=False, highlight=False, soft_wrap=True)
    console.print(f"[dim]{escape(why)}[/]")
