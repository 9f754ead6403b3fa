"""Starts and stops a real `sluice serve` for integration tests.

Each broker gets a free loopback port and a temporary data directory, and is
stopped by its process id. Nothing here talks to any address but 127.0.0.1.
"""

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SLUICE_BIN = os.environ.get("SLUICE_BIN", str(REPO / "build" / "bin" / "sluice"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """One broker process. `settings` are extra --KEY VALUE pairs."""

    def __init__(self, data_dir=None, port=None, settings=None):
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="sluice-it-")
            data_dir = self._tmp.name
        self.data_dir = str(data_dir)
        self.port = port or free_port()
        # Each broker gets its own metrics port, so brokers of tests running
        # side by side never compete for the default one.
        self.metrics_port = free_port()
        self.settings = dict(settings or {})
        self.proc = None
        self.log_path = os.path.join(self.data_dir, "..", f"sluice-{self.port}.log")
        self.log_path = os.path.join(tempfile.gettempdir(), f"sluice-it-{os.getpid()}-{self.port}.log")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def args(self):
        a = [SLUICE_BIN, "serve", "--listeners", self.bootstrap, "--log.dirs", self.data_dir,
             "--sluice.metrics.listener", f"127.0.0.1:{self.metrics_port}"]
        for k, v in self.settings.items():
            a += [f"--{k}", str(v)]
        return a

    def start(self, timeout=30.0):
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args(), stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sluice exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sluice did not listen on {self.bootstrap} in {timeout}s:\n{self.log_text()}")

    def metrics(self) -> dict:
        """Scrapes /metrics; returns {'name{labels}': value}."""
        import urllib.request
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def log_text(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-20000:]
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=30.0) -> int:
        """Sends `sig` to the broker's pid and waits; returns the exit status."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                raise RuntimeError(f"sluice did not stop on {sig} within {timeout}s")
        rc = self.proc.returncode
        self.proc = None
        self._log.close()
        return rc

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self):
        self.stop()
        return self.start()

    def rss_bytes(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def close(self):
        try:
            self.stop()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None
            if os.path.exists(self.log_path):
                os.unlink(self.log_path)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
