"""Fixtures that drive the real `lab` command against a real Docker engine.

The suite's shared 2-node lab is a session lab of lab's own pytest plugin (lab/testing/): one per xdist worker,
owner-labelled, removed at the session's end, and by the next session after a `kill -9`. Tests that run jobs on a lab
and assert on their ranks and diagnosis take the plugin's `lab_cluster`; tests of the command line drive `lab`.
"""

import functools
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import docker
import pytest

from lab.testing.labs import LabRequest
from lab.testing.plugin import STATE as PLUGIN_STATE

from . import cli_process

# Labs the tests bring up are named NAME_PREFIX + a random part; on an engine shared with others, give yours (the
# plugin's session labs are named NAME_PREFIX-<worker's token>-<n>: tests/conftest.py).
NAME_PREFIX = os.environ.get("LAB_TEST_NAME_PREFIX", "it")


def lab(*args, timeout=900, check=False, env=None):
    """`lab ARGS` in a process of its own, as `python -m lab.cli` (forked from one that imported it: cli_process)."""
    command = [sys.executable, "-m", "lab.cli", *args]
    with tempfile.TemporaryDirectory(prefix="lab-call-") as folder:
        out, err = Path(folder, "stdout"), Path(folder, "stderr")
        process = cli_forks().Process(target=cli_process.run_cli, args=(
            list(args), {**os.environ, **(env or {})}, os.getcwd(), str(out), str(err)))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(command, timeout, out.read_text(), err.read_text())
        result = subprocess.CompletedProcess(command, process.exitcode, out.read_text(), err.read_text())
    if check and result.returncode != 0:
        raise AssertionError(f"lab {' '.join(args)} -> {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


@functools.cache
def cli_forks() -> multiprocessing.context.ForkServerContext:
    """This worker's server of `lab` calls: started at the first call, with the command line imported."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([cli_process.__name__, *cli_process.PRELOAD])
    return context


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
