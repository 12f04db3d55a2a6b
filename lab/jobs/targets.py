"""Picks the transport for a run (a lab's containers, or plain host processes) and runs exercises."""

from __future__ import annotations

import dataclasses

from lab import paths
from lab.nodes import lifecycle as labs
from lab.jobs.exercises import Exercise, discover, exercises_root, find
from lab.nodes.gpus import run_backend
from lab.jobs.runner import Reporter, RunOptions, RunRecord, run_exercise
from lab.jobs.transports import DockerTransport, LocalTransport


def transport_for(lab_name: str, driver_kind: str, local_nodes: int):
    """(transport, node count) for a run on lab `lab_name` or, with driver 'local', on this host."""
    if driver_kind == "local":
        return LocalTransport(paths.state_dir() / "local" / "shared", exercises_root()), local_nodes
    driver, spec, _ = labs.require(lab_name)
    return DockerTransport(driver, lab_name, paths.lab_dir(lab_name) / "shared"), spec.nodes


def run_exercises(name: str | None, lab_name: str, driver_kind: str, local_nodes: int, nproc_per_node: int | None,
                  backend: str, timeout: int | None, reporter: Reporter, master_port: int | None = None) -> list[RunRecord]:
    """Run one exercise, or all of them (name None) in order; every run keeps its own record."""
    exercises = [find(name)] if name else discover()
    transport, nnodes = transport_for(lab_name, driver_kind, local_nodes)
    node_gpus = None  # local runs: labkit picks the backend on this host
    if driver_kind == "docker":
        _, spec, states = labs.require(lab_name)
        nproc_per_node = nproc_per_node if nproc_per_node is not None else spec.nproc_per_node
        node_gpus = [state.gpus for state in states]
    options = RunOptions(nnodes=nnodes, nproc_per_node=nproc_per_node, backend=backend, timeout=timeout,
                         master_port=master_port,
                         lab_name=lab_name if driver_kind == "docker" else "local")
    return [run_exercise(exercise, transport, _resolved_backend(options, exercise, node_gpus), reporter)
            for exercise in exercises]


def _resolved_backend(options: RunOptions, exercise: Exercise, node_gpus: list[list[str]] | None) -> RunOptions:
    """`auto` made gloo or nccl from the lab's GPUs, the same on every node; nccl refused where it would hang."""
    if node_gpus is None:
        return options
    nproc = options.nproc_per_node or exercise.nproc_per_node
    return dataclasses.replace(options, backend=run_backend(options.backend, node_gpus, nproc, options.lab_name))
