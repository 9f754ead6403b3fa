"""Group configs: Kafka's GROUP config resources (ConfigResource type 32),
through `sluice config --group` and raw DescribeConfigs (v0 to v4),
IncrementalAlterConfigs, AlterConfigs and DeleteGroups requests (Debian's
confluent-kafka 1.7 and kafka-python know no GROUP resource).

One broker: set, read and delete; every DescribeConfigs version; bad keys
and values refused with INVALID_CONFIG naming the key and nothing changed;
APPEND/SUBTRACT and an empty group refused; validate_only; the legacy
AlterConfigs replacing the whole set; the values surviving a restart; and
DeleteGroups taking a deleted group's configs with it.

A cluster (three brokers, etcd): set through one broker, read on every
broker, deleted through another; DeleteGroups on the group's coordinator
taking the configs away on every broker.
"""

import os
import subprocess
import uuid

import pytest

import config_wire as cw
import group_wire
from cluster_harness import Cluster, create_topics_request
from sluice_harness import SLUICE_BIN, wait_until

TIMEOUT = 30
LOCK = "share.record.lock.duration.ms"
RESET = "share.auto.offset.reset"
KEYS = {
    "share.auto.offset.reset": "latest",
    "share.record.lock.duration.ms": "30000",
    "share.delivery.count.limit": "5",
    "share.isolation.level": "read_uncommitted",
    "share.session.timeout.ms": "45000",
    "share.heartbeat.interval.ms": "5000",
    "errors.deadletterqueue.topic.name": "",
    "errors.deadletterqueue.copy.record.enable": "false",
    "consumer.session.timeout.ms": "45000",
    "consumer.heartbeat.interval.ms": "5000",
}


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def cli(*args, check=True):
    p = subprocess.run([SLUICE_BIN, *args], capture_output=True, text=True, timeout=TIMEOUT + 30)
    if check:
        assert p.returncode == 0, f"sluice {' '.join(args)}: rc {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def defaults_except(**changed):
    want = {k: (v, cw.DEFAULT_CONFIG) for k, v in KEYS.items()}
    for k, v in changed.items():
        want[k.replace("_", ".")] = (v, cw.DYNAMIC_GROUP_CONFIG)
    return want


# ---------------------------------------------------------------- one broker

def test_set_read_and_delete_through_the_cli_and_the_wire(broker):
    g = unique("share")
    assert cw.group_values(broker.port, g) == defaults_except(), "a group nobody configured"

    out = cli("config", "alter", "--bootstrap", broker.bootstrap, "--group", g,
              "-c", f"{LOCK}=20000", "-c", f"{RESET}=by_duration:PT1H").stdout
    assert f"altered group {g}" in out
    want = defaults_except()
    want[LOCK] = ("20000", cw.DYNAMIC_GROUP_CONFIG)
    want[RESET] = ("by_duration:PT1H", cw.DYNAMIC_GROUP_CONFIG)
    assert cw.group_values(broker.port, g) == want

    described = cli("config", "describe", "--bootstrap", broker.bootstrap, "--group", g, "--synonyms").stdout
    assert f"configs of group {g}:" in described
    assert f"  {LOCK}=20000\t(DYNAMIC_GROUP_CONFIG)" in described
    # The inherited value's synonym is the broker setting it comes from, as
    # Kafka names it.
    assert f"      group.{LOCK}=30000\t(DEFAULT_CONFIG)" in described
    assert "  share.isolation.level=read_uncommitted\t(DEFAULT_CONFIG)" in described

    # Raw IncrementalAlterConfigs: SET another, DELETE one set and one never set.
    err, msg = cw.alter_group(broker.port, g, [("share.isolation.level", cw.SET, "read_committed"),
                                               (RESET, cw.DELETE, None),
                                               ("share.session.timeout.ms", cw.DELETE, None)])
    assert err == cw.NONE, msg
    want[RESET] = ("latest", cw.DEFAULT_CONFIG)
    want["share.isolation.level"] = ("read_committed", cw.DYNAMIC_GROUP_CONFIG)
    assert cw.group_values(broker.port, g) == want

    cli("config", "alter", "--bootstrap", broker.bootstrap, "--group", g,
        "-d", LOCK, "-d", "share.isolation.level")
    assert cw.group_values(broker.port, g) == defaults_except()
    # Nothing left of the group in the file.
    with open(os.path.join(broker.data_dir, "meta", "group_configs")) as f:
        assert g not in f.read()


