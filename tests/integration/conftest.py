"""Fixtures that drive the real `lab` command against a real Docker engine."""

import json
import os
import subprocess
import sys
import uuid

import docker
import pytest

# Labs the tests bring up are named NAME_PREFIX + a random part; on an engine shared with others, give yours.
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
def two_nodes():
    """One 2-node lab shared by the tests that only read from it."""
    name = f"{NAME_PREFIX}{uuid.uuid4().hex[:6]}"
    lab_json("up", "--nodes", "2", "--name", name)
    yield name
    lab("down", "--name", name)


@pytest.fixture
def fresh_name():
    name = f"{NAME_PREFIX}{uuid.uuid4().hex[:6]}"
    yield name
    lab("down", "--name", name)


def labelled(client, name):
    flt = {"label": [f"io.lab.lab={name}"]}
    return (client.containers.list(all=True, filters=flt), client.networks.list(filters=flt),
            client.volumes.list(filters=flt))
