import io
import os
import tarfile
from pathlib import Path

import pytest

from lab import paths
from lab.nodes import bootstrap
from lab.nodes.bootstrap import (
    BASE_TAG,
    AptSource,
    StageReporter,
    check_can_bootstrap,
    choose_mirror,
    logged_failure,
    parse_deb822_sources,
    parse_one_line_sources,
    read_apt_sources,
    read_os_release,
    run_logged,
)
from lab.errors import ImageError

MIRROR = "http://mirror.example.invalid/debian"
SECURITY = "http://mirror.example.invalid/debian-security"
THIRD_PARTY = "https://packages.example.invalid/node"


pytestmark = pytest.mark.usefixtures("own_lab_home")

ONE_LINE = f"""\
# the main archive
deb [arch=amd64 signed-by=/usr/share/keyrings/debian.gpg] {MIRROR}/ bookworm main contrib  # trailing
deb-src {MIRROR} bookworm main
deb {MIRROR} bookworm-updates main
deb {SECURITY} bookworm-security main
"""

DEB822 = f"""\
Types: deb
# a comment inside the stanza
URIs: {MIRROR}
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: {SECURITY}
Suites: bookworm-security
Components: main

Types: deb-src
URIs: {MIRROR}
Suites: bookworm
Components: main

Types: deb
URIs: {THIRD_PARTY}
Suites: nodistro
Components: main
Enabled: no
"""

DEBIAN_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_CODENAME=bookworm\n'


def test_one_line_sources_drop_options_comments_and_deb_src():
    assert parse_one_line_sources(ONE_LINE) == [
        AptSource(MIRROR, "bookworm", ("main", "contrib")),
        AptSource(MIRROR, "bookworm-updates", ("main",)),
        AptSource(SECURITY, "bookworm-security", ("main",)),
    ]


def test_deb822_sources_expand_suites_and_skip_disabled_and_deb_src():
    assert parse_deb822_sources(DEB822) == [
        AptSource(MIRROR, "bookworm", ("main",)),
        AptSource(MIRROR, "bookworm-updates", ("main",)),
        AptSource(SECURITY, "bookworm-security", ("main",)),
    ]


def test_deb822_continuation_lines_join_the_field():
    text = f"Types: deb\nURIs: {SECURITY}\n {MIRROR}\nSuites: bookworm\nComponents: main\n"
    assert [s.uri for s in parse_deb822_sources(text)] == [SECURITY, MIRROR]


def make_apt_dir(tmp_path: Path, sources_list: str = "", parts: dict[str, str] | None = None) -> Path:
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list").write_text(sources_list)
    for name, text in (parts or {}).items():
        (apt / "sources.list.d" / name).write_text(text)
    return apt


def test_read_apt_sources_reads_both_formats_and_ignores_other_files(tmp_path):
    apt = make_apt_dir(tmp_path, f"deb {MIRROR} bookworm main\n", {
        "debian.sources": DEB822,
        "extra.list": f"deb {THIRD_PARTY} nodistro main\n",
        "old.list.disabled": "deb http://disabled.example.invalid/debian bookworm main\n",
    })
    uris = [s.uri for s in read_apt_sources(apt)]
    assert uris[0] == MIRROR and THIRD_PARTY in uris
    assert "http://disabled.example.invalid/debian" not in uris


def test_read_apt_sources_without_sources_is_empty(tmp_path):
    assert read_apt_sources(tmp_path / "missing") == []


def test_choose_mirror_picks_the_main_archive():
    sources = parse_deb822_sources(DEB822) + [AptSource(THIRD_PARTY, "nodistro", ("main",))]
    assert choose_mirror(sources, "bookworm") == MIRROR


def test_choose_mirror_prefers_the_hosts_release_over_the_base_suite():
    other = "http://other.example.invalid/debian"
    sources = [AptSource(other, "bookworm", ("main",)), AptSource(MIRROR, "trixie", ("main",))]
    assert choose_mirror(sources, "trixie") == MIRROR
    assert choose_mirror(sources, None) == other