def test_every_describe_configs_version(broker):
    g = unique("versions")
    assert cw.alter_group(broker.port, g, [(LOCK, cw.SET, "25000")])[0] == cw.NONE
    for version in range(0, 5):
        res = cw.describe_group(broker.port, g, version=version, synonyms=True, documentation=True)
        assert res["error"] == cw.NONE and res["type"] == cw.RESOURCE_GROUP and res["name"] == g, (version, res)
        assert sorted(res["configs"]) == sorted(KEYS), version
        lock = res["configs"][LOCK]
        assert lock["value"] == "25000" and not lock["read_only"] and not lock["sensitive"], (version, lock)
        iso = res["configs"]["share.isolation.level"]
        if version == 0:
            assert lock["source"] is None and iso["source"] == cw.DEFAULT_CONFIG  # is_default
        else:
            assert lock["source"] == cw.DYNAMIC_GROUP_CONFIG and iso["source"] == cw.DEFAULT_CONFIG
            assert lock["synonyms"] == [(LOCK, "25000", cw.DYNAMIC_GROUP_CONFIG),
                                        (f"group.{LOCK}", "30000", cw.DEFAULT_CONFIG)]
        if version >= 3:
            assert lock["type"] == 3 and res["configs"]["errors.deadletterqueue.copy.record.enable"]["type"] == 1
            assert lock["doc"]
    # configuration_keys filters; a name no group has is left out.
    (res,) = cw.describe_configs(broker.port, [(cw.RESOURCE_GROUP, g, [LOCK, "no.such.key"])])
    assert list(res["configs"]) == [LOCK]
    # Groups beside topics in one request.
    res = cw.describe_configs(broker.port, [(cw.RESOURCE_GROUP, g, None), (cw.RESOURCE_GROUP, "", None)])
    assert res[0]["error"] == cw.NONE
    assert res[1]["error"] == cw.INVALID_REQUEST


def test_bad_keys_and_values_are_refused_and_change_nothing(broker):
    g = unique("bad")
    assert cw.alter_group(broker.port, g, [(LOCK, cw.SET, "20000")])[0] == cw.NONE
    before = cw.group_values(broker.port, g)
    refused = [
        ([(LOCK, cw.SET, "2000")], "group.share.min.record.lock.duration.ms"),
        ([(LOCK, cw.SET, "60001")], "group.share.max.record.lock.duration.ms"),
        ([(LOCK, cw.SET, "soon")], LOCK),
        ([("share.delivery.count.limit", cw.SET, "1")], "share.delivery.count.limit"),
        ([(RESET, cw.SET, "none")], RESET),
        ([(RESET, cw.SET, "by_duration:-PT1H")], RESET),
        ([("share.isolation.level", cw.SET, "serializable")], "share.isolation.level"),
        ([("errors.deadletterqueue.topic.name", cw.SET, "bad name")], "errors.deadletterqueue.topic.name"),
        ([("errors.deadletterqueue.copy.record.enable", cw.SET, "maybe")], "errors.deadletterqueue.copy"),
        ([("retention.ms", cw.SET, "1")], "retention.ms: unknown group config"),
        ([("share.record.lock.duration", cw.SET, "20000")], "did you mean share.record.lock.duration.ms"),
        # A good key beside a bad one: the good one is not applied either.
        ([("share.delivery.count.limit", cw.SET, "3"), (LOCK, cw.SET, "1")], LOCK),
        ([(LOCK, cw.APPEND, "1")], f"Can't APPEND to key {LOCK} because its type is not LIST."),
        ([(LOCK, cw.SUBTRACT, "1")], "Can't SUBTRACT"),
    ]
    for ops, words in refused:
        err, msg = cw.alter_group(broker.port, g, ops)
        assert err == cw.INVALID_CONFIG, (ops, err, msg)
        assert words in (msg or ""), (ops, msg)
    assert cw.group_values(broker.port, g) == before

    err, msg = cw.alter_group(broker.port, "", [(LOCK, cw.SET, "20000")])
    assert err == cw.INVALID_REQUEST and msg == "Default group resources are not allowed.", msg
    err, msg = cw.alter_group(broker.port, g, [(LOCK, 7, "20000")])
    assert err == cw.INVALID_REQUEST, msg

    # validate_only checks and changes nothing.
    assert cw.alter_group(broker.port, g, [(LOCK, cw.SET, "40000")], validate_only=True)[0] == cw.NONE
    assert cw.alter_group(broker.port, g, [(LOCK, cw.SET, "1")], validate_only=True)[0] == cw.INVALID_CONFIG
    assert cw.group_values(broker.port, g) == before

    # The CLI reports the refusal and fails.
    p = cli("config", "alter", "--bootstrap", broker.bootstrap, "--group", g, "-c", f"{LOCK}=1", check=False)
    assert p.returncode != 0 and "INVALID_CONFIG" in p.stderr and LOCK in p.stderr, p.stderr


