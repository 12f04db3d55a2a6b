"""Commands that run jobs on a lab: the exercises, `lab run`, `lab exec`, `lab torchrun`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from lab.cli.console import LiveReporter, console, exit_codes_text, print_checks, print_diagnosis
from lab.cli.options import (diagnosis_options, json_option, master_port_option, name_option, target_options,
                             user_job_options)
from lab.errors import SpecError


@click.command("exercises")
@json_option
def exercises_command(as_json):
    """List the exercises, one line each."""
    from lab.jobs.exercises import discover

    found = discover()
    if as_json:
        print(json.dumps([{"name": e.name, "title": e.title, "summary": e.summary, "nodes": e.nodes,
                           "nproc_per_node": e.nproc_per_node, "steps": [s.name for s in e.steps],
                           "requirements": list(e.requirements)} for e in found], indent=2))
        return
    # Plain aligned lines, not a table: a table wraps long summaries; these are cut at the terminal's width.
    title_width = max((len(exercise.title) for exercise in found), default=0)
    for exercise in found:
        console.print(f"{exercise.name}  {exercise.title:<{title_width}}  {exercise.summary}", markup=False,
                      no_wrap=True, overflow="ellipsis", crop=True)


@click.command()
@click.argument("exercise", nargs=-1)
@click.option("--all", "run_all", is_flag=True, help="Run every exercise in order.")
@name_option
@target_options
@click.option("--nproc-per-node", type=click.IntRange(1, 64), default=None, help="Override processes per node.")
@click.option("--backend", type=click.Choice(["auto", "gloo", "nccl"]), default="auto", show_default=True,
              help="auto: nccl where every rank has its own GPU, else gloo.")
@click.option("--timeout", type=click.IntRange(1, 86400), default=None, help="Seconds per step (default: the exercise's).")
@click.option("--quiet", is_flag=True, help="Do not stream the nodes' output.")
@click.option("--jobs", "-j", type=click.IntRange(1, 8), default=1, show_default=True, metavar="N",
              help="Run N of the exercises at a time, each on a lab of its own: this one and N-1 copies of it "
                   "(NAME-copy1, ...), made for the run and removed after. Node output is then not streamed.")
@master_port_option
@diagnosis_options
@json_option
def run(exercise, run_all, name, on, nodes, inventory, nproc_per_node, backend, timeout, quiet, jobs, master_port,
        fail_grace, verbose, as_json):
    """Run EXERCISE (exercise03, or just 3; several in turn) across every node and check its results.

    Output of every node streams live with a node/rank prefix. A record (per-node logs,
    per-rank JSON, checks, timings) is kept under .lab/runs/<id>/. Exits 0 only if every
    check passes. A run that fails says why (the top finding; all with -v, or later with
    `lab explain`); a hung one gets the stacks of every rank in its record.

    \b
    Examples:
      lab run 3                  exercise03 on the default lab
      lab run 1 5 8              three exercises, one after the other
      lab run --all -j 2         every exercise, two at a time (on the lab and a copy of it)
      lab run 1 --on host        as processes on this machine: the native comparison
    """
    from lab.jobs import targets
    from lab.jobs.exercises import discover, find

    if not exercise and not run_all:
        raise SpecError("name an exercise or pass --all", "see `lab exercises`")
    if exercise and run_all:
        raise SpecError("name an exercise or pass --all, not both")
    if jobs > 1 and (on is not None or inventory is not None or nodes is not None):
        raise SpecError("--jobs runs exercises on copies of a lab; it does not go with --on, --inventory or --nodes",
                        "leave out --jobs")
    exercises = discover() if run_all else list({found.name: found for found in map(find, exercise)}.values())
    if jobs > 1:
        from lab.jobs.spread import copy_names

        copy_names(name, min(jobs, len(exercises)))  # a name too long to copy is refused before the engine is asked
    with LiveReporter(quiet or as_json or jobs > 1) as reporter:
        def run_many(some, target):
            """`some` on `target`, or (None) on the target the options name, `jobs` at a time."""
            if target is None and jobs > 1:
                from lab.jobs.spread import run_spread

                return run_spread(some, name, jobs, lambda one, where, labelled: targets.run_exercises(
                    [one], where, nproc_per_node, backend, timeout, labelled, master_port, fail_grace or None)[0],
                    reporter)
            return targets.run_exercises(some, target or targets.resolve(on, name, inventory, nodes), nproc_per_node,
                                         backend, timeout, reporter, master_port, fail_grace or None)

        if on is None and inventory is None:  # a lab: exercises with packages it lacks go to a companion lab
            from lab.jobs.companion import run_with_companion

            records = run_with_companion(exercises, name, run_many, reporter, at_once=jobs > 1)
        else:
            records = run_many(exercises, None)
    if as_json:
        print(json.dumps([record.to_dict() for record in records], indent=2))
    else:
        for record in records:
            print_checks(record)
            print_diagnosis(record, verbose)
        if len(records) > 1:
            console.print(", ".join(f"{r.exercise} {'PASS' if r.passed else 'FAIL'}" for r in records))
    if not all(record.passed for record in records):
        sys.exit(1)


def _finish_adhoc(record, as_json, verbose) -> None:
    if as_json:
        print(json.dumps(record.to_dict(), indent=2))
    else:
        codes = exit_codes_text(record.steps[0].exit_codes)
        console.print(f"{record.exercise}: {record.status.upper()} in {record.seconds:.1f} s ({codes}); record: {record.path}")
        print_diagnosis(record, verbose)
    if not record.passed:
        sys.exit(1)


@click.command("exec", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--node", "node_list", multiple=True, type=click.IntRange(0, 63), metavar="I",
              help="Run on node I (repeatable). Default: every node.")
@click.option("--all", "every", is_flag=True, help="Run on every node (the default).")
@click.option("--copy", type=click.Path(path_type=Path), default=None,
              help="Copy this file or folder into the run's working directory on the shared folder first.")
@user_job_options
@click.option("--profile", is_flag=True,
              help="Profile a few steady steps of every process and calibrate the link, for `lab forecast RUN`.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def exec_command(node_list, every, env_pairs, copy, timeout, copy_limit, name, on, nodes, inventory, master_port,
                 fail_grace, verbose, as_json, profile, command):
    """Run COMMAND on the nodes, with placeholders filled in per node.

    
    Placeholders, in COMMAND and --env values: {node_rank} {nnodes} {rank} {world_size} {master_addr} {master_port}
    (one process per node, so rank = node_rank). MASTER_ADDR/MASTER_PORT/NODE_RANK/NNODES
    are set too. The working directory is this run's folder on the shared mount. `python` or `python3` as the
    command runs the nodes' interpreter, the one with torch (an image's python3 or /opt/conda/bin/python alike).

    
    A script written for two terminals (--rank/--world-size + MASTER_ADDR/PORT):
      lab exec --copy train.py -- python train.py --rank {rank} --world-size {world_size}
    """
    from lab.jobs import adhoc, targets

    if command and command[0] == "--":
        command = command[1:]
    env = adhoc.parse_env(env_pairs)
    target = targets.resolve(on, name, inventory, nodes)
    with LiveReporter(as_json) as reporter:
        record = adhoc.run_exec(target, sorted(set(node_list)) if node_list and not every else None, list(command),
                                env, copy, timeout, reporter, master_port, fail_grace or None, copy_limit=copy_limit,
                                profile=profile)
    _finish_adhoc(record, as_json, verbose)


@click.command("torchrun", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--nproc-per-node", type=click.IntRange(1, 64), default=None,
              help="Processes per node (default: the lab's, from `lab up --nproc-per-node`, else 1).")
@click.option("--rdzv", type=click.Choice(["static", "c10d"]), default="static", show_default=True,
              help="static: exact --node-rank placement; c10d: elastic rendezvous on node0.")
@user_job_options
@click.option("--profile", is_flag=True,
              help="Profile a few steady steps of every process and calibrate the link, for `lab forecast RUN`.")
@click.argument("script", type=click.Path(path_type=Path))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def torchrun_command(nproc_per_node, rdzv, env_pairs, timeout, copy_limit, name, on, nodes, inventory, master_port,
                     fail_grace, verbose, as_json, profile, script, args):
    """Run an unmodified training SCRIPT with torchrun on every node.

    The script's folder is copied to the run's folder on the shared mount and the job runs
    from there, so checkpoints written to relative paths are shared by all nodes. Virtual
    environments (any folder with pyvenv.cfg), version control, caches and what .gitignore or
    .labignore name are left out; a copy over --copy-limit is refused.

    
    On a lab with a workspace (`lab up --workspace DIR`), a script inside it runs where it is,
    from the workspace, nothing copied; `-m MODULE` runs a module of it.

    
    Examples:
      lab torchrun --nproc-per-node 2 my_project/train.py --epochs 3
      lab torchrun -m mypkg.train --epochs 3          (on a lab up with --workspace)
      lab torchrun --profile train.py                 then `lab forecast --nodes 4,8,16`
    """
    from lab.jobs import adhoc, targets

    env = adhoc.parse_env(env_pairs)
    target = targets.resolve(on, name, inventory, nodes)
    with LiveReporter(as_json) as reporter:
        record = adhoc.run_torchrun(target, nproc_per_node, rdzv, script, list(args), env, timeout, reporter, master_port,
                                    fail_grace or None, copy_limit=copy_limit, profile=profile)
    _finish_adhoc(record, as_json, verbose)

