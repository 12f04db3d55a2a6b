"""Names and labels of the Docker objects a lab is made of.

Every container, network and volume carries the lab's labels, so `lab down` and `lab status` find
them from labels alone (also after a crash that lost `.lab/`). The compose-style project label lets
`docker compose` tools group them too.
"""

from __future__ import annotations

import json

from lab.model.spec import LabSpec, Node

LABEL_PREFIX = "io.lab"
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
LAB_LABEL = f"{LABEL_PREFIX}.lab"
MANAGED_LABEL = f"{LABEL_PREFIX}.managed"
ROLE_LABEL = f"{LABEL_PREFIX}.role"
NODE_LABEL = f"{LABEL_PREFIX}.node"
SPEC_LABEL = f"{LABEL_PREFIX}.spec"
FINGERPRINT_LABEL = f"{LABEL_PREFIX}.fingerprint"
GPUS_LABEL = f"{LABEL_PREFIX}.gpus"  # the node's GPUs as host indices, for `lab status`
PYTHON_LABEL = f"{LABEL_PREFIX}.python"  # the interpreter a node runs, when not the node image's venv
OWNER_LABEL = f"{LABEL_PREFIX}.owner"  # the process that owns the lab (LabSpec.owner), on every object it made
SSH_PORT = 22
# Nodes share one host, so their network can carry loopback-sized frames: with the default 1500-byte MTU,
# gloo's all_reduce over the bridge reached ~0.7 of native loopback bandwidth (bench/RESULTS.md).
NETWORK_OPTIONS = {"com.docker.network.driver.mtu": "65520"}


def lab_labels(name: str, owner: str | None = None) -> dict[str, str]:
    """Labels that mark an object as belonging to lab `name` (compose-style project label included), and to the
    process that owns the lab, when one does."""
    return {PROJECT_LABEL: f"lab-{name}", LAB_LABEL: name, MANAGED_LABEL: "true", **({OWNER_LABEL: owner} if owner else {})}


def node_labels(spec: LabSpec, node: Node) -> dict[str, str]:
    """A node container's labels: its lab, its index, and the whole spec so `lab up` can tell same from different."""
    return {
        **lab_labels(spec.name, spec.owner),
        NODE_LABEL: str(node.index),
        ROLE_LABEL: "node",
        SPEC_LABEL: json.dumps(spec.to_dict(), sort_keys=True),
        FINGERPRINT_LABEL: spec.fingerprint(),
        SERVICE_LABEL: node.hostname,
    }


def lab_filter(name: str | None = None) -> dict[str, list[str]]:
    """Docker label filter selecting one lab, or every lab when name is None."""
    if name is None:
        return {"label": [f"{MANAGED_LABEL}=true"]}
    return {"label": [f"{LAB_LABEL}={name}", f"{MANAGED_LABEL}=true"]}


def network_name(name: str) -> str:
    return f"lab-{name}-net"


def volume_name(name: str) -> str:
    return f"lab-{name}-shared"


INTERFACE = "eth0"  # a node's interface on the lab network (the only one besides lo)


def container_name(node: Node) -> str:
    return f"lab-{node.lab}-{node.hostname}"
