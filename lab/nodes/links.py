"""Shaped links between nodes (`lab up --link`): tc on the host side of each node's veth pair.

Every node's eth0 is one end of a veth pair whose other end lives in the host's network namespace (found from
the node's eth0 `iflink`). Shaping there needs no privilege in the node:

- into the node: the root qdisc of the host-side veth (its egress): tbf for a rate; netem when the profile has a
  delay, jitter or loss (applied once per direction, on the way in, so a one-way delay is paid once per hop);
- out of the node: an ingress qdisc on the host-side veth redirects every packet to an IFB device of the lab's,
  whose root tbf holds it to the same rate: each node has a full-duplex NIC of that rate.

Traffic inside a node never reaches its veth and stays unshaped. `shaping_commands` is pure; the rest runs
`ip`/`tc` from iproute2 on this host.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lab.errors import HostError
from lab.model.spec import LabSpec, LinkProfile, format_rate, format_time
from lab.nodes.driver import DockerDriver, in_parallel
from lab.nodes.labels import INTERFACE

SYS_NET = Path("/sys/class/net")
TBF_LATENCY = "10ms"  # how long a packet may wait in the bucket's queue before it is dropped
MIN_BURST = 128 * 1024  # above the lab network's 65520-byte MTU: tbf drops a packet larger than its bucket
NO_NETEM_HINT = "use a rate-only profile such as --link 10gbit (or ethernet-10g)"
NO_TC_HINT = "install iproute2 on this host (e.g. `apt-get install iproute2`), or leave out --link"


@dataclass(frozen=True)
class LinkCommands:
    """What shapes one node's link: `clear` undoes an earlier shaping (its failures mean nothing was there)."""

    clear: list[list[str]]
    apply: list[list[str]]


def ifb_name(lab: str, index: int) -> str:
    """The IFB device that shapes node `index`'s outgoing traffic; at most 15 characters, as Linux requires."""
    return f"{ifb_prefix(lab)}{index}"


def ifb_prefix(lab: str) -> str:
    return f"lifb{hashlib.sha1(lab.encode()).hexdigest()[:7]}-"


def burst_bytes(profile: LinkProfile) -> int:
    """The token bucket: a millisecond at the rate, and never less than one packet of the lab's MTU."""
    return max(MIN_BURST, int(profile.rate_bytes_per_second / 1000))


def netem_args(profile: LinkProfile) -> list[str]:
    """netem's words for a profile's delay, jitter, loss and rate."""
    args = []
    if profile.delay_us:
        args += ["delay", format_time(profile.delay_us)] + ([format_time(profile.jitter_us)] if profile.jitter_us else [])
    if profile.loss_percent:
        args += ["loss", f"{profile.loss_percent:g}%"]
    return args + ["rate", format_rate(profile.rate_bps)]


def shaping_commands(profile: LinkProfile, veth: str, ifb: str, ifb_exists: bool) -> LinkCommands:
    """The ip/tc command lines that shape the node behind host-side `veth` to `profile`, using IFB device `ifb`."""
    tbf = ["tbf", "rate", format_rate(profile.rate_bps), "burst", str(burst_bytes(profile)), "latency", TBF_LATENCY]
    inbound = ["netem", *netem_args(profile)] if profile.needs_netem else tbf
    apply = [] if ifb_exists else [["ip", "link", "add", ifb, "type", "ifb"]]
    apply += [
        ["ip", "link", "set", "dev", ifb, "up"],
        ["tc", "qdisc", "replace", "dev", ifb, "root", "handle", "1:", *tbf],
        ["tc", "qdisc", "replace", "dev", veth, "root", "handle", "1:", *inbound],
        ["tc", "qdisc", "add", "dev", veth, "handle", "ffff:", "ingress"],
        ["tc", "filter", "add", "dev", veth, "parent", "ffff:", "protocol", "all", "prio", "1",
         "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", ifb],
    ]
    return LinkCommands(clear=[["tc", "qdisc", "del", "dev", veth, "ingress"]], apply=apply)


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise HostError(f"`{argv[0]}` (iproute2) is not installed on this host: --link needs it", NO_TC_HINT) from None


def _first_line(result: subprocess.CompletedProcess) -> str:
    return next((line for line in (result.stderr + result.stdout).splitlines() if line.strip()), f"exit {result.returncode}")


def _refused(what: str, result: subprocess.CompletedProcess) -> HostError:
    reason = _first_line(result)
    if "not permitted" in reason.lower():
        return HostError(f"{what}: {reason}", "shaping runs tc on the host side of the nodes' links: run `lab up --link` "
                                             "as root (CAP_NET_ADMIN), or leave out --link")
    return HostError(f"{what}: {reason}", "see `tc -s qdisc` on this host; leave out --link to start the lab unshaped")


