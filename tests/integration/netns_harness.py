"""Network namespaces for fault tests: every node (a broker, an etcd member)
in a namespace of its own, on a bridge the lab creates, and links between
two nodes cut and healed one at a time, sockets kept.

    with NetnsLab() as lab:             # pytest.skip unless root with `ip netns`
        b1 = lab.node("b1")             # its own namespace and address on the bridge
        e1 = lab.node("e1")
        p = lab.popen(e1, ["etcd", ...])  # a process inside e1's namespace
        lab.host                        # the test process itself (root namespace),
        lab.host.ip                     # its address on the bridge
        lab.cut(b1, e1)                 # every packet between the two is dropped
        lab.heal(b1, e1)
        lab.cut(b1, lab.host)           # the test's own clients lose b1 too
        nodes = lab.place_cluster(c)    # a cluster_harness.Cluster, not started:
                                        # each member and broker in its own namespace
        faults = Faults(c, lab, nodes)  # the fault tests' cuts, each returning its heal
        heal = faults.split(1, faults.members[0])

How a cut is made. The development machine has neither iptables nor tc
qdiscs, so a cut is a permanent neighbour (ARP) entry in each of the two
namespaces that maps the other's address to a MAC address no interface has:
the frames go out on the bridge and nobody takes them, exactly as a network
that drops packets (an iptables DROP on both sides). Nothing else changes:
each namespace keeps talking to every other address, sockets stay open,
TCP retransmits, and once healed (the entries removed, ARP resolves the real
MAC again) held data flows on. Only traffic between the lab's namespaces and
the root namespace's address on the lab's bridge is involved; the bridge is
connected to no physical interface.

Also here, for the fault tests (test_netns_faults.py, test_txn_faults.py):
Faults (the kinds of cut they make), watch_hold, and the cluster views they
wait on (agreed_leaders, full_isr).

Every name the lab makes (namespaces, bridge, veth pairs) starts with a
prefix of this process's pid, and close() removes them all; the caller stops
the processes it started first (a namespace whose process still runs goes
only when that process ends). Not thread-safe: one test thread drives it.
"""

import contextlib
import ipaddress
import os
import shutil
import subprocess
import time
from dataclasses import dataclass

# A locally administered unicast MAC that no interface of the lab has.
_NOWHERE_MAC = "02:00:5e:10:de:ad"
_labs_made = 0  # labs this process made: each lab's names are its own


def _ip(*args, check=True, ns=None):
    cmd = ["ip"] + (["-n", ns] if ns else []) + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip() or r.returncode}")
    return r


