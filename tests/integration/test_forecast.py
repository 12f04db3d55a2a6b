"""`lab torchrun --profile` then `lab forecast`: the whole path on a real 2-node lab with a shaped link.

The rehearsal is bench/forecast_workload.py (DDP, 8 buckets of 1 MiB): every process writes its profiled steps, the
lab calibrates the link between node0 and node1, and the forecast reads only the record.
"""

import json
import uuid
from pathlib import Path

import pytest

from .conftest import lab, lab_json

pytestmark = [pytest.mark.docker, pytest.mark.slow]

WORKLOAD = Path(__file__).resolve().parents[2] / "bench" / "forecast_workload.py"


@pytest.fixture
def forecast_lab():
    """A lab of this test's own (named for the feature, so that it is told from other work on a shared engine)."""
    name = f"forecast{uuid.uuid4().hex[:6]}"
    yield name
    lab("down", "--name", name)


def test_a_profiled_rehearsal_forecasts_bigger_labs(forecast_lab):
    fresh_name = forecast_lab
    lab("up", "--nodes", "2", "--name", fresh_name, "--link", "200mbit", "--nproc-per-node", "1", check=True)
    record = json.loads(lab("torchrun", "--name", fresh_name, "--profile", "--json", str(WORKLOAD), "--steps", "18",
                            timeout=900, check=True).stdout)  # --json before the script: after it, it is the script's
    folder = Path(record["path"]) / "profile"
    profiles = sorted(folder.glob("profile-*.json"))
    assert len(profiles) == 2, list(folder.iterdir())
    facts = json.loads((folder / "lab.json").read_text())
    assert facts["link"] == "200mbit" and facts["nodes"] == 2
    assert len(facts["calibration"]["all_reduce"]) >= 5, facts["calibration"]
    window = json.loads(profiles[0].read_text())["window"]
    assert window["collectives"] and all(c["bytes"] == 1050624 for c in window["collectives"])
    assert all(c["issued_ns"] <= c["started_ns"] < c["ended_ns"] for c in window["collectives"])

    rows = lab_json("forecast", record["run_id"], "--nodes", "4,8")
    assert [row["nodes"] for row in rows] == [4, 8]
    assert rows[0]["step_ms"] < rows[1]["step_ms"] and rows[1]["efficiency"] < 1
    assert (Path(record["path"]) / "forecast.png").is_file()

    plain = json.loads(lab("torchrun", "--name", fresh_name, "--json", str(WORKLOAD), "--steps", "2", timeout=600,
                           check=True).stdout)
    refused = lab("forecast", plain["run_id"])
    assert refused.returncode == 2 and "was not profiled" in refused.stderr
