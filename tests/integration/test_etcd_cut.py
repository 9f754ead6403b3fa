"""Issue 31, item 0: a broker cut off from etcd alone comes back by itself.

Three brokers over a three-member etcd, and a cut that takes away one
broker's etcd and nothing else: clients and the other brokers still reach
it, its followers keep fetching from it, it keeps fetching from its leaders.
The cut is held long enough (20 s) for gRPC's keepalive to give the old
connections up, so the broker must reconnect after the heal (what failed in
the fault runs: the client opened a connection once a second and closed it
before its handshake was done). Two ways to cut, the same scenario:

- network namespaces (netns_harness.py): every etcd member and broker in a
  namespace of its own on a bridge the test makes, the links between the
  broker and each member cut by dropping their packets both ways (sockets
  kept). Needs root and `ip netns`; skipped otherwise.
- TCP proxies of this test process (FaultProxy, test_faults.py), through
  which alone each broker reaches the etcd members: a cut freezes the
  broker's etcd connections without closing them and holds new ones
  unanswered. Runs anywhere.

What is asserted, all with generous bounds (a busy 2-core machine):
- during the cut, once the cluster has counted the broker dead (the others
  list it no more and lead its partitions), the broker names no controller
  and none of its old leaderships, and answers a produce to a partition it
  led with NOT_LEADER_OR_FOLLOWER instead of waiting for followers that
  left (REQUEST_TIMED_OUT after the request's timeout);
- after the heal, without a restart: the broker is registered again and
  every broker agrees on the brokers and the controller; its replica
  fetches are taken again (it is back in every ISR); InitProducerId through
  it works (it needs etcd);
- a broker cut off from etcd stops after SIGTERM (bounded wait).

And the minority side of a split (network namespaces only): one broker
with one etcd member, cut off from the other two brokers and members. The
member it reaches has no quorum and knows no leader, which is also what an
etcd quorum loss looks like, through which a broker keeps leading
(test_cluster.py); the majority meanwhile expires its lease and elects
other leaders. Asserted: an acks=all produce sent to it after the split is
answered NOT_LEADER_OR_FOLLOWER (its followers left; not REQUEST_TIMED_OUT
after the request's 30 s), its Metadata stops naming it leader, a consumer
reading past its stale log end is told NOT_LEADER_OR_FOLLOWER (not
OFFSET_OUT_OF_RANGE, which resets a consumer), and after the heal it is
back in the cluster without a restart.
"""

import signal
import struct
import threading
import time

import pytest

from cluster_harness import Cluster, _kstr, _request, create_topics_request, init_producer_id_request, produce_request
from netns_harness import NetnsLab
from test_faults import FaultProxy

TOPIC = "cut"
PARTITIONS = 6
SESSION_TIMEOUT_MS = 4000
CUT_S = 20  # past gRPC's keepalive (10 s, then 5 s for the answer)
NOT_LEADER_OR_FOLLOWER = 6
OFFSET_OUT_OF_RANGE = 1
BACK_S = 60


def new_cluster():
    return Cluster(brokers=3, etcd=3, session_timeout_ms=SESSION_TIMEOUT_MS,
                   extra_settings={"replica.lag.time.max.ms": "3000",
                                   "replica.fetch.wait.max.ms": "200",
                                   "replica.fetch.backoff.ms": "200"})


@pytest.fixture
def etcd_proxied_cluster():
    """Three brokers that reach etcd only through FaultProxy (owner: the
    broker); clients and peers reach each broker directly. Yields the
    cluster and functions that cut a broker off from etcd and heal it."""
    c = new_cluster()
    proxy = None
    try:
        proxy = FaultProxy(lambda: {n: c.broker(n).pid for n in c.node_ids})
        for n in c.node_ids:
            c.broker(n).etcd_endpoints = ",".join(
                "http://127.0.0.1:%d" % proxy.add(m.client_port, owner=n) for m in c.etcd.members)
        c.start()
        yield c, proxy.cut, lambda victim: proxy.heal()
    finally:
        try:
            if proxy is not None:
                proxy.close()
        finally:
            c.close()


@pytest.fixture
def etcd_netns_cluster():
    """Every etcd member and broker in a network namespace of its own
    (skipped unless root with `ip netns`). Yields the cluster and functions
    that cut a broker's links to every etcd member and heal them."""
    with NetnsLab() as lab:
        c = new_cluster()
        try:
            nodes = lab.place_cluster(c)
            members = [nodes[m.name] for m in c.etcd.members]

            def cut(victim):
                for m in members:
                    lab.cut(nodes[victim], m)

            def heal(victim):
                for m in members:
                    lab.heal(nodes[victim], m)
            c.start()
            yield c, cut, heal
        finally:
            c.close()  # the processes first: a namespace goes with its last process