def unavailable_reason():
    """None when namespaces, veth pairs and bridges can be made here, else
    why not (for pytest.skip)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2)"
    probe = f"slprobe{os.getpid() % 100000}"
    try:
        if _ip("netns", "add", probe, check=False).returncode != 0:
            return "`ip netns add` fails here"
        _ip("netns", "del", probe, check=False)
        r = _ip("link", "add", probe, "type", "veth", "peer", "name", probe + "p", check=False)
        if r.returncode != 0:
            return f"no veth pairs here: {r.stderr.strip()}"
        _ip("link", "del", probe, check=False)
        r = _ip("link", "add", probe, "type", "bridge", check=False)
        if r.returncode != 0:
            return f"no bridges here: {r.stderr.strip()}"
        _ip("link", "del", probe, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return f"ip failed: {e!r}"
    return None


@dataclass(frozen=True)
class Node:
    name: str
    ns: str    # the namespace's name; "" for the host (the root namespace)
    ip: str    # its address on the lab's bridge
    dev: str   # its interface on the bridge, inside its namespace


class NetnsLab:
    """A bridge in the root namespace and the nodes made by node()."""

    def __init__(self):
        reason = unavailable_reason()
        if reason is not None:
            import pytest
            pytest.skip(reason)
        global _labs_made
        _labs_made += 1
        # Interface names have at most 15 bytes: "sl" + pid + lab + "v" + node.
        self._prefix = f"sl{os.getpid() % 100000}{_labs_made % 100}"
        self._bridge = self._prefix + "br"
        self._net = self._free_subnet()
        self._nodes = []
        self._cuts = set()
        hosts = self._net.hosts()
        self._addresses = iter(hosts)
        host_ip = str(next(self._addresses))
        try:
            _ip("link", "add", self._bridge, "type", "bridge")
            _ip("addr", "add", f"{host_ip}/{self._net.prefixlen}", "dev", self._bridge)
            _ip("link", "set", self._bridge, "up")
        except BaseException:
            self.close()
            raise
        self.host = Node("host", "", host_ip, self._bridge)

    @staticmethod
    def _free_subnet():
        """A /24 in 10.213.0.0/16 that no route of the root namespace touches."""
        used = _ip("-4", "route", "show").stdout
        taken = []
        for line in used.splitlines():
            first = line.split()[0] if line.split() else ""
            try:
                taken.append(ipaddress.ip_network(first, strict=False))
            except ValueError:
                pass
        start = os.getpid() % 200
        for k in range(256):
            net = ipaddress.ip_network(f"10.213.{(start + k) % 256}.0/24")
            if not any(net.overlaps(t) for t in taken):
                return net
        raise RuntimeError("no free 10.213.x.0/24 for the lab's bridge")

    # ------------------------------------------------------------ nodes

    def node(self, name):
        """A new namespace with loopback up and one interface on the bridge."""
        i = len(self._nodes)
        ns = f"{self._prefix}-{name}"
        outer, inner = f"{self._prefix}v{i}", f"{self._prefix}i{i}"
        ip = str(next(self._addresses))
        _ip("netns", "add", ns)
        node = Node(name, ns, ip, "eth0")
        self._nodes.append(node)
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", ns)
        _ip("link", "set", inner, "name", "eth0", ns=ns)
        _ip("addr", "add", f"{ip}/{self._net.prefixlen}", "dev", "eth0", ns=ns)
        _ip("link", "set", "eth0", "up", ns=ns)
        _ip("link", "set", "lo", "up", ns=ns)
        _ip("link", "set", outer, "master", self._bridge)
        _ip("link", "set", outer, "up")
        return node

    def command(self, node, args):
        """`args` run inside `node`'s namespace (unchanged for the host)."""
        return list(args) if not node.ns else ["ip", "netns", "exec", node.ns] + list(args)

    def popen(self, node, args, **kwargs):
        """subprocess.Popen of `args` inside `node`'s namespace."""
        return subprocess.Popen(self.command(node, args), **kwargs)

    # ------------------------------------------------------------ cuts

    def _blackhole(self, here, there):
        _ip("neigh", "replace", there.ip, "lladdr", _NOWHERE_MAC, "dev", here.dev, "nud", "permanent",
            ns=here.ns or None)

    def _restore(self, here, there):
        _ip("neigh", "del", there.ip, "dev", here.dev, ns=here.ns or None, check=False)

    def cut(self, a, b):
        """Drops every packet between a and b, both ways, from now on."""
        self._blackhole(a, b)
        self._blackhole(b, a)
        self._cuts.add((a, b))

    def heal(self, a, b):
        """Undoes cut(a, b) (either order)."""
        self._restore(a, b)
        self._restore(b, a)
        self._cuts.discard((a, b))
        self._cuts.discard((b, a))

    def heal_all(self):
        for a, b in list(self._cuts):
            self.heal(a, b)

    # ------------------------------------------------------------ clusters

    def place_cluster(self, c):
        """Puts every etcd member and broker of cluster_harness.Cluster `c`
        (not started yet) in a namespace of its own; returns {etcd member
        name ("m0", ...) or broker node id: Node}. Clients of the test reach
        them on their addresses (Cluster.bootstrap, metadata_from and the
        raw requests given `host`)."""
        nodes = {}
        for i, m in enumerate(c.etcd.members):
            n = self.node(m.name)
            c.etcd.place(i, n.ip, lambda args, n=n: self.command(n, args))
            nodes[m.name] = n
        for node_id in c.node_ids:
            b = c.broker(node_id)
            n = self.node(f"b{node_id}")
            b.host = n.ip
            b.wrap = lambda args, n=n: self.command(n, args)
            b.etcd_endpoints = c.etcd.endpoints
            nodes[node_id] = n
        return nodes

    # ------------------------------------------------------------ teardown

    def close(self):
        """Removes every namespace, veth pair and the bridge the lab made."""
        for i, n in enumerate(self._nodes):
            # The pair at once (a namespace's own removal is finished by the
            # kernel later), then the namespace.
            _ip("link", "del", f"{self._prefix}v{i}", check=False)
            _ip("netns", "del", n.ns, check=False)
        self._nodes = []
        _ip("link", "del", self._bridge, check=False)
        self._cuts = set()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------------------ fault tests

