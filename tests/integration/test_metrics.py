"""The operator's view: /metrics after known traffic, and /health."""

import subprocess
import urllib.request


def test_metrics_after_known_traffic(broker):
    lines = b"".join(b"k%d:v%d\n" % (i, i) for i in range(250))
    subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", "metered", "-K", ":", "-p", "0"],
                   input=lines, check=True, timeout=60, capture_output=True)
    m = broker.metrics()
    assert m['sluice_up'] == 1
    assert m['sluice_log_end_offset{topic="metered",partition="0"}'] == 250
    assert m['sluice_log_start_offset{topic="metered",partition="0"}'] == 0
    assert m['sluice_log_segments{topic="metered",partition="0"}'] == 1
    assert m['sluice_log_size_bytes{topic="metered",partition="0"}'] > 250 * 6
    assert m['sluice_requests_total{api="produce"}'] >= 1
    assert m['sluice_request_latency_seconds_count{api="produce"}'] == m['sluice_requests_total{api="produce"}']
    assert m['sluice_request_latency_seconds_bucket{api="produce",le="+Inf"}'] == \
        m['sluice_request_latency_seconds_count{api="produce"}']
    assert m["sluice_connections_accepted_total"] >= 1
    assert m["sluice_network_bytes_in_total"] > 250 * 6

    # Reading it all moves the fetch counters and bytes out.
    out = subprocess.run(["kcat", "-C", "-b", broker.bootstrap, "-t", "metered", "-o", "beginning", "-e"],
                         check=True, timeout=60, capture_output=True)
    assert len(out.stdout.splitlines()) == 250
    m2 = broker.metrics()
    assert m2['sluice_requests_total{api="fetch"}'] >= 1
    assert m2['sluice_response_bytes_total{api="fetch"}'] > 250 * 6


def test_health(broker):
    body = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/health", timeout=10).read()
    assert body == b"ok\n"
