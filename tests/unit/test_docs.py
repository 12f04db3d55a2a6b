"""The documentation is generated from the code and checked with it: every cause a rule can return has a catalogue
entry and a real example, every command and option is in the CLI reference, and the site builds with --strict."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lab.analysis.diagnosis import CAUSES, PRIORITY
from tools import docs_reference

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def samples():
    return docs_reference.samples()


def test_every_cause_a_rule_can_return_has_a_catalogue_entry():
    in_code, unreadable = docs_reference.cause_ids_in_code()
    assert unreadable == [], f"Finding(...) calls whose cause is not a literal id: {unreadable}"
    assert "wrong-results" in in_code and set(PRIORITY) <= in_code | set(PRIORITY)
    missing = sorted((in_code | set(PRIORITY)) - set(CAUSES))
    assert missing == [], (f"causes without an entry in CAUSES (lab/analysis/diagnosis/__init__.py), say in a "
                           f"sentence or two what each means: {missing}")
    stale = sorted(set(CAUSES) - in_code - set(PRIORITY))
    assert stale == [], f"CAUSES entries no rule returns: {stale}"


def test_a_cause_only_in_priority_is_found_too():
    """PRIORITY alone names a cause a rule returns through a variable: it is still checked."""
    assert set(docs_reference.all_cause_ids()) == set(PRIORITY) | docs_reference.cause_ids_in_code()[0]


def test_a_new_rule_without_a_catalogue_entry_is_caught(tmp_path, monkeypatch):
    """What happens when a rule adds a cause: the scan finds its id, and the causes page refuses to build."""
    (tmp_path / "rule.py").write_text('def rule(ctx):\n    return [Finding("gpu-on-fire", "t", "e", 0, 0, "f")]\n'
                                      'PATTERNS = [PatternRule("disk-full", None, None)]\n'
                                      'def other(cause):\n    return Finding(cause, "t", "e", 0, 0, "f")\n')
    found, unreadable = docs_reference.cause_ids_in_code(tmp_path)
    assert found == {"gpu-on-fire", "disk-full"}
    assert unreadable == [f"{tmp_path.name}/rule.py:5"]  # a cause passed through a variable is not let through
    monkeypatch.setattr(docs_reference, "all_cause_ids", lambda: PRIORITY + ["gpu-on-fire"])
    with pytest.raises(RuntimeError, match="gpu-on-fire"):
        docs_reference.causes_markdown()


def test_every_cause_has_a_real_example(samples):
    shown = docs_reference.examples(samples)
    missing = [cause for cause in docs_reference.all_cause_ids() if cause not in shown]
    assert missing == [], (f"no sample in tests/unit/diagnosis_samples/ shows {missing}: add the real logs of a run "
                           "that fails that way (nodeI.log, run.json with exit_codes, facts and the cause its top "
                           "finding is)")


@pytest.mark.parametrize("folder", sorted(path.name for path in docs_reference.SAMPLES.iterdir()
                                          if (path / "run.json").is_file()))
def test_each_sample_is_diagnosed_as_the_cause_it_names(folder):
    sample = docs_reference.load_sample(docs_reference.SAMPLES / folder)
    assert sample.cause, (f"{folder}/run.json: say which cause its top finding is (\"cause\") and give the launch "
                          "facts its tests pass, such as nproc_per_node or timed_out (\"facts\")")
    assert sample.findings, f"{folder}: no finding"
    assert sample.findings[0].cause == sample.cause, [finding.cause for finding in sample.findings]


def test_the_causes_page_has_a_section_per_cause_with_its_example(samples):
    page = docs_reference.causes_markdown()
    for cause in docs_reference.all_cause_ids():
        assert f"\n## {cause} {{#{cause}}}\n" in page
        assert CAUSES[cause] in page
    shown = docs_reference.examples(samples)
    loopback = shown["master-addr-loopback"][1]
    assert loopback.evidence in page and f"**Fix**: {loopback.fix}" in page
    assert "Connection closed by peer" in page  # an error message as a user would paste it into the search box


def test_the_cli_reference_names_every_command_and_option():
    page = docs_reference.cli_markdown()
    documented = docs_reference.commands()
    assert {doc.path for doc in documented} >= {"lab up", "lab run", "lab explain", "lab export k8s", "lab image build"}
    for doc in documented:
        assert f"`{doc.path}` {{#" in page, doc.path
        section = page.split(f"`{doc.path}` {{#", 1)[1].split("\n## ", 1)[0]
        for name in docs_reference.option_names(doc.command):
            assert name in section, f"{doc.path}: {name} missing from its section"


def test_the_cli_reference_lists_every_exit_code():
    page = docs_reference.cli_markdown()
    for code in (1, 2, 3, 4, 5, 6, 7, 8, 70, 130):
        assert f"\n| {code} | " in page


def test_every_page_is_in_the_navigation():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def pages(nav):
        for entry in nav:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            yield from pages(value) if isinstance(value, list) else [value]

    in_nav = set(pages(config["nav"]))
    on_disk = {path.relative_to(ROOT / "docs").as_posix() for path in (ROOT / "docs").rglob("*.md")}
    generated = {docs_reference.CLI_PAGE, docs_reference.CAUSES_PAGE}
    assert on_disk - in_nav == set(), "pages outside the navigation"
    assert in_nav - on_disk - generated == set(), "navigation entries without a page"
    assert generated.isdisjoint(on_disk), "a generated page is also written by hand"


def test_the_readme_is_a_landing_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert "make demo" in readme and "make test" in readme
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert {"docs/tutorials/first-lab.md", "docs/reference/files.md", "docs/explanation/measurements.md"} <= set(local)
    assert [link for link in local if not (ROOT / link).is_file()] == []  # GitHub shows the Markdown: no dead link


@pytest.mark.slow
def test_the_site_builds_strict_with_the_generated_pages(tmp_path):
    pytest.importorskip("mkdocs", reason="MkDocs is in the dev extra: make setup (pip install -e '.[dev]')")
    pytest.importorskip("material", reason="mkdocs-material is in the dev extra")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    causes = (tmp_path / "site" / "reference" / "causes" / "index.html").read_text()
    for cause in PRIORITY + ["wrong-results"]:
        assert f'id="{cause}"' in causes
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert 'id="lab-up"' in cli and "--nodes" in cli
    index = json.loads((tmp_path / "site" / "search" / "search_index.json").read_text())
    assert any("Connection closed by peer" in doc["text"] for doc in index["docs"])  # a pasted error finds a page
