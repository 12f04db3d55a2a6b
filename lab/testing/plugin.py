"""lab's pytest plugin (entry point `lab` in the group pytest11): options, markers, fixtures and hooks only; the work is
done by lab/testing/ over lab's own lifecycle and jobs. Inert for a suite that uses none of it: no engine is asked
anything until a test marked `lab` or using `lab_cluster` runs.

    @pytest.mark.lab(nodes=2, nproc_per_node=1, timeout=120)
    def test_all_reduce(lab_rank): ...         # the body runs on every rank, torch.distributed initialised

    def test_train(lab_cluster):
        result = lab_cluster.torchrun("train.py", nproc_per_node=2)
        assert result.passed, result.why
"""

from __future__ import annotations

import atexit
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.model.requirements import normalise_requirement, read_requirements

MARKERS = (
    "lab(nodes=2, nproc_per_node=1, timeout=None, init=True, backend=None, image=None, gpus=None, link=None, "
    "requirements=(), pip=()): run this test's body on every rank across the nodes of a lab",
    "lab_cluster(nodes=2, image=None, gpus=None, link=None, requirements=(), pip=()): the lab the lab_cluster "
    "fixture gives this test",
)
# option -> (ini key, help); every option has its ini key, an option given wins over the ini.
SETTINGS = {
    "nodes": ("lab_nodes", "Nodes of a lab (default 2; a marker's nodes= wins)."),
    "nproc_per_node": ("lab_nproc_per_node", "Ranks per node of a test marked lab (default 1)."),
    "image": ("lab_image", "The nodes' image: auto (the lab's node image), host, or your own local IMAGE."),
    "timeout": ("lab_timeout", "Seconds a test on a lab may take before its ranks' stacks are taken and they are "
                               "stopped (default 300; a marker's timeout= wins)."),
    "requirements": ("lab_requirements", "A requirements file for the nodes' Python (repeatable)."),
    "pip": ("lab_pip", "One package for the nodes' Python, e.g. numpy==2.4.6 (repeatable)."),
    "workspace": ("lab_workspace", "The folder mounted on every node at the same path, read-only (default: the "
                                   "rootdir); the tests must be inside it."),
    "link": ("lab_link", "Shape traffic between nodes, as `lab up --link` (e.g. 1gbit:200us)."),
    "gpus": ("lab_gpus", "GPUs for the nodes, as `lab up --gpus`: auto (default), none, all, or N per node."),
    "name_prefix": ("lab_name_prefix", "Lab names start with this (default pytest)."),
}
FLAGS = {
    "keep": ("lab_keep", "Leave the session's labs up at the end, and say how to reach them."),
    "required": ("lab_required", "No Docker engine is an error, not a skip (for CI: a broken runner cannot pass)."),
}
DEFAULT_TIMEOUT = 300
STATE = pytest.StashKey["LabSession"]()


def pytest_addoption(parser):
    group = parser.getgroup("lab", "multi-node tests on a lab (containers as nodes)")
    for name, (ini, help_text) in SETTINGS.items():
        multiple = name in ("requirements", "pip")
        group.addoption(f"--lab-{name.replace('_', '-')}", dest=f"lab_{name}", action="append" if multiple else "store",
                        default=None, metavar=name.upper(), help=help_text)
        parser.addini(ini, help_text, type="linelist" if multiple else "string")
    for name, (ini, help_text) in FLAGS.items():
        group.addoption(f"--lab-{name}", dest=f"lab_{name}", action="store_true", default=None, help=help_text)
        parser.addini(ini, help_text, type="bool", default=False)


def pytest_configure(config):
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    config.stash[STATE] = LabSession(config)


@dataclass
class LabSession:
    """This session's settings, its labs (made on first use) and what it has to say at the end."""

    config: pytest.Config
    problem: str | None = None  # why no lab can be had (no engine), once asked
    pool: object = None
    notes: list[str] = field(default_factory=list)

    def setting(self, name: str, default=None):
        option = self.config.getoption(f"lab_{name}")
        if option not in (None, []):
            return option
        ini = self.config.getini((SETTINGS.get(name) or FLAGS[name])[0])
        return ini if ini not in ("", [], None) else default

    def request(self, marker: pytest.Mark | None):
        """The lab a test asks for: its marker's keys over the options and ini keys."""
        from lab.testing.labs import LabRequest

        asked = dict(marker.kwargs) if marker else {}
        root = self.config.rootpath
        files = [str(root / path) if not Path(path).is_absolute() else path
                 for path in self.setting("requirements", [])] + [str(path) for path in asked.get("requirements", ())]
        lines = [line for path in files for line in read_requirements(path)]
        lines += [normalise_requirement(spec, root, f"pip '{spec}'")
                  for spec in [*self.setting("pip", []), *asked.get("pip", ())]]
        workspace = self.setting("workspace")
        return LabRequest(nodes=int(asked.get("nodes") or self.setting("nodes", 2)),
                          image=asked.get("image") or self.setting("image", "auto"),
                          gpus=str(asked.get("gpus") or self.setting("gpus", "auto")),
                          link=asked.get("link") or self.setting("link"),
                          requirements=tuple(dict.fromkeys(lines)),
                          workspace=str((root / workspace).resolve()) if workspace else str(root)).with_pytest()

    def timeout(self, marker: pytest.Mark | None) -> float:
        asked = marker.kwargs.get("timeout") if marker else None
        return float(asked or self.setting("timeout", DEFAULT_TIMEOUT))

    def labs(self):
        """The session's LabPool, made when a test first needs a lab; skips (or, with --lab-required, fails) the test
        when no Docker engine answers."""
        from lab.testing.labs import LabPool, engine_problem

        if self.problem is None and self.pool is None:
            self.problem = engine_problem() or ""
            if not self.problem:
                self.pool = LabPool(self.setting("name_prefix", "pytest"), bool(self.setting("keep", False)),
                                    self.notes.append)
                atexit.register(self.close)  # a session that ends without pytest's own finish still removes them
        if self.problem:
            if self.setting("required", False):
                pytest.fail(f"lab: {self.problem}, and --lab-required is set", pytrace=False)
            pytest.skip(f"lab: {self.problem}")
        return self.pool

    def close(self) -> None:
        if self.pool is not None:
            kept = self.pool.close()
            for name in kept:
                self.notes.append(f"lab '{name}' kept up (--lab-keep): `lab status --name {name}`, "
                                  f"`lab ssh node0 --name {name}`, `lab down --name {name}` (state folder: "
                                  f"{_state_folder()})")
            self.pool = None