@functools.lru_cache(maxsize=1)
def netem_available() -> bool:
    """Whether this kernel has netem (CONFIG_NET_SCH_NETEM): tried once on a throwaway IFB device."""
    probe = f"lnetem{os.getpid() % 10**8}"
    created = _run(["ip", "link", "add", probe, "type", "ifb"])
    if created.returncode != 0:
        raise _refused("could not make an IFB device to look for netem", created)
    try:
        return _run(["tc", "qdisc", "add", "dev", probe, "root", "netem", "delay", "1ms"]).returncode == 0
    finally:
        _run(["ip", "link", "del", probe])


def check_host(profile: LinkProfile) -> None:
    """Refuse, before any container exists, a profile this host cannot shape."""
    for tool in ("tc", "ip"):
        if shutil.which(tool) is None:
            raise HostError(f"`{tool}` (iproute2) is not installed on this host: --link needs it", NO_TC_HINT)
    if profile.needs_netem and not netem_available():
        raise HostError(f"--link {profile.text()} needs netem for its delay, jitter or loss, and this kernel has no netem "
                        "(CONFIG_NET_SCH_NETEM)", NO_NETEM_HINT)


def host_veth(driver: DockerDriver, lab: str, index: int) -> str:
    """The host-side end of node `index`'s eth0: the host interface whose index is the node's eth0 iflink."""
    code, output = driver.exec_output(lab, index, ["cat", f"/sys/class/net/{INTERFACE}/iflink",
                                                   f"/sys/class/net/{INTERFACE}/ifindex"])
    numbers = output.split()
    if code != 0 or len(numbers) != 2 or not all(number.isdigit() for number in numbers):
        raise HostError(f"node{index}: could not read its {INTERFACE}'s link ({output.strip()[:80] or code})",
                        "is the node on the lab network? `lab fault heal` it, or `lab up --recreate`")
    peer_index, node_ifindex = numbers
    try:
        name = socket.if_indextoname(int(peer_index))
        pairs_back = (SYS_NET / name / "iflink").read_text().strip() == node_ifindex
    except OSError:
        name, pairs_back = "", False
    if not pairs_back:
        raise HostError(f"node{index}'s link is not in this host's network namespace (a Docker Desktop, rootless or "
                        "remote engine?): --link shapes it from the host side", "run lab on the Docker host itself, "
                        "or leave out --link")
    return name


def shape_node(driver: DockerDriver, lab: str, index: int, profile: LinkProfile) -> str:
    """Shape node `index`'s link to `profile` (again: idempotent); its host-side veth."""
    veth = host_veth(driver, lab, index)
    ifb = ifb_name(lab, index)
    commands = shaping_commands(profile, veth, ifb, (SYS_NET / ifb).exists())
    for argv in commands.clear:
        _run(argv)
    for argv in commands.apply:
        result = _run(argv)
        if result.returncode != 0:
            raise _refused(f"could not shape node{index}'s link ({' '.join(argv[:3])} {veth})", result)
    return veth


def apply_links(spec: LabSpec, driver: DockerDriver) -> list[str]:
    """Shape every node's link to the lab's profile (nothing when it has none); the host-side veths."""
    profile = spec.link_profile
    if profile is None:
        return []
    check_host(profile)
    return in_parallel(lambda index: shape_node(driver, spec.name, index, profile), list(range(spec.nodes)))


def link_state(driver: DockerDriver, lab: str, index: int) -> str:
    """How node `index`'s link is shaped now, as `lab status` shows it: the qdisc kind and rate, or 'unshaped'."""
    try:
        veth = host_veth(driver, lab, index)
        shown = _run(["tc", "qdisc", "show", "dev", veth, "root"])
    except HostError as error:
        return f"unknown: {error}"
    words = shown.stdout.split()
    kind = words[1] if len(words) > 1 else ""
    if kind not in ("tbf", "netem") or not (SYS_NET / ifb_name(lab, index)).exists():
        return "unshaped (run `lab up` again)"
    rate = words[words.index("rate") + 1] if "rate" in words else "?"
    return f"{kind} {rate} ({veth})"


def remove_links(lab: str) -> None:
    """Delete lab `lab`'s IFB devices (the veths and their qdiscs go with the containers)."""
    if not SYS_NET.is_dir():
        return
    for device in SYS_NET.iterdir():
        if device.name.startswith(ifb_prefix(lab)):
            _run(["ip", "link", "del", device.name])
