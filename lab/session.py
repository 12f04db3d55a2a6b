"""Picks the transport for a run (a lab's containers, or plain host processes) and runs exercises."""

from __future__ import annotations

from lab import labs, paths
from lab.exercises import discover, exercises_root, find
from lab.runner import Reporter, RunOptions, RunRecord, run_exercise
from lab.transports import DockerTransport, LocalTransport


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
    if driver_kind == "docker" and nproc_per_node is None:
        nproc_per_node = labs.require(lab_name)[1].nproc_per_node
    options = RunOptions(nnodes=nnodes, nproc_per_node=nproc_per_node, backend=backend, timeout=timeout,
                         master_port=master_port,
                         lab_name=lab_name if driver_kind == "docker" else "local")
    return [run_exercise(exercise, transport, options, reporter) for exercise in exercises]
