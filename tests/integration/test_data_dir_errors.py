"""A data directory the broker cannot use (issue 16, item 11).

`sluice serve` on a read-only, unusable or busy data directory exits
non-zero with one plain line that says what failed and the OS error; only a
directory locked by a running broker is reported as "in use by another
sluice process". Tests run as root, where a read-only directory is still
writable, so they use a read-only bind mount (skipped where mounting is not
allowed) and paths that fail for everyone.
"""

import os
import subprocess
import tempfile

import pytest

from sluice_harness import SLUICE_BIN, free_port


def serve(data_dir, timeout=30):
    """Runs `sluice serve` expecting it to refuse to start; returns (rc, stderr)."""
    args = [SLUICE_BIN, "serve", "--listeners", f"127.0.0.1:{free_port()}", "--log.dirs", str(data_dir),
            "--sluice.metrics.listener", ""]
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stderr


@pytest.fixture
def read_only_dir():
    """A data directory a broker has used, then bind-mounted read-only."""
    with tempfile.TemporaryDirectory(prefix="sluice-it-ro-") as tmp:
        src = os.path.join(tmp, "src")
        mnt = os.path.join(tmp, "mnt")
        os.makedirs(src)
        os.makedirs(mnt)
        with open(os.path.join(src, ".lock"), "w") as f:
            f.write("1\n")
        r = subprocess.run(["mount", "--bind", "-o", "ro", src, mnt], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot bind-mount read-only here: {r.stderr.strip()}")
        try:
            yield mnt
        finally:
            subprocess.run(["umount", mnt], check=True)


def test_read_only_data_dir_names_the_os_error(read_only_dir):
    rc, err = serve(read_only_dir)
    assert rc != 0
    assert "in use" not in err, err
    assert "Read-only file system" in err, err
    assert err.startswith("sluice serve: cannot start: "), err
    assert len(err.strip().splitlines()) == 1, err


def test_file_in_place_of_data_dir(tmp_path):
    f = tmp_path / "data"
    f.write_text("not a directory")
    rc, err = serve(f)
    assert rc != 0
    assert "in use" not in err, err
    assert "exists and is not a directory" in err, err
    rc, err = serve(f / "below")
    assert rc != 0
    assert "in use" not in err and "Not a directory" in err, err


def test_busy_data_dir_names_the_other_broker(broker):
    rc, err = serve(broker.data_dir)
    assert rc != 0
    assert f"in use by another sluice process (pid {broker.proc.pid})" in err, err
