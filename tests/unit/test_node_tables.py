"""What the lab reads of a node from this machine instead of starting a process in it (lab/nodes/driver.py): its
OOM kill count (memory cgroup, v1 and v2) and its listening ports (/proc/PID/net/tcp), on fake /proc trees written
as the kernel writes them; a PID that is not the container's gives nothing, so the caller asks inside the node."""

from lab.nodes.driver import cgroup_oom_kills, listening_ports

CONTAINER = "2450579cf60114b68b8b8637a157249cfab59d3da44774f9e37f7ae5cbc0d25a"
V1 = "\n".join(f"{n}:{c}:/docker/{CONTAINER}" for n, c in ((4, "memory"), (3, "cpuset"), (1, "cpu,cpuacct")))
V2 = f"0::/system.slice/docker-{CONTAINER}.scope"
TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 348547 1 0 100 0 0 10 0
   1: 0B00007F:9B85 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 349206 1 0 100 0 0 10 0
   2: 03B0A8C0:0016 01B0A8C0:93E0 01 00000000:00000000 02:000AF0D2 00000000     0        0 349770 2 0 21 4 14 18 -1
"""
TCP6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue
   0: 00000000000000000000000000000000:732B 00000000000000000000000000000000:0000 0A 00000000:00000000
"""


def fake_proc(tmp_path, cgroup: str, pid: int = 4242):
    (tmp_path / "proc" / str(pid) / "net").mkdir(parents=True)
    (tmp_path / "proc" / str(pid) / "cgroup").write_text(cgroup + "\n")
    return tmp_path / "proc"


def test_oom_kills_from_a_v1_memory_cgroup(tmp_path):
    proc = fake_proc(tmp_path, V1)
    control = tmp_path / "cgroup" / "memory" / "docker" / CONTAINER / "memory.oom_control"
    control.parent.mkdir(parents=True)
    control.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    assert cgroup_oom_kills(4242, CONTAINER, proc, tmp_path / "cgroup") == 3


def test_oom_kills_from_a_v2_cgroup(tmp_path):
    proc = fake_proc(tmp_path, V2)
    events = tmp_path / "cgroup" / "system.slice" / f"docker-{CONTAINER}.scope" / "memory.events"
    events.parent.mkdir(parents=True)
    events.write_text("low 0\nhigh 0\nmax 2\noom 1\noom_kill 1\n")
    assert cgroup_oom_kills(4242, CONTAINER, proc, tmp_path / "cgroup") == 1


def test_a_process_of_something_else_or_no_file_gives_nothing(tmp_path):
    proc = fake_proc(tmp_path, "0::/user.slice/session-1.scope")  # an engine in a VM: the PID is another process
    assert cgroup_oom_kills(4242, CONTAINER, proc, tmp_path / "cgroup") is None
    assert cgroup_oom_kills(4242, CONTAINER, fake_proc(tmp_path / "b", V2), tmp_path / "cgroup") is None  # no file
    assert cgroup_oom_kills(0, CONTAINER, proc, tmp_path / "cgroup") is None


def test_listening_ports_from_the_tcp_tables(tmp_path):
    proc = fake_proc(tmp_path, V2)
    (proc / "4242" / "net" / "tcp").write_text(TCP)
    (proc / "4242" / "net" / "tcp6").write_text(TCP6)
    assert listening_ports(4242, proc) == {22, 39813, 29483}  # an established connection is not listening
    assert listening_ports(999, proc) == set()  # no tables: nothing seen (the caller checks the process first)
