"""Fixtures that drive the real `lab` command against a real Docker engine.

The suite's shared 2-node lab is a session lab of lab's own pytest plugin (lab/testing/): one per xdist worker,
owner-labelled, removed at the session's end, and by the next session after a `kill -9`. Tests that run jobs on a lab
and assert on their ranks and diagnosis take the plugin's `lab_cluster`; tests of the command line drive `lab`.
"""

import json
import os
import subprocess
import sys
import uuid

import docker
import pytest

from lab.testing.labs import LabRequest
from lab.testing.plugin import STATE as PLUGIN_STATE

# Labs the tests bring up are named NAME_PREFIX + a random part; on an engine shared with others, give yours (the
# plugin's session labs are named NAME_PREFIX-<worker's token>-<n>: tests/conftest.py).
NAME_PREFIX = os.environ.get("LAB_TEST_NAME_PREFIX", "it")


def lab(*args, timeout=900, check=False, env=None):
    result = subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, **(env or {})})
    if check and result.returncode != 0:
        raise AssertionError(f"lab {' '.join(args)} -> {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def lab_json(*args, **kwargs):
    return json.loads(lab(*args, "--json", check=True, **kwargs).stdout)


@pytest.fixture(scope="session")
def client():
    return docker.from_env()


@pytest.fixture(scope="session")
def two_nodes(request):
    """One 2-node lab shared by the tests that only read from it, the spec of `lab up --nodes 2` (no workspace, no
    packages): the plugin's session lab for that spec."""
    session = request.config.stash[PLUGIN_STATE]
    return session.labs().lab(LabRequest(nodes=2))


@pytest.fixture
def fresh_name():
    name = f"{NAME_PREFIX}{uuid.uuid4().hex[:6]}"
    yield name
    lab("down", "--name", name)


def labelled(client, name):
    flt = {"label": [f"io.lab.lab={name}"]}
    return (client.containers.list(all=True, filters=flt), client.networks.list(filters=flt),
            client.volumes.list(filters=flt))