@pytest.mark.parametrize("sources", [
    [AptSource(SECURITY, "bookworm-security", ("main",)), AptSource(MIRROR, "bookworm-updates", ("main",))],
    [AptSource(MIRROR, "bookworm", ("contrib",))],
    [AptSource("cdrom:[Debian 12]", "bookworm", ("main",))],
    [AptSource(THIRD_PARTY, "nodistro", ("main",))],
    [],
])
def test_choose_mirror_finds_none_without_a_main_archive(sources):
    assert choose_mirror(sources, "bookworm") is None


def test_read_os_release(tmp_path):
    path = tmp_path / "os-release"
    path.write_text(DEBIAN_RELEASE)
    assert read_os_release(path)["VERSION_CODENAME"] == "bookworm"
    assert read_os_release(tmp_path / "missing") == {}


@pytest.fixture
def bootstrappable(tmp_path, monkeypatch):
    """A root host with debootstrap and a Debian apt source; each test takes one of them away."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(bootstrap.shutil, "which", lambda name: f"/usr/sbin/{name}")
    release = tmp_path / "os-release"
    release.write_text(DEBIAN_RELEASE)
    return make_apt_dir(tmp_path, ONE_LINE), release


def test_check_can_bootstrap_finds_program_and_mirror(bootstrappable, monkeypatch):
    assert check_can_bootstrap(*bootstrappable) == ("/usr/sbin/mmdebstrap", MIRROR)  # the faster one first
    monkeypatch.setattr(bootstrap.shutil, "which", lambda name: None if name == "mmdebstrap" else f"/usr/sbin/{name}")
    assert check_can_bootstrap(*bootstrappable) == ("/usr/sbin/debootstrap", MIRROR)


def test_refuses_when_not_root(bootstrappable, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ImageError, match="needs root") as error:
        check_can_bootstrap(*bootstrappable)
    assert "sudo" in error.value.hint


def test_refuses_without_a_bootstrap_program(bootstrappable, monkeypatch):
    monkeypatch.setattr(bootstrap.shutil, "which", lambda name: None)
    with pytest.raises(ImageError, match="neither mmdebstrap nor debootstrap is installed") as error:
        check_can_bootstrap(*bootstrappable)
    assert "apt-get install mmdebstrap" in error.value.hint


def test_refuses_without_a_mirror(bootstrappable, tmp_path):
    _, release = bootstrappable
    apt = make_apt_dir(tmp_path / "other", f"deb {SECURITY} bookworm-security main\n")
    with pytest.raises(ImageError, match="no Debian mirror") as error:
        check_can_bootstrap(apt, release)
    assert error.value.hint


def test_refuses_on_a_host_that_is_not_debian(bootstrappable):
    apt, release = bootstrappable
    release.write_text("ID=ubuntu\nVERSION_CODENAME=bookworm\n")
    with pytest.raises(ImageError, match="no Debian mirror"):
        check_can_bootstrap(apt, release)


def test_stage_reporter_reports_each_stage_once_and_every_warning():
    seen = []
    report = StageReporter(seen.append)
    for line in ["I: Retrieving InRelease", "I: Retrieving libc6 2.36", "I: Validating libc6 2.36",
                 "I: Retrieving apt 2.6", "W: Failure trying to run: chroot", "W: Failure again", "noise",
                 "I: Configuring required packages...", "I: Configuring libc6"]:
        report(line)
    assert seen == ["debootstrap: Retrieving InRelease", "debootstrap: Validating libc6 2.36",
                    "debootstrap: Failure trying to run: chroot", "debootstrap: Failure again",
                    "debootstrap: Configuring required packages..."]


def test_run_logged_returns_status_tail_and_log():
    log, lines = io.StringIO(), []
    status, tail = run_logged(["sh", "-c", "echo one; echo two >&2; echo; exit 3"], log, lines.append)
    assert status == 3
    assert tail == lines == ["one", "two"]
    assert "one\ntwo\n" in log.getvalue() and log.getvalue().startswith("$ sh -c")


def test_logged_failure_says_how_much_space_is_left(tmp_path):
    error = logged_failure("pip failed", ["OSError: [Errno 28] No space left on device"], tmp_path / "x.log", tmp_path)
    assert "no space left on device" in error.message and "GiB free on" in error.message
    assert "docker image prune" in error.hint and "x.log" in error.hint


def test_logged_failure_otherwise_shows_the_last_lines(tmp_path):
    error = logged_failure("step failed", ["a", "b", "c", "d"], tmp_path / "x.log", None)
    assert error.message == "step failed"
    assert "b | c | d" in error.hint and "a |" not in error.hint and "x.log" in error.hint


FAKE_DEBOOTSTRAP = """#!/bin/sh
# called as: debootstrap --variant=minbase --include=... SUITE DIR MIRROR
target="$4"
echo "I: Retrieving InRelease"
mkdir -p "$target/etc" "$target/dev" "$target/var/cache/apt/archives"
echo bookworm > "$target/etc/debian_version"
echo device > "$target/dev/null-ish"
echo deb > "$target/var/cache/apt/archives/libc6.deb"
echo "I: Base system installed successfully."
exit "${FAKE_STATUS:-0}"
"""


class FakeImportAPI:
    def __init__(self):
        self.imported = {}

    def import_image_from_stream(self, stream, repository, tag):
        self.imported[f"{repository}:{tag}"] = b"".join(stream)


class FakeClient:
    def __init__(self):
        self.api = FakeImportAPI()


@pytest.fixture
def fake_debootstrap(tmp_path, monkeypatch):
    program = tmp_path / "debootstrap"
    program.write_text(FAKE_DEBOOTSTRAP)
    program.chmod(0o755)
    monkeypatch.setattr(bootstrap, "check_can_bootstrap", lambda *_: (str(program), MIRROR))
    return program


def test_bootstrap_imports_the_tree_without_dev_or_debs_and_cleans_up(fake_debootstrap):
    client, progress = FakeClient(), []
    assert bootstrap.bootstrap_base(client, progress.append) == BASE_TAG
    with tarfile.open(fileobj=io.BytesIO(client.api.imported[BASE_TAG])) as tar:
        names = set(tar.getnames())
    assert "./etc/debian_version" in names and "./dev" in names
    assert "./dev/null-ish" not in names and "./var/cache/apt/archives/libc6.deb" not in names
    assert "debootstrap: Retrieving InRelease" in progress
    assert not list(paths.cache_dir().glob("bootstrap-*"))


def test_failed_bootstrap_raises_with_log_and_cleans_up(fake_debootstrap, monkeypatch):
    monkeypatch.setenv("FAKE_STATUS", "1")
    client = FakeClient()
    with pytest.raises(ImageError, match=r"debootstrap of bookworm failed \(exit 1\)") as error:
        bootstrap.bootstrap_base(client, lambda _: None)
    assert "bootstrap-bookworm.log" in error.value.hint
    assert client.api.imported == {}
    assert not list(paths.cache_dir().glob("bootstrap-*"))


FAKE_MMDEBSTRAP = """#!/bin/sh
# called as: mmdebstrap --variant=minbase --include=... SUITE TARBALL MIRROR
tarball="$4"
echo "I: downloading packages with apt..."
work=$(mktemp -d)
mkdir -p "$work/etc" && echo bookworm > "$work/etc/debian_version"
tar -C "$work" -cf "$tarball" . && rm -rf "$work"
echo "I: success in 0.1 seconds"
exit "${FAKE_STATUS:-0}"
"""


def test_mmdebstrap_tarball_is_imported_as_it_is_and_cleaned_up(tmp_path, monkeypatch):
    program = tmp_path / "mmdebstrap"
    program.write_text(FAKE_MMDEBSTRAP)
    program.chmod(0o755)
    monkeypatch.setattr(bootstrap, "check_can_bootstrap", lambda *_: (str(program), MIRROR))
    monkeypatch.setenv("LAB_HOME", str(tmp_path / "home"))
    client, progress = FakeClient(), []
    assert bootstrap.bootstrap_base(client, progress.append) == BASE_TAG
    with tarfile.open(fileobj=io.BytesIO(client.api.imported[BASE_TAG])) as tar:
        assert "./etc/debian_version" in tar.getnames()
    assert "mmdebstrap: downloading packages with apt..." in progress
    assert not list((tmp_path / "home").rglob("base.tar"))  # the tarball went with its folder