@pytest.fixture
def netns_cluster():
    """The cluster of etcd_netns_cluster, with the lab and its nodes, for
    cuts of any shape."""
    with NetnsLab() as lab:
        c = new_cluster()
        try:
            nodes = lab.place_cluster(c)
            c.start()
            yield c, lab, nodes
        finally:
            c.close()


def consumer_fetch(host, port, topic, partition, offset, timeout=10.0):
    """Fetch v4 of one partition as a consumer (no wait); returns the
    partition's error code."""
    body = struct.pack(">iiiib", -1, 0, 0, 1 << 20, 0)
    body += struct.pack(">i", 1) + _kstr(topic) + struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, 1 << 20)
    r = _request(port, 1, 4, body, timeout, host=host)
    r.take(">i")  # throttle_time_ms
    assert r.take(">i") == 1 and r.string() == topic and r.take(">i") == 1
    index, err = r.take(">ih")
    assert index == partition
    return err


def create_topic(c):
    b = c.broker(c.node_ids[0])
    err, msg = create_topics_request(b.port, TOPIC, PARTITIONS, 3, host=b.host)
    assert err == 0, f"CreateTopics: {err} {msg}"
    full = lambda: all(
        v.topics.get(TOPIC) and len(v.topics[TOPIC].partitions) == PARTITIONS
        and all(p.leader >= 0 and len(p.isr) == 3 for p in v.topics[TOPIC].partitions.values())
        for v in c.metadata_all().values()) and len(c.metadata_all()) == 3
    c.wait_for(full, 60, f"{TOPIC} with a leader and a full ISR everywhere")


def a_broker_that_leads_but_does_not_control(c):
    view = c.wait_converged()
    for n in c.node_ids:
        if n != view.controller and any(l == n for l in view.leaders(TOPIC).values()):
            return n, [p for p, l in view.leaders(TOPIC).items() if l == n]
    pytest.fail(f"no broker other than the controller leads a partition: {view.leaders(TOPIC)}")


def counted_dead(c, victim):
    """The other brokers list the victim no more and lead every partition."""
    others = [n for n in c.node_ids if n != victim]
    views = c.metadata_all(others)
    if len(views) != len(others):
        return False
    for v in views.values():
        if victim in v.brokers:
            return False
        if any(p.leader < 0 or p.leader == victim for p in v.topics[TOPIC].partitions.values()):
            return False
    return True


def claims_nothing(c, victim):
    """The victim's own Metadata names no controller and leads nothing."""
    try:
        v = c.metadata_from(victim, timeout=10.0)
    except (OSError, EOFError):
        return False
    return v.controller == -1 and all(p.leader != victim for p in v.topics[TOPIC].partitions.values())


def back_in_the_cluster(c, victim):
    """Every broker lists all three and the same controller, the victim's
    answer included (a fresh view), and every ISR is full again: the
    victim's replica fetches are taken."""
    view = c.agreed_view()
    if view is None or victim not in view.brokers:
        return False
    views = c.metadata_all()
    if len(views) != 3:
        return False
    for v in views.values():
        t = v.topics.get(TOPIC)
        if not t or any(p.leader < 0 or len(p.isr) != 3 for p in t.partitions.values()):
            return False
    return True


def comes_back_by_itself(c, cut, heal):
    create_topic(c)
    victim, led = a_broker_that_leads_but_does_not_control(c)
    b = c.broker(victim)

    cut(victim)
    cut_at = time.monotonic()
    try:
        c.wait_for(lambda: counted_dead(c, victim), 60,
                   f"the other brokers to count broker {victim} dead and lead its partitions")
        # Its session is lost by its own clock too (the keeper gives up a
        # TTL after its last renewal was sent, no later than etcd expires it).
        c.wait_for(lambda: claims_nothing(c, victim), 30,
                   f"broker {victim} to name no controller and no leadership of its own")
        # A produce to a partition it led: refused at once, not timed out.
        err, _ = produce_request(b.port, TOPIC, led[0], b"during the cut", acks=-1, timeout=10.0, host=b.host)
        assert err == NOT_LEADER_OR_FOLLOWER, f"produce to the cut-off broker answered {err}"
        time.sleep(max(0.0, CUT_S - (time.monotonic() - cut_at)))
    finally:
        heal(victim)

    # Back without a restart: registered, agreeing, in every ISR.
    c.wait_for(lambda: back_in_the_cluster(c, victim), BACK_S,
               f"broker {victim} back in the cluster (a fresh view, every ISR full) after the heal")
    assert b.running()
    err, pid, _epoch = init_producer_id_request(b.port, host=b.host)
    assert err == 0 and pid >= 0, f"InitProducerId through broker {victim}: error {err}"


