"""The nodes launched the job differently, so they never formed one job, read from the launchers' own command lines
(the stacks of torchrun's agents, or the settings the hooks saw an agent launch with) and from who each process said
it was (the Flight Recorder dumps):

- torchrun options that differ between the nodes' agents (a --rdzv-id made per node with $RANDOM, another --nnodes
  or endpoint): each agent waits in a rendezvous the others never join;
- node rank 0 given to another node than the one --master-addr names: nobody listens where the agents dial;
- a rank number held by a process on each of two nodes, in worlds of the same size: each node ran a job of its own
  (`--standalone` on every node, a rendezvous endpoint of localhost).
"""

from __future__ import annotations

import re

from lab.analysis.diagnosis.context import Context
from lab.analysis.diagnosis.findings import Finding

NODE_OWN_OPTIONS = {"--node-rank", "--node_rank", "--local-addr", "--local_addr", "--log-dir", "--log_dir"}


def launch_findings(ctx: Context) -> list[Finding]:
    agents = _agents(ctx)
    return (_options_differ(ctx, agents) + _nodes_never_come(ctx, agents) + _separate_worlds(ctx)
            + _option_spelled_otherwise(ctx))


def _option_spelled_otherwise(ctx: Context) -> list[Finding]:
    """An option of the job's command line that the script's parser defines under another spelling (`--node-rank`
    given, `--node_rank` defined), in a script that parses with parse_known_args: argparse left it among the unknown
    arguments without an error, and the option kept its default on every node."""
    for path, text in {path: text for trace in ctx.evidence.traces for path, text in trace.sources.items()}.items():
        if "parse_known_args" not in text:
            continue
        defined = set(re.findall(r"add_argument\(\s*[^)]*?[\"'](--[\w-]+)[\"']", text))
        for word in ctx.evidence.command:
            given = word.partition("=")[0]
            if not given.startswith("--") or given in defined or any(name.startswith(given) for name in defined):
                continue
            meant = next((name for name in defined if name.replace("_", "-") == given.replace("_", "-")), None)
            if meant:
                return [Finding(
                    "option-spelled-otherwise", f"the command passes {given}, but {path.rsplit('/', 1)[-1]} defines "
                    f"{meant}: parse_known_args() puts an option it does not know among the leftovers without an "
                    f"error, so {meant} kept its default on every node", f"command: {' '.join(ctx.evidence.command)}",
                    None, None,
                    f"pass the spelling the script defines ({meant}), or accept both (add_argument('{given}', "
                    f"'{meant}', dest=...)); and do not let unknown options pass silently: parse_args(), or fail on "
                    "leftovers that are not the overrides the script expects")]
    return []


def _launcher_options(cmdline: list[str]) -> dict[str, str] | None:
    """torchrun's options (`--name value` or `--name=value`) before the script; None for another command."""
    try:
        start = next(index for index, word in enumerate(cmdline) if word.endswith(("torchrun", "torch.distributed.run",
                                                                                     "torch.distributed.launch")))
    except StopIteration:
        return None
    options, words = {}, cmdline[start + 1:]
    index = 0
    while index < len(words) and words[index].startswith("--"):
        name, _, value = words[index].partition("=")
        if not value and index + 1 < len(words) and not words[index + 1].startswith("--") and not words[
                index + 1].endswith(".py"):
            value, index = words[index + 1], index + 1
        options[name.replace("_", "-")] = value
        index += 1
    return options


# The hooks' record of a torchrun agent's LaunchConfig, as the command-line options that set each setting.
SETTING_OPTIONS = {"run_id": "--rdzv-id", "rdzv_backend": "--rdzv-backend", "rdzv_endpoint": "--rdzv-endpoint",
                   "nproc_per_node": "--nproc-per-node", "max_restarts": "--max-restarts"}