def test_legacy_alter_configs_replaces_the_whole_set(broker):
    g = unique("legacy")
    assert cw.alter_group(broker.port, g, [(LOCK, cw.SET, "20000"), (RESET, cw.SET, "earliest")])[0] == cw.NONE
    (r,) = cw.alter_configs(broker.port, [(cw.RESOURCE_GROUP, g, [("share.delivery.count.limit", "3")])])
    assert r["error"] == cw.NONE, r
    assert cw.group_values(broker.port, g) == defaults_except(share_delivery_count_limit="3")
    (r,) = cw.alter_configs(broker.port, [(cw.RESOURCE_GROUP, g, [("share.delivery.count.limit", None)])])
    assert r["error"] == cw.INVALID_CONFIG and "Null value not supported" in r["message"], r
    (r,) = cw.alter_configs(broker.port, [(cw.RESOURCE_GROUP, g, [(LOCK, "5")])])
    assert r["error"] == cw.INVALID_CONFIG, r
    assert cw.group_values(broker.port, g) == defaults_except(share_delivery_count_limit="3")
    (r,) = cw.alter_configs(broker.port, [(cw.RESOURCE_GROUP, g, [])])
    assert r["error"] == cw.NONE, r
    assert cw.group_values(broker.port, g) == defaults_except()


def test_values_survive_a_restart(broker):
    groups = {unique("durable"): "20000", "with spaces/and=odd%bytes": "45000"}
    for g, v in groups.items():
        assert cw.alter_group(broker.port, g, [(LOCK, cw.SET, v),
                                               ("errors.deadletterqueue.topic.name", cw.SET, "dlq.orders")])[0] == 0
    broker.restart()
    for g, v in groups.items():
        assert cw.group_values(broker.port, g) == defaults_except(
            share_record_lock_duration_ms=v, errors_deadletterqueue_topic_name="dlq.orders"), g


def test_delete_groups_takes_the_groups_configs(broker):
    topic, g, kept = unique("t"), unique("deleted"), unique("kept")
    cli("topic", "create", topic, "--bootstrap", broker.bootstrap, "-p", "1")
    for group in (g, kept):
        assert group_wire.offset_commit(broker.port, group, {(topic, 0): 5}) == {(topic, 0): 0}
        assert cw.alter_group(broker.port, group, [(LOCK, cw.SET, "20000")])[0] == cw.NONE
    assert cw.delete_groups(broker.port, [g]) == {g: cw.NONE}
    assert cw.group_values(broker.port, g) == defaults_except()
    assert cw.group_values(broker.port, kept) == defaults_except(share_record_lock_duration_ms="20000")
    # A group that does not exist keeps configs set ahead of it.
    early = unique("early")
    assert cw.alter_group(broker.port, early, [(LOCK, cw.SET, "20000")])[0] == cw.NONE
    assert cw.delete_groups(broker.port, [early]) == {early: cw.GROUP_ID_NOT_FOUND}
    assert cw.group_values(broker.port, early)[LOCK] == ("20000", cw.DYNAMIC_GROUP_CONFIG)
    broker.restart()
    assert cw.group_values(broker.port, g) == defaults_except()
    assert cw.group_values(broker.port, kept)[LOCK] == ("20000", cw.DYNAMIC_GROUP_CONFIG)