@contextlib.contextmanager
def placed_cluster(c, keep_logs=None):
    """A lab holding cluster_harness.Cluster `c` (not started), every member
    and broker in its own namespace; starts it and yields (c, lab, nodes).
    On the way out: every cut healed, paused brokers resumed, the brokers'
    logs copied into directory `keep_logs` if given, and the cluster closed
    before the lab (a namespace goes with its last process)."""
    try:
        lab = NetnsLab()  # skips the test where namespaces cannot be made
    except BaseException:
        c.close()
        raise
    with lab:
        try:
            nodes = lab.place_cluster(c)
            c.start()
            yield c, lab, nodes
        finally:
            try:
                lab.heal_all()
                for n in c.node_ids:
                    if c.broker(n).paused:
                        c.resume(n)
                if keep_logs:
                    os.makedirs(keep_logs, exist_ok=True)
                    for n in c.node_ids:
                        shutil.copy(c.broker(n).log_path, os.path.join(keep_logs, f"broker-{n}.log"))
            finally:
                c.close()


class Faults:
    """The cuts the fault tests make over a lab holding cluster `c`
    (place_cluster's `nodes`); each returns a function that heals it."""

    def __init__(self, c, lab, nodes):
        self.c, self.lab, self.nodes = c, lab, nodes
        self.brokers = {n: nodes[n] for n in c.node_ids}
        self.members = [nodes[m.name] for m in c.etcd.members]

    def _cut_all(self, pairs):
        for a, b in pairs:
            self.lab.cut(a, b)

        def heal():
            for a, b in pairs:
                self.lab.heal(a, b)
        return heal

    def etcd_only(self, victim):
        """Broker `victim` cut off from every etcd member and nothing else."""
        return self._cut_all([(self.brokers[victim], m) for m in self.members])

    def from_followers(self, victim):
        """Broker `victim` cut off from the other brokers only."""
        return self._cut_all([(self.brokers[victim], self.brokers[n]) for n in self.c.node_ids if n != victim])

    def isolate(self, victim):
        """Broker `victim` cut off from everybody: brokers, etcd members and
        the test's own clients."""
        pairs = [(self.brokers[victim], m) for m in self.members]
        pairs += [(self.brokers[victim], self.brokers[n]) for n in self.c.node_ids if n != victim]
        pairs.append((self.brokers[victim], self.lab.host))
        return self._cut_all(pairs)

    def split(self, alone, member):
        """Broker `alone` and etcd member `member` on one side, the rest on
        the other; the test's clients reach both sides."""
        side_a = [self.brokers[alone], member]
        side_b = [self.brokers[n] for n in self.c.node_ids if n != alone] + \
                 [m for m in self.members if m is not member]
        return self._cut_all([(a, b) for a in side_a for b in side_b])


def watch_hold(c, victim, hold):
    """Holds a fault for `hold` seconds; returns when the other brokers first
    all listed `victim` no more (its session lost: the fault reached the
    control plane), or None."""
    t0 = time.monotonic()
    others = [n for n in c.node_ids if n != victim]
    dropped = None
    while time.monotonic() - t0 < hold:
        if dropped is None:
            views = c.metadata_all(others, timeout=1.0)
            if len(views) == len(others) and all(victim not in v.brokers for v in views.values()):
                dropped = time.monotonic() - t0
        time.sleep(0.3)
    return dropped


def agreed_leaders(c, topic, partitions, exclude=()):
    """{partition: leader} of `topic` (`partitions` of them) when every live
    broker not in `exclude` names the same live leader (not in exclude) for
    every partition; else None."""
    nodes = [n for n in c.live_ids() if n not in exclude]
    views = c.metadata_all(nodes, timeout=2.0)
    if not nodes or len(views) != len(nodes):
        return None
    seen = set()
    for v in views.values():
        t = v.topics.get(topic)
        if t is None or sorted(t.partitions) != list(range(partitions)):
            return None
        leaders = tuple((i, p.leader) for i, p in sorted(t.partitions.items()))
        if any(l not in nodes for _, l in leaders):
            return None
        seen.add(leaders)
    if len(seen) != 1:
        return None
    return dict(seen.pop())


def full_isr(c, topics):
    """Every broker runs, lists all brokers and the same controller, and
    names a leader and a full ISR for every partition of `topics`
    ({name: partition count})."""
    if len(c.live_ids()) != len(c.node_ids) or c.agreed_view() is None:
        return False
    views = c.metadata_all(timeout=2.0)
    if len(views) != len(c.node_ids):
        return False
    for v in views.values():
        for topic, partitions in topics.items():
            t = v.topics.get(topic)
            if t is None or len(t.partitions) != partitions:
                return False
            if any(p.leader < 0 or sorted(p.isr) != c.node_ids for p in t.partitions.values()):
                return False
    return True