def _agents(ctx: Context) -> dict[int, dict[str, str]]:
    """Each node's torchrun options, from its agent's stack, else from the settings the hooks saw its agent launch
    with (torchrun started from a script: torch.distributed.run.main([...]), elastic_launch)."""
    agents = {}
    for process in ctx.evidence.processes:
        if process.role == "agent" and (options := _launcher_options(process.cmdline)) is not None:
            agents.setdefault(process.node, options)
    if agents:
        return agents  # the command lines: the hooks' settings are another form, not to be compared with them
    for trace in ctx.evidence.traces:
        launch = trace.calls.launch if trace.calls else {}
        if launch and trace.node is not None and trace.node not in agents:
            options = {option: launch[name] for name, option in SETTING_OPTIONS.items() if name in launch}
            if "min_nodes" in launch and "max_nodes" in launch:
                options["--nnodes"] = launch["min_nodes"] if launch["min_nodes"] == launch["max_nodes"] else \
                    f"{launch['min_nodes']}:{launch['max_nodes']}"
            agents[trace.node] = options
    return agents


def _nodes_never_come(ctx: Context, agents: dict[int, dict[str, str]]) -> list[Finding]:
    """Every agent was told (one --nnodes) to wait for more nodes than the job was launched on: the rendezvous
    waits for nodes that never come, and no worker starts."""
    asked = {options.get("--nnodes", "").split(":")[0] for options in agents.values()}
    if len(asked) != 1 or not (value := asked.pop()).isdigit():
        return []
    launched = max(ctx.evidence.nnodes, len(agents))
    if int(value) <= launched or any(process.rank is not None for process in ctx.evidence.processes):
        return []
    return [Finding(
        "nodes-never-come", f"torchrun was told --nnodes {value} on each of the {launched} nodes the job was launched "
        f"on: its rendezvous waits for {int(value) - launched} more node(s) that never come, so no worker started",
        "agents: " + "; ".join(f"node{node}: --nnodes {options.get('--nnodes')}" for node, options in sorted(
            agents.items())), min(agents), None,
        f"give --nnodes the number of nodes you launch on ({launched} here: `--nnodes {launched}`, or `lab torchrun`, "
        "which passes the lab's), or launch on as many nodes as --nnodes asks (`lab up --nodes "
        f"{value}`); a range (--nnodes {launched}:{value}) lets an elastic job start with fewer")]


def _options_differ(ctx: Context, agents: dict[int, dict[str, str]]) -> list[Finding]:
    if len(agents) < 2:
        return []
    ranks = {node: options.get("--node-rank") for node, options in agents.items()}
    if None not in ranks.values() and len(set(ranks.values())) < len(ranks):
        given = ", ".join(f"node{node} {value}" for node, value in sorted(ranks.items()))
        return [Finding(
            "duplicate-rank", f"the nodes' torchrun were given the same --node-rank ({given}): two agents claim one "
            "place in the job, and the static rendezvous waits for a node rank nobody has, so no worker starts",
            "agents: " + "; ".join(f"node{node}: --node-rank {value}" for node, value in sorted(ranks.items())),
            min(agents), None,
            "give each node its own --node-rank, 0 to NNODES-1 (`lab exec` fills {node_rank} per node: torchrun "
            "--node-rank {node_rank} ...; a launch script copied to every node must read it, not hard-code it)")]
    if (elsewhere := _rank_zero_elsewhere(ctx, agents)) is not None:
        return [elsewhere]
    names = sorted(set().union(*agents.values()) - {name.replace("_", "-") for name in NODE_OWN_OPTIONS})
    for name in names:
        values = {node: options.get(name, "(not given)") for node, options in sorted(agents.items())}
        if len(set(values.values())) > 1:
            shown = ", ".join(f"node{node} {value}" for node, value in values.items())
            return [Finding(
                "launch-options-differ", f"the nodes' torchrun were started with different {name} ({shown}): each "
                "waits in a rendezvous the others do not join, so no worker ever starts", "agents: " + "; ".join(
                    f"node{node}: {' '.join(f'{key} {value}'.strip() for key, value in options.items())}"
                    for node, options in sorted(agents.items()))[:600], min(agents), None,
                f"start torchrun on every node with the same options; only --node-rank differs per node. A value "
                f"made on each node ($RANDOM, a date, the hostname) must be made once and passed to every node: "
                f"`lab exec --env RDZV_ID=job1 -- torchrun ... {name} $RDZV_ID ...`, or `lab torchrun`, which "
                "launches every node alike")]
    return []