# ---------------------------------------------------------------- a cluster

def test_a_cluster_sets_on_one_broker_and_reads_on_every_other():
    with Cluster(brokers=3, etcd=1, session_timeout_ms=4000) as c:
        ids = c.node_ids
        controller = c.controller_id()
        other = next(n for n in ids if n != controller)
        g = unique("clustered")
        ports = {n: c.broker(n).port for n in ids}

        # Set through a broker that is not the controller: forwarded to it.
        err, msg = cw.alter_group(ports[other], g, [(LOCK, cw.SET, "20000"), (RESET, cw.SET, "earliest")])
        assert err == cw.NONE, msg
        want = defaults_except(share_record_lock_duration_ms="20000", share_auto_offset_reset="earliest")
        # The altering broker has it when the alter returns; the others soon.
        assert cw.group_values(ports[other], g) == want
        for n in ids:
            wait_until(lambda: cw.group_values(ports[n], g) == want, TIMEOUT, f"broker {n} to show {g}'s configs")

        # The CLI, against a third broker; refusals as on one broker.
        third = next(n for n in ids if n not in (controller, other))
        cli("config", "alter", "--bootstrap", c.broker(third).address, "--group", g, "-d", RESET)
        assert cw.alter_group(ports[third], g, [(LOCK, cw.SET, "1")])[0] == cw.INVALID_CONFIG
        want[RESET] = ("latest", cw.DEFAULT_CONFIG)
        for n in ids:
            wait_until(lambda: cw.group_values(ports[n], g) == want, TIMEOUT, f"broker {n} to drop {RESET}")

        # A restarted broker reads them back from etcd.
        c.restart(other)
        wait_until(lambda: cw.group_values(ports[other], g) == want, TIMEOUT, "the restarted broker's copy")

        # DeleteGroups on a group's coordinator takes its configs away on
        # every broker: for a group the controller coordinates (deleted on
        # its forwarding thread) and for one another broker coordinates (the
        # forwarder asks the controller).
        topic = unique("t")
        assert create_topics_request(ports[controller], topic, 1, 3)[0] == 0

        def coordinator(group):
            err, node = group_wire.find_coordinator(ports[controller], group)
            return node if err == 0 else None

        by_coordinator = {wait_until(lambda: coordinator(g), TIMEOUT, "a coordinator"): g}  # node ids start at 1
        while len({n == controller for n in by_coordinator}) < 2:
            name = unique("clustered")
            node = wait_until(lambda: coordinator(name), TIMEOUT, "a coordinator")
            by_coordinator.setdefault(node, name)
        for coord, group in by_coordinator.items():
            if group != g:
                assert cw.alter_group(ports[other], group, [(LOCK, cw.SET, "20000")])[0] == cw.NONE
            wait_until(lambda: group_wire.offset_commit(ports[coord], group, {(topic, 0): 1}) == {(topic, 0): 0},
                       TIMEOUT, "an offset commit on the coordinator")
            assert cw.delete_groups(ports[coord], [group]) == {group: cw.NONE}
        for group in by_coordinator.values():
            for n in ids:
                wait_until(lambda: cw.group_values(ports[n], group) == defaults_except(), TIMEOUT,
                           f"broker {n} to forget deleted group {group}'s configs")


def test_a_share_groups_own_heartbeat_interval_is_what_its_members_are_told(broker):
    import share_wire as sw
    g = unique("beat")
    member = uuid.uuid4().hex[:22]
    err, _, epoch, interval = sw.heartbeat(broker.port, g, member, 0, ["t"])
    assert (err, interval) == (sw.NONE, 5000)  # the broker's group.share.heartbeat.interval.ms
    assert sw.heartbeat(broker.port, g, member, -1)[0] == sw.NONE
    assert cw.alter_group(broker.port, g, [("share.heartbeat.interval.ms", cw.SET, "7000"),
                                           ("share.session.timeout.ms", cw.SET, "50000")])[0] == cw.NONE
    err, _, epoch, interval = sw.heartbeat(broker.port, g, member, 0, ["t"])
    assert (err, interval) == (sw.NONE, 7000)
    assert sw.heartbeat(broker.port, g, member, -1)[0] == sw.NONE
