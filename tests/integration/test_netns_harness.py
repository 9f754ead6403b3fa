"""netns_harness.py itself: a cut drops exactly the packets between two
nodes, both ways, keeps sockets open, and a heal lets held data through.
Skipped (by the harness) unless run as root where `ip netns` works."""

import socket
import subprocess
import time

import pytest

from netns_harness import NetnsLab

PYTHON = "/usr/bin/python3"
PORT = 7070

ECHO_SERVER = """
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(16)
def serve(c):
    while True:
        d = c.recv(4096)
        if not d:
            return
        c.sendall(d)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

ECHO_CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
c.sendall(b"ping"); print(c.recv(16).decode())
"""


@pytest.fixture
def lab():
    with NetnsLab() as lab:
        procs = []
        lab.procs = procs
        try:
            yield lab
        finally:
            for p in procs:
                p.kill()
                p.wait()


def start_echo(lab, node):
    p = lab.popen(node, [PYTHON, "-c", ECHO_SERVER, node.ip, str(PORT)])
    lab.procs.append(p)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection((node.ip, PORT), timeout=1).close()
            return p
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"echo server in {node.name} did not listen")


def client_in(lab, node, target, timeout):
    """Runs one echo round trip from inside `node`; the reply, or None."""
    r = subprocess.run(lab.command(node, [PYTHON, "-c", ECHO_CLIENT, target.ip, str(PORT), str(timeout)]),
                       capture_output=True, text=True, timeout=timeout + 30)
    return r.stdout.strip() if r.returncode == 0 else None


def test_a_cut_holds_an_open_connection_and_a_heal_lets_it_go_on(lab):
    a = lab.node("a")
    start_echo(lab, a)
    c = socket.create_connection((a.ip, PORT), timeout=5)
    c.sendall(b"before")
    assert c.recv(16) == b"before"
    lab.cut(lab.host, a)
    c.sendall(b"during")
    c.settimeout(2)
    with pytest.raises(socket.timeout):
        c.recv(16)
    lab.heal(lab.host, a)
    c.settimeout(60)  # the next TCP retransmission, generous for a busy machine
    assert c.recv(16) == b"during"
    c.close()


def test_a_cut_between_two_nodes_leaves_every_other_link_alone(lab):
    a, b = lab.node("a"), lab.node("b")
    start_echo(lab, a)
    assert client_in(lab, b, a, 10) == "ping"
    lab.cut(a, b)
    try:
        assert client_in(lab, b, a, 3) is None, "b reached a through the cut"
        # The host still reaches a, and b the host's side of the bridge.
        c = socket.create_connection((a.ip, PORT), timeout=5)
        c.sendall(b"host")
        assert c.recv(16) == b"host"
        c.close()
    finally:
        lab.heal(a, b)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if client_in(lab, b, a, 5) == "ping":
            return
    pytest.fail("b did not reach a again after the heal")