def _rank_zero_elsewhere(ctx: Context, agents: dict[int, dict[str, str]]) -> Finding | None:
    """Static rendezvous (torchrun's default with --master-addr): node rank 0's agent hosts the store on its own host
    and every agent dials --master-addr; a node rank 0 on another node than the one --master-addr names leaves
    nobody listening where they dial."""
    if any(options.get("--rdzv-backend", "static") != "static" or "--rdzv-endpoint" in options
           for options in agents.values()):
        return None
    zero = [node for node, options in agents.items() if options.get("--node-rank") == "0"]
    addresses = {options.get("--master-addr") for options in agents.values()}
    hostnames = {node.hostname: node.index for node in ctx.evidence.nodes}
    if len(zero) != 1 or len(addresses) != 1 or (address := next(iter(addresses))) not in hostnames \
            or hostnames[address] == zero[0]:
        return None
    named, ranked = hostnames[address], zero[0]
    return Finding(
        "node-rank-zero-not-master", f"node{ranked} was given --node-rank 0 but --master-addr names {address} "
        f"(node{named}, --node-rank {agents[named].get('--node-rank', '?')}): node rank 0 hosts the rendezvous store "
        f"on its own host, and every agent dials {address}, where nobody listens, until the timeout",
        "agents: " + "; ".join(f"node{node}: --node-rank {options.get('--node-rank')} --master-addr "
                               f"{options.get('--master-addr')}" for node, options in sorted(agents.items())),
        ranked, None,
        f"give --node-rank 0 to the node --master-addr names ({address}), or point --master-addr at node rank 0's "
        "host; a node rank taken from a host file's order must match the master's place in it (list the master "
        "first), or let `lab exec` fill {node_rank} and {master_addr} together")


def _separate_worlds(ctx: Context) -> list[Finding]:
    """Two nodes whose processes claim the same ranks of worlds of the same size, and ran collectives in them: two
    jobs, not one (two processes that claimed one rank of one world never get past its rendezvous)."""
    claimed: dict[tuple[int, int], set[int]] = {}
    for trace in ctx.evidence.traces:  # a world that formed: its processes got past init into collectives
        if trace.rank is not None and trace.world_size and trace.node is not None and trace.reached:
            claimed.setdefault((trace.rank, trace.world_size), set()).add(trace.node)
    twice = {key: nodes for key, nodes in claimed.items() if len(nodes) > 1}
    if not twice or not ctx.multi_node:
        return []
    (rank, world), nodes = min(twice.items())
    listed = " and ".join(f"node{node}" for node in sorted(nodes))
    standalone = any("--standalone" in word for word in ctx.evidence.command)
    why = ("--standalone, which makes each node its own rendezvous on localhost" if standalone else
           "a rendezvous of its own (a localhost endpoint, --standalone, or another port or id per node)")
    return [Finding(
        "separate-jobs", f"{listed} each ran a job of their own: both have a rank {rank} in a world of {world}, so the "
        f"nodes never trained together (each node's torchrun used {why})", f"ranks by node: " + "; ".join(
            f"rank {rank_} of {world_}: {', '.join(f'node{node}' for node in sorted(found))}"
            for (rank_, world_), found in sorted(claimed.items()))[:600], min(nodes), rank,
        "launch one job across the nodes: on every node torchrun --nnodes N --node-rank R --nproc-per-node P "
        "--rdzv-endpoint node0:PORT (or --master-addr node0 --master-port PORT), without --standalone; or `lab "
        "torchrun`, which does so")]
