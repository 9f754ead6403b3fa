"""Raw share-group admin requests for integration tests: the share-group
offset APIs (KIP-932) DescribeShareGroupOffsets (90, v1), AlterShareGroupOffsets
(91, v0) and DeleteShareGroupOffsets (92, v0), sent to one chosen broker (the
group's coordinator) with no client library between the test and the wire.
All three are flexible versions. Errors are Kafka error codes, never
exceptions.
"""

import struct

from group_wire import _call, _cstr, _uvarint

API_DESCRIBE_SHARE_GROUP_OFFSETS = 90
API_ALTER_SHARE_GROUP_OFFSETS = 91
API_DELETE_SHARE_GROUP_OFFSETS = 92

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_COORDINATOR = 16
GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68


def _carray(items):
    return _uvarint(len(items) + 1) + b"".join(items)


def describe_offsets(port, group, topics=None, timeout=10.0, host="127.0.0.1"):
    """DescribeShareGroupOffsets v1 of one group ({topic: [partitions]}, or
    None for every share partition of the group); returns (group error,
    {(topic, partition): (start_offset, leader_epoch, lag, error)})."""
    if topics is None:
        tb = _uvarint(0)
    else:
        tb = _carray([_cstr(t) + _carray([struct.pack(">i", p) for p in ps]) + _uvarint(0)
                      for t, ps in topics.items()])
    body = _carray([_cstr(group) + tb + _uvarint(0)]) + _uvarint(0)
    r = _call(port, API_DESCRIBE_SHARE_GROUP_OFFSETS, 1, body, True, timeout, host=host)
    r.take(">i")  # throttle_time_ms
    n = r.carray_len()
    assert n == 1, f"{n} groups answered for one asked"
    assert r.cstring() == group
    out = {}
    for _ in range(r.carray_len()):
        t = r.cstring()
        r.p += 16  # topic id
        for _ in range(r.carray_len()):
            p, start, epoch, lag, err = r.take(">iqiqh")
            r.cstring()  # error_message
            r.skip_tags()
            out[(t, p)] = (start, epoch, lag, err)
        r.skip_tags()
    err = r.take(">h")
    r.cstring()
    r.skip_tags()
    return err, out


def alter_offsets(port, group, offsets, timeout=10.0, host="127.0.0.1"):
    """AlterShareGroupOffsets v0 of `offsets` ({(topic, partition): start
    offset}); returns (group error, error message, {(topic, partition): error})."""
    by_topic = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append((p, o))
    body = _cstr(group) + _carray([
        _cstr(t) + _carray([struct.pack(">iq", p, o) + _uvarint(0) for p, o in ps]) + _uvarint(0)
        for t, ps in by_topic.items()]) + _uvarint(0)
    r = _call(port, API_ALTER_SHARE_GROUP_OFFSETS, 0, body, True, timeout, host=host)
    r.take(">i")  # throttle_time_ms
    err = r.take(">h")
    msg = r.cstring()
    out = {}
    for _ in range(r.carray_len()):
        t = r.cstring()
        r.p += 16  # topic id
        for _ in range(r.carray_len()):
            p, perr = r.take(">ih")
            r.cstring()
            r.skip_tags()
            out[(t, p)] = perr
        r.skip_tags()
    r.skip_tags()
    return err, msg, out


def delete_offsets(port, group, topics, timeout=10.0, host="127.0.0.1"):
    """DeleteShareGroupOffsets v0 of whole `topics`; returns (group error,
    error message, {topic: error})."""
    body = _cstr(group) + _carray([_cstr(t) + _uvarint(0) for t in topics]) + _uvarint(0)
    r = _call(port, API_DELETE_SHARE_GROUP_OFFSETS, 0, body, True, timeout, host=host)
    r.take(">i")  # throttle_time_ms
    err = r.take(">h")
    msg = r.cstring()
    out = {}
    for _ in range(r.carray_len()):
        t = r.cstring()
        r.p += 16  # topic id
        out[t] = r.take(">h")
        r.cstring()
        r.skip_tags()
    r.skip_tags()
    return err, msg, out
