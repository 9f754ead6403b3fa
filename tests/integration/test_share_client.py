"""PLACEHOLDER, to be replaced by the share-group tests (KIP-932) once the
broker serves ShareGroupHeartbeat, ShareFetch and ShareAcknowledge.

Until then it checks the test-side plumbing against today's broker: the
share_consumer program (librdkafka 2.15.1) starts, subscribes, finds the group
coordinator, and is told by ApiVersions that ShareGroupHeartbeat (key 76) is
not served; then it stops cleanly on SIGTERM.

What librdkafka 2.15.1 does then, as observed: it sends ApiVersions v3,
Metadata v12 and FindCoordinator v2 (key type 0, the group id), connects to
the coordinator, finds no ShareGroupHeartbeat v1 in its ApiVersions and logs
(debug "cgrp") "marking the coordinator (N) dead: Local: Required feature not
supported by broker: ShareGroupHeartbeatRequest not supported by broker";
after that it finds the coordinator again and goes quiet. It raises nothing
to the application: no error callback, no error from rd_kafka_share_poll(),
no record, so the only trace is that log line.
"""

import re
import time

from confluent_kafka import Producer

UNSUPPORTED = re.compile(
    r"marking the coordinator \(\d+\) dead: Local: Required feature not supported by broker: "
    r"ShareGroupHeartbeatRequest not supported by broker")


def test_placeholder_share_consumer_meets_a_broker_without_share_groups(broker, share_consumer_factory):
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        p.produce("share-placeholder", value=f"v{i}".encode())
    assert p.flush(30) == 0

    c = share_consumer_factory(broker.bootstrap, "share-placeholder-group", "share-placeholder",
                               mode="explicit", commit="sync", debug="cgrp")
    c.wait_until(lambda lines: any(o.get("event") == "subscribed" for o in lines), 15, "subscribed")
    c.wait_for_stderr(UNSUPPORTED, deadline=30)

    # Nothing reaches the application, for a while after the refusal either.
    time.sleep(3)
    assert c.running(), c.describe()
    assert c.lines() == [{"event": "subscribed", "group": "share-placeholder-group",
                          "topics": ["share-placeholder"]}], c.describe()

    assert c.stop(timeout=30) == 0, c.describe()
    assert [o["event"] for o in c.events()] == ["subscribed", "closing", "closed"], c.describe()
    assert c.events("closing")[0] == {"event": "closing", "reason": "signal", "records": 0}
    assert c.records() == [] and c.errors() == [] and c.commits() == [], c.describe()
