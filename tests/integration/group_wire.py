"""Raw group requests for integration tests: FindCoordinator, OffsetCommit and
OffsetFetch sent to one chosen broker, with no client library between the
test and the wire, so a test can say which broker answered and what.

OffsetFetch is spoken in two shapes: v3 (one group, non-flexible, with a
top-level error code) and v9 (the batched, flexible shape of KIP-709 with
KIP-848's member id and epoch, as librdkafka 2.x's admin client sends it).
Every function opens one connection to host:port (127.0.0.1 unless a test
puts brokers in network namespaces) and returns the
decoded answer; errors are Kafka error codes, never exceptions.
"""

import socket
import struct

from sluice_harness import Reader

API_OFFSET_COMMIT = 8
API_OFFSET_FETCH = 9
API_FIND_COORDINATOR = 10

NONE = 0
REQUEST_TIMED_OUT = 7
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
# Answers after which a client looks for the coordinator again or retries.
RETRIABLE = {COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, REQUEST_TIMED_OUT}


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


def _kstr(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _uvarint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _cstr(s):
    """A compact (nullable) string: length + 1 as an unsigned varint."""
    if s is None:
        return _uvarint(0)
    b = s.encode()
    return _uvarint(len(b) + 1) + b


class FlexReader(Reader):
    """Reader with the compact forms of flexible versions."""

    def uvarint(self):
        shift = n = 0
        while True:
            b = self.take(">B")
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7

    def cstring(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.d[self.p:self.p + n].decode()
        self.p += n
        return s

    def carray_len(self):
        return self.uvarint() - 1

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            size = self.uvarint()  # read before self.p is: `self.p += self.uvarint()` would lose the read
            self.p += size


def _call(port, api_key, version, body, flexible, timeout=10.0, corr=11, host="127.0.0.1"):
    client_id = b"group-wire"
    header = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    if flexible:
        header += _uvarint(0)  # request header v2: no tagged fields
    payload = header + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(payload)) + payload)
        (n,) = struct.unpack(">i", _recv_exact(s, 4))
        r = FlexReader(_recv_exact(s, n))
    if r.take(">i") != corr:
        raise EOFError("answer with a wrong correlation id")
    if flexible:
        r.skip_tags()  # response header v1
    return r


def find_coordinator(port, group, timeout=10.0, key_type=0, host="127.0.0.1"):
    """FindCoordinator v1 for a group (key_type 1: a transactional id),
    asked of broker host:port; returns (error code, node id)."""
    r = _call(port, API_FIND_COORDINATOR, 1, _kstr(group) + struct.pack(">b", key_type), False, timeout,
              host=host)
    r.take(">i")  # throttle_time_ms
    err = r.take(">h")
    r.string()  # error_message
    node = r.take(">i")
    return err, node


def offset_commit(port, group, offsets, timeout=10.0):
    """OffsetCommit v2 of `offsets` ({(topic, partition): offset}) for a group
    without members (generation -1, empty member id), sent to broker
    127.0.0.1:port; returns {(topic, partition): error code}."""
    by_topic = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append((p, o))
    body = _kstr(group) + struct.pack(">i", -1) + _kstr("") + struct.pack(">q", -1)
    body += struct.pack(">i", len(by_topic))
    for t, parts in by_topic.items():
        body += _kstr(t) + struct.pack(">i", len(parts))
        for p, o in parts:
            body += struct.pack(">iq", p, o) + _kstr("")
    r = _call(port, API_OFFSET_COMMIT, 2, body, False, timeout)
    out = {}
    for _ in range(r.take(">i")):
        t = r.string()
        for _ in range(r.take(">i")):
            p, err = r.take(">ih")
            out[(t, p)] = err
    return out


def offset_fetch_v3(port, group, topics=None, timeout=10.0):
    """OffsetFetch v3 of one group ({topic: [partitions]}, or None for every
    committed partition) from broker 127.0.0.1:port; returns
    (group error code, {(topic, partition): (offset, error code)})."""
    body = _kstr(group)
    if topics is None:
        body += struct.pack(">i", -1)
    else:
        body += struct.pack(">i", len(topics))
        for t, parts in topics.items():
            body += _kstr(t) + struct.pack(">i", len(parts)) + b"".join(struct.pack(">i", p) for p in parts)
    r = _call(port, API_OFFSET_FETCH, 3, body, False, timeout)
    r.take(">i")  # throttle_time_ms
    out = {}
    for _ in range(r.take(">i")):
        t = r.string()
        for _ in range(r.take(">i")):
            p, o = r.take(">iq")
            r.string()  # metadata
            out[(t, p)] = (o, r.take(">h"))
    return r.take(">h"), out


def offset_fetch_v9(port, group, topics=None, timeout=10.0, host="127.0.0.1"):
    """OffsetFetch v9 of one group, without a member id (member epoch -1) and
    with require_stable, as an admin client asks, of broker host:port; same
    return as offset_fetch_v3."""
    body = _uvarint(2) + _cstr(group) + _cstr(None) + struct.pack(">i", -1)
    if topics is None:
        body += _uvarint(0)
    else:
        body += _uvarint(len(topics) + 1)
        for t, parts in topics.items():
            body += _cstr(t) + _uvarint(len(parts) + 1) + b"".join(struct.pack(">i", p) for p in parts)
            body += _uvarint(0)
    body += _uvarint(0)  # the group's tags
    body += struct.pack(">b", 1) + _uvarint(0)  # require_stable, tags
    r = _call(port, API_OFFSET_FETCH, 9, body, True, timeout, host=host)
    r.take(">i")  # throttle_time_ms
    groups = r.carray_len()
    assert groups == 1, f"{groups} groups answered for one asked"
    assert r.cstring() == group
    out = {}
    for _ in range(r.carray_len()):
        t = r.cstring()
        for _ in range(r.carray_len()):
            p, o, _epoch = r.take(">iqi")
            r.cstring()  # metadata
            out[(t, p)] = (o, r.take(">h"))
            r.skip_tags()
        r.skip_tags()
    err = r.take(">h")
    r.skip_tags()
    return err, out
