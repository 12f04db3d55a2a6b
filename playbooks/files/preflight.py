"""Pre-job checks run on a node by `lab doctor` (standard library only; prints one JSON line).

  preflight.py facts                      hostname resolution, /dev/shm, interfaces + MTU, the interface
                                          gloo and NCCL would pick, the socket-interface variables set
  preflight.py listen PORT COUNT SECONDS  on the rendezvous host: bind PORT as a TCPStore would, say so, serve
                                          COUNT clients with this node's clock, then exit
  preflight.py connect HOST PORT SECONDS  reach HOST:PORT as a rank would; report round trip and clock offset

Run with the job's environment: GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME change what the backends pick.
"""

import fcntl
import ipaddress
import json
import os
import socket
import struct
import subprocess
import sys
import time

SYS_NET = "/sys/class/net"
SIOCGIFADDR = 0x8915
CLOCK_SAMPLES = 5  # exchanges per connection; the one with the shortest round trip gives the offset
NCCL_DEFAULT_ORDER = ("ib", "^docker,lo", "docker", "lo")  # NCCL's own search without NCCL_SOCKET_IFNAME


def ioctl_address(name):
    """The interface's primary IPv4 address (SIOCGIFADDR), for nodes without iproute2."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            packed = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return []
    return [socket.inet_ntoa(packed[20:24])]


def read_mtu(name):
    try:
        with open(os.path.join(SYS_NET, name, "mtu")) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def interfaces():
    """interface -> {addresses (IPv4), mtu} for those with an address, in the kernel's index order (NCCL's)."""
    addresses = {}
    try:
        output = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True, timeout=10).stdout
        for link in json.loads(output or "[]"):
            addresses[link["ifname"]] = [info["local"] for info in link.get("addr_info", [])
                                         if info.get("family") == "inet"]
    except (OSError, ValueError, subprocess.TimeoutExpired):
        pass
    found = {name: addresses[name] if name in addresses else ioctl_address(name) for _, name in socket.if_nameindex()}
    return {name: {"addresses": held, "mtu": read_mtu(name)} for name, held in found.items() if held}


def own_addresses(hostname):
    """What the hostname resolves to, in getaddrinfo's order (gloo tries them in this order)."""
    try:
        found = socket.getaddrinfo(hostname, None, type=socket.SOCK_STREAM)
    except OSError:
        return []
    return list(dict.fromkeys(info[4][0] for info in found))


def binds(address):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
        return True
    except OSError:
        return False


def loopback_interface(found):
    return next((name for name, info in found.items()
                 if any(ipaddress.ip_address(a).is_loopback for a in info["addresses"])), "lo")


def owner(address, found):
    """The interface that holds `address` (any 127/8 or ::1 address is the loopback interface's)."""
    if ipaddress.ip_address(address.split("%")[0]).is_loopback:
        return loopback_interface(found)
    return next((name for name, info in found.items() if address in info["addresses"]), None)


def gloo_choice(own, found):
    """(interface, why) as torch's gloo picks it: GLOO_SOCKET_IFNAME; else the first address of the hostname
    that can be bound; else, with a warning in the job's log, the loopback address."""
    wanted = os.environ.get("GLOO_SOCKET_IFNAME", "")
    if wanted:
        return wanted.split(",")[0], "GLOO_SOCKET_IFNAME"
    for address in own:
        if binds(address):
            return owner(address, found), "hostname"
    return loopback_interface(found), "loopback fallback"


def nccl_matches(name, spec):
    """NCCL_SOCKET_IFNAME's syntax: comma-separated prefixes, '=' for exact names, a leading '^' to exclude."""
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    hit = any(name == part if exact else name.startswith(part) for part in spec.split(",") if part)
    return hit != exclude


def nccl_choice(found):
    """The first interface NCCL's socket transport would use: NCCL_SOCKET_IFNAME, else ib*, then anything but
    docker*/lo*, then docker*, then lo*."""
    wanted = os.environ.get("NCCL_SOCKET_IFNAME", "")
    for spec in [wanted] if wanted else NCCL_DEFAULT_ORDER:
        picked = [name for name in found if nccl_matches(name, spec)]
        if picked:
            return picked[0]
    return None


def facts():
    hostname = socket.gethostname()
    own = own_addresses(hostname)
    found = interfaces()
    gloo, gloo_reason = gloo_choice(own, found)
    try:
        stat = os.statvfs("/dev/shm")
        shm = stat.f_frsize * stat.f_blocks
    except OSError:
        shm = None
    return {
        "hostname": hostname,
        "hostname_addresses": own,
        "hostname_is_loopback": any(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in own),
        "shm_bytes": shm,
        "interfaces": found,
        "gloo_interface": gloo,
        "gloo_reason": gloo_reason,
        "nccl_interface": nccl_choice(found),
        "socket_ifname": {key: os.environ[key] for key in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME") if key in os.environ},
    }


def serve(conn):
    """Answer every 8-byte reading of the client's clock with this node's clock, until it hangs up."""
    conn.settimeout(5)
    try:
        while len(conn.recv(8)) == 8:
            conn.sendall(struct.pack("!d", time.time()))
    except OSError:
        return False
    return True


def listen(port, count, seconds):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("", port))
    except OSError as error:
        return {"listening": False, "port": port, "error": error.strerror or str(error)}
    server.listen(max(1, count))
    print(json.dumps({"listening": True, "port": port}), flush=True)
    served = 0
    deadline = time.monotonic() + seconds
    while served < count and time.monotonic() < deadline:
        server.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            conn, _ = server.accept()
        except socket.timeout:
            break
        with conn:
            served += serve(conn)
    return {"served": served, "port": port}


def exchange(conn):
    """One NTP-style reading: (round trip, the other clock minus ours at the middle of it), in seconds."""
    sent = time.time()
    conn.sendall(struct.pack("!d", sent))
    data = b""
    while len(data) < 8:
        chunk = conn.recv(8 - len(data))
        if not chunk:
            raise ConnectionError("the listener closed the connection")
        data += chunk
    received = time.time()
    (remote,) = struct.unpack("!d", data)
    return received - sent, remote - (sent + received) / 2


def connect(host, port, seconds):
    deadline = time.monotonic() + seconds
    last_error = "timed out"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=5) as conn:
                rtt, offset = min(exchange(conn) for _ in range(CLOCK_SAMPLES))
            return {"reached": True, "host": host, "port": port, "rtt_ms": round(rtt * 1000, 3),
                    "clock_offset_ms": round(offset * 1000, 3)}
        except OSError as error:
            last_error = error.strerror or str(error)
        time.sleep(0.2)
    return {"reached": False, "host": host, "port": port, "error": last_error}


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "facts"
    if mode == "facts":
        result = facts()
    elif mode == "listen":
        result = listen(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    else:
        result = connect(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    print(json.dumps(result), flush=True)
