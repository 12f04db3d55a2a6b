"""Graduation to real machines: `lab run EXERCISE --inventory hosts.ini` (also `lab exec`, `lab torchrun`).

An ansible INI inventory names the machines; the same playbook (playbooks/provision.yml) provisions
them, and the run goes through the same road as on a lab (lab/jobs/targets.py), over `ssh` instead
of `docker exec`.

Hosts are the group `[nodes]` if the file has one, else every host in the order written; the
first is node0 (rank 0, the rendezvous). Variables, on the host line or in `[nodes:vars]`/`[all:vars]`:

  ansible_host, ansible_port (22), ansible_user, ansible_ssh_private_key_file, ansible_ssh_common_args
  ansible_python_interpreter   python for ansible, and for the exercises unless lab_python is set
  lab_python                   the interpreter that has torch (default: ansible_python_interpreter, else python3)
  lab_exercises_dir            where each host has a copy of this repo's exercises/ (default /lab/exercises)
  lab_shared_dir               a writable folder on each host for run results and scratch (default /lab/shared);
                               it need not be shared: results are copied back over ssh after each step
  (lab_exercises_dir and lab_shared_dir are read from node0 and must be the same path on every host)
  master_addr                  how the nodes reach node0 (default: node0's ansible_host)
  lab_workspace                a project folder on this machine (absolute): copied to the same path on every host
                               before a run when its files changed (as `lab up --workspace` mounts it on a lab),
                               leaving out what copies leave out (lab/jobs/staging.py); the runs' working directory
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from lab import paths
from lab.errors import ProvisionError, SpecError
from lab.provision.ansible import ProvisionResult, run_playbook
from lab.model.spec import EXERCISES_MOUNT, MASTER_PORT, SHARED_MOUNT
from lab.jobs.transports import SshHost, SshTransport

NODES_GROUP = "nodes"
DEFAULT_PYTHON = "python3"
SECTION = re.compile(r"^\[([^\]:]+)(?::(vars|children))?\]$")


@dataclass(frozen=True)
class Inventory:
    """The machines of an inventory, in rank order, with every variable resolved per host."""

    path: Path
    hosts: tuple[tuple[str, dict[str, str]], ...]

    def var(self, index: int, key: str, default: str | None = None) -> str | None:
        return self.hosts[index][1].get(key, default)

    @property
    def label(self) -> str:
        """A lab-like name for this inventory's records and files: inventory-<file stem>."""
        return "inventory-" + (re.sub(r"[^a-z0-9-]+", "-", self.path.stem.lower()).strip("-") or "hosts")

    def ssh_hosts(self) -> list[SshHost]:
        hosts = []
        for index, (name, host_vars) in enumerate(self.hosts):
            key = host_vars.get("ansible_ssh_private_key_file")
            options = host_vars.get("ansible_ssh_common_args")
            hosts.append(SshHost(
                name=name, address=host_vars.get("ansible_host", name), port=_port(self, name, host_vars),
                user=host_vars.get("ansible_user"), key=Path(key).expanduser() if key else None,
                **({"ssh_options": tuple(shlex.split(options))} if options else {})))
        return hosts

    @property
    def python(self) -> str:
        return self.var(0, "lab_python") or self.var(0, "ansible_python_interpreter") or DEFAULT_PYTHON

    @property
    def workspace(self) -> str | None:
        return self.var(0, "lab_workspace")

    @property
    def master_addr(self) -> str:
        return self.var(0, "master_addr") or self.var(0, "ansible_host") or self.hosts[0][0]


def _port(inventory: Inventory, name: str, host_vars: dict[str, str]) -> int:
    value = host_vars.get("ansible_port", "22")
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise SpecError(f"{inventory.path}: {name} has ansible_port={value!r}", "give a port number, e.g. ansible_port=22")
    return int(value)


