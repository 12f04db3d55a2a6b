"""`lab up --link`: traffic between two real nodes runs at the profile's rate, and the shaping goes with the lab."""

import json
import re
from pathlib import Path

import pytest

from lab.nodes import links

from .conftest import lab, lab_json

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROBE = Path(__file__).resolve().parents[2] / "bench" / "link_probe.py"
RATE = 500 * 10**6  # well below what two nodes reach unshaped on a loaded host (several Gbit/s)


def probe(name: str) -> dict:
    result = lab("exec", "--name", name, "--copy", str(PROBE), "--timeout", "120", "--",
                 "python", "link_probe.py", "--rank", "{rank}", check=True)
    [line] = re.findall(r"LINK (\{.*\})", result.stdout)
    return json.loads(line)


def test_traffic_between_nodes_runs_at_the_profiles_rate(fresh_name):
    up = lab("up", "--nodes", "2", "--name", fresh_name, "--link", "500mbit", check=True)
    assert "link 500mbit" in up.stdout
    status = lab_json("status", "--name", fresh_name)[fresh_name]
    assert status["spec"]["link"] == "500mbit"
    assert all(node["link"].startswith("tbf 500Mbit") for node in status["nodes"]), status["nodes"]

    measured = probe(fresh_name)["bits_per_second"]
    assert abs(measured - RATE) <= 0.1 * RATE, f"{measured / 1e6:.0f} Mbit/s through a 500mbit link"

    lab("down", "--name", fresh_name, check=True)
    assert not [device for device in links.SYS_NET.iterdir() if device.name.startswith(links.ifb_prefix(fresh_name))]


def test_a_delay_needs_netem(fresh_name):
    if links.netem_available():
        up = lab("up", "--nodes", "2", "--name", fresh_name, "--link", "1gbit:500us", check=True)
        assert "link 1gbit:500us" in up.stdout
        assert probe(fresh_name)["rtt_us_median"] >= 2 * 500  # the one-way delay is paid on the way there and back
        return
    refused = lab("up", "--nodes", "2", "--name", fresh_name, "--link", "1gbit:500us")
    assert refused.returncode == 8 and "no netem" in refused.stderr and "--link 10gbit" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 2  # one line of error, one of hint
    assert fresh_name not in lab_json("status")  # refused before anything was made
    pytest.skip("this kernel has no netem (CONFIG_NET_SCH_NETEM): no delay can be set, so no round trip is measured")
