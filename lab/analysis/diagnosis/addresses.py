"""Rendezvous and network causes: an address that is loopback, does not resolve or answers with another
service, a port in use, an interface that is not there, a store nobody answers at.
"""

from __future__ import annotations

import ipaddress
import re

from lab.analysis.diagnosis.context import (JOINED, STORE_WAIT, Context, PatternRule, env_values, node_evidence, quote,
                                            rendezvous_host)
from lab.analysis.diagnosis.evidence import Evidence
from lab.analysis.diagnosis.findings import Finding
from lab.analysis.diagnosis.logs import LIBRARY_FILE, LogLine

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("::ffff:")).is_loopback
    except ValueError:
        return False


def endpoint_host(value: str) -> str:
    """'tcp://h:1', 'h:1', '[::1]:1', 'h' -> the host part."""
    value = re.sub(r"^\w+://", "", value)
    if value.startswith("["):
        return value[1:value.find("]")]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


# --master-addr X / --master_addr=X / --rdzv-endpoint X:P / --init-method tcp://X:P / tcp://X:P anywhere
ADDRESS_OPTION = re.compile(r"^--(?:master[-_]addr|rdzv[-_]endpoint|init[-_]method|dist[-_]url)(?:=(?P<value>.+))?$")


def configured_master_addrs(evidence: Evidence) -> list[tuple[str, str, int | None, int | None]]:
    """(host, where it was set, node, rank) for every rendezvous address the run was given."""
    found = []
    if evidence.master_addr:
        found.append((evidence.master_addr, f"MASTER_ADDR={evidence.master_addr} (the lab's launch)", None, None))
    if "MASTER_ADDR" in evidence.env:
        found.append((evidence.env["MASTER_ADDR"], f"--env MASTER_ADDR={evidence.env['MASTER_ADDR']}", None, None))
    argv = evidence.command
    for position, arg in enumerate(argv):
        if match := ADDRESS_OPTION.match(arg):
            value = match["value"] or (argv[position + 1] if position + 1 < len(argv) else "")
            found.append((endpoint_host(value), " ".join(argv[position:position + (1 if match["value"] else 2)]),
                          None, None))
        elif tcp := re.search(r"tcp://([^\s'\"]+)", arg):
            found.append((endpoint_host(tcp.group(1)), arg, None, None))
    for process in evidence.processes:
        if "MASTER_ADDR" in process.env:
            found.append((process.env["MASTER_ADDR"], f"MASTER_ADDR={process.env['MASTER_ADDR']} "
                          f"(environment of pid {process.pid} on node{process.node})", process.node, process.rank))
    return found