def stops_after_sigterm(c, cut, heal):
    create_topic(c)
    victim, _led = a_broker_that_leads_but_does_not_control(c)
    cut(victim)
    try:
        c.wait_for(lambda: counted_dead(c, victim), 60,
                   f"the other brokers to count broker {victim} dead")
        c.broker(victim).send_signal(signal.SIGTERM)
        # A few seconds are enough (etcd gets a 2 s grace); bounded for a busy machine.
        rc = c.broker(victim).wait_exit(20)
        assert rc is not None, f"broker {victim} still running 20 s after SIGTERM:\n{c.broker(victim).log_text()}"
        assert rc == 0, f"broker {victim} exited with {rc}"
    finally:
        heal(victim)


def test_a_broker_cut_off_from_etcd_comes_back_by_itself(etcd_proxied_cluster):
    comes_back_by_itself(*etcd_proxied_cluster)


def test_a_broker_cut_off_from_etcd_stops_after_sigterm(etcd_proxied_cluster):
    stops_after_sigterm(*etcd_proxied_cluster)


def test_a_broker_cut_off_from_etcd_in_its_namespace_comes_back_by_itself(etcd_netns_cluster):
    comes_back_by_itself(*etcd_netns_cluster)


def test_a_broker_cut_off_from_etcd_in_its_namespace_stops_after_sigterm(etcd_netns_cluster):
    stops_after_sigterm(*etcd_netns_cluster)


def test_the_minority_broker_of_a_split_stops_leading(netns_cluster):
    c, lab, nodes = netns_cluster
    create_topic(c)
    victim, led = a_broker_that_leads_but_does_not_control(c)
    b = c.broker(victim)
    others = [n for n in c.node_ids if n != victim]
    near, *far = [nodes[m.name] for m in c.etcd.members]
    # The split: the victim and one member on one side.
    for o in others:
        lab.cut(nodes[victim], nodes[o])
        lab.cut(nodes[o], near)
    for m in far:
        lab.cut(nodes[victim], m)
        lab.cut(near, m)
    answered = {}

    def produce_after_the_split():
        try:
            answered["err"] = produce_request(b.port, TOPIC, led[0], b"after the split", acks=-1, timeout=30.0,
                                              host=b.host)[0]
        except Exception as e:  # noqa: BLE001 - reported below
            answered["exc"] = e
    t = threading.Thread(target=produce_after_the_split, daemon=True)
    t.start()
    try:
        c.wait_for(lambda: counted_dead(c, victim), 60,
                   f"the majority to count broker {victim} dead and lead its partitions")
        # Its followers fetch from the new leaders: the victim stops naming
        # itself leader of those partitions (it cannot tell this from an
        # etcd quorum loss by etcd alone).
        def names_itself():
            try:
                v = c.metadata_from(victim, timeout=10.0)
            except (OSError, EOFError):
                return True
            return any(p.leader == victim for p in v.topics[TOPIC].partitions.values())
        c.wait_for(lambda: not names_itself(), 30, f"broker {victim} to stop naming itself leader")
        t.join(40)
        assert not t.is_alive(), "the produce sent after the split was never answered"
        assert answered.get("err") == NOT_LEADER_OR_FOLLOWER, \
            f"acks=all produce to the minority broker answered {answered}"
        # The new leader takes writes the victim never sees; a consumer
        # reading there from the victim is sent away, not reset.
        view = c.agreed_view(others)
        assert view is not None, "the majority's brokers do not agree"
        new_leader = c.broker(view.leaders(TOPIC)[led[0]])
        last = -1
        for i in range(3):
            err, last = produce_request(new_leader.port, TOPIC, led[0], b"majority %d" % i, acks=-1, timeout=30.0,
                                        host=new_leader.host)
            assert err == 0, f"produce to the new leader answered {err}"
        err = consumer_fetch(b.host, b.port, TOPIC, led[0], last + 1)
        assert err == NOT_LEADER_OR_FOLLOWER, f"a consumer fetch from the minority broker answered {err}"
        err, _ = produce_request(b.port, TOPIC, led[0], b"later", acks=1, timeout=10.0, host=b.host)
        assert err == NOT_LEADER_OR_FOLLOWER, f"produce to the minority broker answered {err}"
    finally:
        lab.heal_all()
    c.wait_for(lambda: back_in_the_cluster(c, victim), BACK_S,
               f"broker {victim} back in the cluster after the heal")
    assert b.running()
