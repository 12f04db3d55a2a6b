"""Link profiles (`lab up --link`): parsing in the model, the tc command lines, the host checks; no engine, no tc."""

import json
import subprocess

import pytest

from lab.errors import HostError, SpecError
from lab.model.spec import LabSpec, LinkProfile, parse_link
from lab.nodes import links
from lab.nodes.links import burst_bytes, ifb_name, shaping_commands


@pytest.mark.parametrize("text,normalised", [
    ("10gbit", "10gbit"), ("1000mbit", "1gbit"), ("2.5gbit", "2500mbit"), (" 1GBIT ", "1gbit"),
    ("1gbit:200us", "1gbit:200us"), ("1gbit:0.2ms", "1gbit:200us"), ("1gbit:1ms", "1gbit:1ms"),
    ("1gbit:200us:20us:0.1%", "1gbit:200us:20us:0.1%"), ("1gbit:1%", "1gbit:1%"), ("100mbit:50us:0.5%", "100mbit:50us:0.5%"),
    ("ethernet-1g", "1gbit"), ("ethernet-10g", "10gbit"), ("ethernet-100g", "100gbit"),
])
def test_link_profiles_are_normalised(text, normalised):
    assert LabSpec(link=text).link == normalised
    assert parse_link(normalised).text() == normalised


def test_profile_fields():
    assert parse_link("1gbit:200us:20us:0.1%") == LinkProfile(10**9, 200, 20, 0.1)
    assert not parse_link("10gbit").needs_netem
    assert parse_link("1gbit:1%").needs_netem and parse_link("1gbit:50us").needs_netem


@pytest.mark.parametrize("text", ["fast", "10g", "10gbps", "0gbit", "500kbit", "1gbit:", "1gbit:200", "1gbit:1us:2us:3us",
                                  "1gbit:1%:2%", "1gbit:1%:200us", "1gbit:101%", ":200us", "ethernet-40g"])
def test_bad_link_profiles_are_one_line_spec_errors(text):
    with pytest.raises(SpecError) as error:
        LabSpec(link=text)
    assert "\n" not in str(error.value) and error.value.hint


def test_link_is_part_of_the_spec_and_its_fingerprint():
    shaped = LabSpec(link="ethernet-1g")
    assert LabSpec.from_dict(shaped.to_dict()) == shaped
    assert shaped.fingerprint() != LabSpec().fingerprint()
    assert shaped.fingerprint() == LabSpec(link="1000mbit").fingerprint()
    assert LabSpec.from_dict({"name": "old", "nodes": 2}).link is None  # labs made before --link existed


def test_rate_only_shaping_is_tbf_both_ways():
    commands = shaping_commands(parse_link("1gbit"), "veth1", "lifbx-0", ifb_exists=False)
    tbf = ["tbf", "rate", "1gbit", "burst", "131072", "latency", "10ms"]
    assert commands.apply == [
        ["ip", "link", "add", "lifbx-0", "type", "ifb"],
        ["ip", "link", "set", "dev", "lifbx-0", "up"],
        ["tc", "qdisc", "replace", "dev", "lifbx-0", "root", "handle", "1:", *tbf],
        ["tc", "qdisc", "replace", "dev", "veth1", "root", "handle", "1:", *tbf],
        ["tc", "qdisc", "add", "dev", "veth1", "handle", "ffff:", "ingress"],
        ["tc", "filter", "add", "dev", "veth1", "parent", "ffff:", "protocol", "all", "prio", "1",
         "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", "lifbx-0"],
    ]
    assert commands.clear == [["tc", "qdisc", "del", "dev", "veth1", "ingress"]]
    again = shaping_commands(parse_link("1gbit"), "veth1", "lifbx-0", ifb_exists=True)
    assert again.apply == commands.apply[1:]  # shaping again reuses the IFB device


def test_delay_jitter_and_loss_go_to_netem_on_the_way_in_only():
    commands = shaping_commands(parse_link("1gbit:200us:20us:0.1%"), "veth1", "lifbx-0", ifb_exists=True)
    inbound = next(argv for argv in commands.apply if argv[:5] == ["tc", "qdisc", "replace", "dev", "veth1"])
    assert inbound[8:] == ["netem", "delay", "200us", "20us", "loss", "0.1%", "rate", "1gbit"]
    outbound = next(argv for argv in commands.apply if argv[:5] == ["tc", "qdisc", "replace", "dev", "lifbx-0"])
    assert outbound[8:10] == ["tbf", "rate"]  # the delay is paid once per direction, not twice
    loss_only = shaping_commands(parse_link("1gbit:1%"), "v", "i", ifb_exists=True).apply[2]
    assert loss_only[8:] == ["netem", "loss", "1%", "rate", "1gbit"]


def test_burst_is_a_millisecond_but_at_least_one_big_packet():
    assert burst_bytes(parse_link("100gbit")) == 12_500_000
    assert burst_bytes(parse_link("10mbit")) == 128 * 1024


def test_ifb_names_fit_linux_and_differ_by_lab_and_node():
    names = {ifb_name(lab, index) for lab in ("a", "b", "x" * 31) for index in range(64)}
    assert len(names) == 3 * 64 and max(len(name) for name in names) <= 15


def test_a_delay_on_a_kernel_without_netem_is_refused_before_anything_starts(monkeypatch):
    monkeypatch.setattr(links, "netem_available", lambda: False)
    monkeypatch.setattr(links.shutil, "which", lambda tool: f"/usr/sbin/{tool}")
    links.check_host(parse_link("10gbit"))  # a rate alone needs no netem
    with pytest.raises(HostError) as error:
        links.check_host(parse_link("1gbit:200us"))
    assert "netem" in str(error.value) and "--link 10gbit" in error.value.hint


def test_missing_tc_is_named(monkeypatch):
    monkeypatch.setattr(links.shutil, "which", lambda tool: None if tool == "tc" else "/usr/sbin/ip")
    with pytest.raises(HostError) as error:
        links.check_host(parse_link("10gbit"))
    assert "`tc`" in str(error.value) and "iproute2" in error.value.hint


def test_tc_without_privilege_says_to_run_as_root():
    refused = subprocess.CompletedProcess(["tc"], 2, "", "RTNETLINK answers: Operation not permitted\n")
    error = links._refused("could not shape node0's link", refused)
    assert "Operation not permitted" in str(error) and "root" in error.hint


def test_the_plan_and_the_node_labels_carry_the_link():
    from tests.unit.test_plan import facts

    from lab.nodes.labels import SPEC_LABEL
    from lab.nodes.plan import build_plan

    plan = build_plan(LabSpec(name="demo", link="ethernet-1g"), facts())
    assert plan.spec.link == "1gbit" and plan.to_dict()["spec"]["link"] == "1gbit"
    assert all(LabSpec.from_dict(json.loads(c.labels[SPEC_LABEL])).link == "1gbit" for c in plan.containers)
