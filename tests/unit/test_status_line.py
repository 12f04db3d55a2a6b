"""Progress lines without a terminal: shown for work that lasts, withheld when it fails at once."""

import time

from lab.cli.console import StatusLine


def lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_work_that_ends_at_once_prints_nothing(capsys, monkeypatch):
    monkeypatch.setattr(StatusLine, "GRACE", 0.3)
    with StatusLine(quiet=False) as progress:
        progress("provisioning with ansible")
    time.sleep(0.5)
    assert lines(capsys) == []


def test_a_phase_that_lasts_is_printed_with_its_time(capsys, monkeypatch):
    monkeypatch.setattr(StatusLine, "GRACE", 0.1)
    with StatusLine(quiet=False) as progress:
        progress("building image: step 1")
        time.sleep(0.4)
        progress("building image: step 2")  # same phase within LOG_EVERY: not repeated
    printed = lines(capsys)
    assert len(printed) == 1 and printed[0].endswith("] building image: step 1"), printed


def test_a_next_phase_shows_the_previous_one_at_once(capsys, monkeypatch):
    monkeypatch.setattr(StatusLine, "GRACE", 60.0)
    with StatusLine(quiet=False) as progress:
        progress("bootstrapping base image")
        progress("building image")
    assert [line.split("] ", 1)[1] for line in lines(capsys)] == ["bootstrapping base image"]


def test_quiet_prints_nothing(capsys, monkeypatch):
    monkeypatch.setattr(StatusLine, "GRACE", 0.0)
    with StatusLine(quiet=True) as progress:
        progress("building image")
        time.sleep(0.2)
    assert lines(capsys) == []
