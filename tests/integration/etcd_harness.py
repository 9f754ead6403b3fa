"""Starts and stops a real etcd cluster (Debian's etcd-server) for tests.

`EtcdCluster(n=3)` runs n members on free 127.0.0.1 client and peer ports,
each with a data directory inside one fresh temporary directory. Members are
started, stopped, killed and restarted by process id, never by name, and
close() stops every member it started and removes the temporary directory.
The C++ twin is src/etcd/testing/etcd_cluster.h; both use the same short raft
timings so failover in tests takes about a second.
"""

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

ETCD_BIN = os.environ.get("ETCD_BIN", "/usr/bin/etcd")
ETCDCTL_BIN = os.environ.get("ETCDCTL_BIN", "/usr/bin/etcdctl")


_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    """preexec_fn: the child gets SIGKILL when the test process dies, so a
    test that crashes or is killed leaves no member running (the C++ twin
    does the same)."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


_handed_out = set()  # every port free_port() returned in this process


def free_port() -> int:
    """A loopback port nothing listens on right now (bind port 0), and not
    one this process was given before: the kernel may hand a just-closed
    port out again at once, and two servers of one test then collide (seen:
    two etcd members on one port)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


class EtcdMember:
    def __init__(self, root, index):
        self.name = f"m{index}"
        self.client_port = free_port()
        self.peer_port = free_port()
        self.data_dir = os.path.join(root, f"{self.name}.etcd")
        self.log_path = os.path.join(root, f"{self.name}.log")
        self.proc = None
        self._log = None
        # Where it listens, and how its command line is run (a network
        # namespace's `ip netns exec`): EtcdCluster.place.
        self.host = "127.0.0.1"
        self.wrap = None

    @property
    def client_url(self):
        return f"http://{self.host}:{self.client_port}"

    @property
    def peer_url(self):
        return f"http://{self.host}:{self.peer_port}"

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log_text(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-8000:]
        except OSError:
            return ""


class EtcdCluster:
    """n etcd members on loopback. Use as a context manager, or call
    start() and close()."""

    def __init__(self, n=3):
        if not 1 <= n <= 7:
            raise ValueError("1 to 7 members")
        self._root = tempfile.mkdtemp(prefix="sluice-etcd-it-")
        self.members = [EtcdMember(self._root, i) for i in range(n)]
        self._initial_cluster = ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    # ------------------------------------------------------------ addresses

    @property
    def endpoints(self):
        """"http://127.0.0.1:p0,http://127.0.0.1:p1,..." in member order."""
        return ",".join(m.client_url for m in self.members)

    def endpoint(self, i):
        return self.members[i].client_url

    def pid(self, i):
        return self.members[i].pid

    def place(self, i, host, wrap):
        """Before start(): member i listens on `host` and its command line
        is passed through `wrap` (netns_harness.place_cluster)."""
        self.members[i].host = host
        self.members[i].wrap = wrap
        self._initial_cluster = ",".join(f"{m.name}={m.peer_url}" for m in self.members)

    # ------------------------------------------------------------ lifecycle

    def _spawn(self, i):
        m = self.members[i]
        if m.running():
            raise RuntimeError(f"{m.name} is already running")
        args = [
            ETCD_BIN,
            "--name", m.name,
            "--data-dir", m.data_dir,
            "--listen-client-urls", m.client_url,
            "--advertise-client-urls", m.client_url,
            "--listen-peer-urls", m.peer_url,
            "--initial-advertise-peer-urls", m.peer_url,
            "--initial-cluster", self._initial_cluster,
            "--initial-cluster-state", "new",
            "--initial-cluster-token", f"sluice-it-{os.getpid()}",
            "--heartbeat-interval", "50",
            "--election-timeout", "500",
            "--log-level", "warn",
        ]
        if m.wrap:
            args = m.wrap(args)
        m._log = open(m.log_path, "ab")
        m.proc = subprocess.Popen(args, stdout=m._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  preexec_fn=die_with_parent)

    def start(self, timeout=30.0):
        for i in range(len(self.members)):
            self._spawn(i)
        self.wait_healthy(timeout=timeout)
        return self

    def healthy(self, i):
        """True if member i answers /health with "true" (it has a leader)."""
        try:
            with urllib.request.urlopen(self.endpoint(i) + "/health", timeout=1) as r:
                return b'"health":"true"' in r.read()
        except OSError:
            return False

    def wait_healthy(self, members=None, timeout=30.0):
        """Waits until every running member (or those listed) is healthy."""
        members = [i for i in range(len(self.members)) if self.members[i].running()] if members is None else members
        deadline = time.monotonic() + timeout
        for i in members:
            while not self.healthy(i):
                m = self.members[i]
                if not m.running():
                    raise RuntimeError(f"{m.name} exited:\n{m.log_text()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{m.name} not healthy within {timeout}s:\n{m.log_text()}")
                time.sleep(0.05)

    def _signal(self, i, sig, timeout):
        m = self.members[i]
        if m.proc is None:
            return None
        if m.proc.poll() is None:
            os.kill(m.proc.pid, sig)
            try:
                m.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(m.proc.pid, signal.SIGKILL)
                m.proc.wait()
        rc = m.proc.returncode
        m.proc = None
        m._log.close()
        return rc

    def kill(self, i):
        """SIGKILL member i by pid and reap it."""
        return self._signal(i, signal.SIGKILL, 30.0)

    def stop(self, i, timeout=10.0):
        """SIGTERM member i by pid; SIGKILL if it has not exited after `timeout`."""
        return self._signal(i, signal.SIGTERM, timeout)

    def restart(self, i, timeout=30.0):
        """Starts member i again on its ports and data directory."""
        self.stop(i)
        self._spawn(i)
        self.wait_healthy([i], timeout=timeout)

    def etcdctl(self, *args, endpoints=None, timeout=30):
        env = dict(os.environ, ETCDCTL_API="3")
        return subprocess.run([ETCDCTL_BIN, f"--endpoints={endpoints or self.endpoints}", *args],
                              capture_output=True, text=True, timeout=timeout, env=env)

    def close(self):
        try:
            for i in range(len(self.members)):
                self.kill(i)
        finally:
            shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
