"""KafkaJS 2.2.4 (Node.js) against sluice: admin, idempotent gzip produce,
ListOffsets, and a consumer group reading every message in per-key order."""

import subprocess
from pathlib import Path

HERE = Path(__file__).parent / "kafkajs"


def test_kafkajs_roundtrip(broker):
    r = subprocess.run(["node", str(HERE / "roundtrip.js"), broker.bootstrap, "kafkajs-rt", "2000"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}\nbroker log:\n{broker.log_text()}"
    assert r.stdout.strip() == "ok 2000"