def _value(text: str) -> str:
    """A variable's value as ansible reads it: surrounding quotes removed."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return shlex.split(text)[0]
    return text


def parse_inventory(path: Path) -> Inventory:
    """Read an INI inventory; anything unreadable or without hosts is one SpecError naming the file and line."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"cannot read inventory {path}: {getattr(error, 'strerror', None) or error}",
                        "give an ansible INI inventory, e.g. a [nodes] group with one host per line") from None
    groups: dict[str, list[str]] = {}
    group_vars: dict[str, dict[str, str]] = {}
    host_vars: dict[str, dict[str, str]] = {}
    section, kind = "ungrouped", None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        where = f"{path}:{number}"
        match = SECTION.match(line)
        if match:
            section, kind = match.group(1), match.group(2)
            continue
        if line.startswith("["):
            raise SpecError(f"{where}: '{line}' is not a section header", "write [group], [group:vars] or [group:children]")
        if kind == "children":
            continue  # nested groups add no hosts of their own
        if kind == "vars":
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise SpecError(f"{where}: '{line}' is not key=value", f"variables in [{section}:vars] are key=value")
            group_vars.setdefault(section, {})[key.strip()] = _value(value)
            continue
        try:
            name, *assignments = shlex.split(line, comments=True)
        except ValueError as error:
            raise SpecError(f"{where}: {error}", "check the quotes on this line") from None
        own = host_vars.setdefault(name, {})
        for assignment in assignments:
            key, sep, value = assignment.partition("=")
            if not sep or not key:
                raise SpecError(f"{where}: '{assignment}' is not key=value", "host lines are: NAME key=value ...")
            own[key] = value
        if name not in groups.setdefault(section, []):
            groups[section].append(name)
    if NODES_GROUP in groups:
        names = groups[NODES_GROUP]
    else:
        names = list(dict.fromkeys(name for members in groups.values() for name in members))
    if not names:
        raise SpecError(f"inventory {path} lists no hosts", "put one host per line under [nodes]")
    hosts = []
    for name in names:
        merged = dict(group_vars.get("all", {}))
        for group, members in groups.items():
            if name in members:
                merged.update(group_vars.get(group, {}))
        merged.update(host_vars[name])
        hosts.append((name, merged))
    inventory = Inventory(path, tuple(hosts))
    workspace = inventory.workspace
    if workspace is not None and not (workspace.startswith("/") and Path(workspace).is_dir()):
        raise SpecError(f"{path}: lab_workspace={workspace} is not a folder on this machine (an absolute path)",
                        "give the project's folder as it is here; every host gets a copy at that same path")
    for name, values in hosts:
        _port(inventory, name, values)
        key = values.get("ansible_ssh_private_key_file")
        if key and not Path(key).expanduser().is_file():
            raise SpecError(f"{path}: {name}'s key {key} does not exist", "fix ansible_ssh_private_key_file")
    return inventory


def ansible_inventory(inventory: Inventory, nproc_per_node: int, target: Path) -> Path:
    """A YAML inventory for the playbook: the user's connection settings plus the vars it needs (node_rank, ...)."""
    connection = ("ansible_host", "ansible_port", "ansible_user", "ansible_ssh_private_key_file",
                  "ansible_ssh_common_args", "ansible_python_interpreter")
    hosts = {}
    for index, (name, values) in enumerate(inventory.hosts):
        hosts[name] = {key: values[key] for key in connection if key in values}
        hosts[name]["ansible_port"] = _port(inventory, name, values)
        hosts[name]["node_rank"] = index
    document = {"all": {"hosts": hosts, "vars": {
        "lab_python": inventory.python, "nnodes": len(hosts), "nproc_per_node": nproc_per_node,
        "master_addr": inventory.master_addr, "master_port": MASTER_PORT, "lab_peers": [inventory.master_addr],
    }}}
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return target


def provision(inventory: Inventory, nproc_per_node: int) -> ProvisionResult:
    """Run the lab's playbook against the inventory's hosts; fail if any host fails."""
    derived = ansible_inventory(inventory, nproc_per_node, paths.lab_dir(inventory.label) / "inventory.yml")
    result = run_playbook(inventory.label, derived)
    if not result.ok:
        failed = [node.summary() for node in result.nodes if not node.ok] or ["no host reported"]
        raise ProvisionError(f"provisioning {inventory.path} failed: {'; '.join(failed)}",
                             f"full ansible log: {result.log}")
    return result


def transport(inventory: Inventory) -> SshTransport:
    return SshTransport(inventory.ssh_hosts(), paths.lab_dir(inventory.label) / "shared", inventory.python,
                        inventory.var(0, "lab_exercises_dir", EXERCISES_MOUNT),
                        inventory.var(0, "lab_shared_dir", SHARED_MOUNT), inventory.master_addr)

