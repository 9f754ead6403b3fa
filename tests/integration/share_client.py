"""Runs `share_consumer` (tests/integration/share_consumer.cc, a KIP-932 share
consumer on librdkafka 2.15.1) as a subprocess for the share-group tests.

The program prints one JSON object per line (its header comment is the
contract); a thread here reads them as they come. Lines are sorted by kind:
records ({"topic", "partition", "offset", "delivery_count", "key", "value"}),
errors ({"error", "code", "name", "source", "fatal", ...}), acknowledgement
commit outcomes ({"commit", "topic", "partition", "code", "name", ...}) and
lifecycle events ({"event": "subscribed" | "closing" | "closed", ...}).
librdkafka's own log (`debug=`) goes to a temporary file, read with
stderr_text().

The process is always reaped: stop() sends SIGTERM (the program then commits
pending acknowledgements and closes the consumer), kill() sends SIGKILL,
close() (or leaving the `with` block) kills what is still running and
removes the log file.
"""

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Set by tests/integration/CMakeLists.txt for the integration tests.
SHARE_CONSUMER_BIN = os.environ.get("SLUICE_SHARE_CONSUMER_BIN",
                                    str(REPO / "build" / "bin" / "share_consumer"))

# Exit statuses of share_consumer.
EXIT_OK, EXIT_FATAL, EXIT_USAGE, EXIT_POISON = 0, 1, 2, 3


class ShareConsumer:
    """One share_consumer process. Keyword arguments map to its options:
    max_records, idle_exit_ms, ack ("accept" | "release" | "reject"), poison,
    mode ("implicit" | "explicit"), commit ("poll" | "sync" | "async"),
    commit_timeout_ms, poll_ms, process_ms (time spent on each record before it is acknowledged), config
    ({librdkafka property: value}), debug
    (librdkafka debug contexts, e.g. "cgrp,fetch")."""

    def __init__(self, bootstrap, group, topics, *, max_records=None, idle_exit_ms=None, ack=None,
                 poison=None, mode=None, commit=None, commit_timeout_ms=None, poll_ms=None, process_ms=None,
                 config=None, debug=None):
        if isinstance(topics, str):
            topics = [topics]
        args = [SHARE_CONSUMER_BIN, "--bootstrap", bootstrap, "--group", group]
        for t in topics:
            args += ["--topic", t]
        for flag, value in (("--max-records", max_records), ("--idle-exit-ms", idle_exit_ms),
                            ("--ack", ack), ("--poison", poison), ("--mode", mode),
                            ("--commit", commit), ("--commit-timeout-ms", commit_timeout_ms),
                            ("--poll-ms", poll_ms), ("--process-ms", process_ms), ("--debug", debug)):
            if value is not None:
                args += [flag, str(value)]
        for k, v in (config or {}).items():
            args += ["--config", f"{k}={v}"]
        self.args = args
        self.proc = None
        self._lines = []
        self._cond = threading.Condition()
        self._reader = None
        self._stderr = None

    # ------------------------------------------------------------ lifecycle

    def start(self):
        if not os.access(SHARE_CONSUMER_BIN, os.X_OK):
            raise RuntimeError(f"{SHARE_CONSUMER_BIN} is missing: build the share_consumer target")
        self._stderr = tempfile.NamedTemporaryFile(prefix="share-consumer-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self._stderr)
        self._reader = threading.Thread(target=self._read, name="share-consumer-stdout", daemon=True)
        self._reader.start()
        return self

    def _read(self):
        for raw in self.proc.stdout:
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            try:
                obj = json.loads(text)
            except ValueError:
                obj = {"unparsed": text}
            with self._cond:
                self._lines.append(obj)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_exit(self, timeout=30.0):
        """Waits for the process to end by itself; returns its exit status
        once its output has been read to the end."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"share_consumer still running after {timeout}s\n{self.describe()}")
        self._reader.join(timeout=10)
        return rc

    def stop(self, timeout=30.0):
        """SIGTERM, then waits: the program commits pending acknowledgements
        and closes the consumer. Returns the exit status; a process that does
        not end within `timeout` is killed and AssertionError raised."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"share_consumer ignored SIGTERM for {timeout}s\n{self.describe()}")
        self._reader.join(timeout=10)
        return self.proc.returncode

    def kill(self):
        """SIGKILL, as a crash: nothing is acknowledged, the consumer does not
        leave its group. Returns the exit status (-9)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._reader.join(timeout=10)
        return self.proc.returncode

    def close(self):
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.kill()
        finally:
            if self.proc is not None and self.proc.stdout is not None:
                self.proc.stdout.close()
            if self._stderr is not None:
                self._stderr.close()
                try:
                    os.unlink(self._stderr.name)
                except FileNotFoundError:
                    pass
                self._stderr = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # --------------------------------------------------------------- output

    def lines(self):
        with self._cond:
            return list(self._lines)

    def records(self):
        return [o for o in self.lines() if "offset" in o and "error" not in o]

    def errors(self):
        return [o for o in self.lines() if "error" in o]

    def commits(self):
        return [o for o in self.lines() if "commit" in o]

    def events(self, name=None):
        return [o for o in self.lines() if "event" in o and (name is None or o["event"] == name)]

    def stderr_text(self):
        if self._stderr is None:
            return ""
        return Path(self._stderr.name).read_text(errors="replace")

    def describe(self, tail=60):
        """What a failing assertion shows: the status, the JSON lines and the
        end of librdkafka's log."""
        rc = self.proc.poll() if self.proc else None
        log = self.stderr_text().splitlines()[-tail:]
        return (f"share_consumer {' '.join(self.args[1:])} (exit status {rc})\n"
                f"stdout:\n" + "\n".join(json.dumps(o) for o in self.lines()) +
                f"\nstderr (last {tail} lines):\n" + "\n".join(log))

    # -------------------------------------------------------------- waiting

    def wait_until(self, predicate, deadline, what):
        """Waits until predicate(lines) is true, `deadline` seconds from now
        at most; also returns early (failing) when the process has ended and
        its output is fully read. Returns the predicate's value."""
        end = time.monotonic() + deadline
        with self._cond:
            while True:
                value = predicate(list(self._lines))
                if value:
                    return value
                reader_done = self._reader is not None and not self._reader.is_alive()
                left = end - time.monotonic()
                if left <= 0 or reader_done:
                    break
                self._cond.wait(timeout=min(left, 0.2))
        why = "exited" if reader_done else f"did not within {deadline}s"
        raise AssertionError(f"waiting for {what}: share_consumer {why}\n{self.describe()}")

    def wait_for(self, n, deadline=30.0):
        """Waits until at least `n` records have been printed, `deadline`
        seconds from now at most; returns the records."""
        self.wait_until(lambda lines: sum(1 for o in lines if "offset" in o and "error" not in o) >= n,
                        deadline, f"{n} records")
        return self.records()

    def wait_for_stderr(self, needle, deadline=30.0):
        """Waits until librdkafka's log contains `needle` (a str, or a compiled
        regular expression); returns the matching text."""
        end = time.monotonic() + deadline
        while True:
            ended = self.proc is not None and self.proc.poll() is not None
            text = self.stderr_text()  # read after the check: an ended process has written all
            if isinstance(needle, str):
                if needle in text:
                    return needle
            else:
                m = needle.search(text)
                if m:
                    return m.group(0)
            if ended or time.monotonic() >= end:
                raise AssertionError(f"waiting for {needle!r} in the log\n{self.describe()}")
            time.sleep(0.1)