def _unresolvable(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    if not match["host"] and any(trace.node == line.node and trace.history for trace in ctx.evidence.traces):
        return None  # a name of the job's own (an HTTP client's host): the node's ranks met, so the rendezvous resolved
    host = match["host"] or "the rendezvous host"
    return (f"the rendezvous host '{host}' does not resolve on node{line.node}",
            f"set MASTER_ADDR (or --master-addr / --rdzv-endpoint) to a name every node resolves, "
            f"e.g. {rendezvous_host(ctx.evidence)}, the lab's rendezvous host; check the spelling of '{host}'")


def _port_in_use(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str] | None:
    raised = next((tb for tb in ctx.tracebacks if tb.line is line), None)
    if raised is not None and job_own_port(raised):
        return None  # a port of the job's own (a metrics server): crashes.py names it
    named = re.search(r"port: (\d+)|address \('[^']*', (\d+)\)", line.text)
    port = next(filter(None, named.groups()), None) if named else ctx.evidence.master_port
    port_text = f"port {port}" if port else "the rendezvous port"
    own = [tb for tb in ctx.tracebacks if tb.node == line.node and _user_made_store(tb)]
    if own and ctx.evidence.nproc_per_node > 1 and str(port) != str(ctx.evidence.master_port):
        return (f"{port_text} on node{line.node} is held by another process of this job: more than one rank creates "
                "a TCPStore server (is_master=True) on it",
                "create the store's server on one rank only: TCPStore(host, port, world_size, is_master=(rank == 0)), "
                "every other rank a client dialling that host (MASTER_ADDR, not each node's own address)")
    return (f"{port_text} is already in use on node{line.node}: the store could not listen on it",
            f"pick a free MASTER_PORT (lab: --master-port PORT) or stop what holds {port_text} "
            f"(a previous run still alive? `ss -ltnp` on node{line.node} shows it)")


def job_own_port(tb) -> bool:
    """An address-in-use error of the job's own socket: frames shown, none of them torch.distributed's, and not one
    of torch's errors (a traceback cut to its last lines says nothing: the store's port is the likelier)."""
    return bool(tb.frames) and not tb.exc_type.startswith("torch.") and not any(
        "/torch/distributed/" in frame.file or frame.function in ("init_process_group", "TCPStore")
        for frame in tb.frames)


def _user_made_store(tb) -> bool:
    """The job's own code built the store that could not listen (the error comes straight from its line), not torch's
    rendezvous inside init_process_group."""
    functions = [frame.function for frame in tb.frames]
    return bool(tb.frames) and not LIBRARY_FILE.search(tb.frames[-1].file) and \
        "init_process_group" not in functions and "_create_c10d_store" not in functions


def _ifname_missing(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    node = node_evidence(ctx.evidence, line.node)
    have = [name for name in (node.interfaces if node else []) if name != "lo"]
    name = match["name"]
    variables = [key for key in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
                 if name and any(value == name for value in env_values(ctx, key))]
    variable = " / ".join(variables) or ("NCCL_SOCKET_IFNAME" if "Bootstrap" in line.text else "GLOO_SOCKET_IFNAME")
    named = f"'{name}'" if name else "the interface asked for"
    return (f"{variable} names an interface node{line.node} does not have ({named})",
            f"set {variable} to an interface every node has"
            + (f" ({', '.join(have)} on node{line.node})" if have else "") + ", or unset it to let torch choose")


def _wrong_service(match: re.Match, line: LogLine, ctx: Context) -> tuple[str, str]:
    endpoint = re.search(r"to host (\S+?):(\d+)", line.text)
    where = f"{endpoint[1]}:{endpoint[2]}" if endpoint else "the rendezvous address"
    port = endpoint[2] if endpoint else None
    known = {"22": "sshd's", "80": "a web server's", "443": "a web server's"}.get(port or "", "another program's")
    return (f"something other than a torch store answers at {where} (node{line.node} dialled it): the port is "
            f"{known}", f"give MASTER_PORT (or the tcp:// port) the port rank 0's store listens on, a free one "
            f"(the lab gives {{master_port}} and --master-port), not {port or 'a port another service uses'}")


# Connection attempts c10d reports: "failed to connect to [host]:port", "trying to connect to (host, port)",
# "failed to connect/validate to host host:port".
CONNECT_ATTEMPT = re.compile(
    r"(?:failed to connect to \[(?P<h1>[^\]]+)\]:(?P<p1>\d+)"
    r"|trying to connect to \((?P<h2>[^,]+), (?P<p2>\d+)\)"
    r"|connect(?:/validate)? to host (?P<h3>\S+?):(?P<p3>\d+)\b)"
    r"(?P<rest>.*)")


REFUSED_OR_TIMEOUT = re.compile(r"Connection refused|errno: 111|timed out|timeout", re.IGNORECASE)


FINAL_ATTEMPT = re.compile(r"^[\w.]*(?:Error|Exception)\b|- timed out \(try=")  # the exception, or c10d's last try


HARMLESS_ERRNO = re.compile(r"errno: 99 - Cannot assign requested address")  # c10d tries ::1 first, then 127.0.0.1


def connect_attempts(ctx: Context) -> list[tuple[LogLine, str, int]]:
    """Every line where c10d reports dialling an address: (the line, host, port)."""
    attempts = []
    for line in ctx.lines:
        if match := CONNECT_ATTEMPT.search(line.text):
            host = match["h1"] or match["h2"] or match["h3"]
            attempts.append((line, host, int(match["p1"] or match["p2"] or match["p3"])))
    return attempts


def loopback_findings(ctx: Context) -> list[Finding]:
    """A multi-node job told to meet at localhost/127.x: every node looks for the store on itself."""
    if not ctx.multi_node:
        return []
    fix = (f"set MASTER_ADDR to {rendezvous_host(ctx.evidence)} (the lab's rendezvous host), not localhost; "
           "with torchrun: --master-addr/--rdzv-endpoint node0:PORT; never hard-code localhost or 127.0.0.1 "
           "in a multi-node script")
    # The evidence: a node other than the rendezvous node (node0) dialling a loopback address.
    attempts = [(line, host, port) for line, host, port in connect_attempts(ctx) if is_loopback(host) and line.node != 0]
    given = configured_master_addrs(ctx.evidence)
    if attempts:
        line, host, port = attempts[0]
        if given and not any(is_loopback(address) for address, *_ in given):
            # Every way the run was launched named the right host: the script set another one itself.
            master_port = ctx.evidence.master_port
            port_too = f" and MASTER_PORT to {port}" if master_port and port != master_port else ""
            return [Finding(
                "master-addr-loopback", f"the script sets MASTER_ADDR to {host}{port_too} itself, over the "
                                        f"{rendezvous_host(ctx.evidence)}" + (f":{master_port}" if master_port else "")
                                        + " the launcher gave every rank, so each node dials itself",
                quote(line), line.node, line.rank,
                "delete the script's own os.environ['MASTER_ADDR'] / ['MASTER_PORT'] assignments (a one-machine "
                "tutorial's setup() does this) or make them os.environ.setdefault(...), so the launcher's "
                f"MASTER_ADDR={rendezvous_host(ctx.evidence)} and MASTER_PORT stand (torchrun and `lab exec` set "
                "both on every rank)")]
        return [Finding("master-addr-loopback", f"a multi-node job points its rendezvous at {host}",
                        quote(line), line.node, line.rank, fix)]
    for host, where, node, rank in given:
        if is_loopback(host):
            return [Finding("master-addr-loopback", f"a multi-node job points its rendezvous at {host}", where,
                            node, rank, fix)]
    return []


def unreachable_findings(ctx: Context) -> list[Finding]:
    """Connection attempts that were refused or timed out: nothing listens at that address and port."""
    master_port = ctx.evidence.master_port
    # The run hung, or a rank waited in vain for others: a retry that failed then is no passing hiccup.
    stuck = ctx.evidence.timed_out or any(JOINED.search(line.text) or STORE_WAIT.search(line.text)
                                          for line in ctx.lines)
    for line, host, port in connect_attempts(ctx):
        if HARMLESS_ERRNO.search(line.text) or not REFUSED_OR_TIMEOUT.search(line.text):
            continue
        if not (stuck or FINAL_ATTEMPT.search(line.text)):
            continue  # a retry that may have succeeded later (c10d retries while the store starts)
        if ctx.multi_node and is_loopback(host):
            continue  # master-addr-loopback's evidence
        own = node_evidence(ctx.evidence, line.node)
        if ctx.multi_node and own is not None and host == own.hostname and host != rendezvous_host(ctx.evidence):
            return [Finding(
                "master-unreachable", f"node{line.node} dialled its own host ({host}) for the store, which runs on "
                                      f"{rendezvous_host(ctx.evidence)} (MASTER_ADDR): nothing listens there",
                quote(line), line.node, line.rank,
                "dial the host where rank 0 creates the store on every rank: MASTER_ADDR (os.environ['MASTER_ADDR']), "
                "not the node's own hostname (socket.gethostname(), platform.node())")]
        read = {trace.rank: trace.calls.env_read.get("MASTER_PORT") for trace in ctx.evidence.traces
                if trace.calls is not None and trace.rank is not None and trace.calls.env_read.get("MASTER_PORT")}
        if len(set(read.values())) > 1 and (master_port is None or str(master_port) not in read.values()):
            shown = ", ".join(f"rank {rank} {value}" for rank, value in sorted(read.items()))
            title = (f"nothing answered at {host}:{port}: the ranks read different MASTER_PORTs ({shown}), none the "
                     f"{master_port} the launch gave, so the job set it itself, in each process (a free port it "
                     "picked, a default of its own), and rank 0's store listened where no other rank dialled")
            return [Finding("master-unreachable", title, quote(line), line.node, line.rank,
                            "let every rank use the MASTER_PORT the launcher gives (do not set it in the script), or "
                            "pick the port once, before the launch, and pass the same value to every node; a free "
                            "port found by each process differs on every machine")]
        tcp_init = any(frame.function == "_tcp_rendezvous_handler" for tb in ctx.tracebacks for frame in tb.frames)
        under_torchrun = any(process.role == "agent" for process in ctx.evidence.processes) or any(
            "distributed/elastic/" in other.text or "ChildFailedError" in other.text for other in ctx.lines)
        if tcp_init and under_torchrun and master_port and port != master_port:
            return [Finding(
                "master-unreachable", f"nothing answered at {host}:{port}: the job's init_method (tcp://{host}:{port}) "
                "names a store no process serves - under torchrun rank 0 too joins as a client of the store "
                f"torchrun made (at MASTER_ADDR:{master_port}), so nothing listens on {port}", quote(line), line.node,
                line.rank,
                "let torchrun's store serve the group: init_method='env://' (or none), so every rank reads the "
                "MASTER_ADDR and MASTER_PORT torchrun set; drop a tcp:// URL (--dist-url) from a torchrun launch")]
        if master_port and port != master_port:
            fix = (f"use the same MASTER_PORT on every node: the rendezvous listens on {master_port}, this rank "
                   f"dialled {port}")
        else:
            fix = (f"check that rank 0 (the store) runs on {host} and listens on {port}: MASTER_ADDR/MASTER_PORT "
                   "must be the same on every node, and rank 0 must start (see its log)")
        return [Finding("master-unreachable", f"nothing answered at {host}:{port} (the rendezvous store)",
                        quote(line), line.node, line.rank, fix)]
    return []


PATTERNS = [
    PatternRule("master-addr-unresolvable", re.compile(
        r"addresses of \((?P<host>[^,\s]+), \d+\) cannot be retrieved \(gai error: -[235]\b"
        r"|gaierror: \[Errno -[235]\]|Name or service not known|Temporary failure in name resolution"
        r"|No address associated with hostname"), _unresolvable),
    PatternRule("master-port-in-use", re.compile(r"EADDRINUSE|[Aa]ddress already in use|errno: 98\b"), _port_in_use),
    PatternRule("wrong-service-on-port", re.compile(
        r"invalid value returned from server|Ping failed"), _wrong_service),
    PatternRule("socket-ifname-missing", re.compile(
        r"Unable to find (?:address|interface) for:? (?P<name>\S+)|Bootstrap : no socket interface found"),
        _ifname_missing),
]