def _state_folder() -> str:
    from lab import paths

    return str(paths.state_dir())


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """A test marked lab: its body runs on the ranks, not here; its reports are made from theirs."""
    marker = item.get_closest_marker("lab")
    if marker is None or not isinstance(item, pytest.Function):
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in _run_on_ranks(item, marker, item.config.stash[STATE]):
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _run_on_ranks(item: pytest.Function, marker: pytest.Mark, session: LabSession) -> list[pytest.TestReport]:
    from lab.testing.ranks import run_test

    started = time.time()
    try:
        pool = session.labs()
        request = session.request(marker)
        if Path(request.workspace) not in item.path.parents:
            raise LabError(f"{item.path} is not inside the lab's workspace {request.workspace}",
                           "run pytest from the project's root, or set --lab-workspace to a folder holding the tests")
        name = pool.lab(request)
    except (pytest.skip.Exception, pytest.fail.Exception) as outcome:
        kind = "skipped" if isinstance(outcome, pytest.skip.Exception) else "failed"
        text = (str(item.path), item.location[1] + 1, f"Skipped: {outcome.msg}") if kind == "skipped" else outcome.msg
        return [_report(item, "setup", kind, text, started), _report(item, "teardown", "passed", None, time.time())]
    except LabError as error:
        text = f"lab: {error.message}" + (f"\nhint: {error.hint}" if error.hint else "")
        return [_report(item, "setup", "failed", text, started), _report(item, "teardown", "passed", None, time.time())]
    reports = [_report(item, "setup", "passed", None, started)]
    started, sections = time.time(), []
    try:
        result = run_test(pool.target(name), item.path, item.nodeid.split("::", 1)[1], item.config.rootpath,
                          item.config.inipath, int(marker.kwargs.get("nproc_per_node")
                                                   or session.setting("nproc_per_node", 1)), session.timeout(marker))
    except LabError as error:
        text = f"lab: {error.message}" + (f"\nhint: {error.hint}" if error.hint else "")
        reports.append(_report(item, "call", "failed", text, started))
    else:
        item.user_properties.append(("lab_run", str(result.job.path)))
        outcome = result.outcome
        longrepr = {"passed": None, "failed": result.failure_text(),
                    "skipped": (str(item.path), item.location[1] + 1, result.skip_reason)}[outcome]
        sections = result.sections()
        reports.append(_report(item, "call", outcome, longrepr, started, sections))
    started = time.time()
    pool.clean(name)
    # JUnit XML writes a test's output from its teardown report: it carries the sections too, as pytest's own do.
    reports.append(_report(item, "teardown", "passed", None, started, sections))
    return reports


def _report(item: pytest.Item, when: str, outcome: str, longrepr, started: float,
            sections: list[tuple[str, str]] = ()) -> pytest.TestReport:
    now = time.time()
    return pytest.TestReport(item.nodeid, item.location, {name: 1 for name in item.keywords}, outcome, longrepr, when,
                             list(sections), now - started, started, now, user_properties=list(item.user_properties))


@pytest.fixture
def lab_cluster(request):
    """The nodes of a lab (the options' spec, or the test's `lab_cluster` marker): `.torchrun(script, *args)`,
    `.module(name, *args)`, `.exec([command])` run jobs as `lab torchrun`/`lab exec` do and return a JobResult."""
    from lab.testing.cluster import LabCluster

    session = request.config.stash[STATE]
    pool = session.labs()
    marker = request.node.get_closest_marker("lab_cluster")
    name = pool.lab(session.request(marker))
    yield LabCluster(pool.target(name), session.timeout(marker))
    pool.clean(name)


@pytest.fixture
def lab_rank():
    """Where a test body runs (rank, local_rank, node_rank, world_size, local_world_size, hostname): given on the
    ranks of a test marked lab."""
    pytest.fail("lab_rank is given to tests marked @pytest.mark.lab, on their ranks", pytrace=False)


def pytest_sessionfinish(session):
    session.config.stash[STATE].close()


def pytest_terminal_summary(terminalreporter, config):
    notes = config.stash[STATE].notes
    if notes:
        terminalreporter.section("lab")
        for note in notes:
            terminalreporter.write_line(note)
