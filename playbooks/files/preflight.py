"""Pre-job checks run inside a node by `lab doctor` (standard library only; prints one JSON line).

  preflight.py facts                      hostname resolution, /dev/shm, interfaces + MTU, the interface
                                          gloo and NCCL would pick, the socket-interface variables set
  preflight.py listen PORT COUNT SECONDS  on the rendezvous host: accept COUNT clients, answer each with this
                                          node's clock (NTP-style), then exit
  preflight.py connect HOST PORT SECONDS  reach HOST:PORT as a rank would; report round trip and clock offset
"""

import json
import os
import socket
import struct
import sys
import time

SYS_NET = "/sys/class/net"


def ipv4_addresses():
    """interface -> IPv4 addresses, read with ioctl-free means: `ip -j` when present, else /proc/net/fib_trie."""
    found = {}
    try:
        import subprocess

        output = subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True, timeout=10).stdout
        for link in json.loads(output or "[]"):
            found[link["ifname"]] = [info["local"] for info in link.get("addr_info", []) if info.get("family") == "inet"]
    except (OSError, ValueError):
        pass
    for name in os.listdir(SYS_NET) if os.path.isdir(SYS_NET) else []:
        found.setdefault(name, [])
    return found


def mtu(name):
    try:
        with open(os.path.join(SYS_NET, name, "mtu")) as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def resolve_all(name):
    try:
        return sorted({info[4][0] for info in socket.getaddrinfo(name, None, socket.AF_INET)})
    except OSError:
        return []


def nccl_choice(interfaces):
    """NCCL's default: the first interface that is neither loopback nor docker*, unless NCCL_SOCKET_IFNAME says."""
    wanted = os.environ.get("NCCL_SOCKET_IFNAME", "")
    names = sorted(name for name, addresses in interfaces.items() if addresses)
    if wanted:
        exclude = wanted.startswith("^")
        prefixes = [part.lstrip("=") for part in wanted.lstrip("^").split(",") if part]
        matches = [name for name in names if any(name.startswith(prefix) for prefix in prefixes)]
        picked = [name for name in names if name not in matches] if exclude else matches
        return picked[0] if picked else None
    usable = [name for name in names if name != "lo" and not name.startswith("docker")]
    return usable[0] if usable else None


def facts():
    hostname = socket.gethostname()
    own = resolve_all(hostname)
    interfaces = ipv4_addresses()
    by_address = {address: name for name, addresses in interfaces.items() for address in addresses}
    gloo_wanted = os.environ.get("GLOO_SOCKET_IFNAME", "")
    gloo = gloo_wanted.split(",")[0] if gloo_wanted else next((by_address[a] for a in own if a in by_address), None)
    try:
        stat = os.statvfs("/dev/shm")
        shm = stat.f_frsize * stat.f_blocks
    except OSError:
        shm = None
    return {
        "hostname": hostname,
        "hostname_addresses": own,
        "hostname_is_loopback": any(address.startswith("127.") for address in own),
        "shm_bytes": shm,
        "interfaces": {name: {"addresses": addresses, "mtu": mtu(name)} for name, addresses in sorted(interfaces.items())},
        "gloo_interface": gloo,
        "nccl_interface": nccl_choice(interfaces),
        "socket_ifname": {key: os.environ[key] for key in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME") if key in os.environ},
        "time": time.time(),
    }


def listen(port, count, seconds):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind(("0.0.0.0", port))
    except OSError as error:
        return {"listening": False, "port": port, "error": error.strerror or str(error)}
    server.listen(max(1, count))
    server.settimeout(seconds)
    print(json.dumps({"listening": True, "port": port}), flush=True)
    served = 0
    deadline = time.monotonic() + seconds
    while served < count and time.monotonic() < deadline:
        try:
            conn, _ = server.accept()
        except socket.timeout:
            break
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(8)
                conn.sendall(struct.pack("!d", time.time()))
                served += 1
            except OSError:
                pass
    return {"served": served, "port": port}


def connect(host, port, seconds):
    deadline = time.monotonic() + seconds
    last_error = "timed out"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=5) as conn:
                sent = time.time()
                conn.sendall(struct.pack("!d", sent))
                data = conn.recv(8)
                received = time.time()
            if len(data) == 8:
                (remote,) = struct.unpack("!d", data)
                return {"reached": True, "host": host, "port": port, "rtt_ms": round((received - sent) * 1000, 3),
                        "clock_offset_ms": round((remote - (sent + received) / 2) * 1000, 3)}
            last_error = "the listener closed the connection"
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
