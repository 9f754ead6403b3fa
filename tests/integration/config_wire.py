"""Raw config requests for integration tests: DescribeConfigs (every version
0 to 4), IncrementalAlterConfigs v0, AlterConfigs v0 and DeleteGroups v0,
sent to one chosen broker with no client library between the test and the
wire. Debian's confluent-kafka 1.7 and kafka-python know no GROUP config
resource (type 32), which is what these are for. Errors are Kafka error
codes in the answers, never exceptions.
"""

import struct

from group_wire import _call, _cstr, _kstr, _uvarint

API_DESCRIBE_CONFIGS = 32
API_ALTER_CONFIGS = 33
API_DELETE_GROUPS = 42
API_INCREMENTAL_ALTER_CONFIGS = 44

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

NONE = 0
INVALID_CONFIG = 40
INVALID_REQUEST = 42
GROUP_ID_NOT_FOUND = 69

# Kafka's ConfigSource codes.
DYNAMIC_GROUP_CONFIG = 8
DEFAULT_CONFIG = 5


def _nullable_kstr(s):
    return struct.pack(">h", -1) if s is None else _kstr(s)


def _array(items):
    return struct.pack(">i", len(items)) + b"".join(items)


def describe_configs(port, resources, version=1, synonyms=False, documentation=False, timeout=10.0,
                     host="127.0.0.1"):
    """DescribeConfigs of `resources` [(type, name, keys or None)]; returns
    [{"error", "message", "type", "name", "configs": {name: entry}}] where an
    entry is {"value", "read_only", "source" (v1+; v0: 5 when is_default,
    else None), "sensitive", "synonyms" [(name, value, source)], "type",
    "doc"}."""
    flexible = version >= 4
    body = b""
    if flexible:
        body += _uvarint(len(resources) + 1)
        for t, name, keys in resources:
            body += struct.pack(">b", t) + _cstr(name)
            body += _uvarint(0) if keys is None else _uvarint(len(keys) + 1) + b"".join(_cstr(k) for k in keys)
            body += _uvarint(0)  # tags
    else:
        parts = []
        for t, name, keys in resources:
            p = struct.pack(">b", t) + _kstr(name)
            p += struct.pack(">i", -1) if keys is None else _array([_kstr(k) for k in keys])
            parts.append(p)
        body += _array(parts)
    if version >= 1:
        body += struct.pack(">?", synonyms)
    if version >= 3:
        body += struct.pack(">?", documentation)
    if flexible:
        body += _uvarint(0)
    r = _call(port, API_DESCRIBE_CONFIGS, version, body, flexible, timeout, host=host)
    string = r.cstring if flexible else r.string
    count = r.carray_len if flexible else (lambda: r.take(">i"))
    r.take(">i")  # throttle_time_ms
    out = []
    for _ in range(count()):
        res = {"error": r.take(">h"), "message": string(), "type": r.take(">b"), "name": string(), "configs": {}}
        for _ in range(count()):
            name = string()
            e = {"value": string(), "read_only": r.take(">?")}
            if version == 0:
                e["source"] = DEFAULT_CONFIG if r.take(">?") else None
            else:
                e["source"] = r.take(">b")
            e["sensitive"] = r.take(">?")
            e["synonyms"] = []
            if version >= 1:
                for _ in range(count()):
                    syn = (string(), string(), r.take(">b"))
                    if flexible:
                        r.skip_tags()
                    e["synonyms"].append(syn)
            if version >= 3:
                e["type"] = r.take(">b")
                e["doc"] = string()
            if flexible:
                r.skip_tags()
            res["configs"][name] = e
        if flexible:
            r.skip_tags()
        out.append(res)
    return out


def describe_group(port, group, version=1, **kw):
    """The one result of DescribeConfigs of GROUP resource `group`."""
    return describe_configs(port, [(RESOURCE_GROUP, group, None)], version=version, **kw)[0]


def _alter_answer(r):
    r.take(">i")  # throttle_time_ms
    out = []
    for _ in range(r.take(">i")):
        out.append({"error": r.take(">h"), "message": r.string(), "type": r.take(">b"), "name": r.string()})
    return out


def incremental_alter_configs(port, resources, validate_only=False, timeout=10.0, host="127.0.0.1"):
    """IncrementalAlterConfigs v0 of `resources` [(type, name, [(key, op, value)])];
    returns [{"error", "message", "type", "name"}]."""
    parts = []
    for t, name, ops in resources:
        cfgs = [_kstr(k) + struct.pack(">b", op) + _nullable_kstr(v) for k, op, v in ops]
        parts.append(struct.pack(">b", t) + _kstr(name) + _array(cfgs))
    body = _array(parts) + struct.pack(">?", validate_only)
    return _alter_answer(_call(port, API_INCREMENTAL_ALTER_CONFIGS, 0, body, False, timeout, host=host))


def alter_group(port, group, ops, validate_only=False, **kw):
    """IncrementalAlterConfigs of one GROUP resource; returns (error, message)."""
    r = incremental_alter_configs(port, [(RESOURCE_GROUP, group, ops)], validate_only=validate_only, **kw)[0]
    return r["error"], r["message"]


def alter_configs(port, resources, validate_only=False, timeout=10.0, host="127.0.0.1"):
    """AlterConfigs v0 (the legacy API) of `resources` [(type, name, [(key, value)])]."""
    parts = []
    for t, name, entries in resources:
        cfgs = [_kstr(k) + _nullable_kstr(v) for k, v in entries]
        parts.append(struct.pack(">b", t) + _kstr(name) + _array(cfgs))
    body = _array(parts) + struct.pack(">?", validate_only)
    return _alter_answer(_call(port, API_ALTER_CONFIGS, 0, body, False, timeout, host=host))


def delete_groups(port, groups, timeout=10.0, host="127.0.0.1"):
    """DeleteGroups v0; returns {group: error code}."""
    r = _call(port, API_DELETE_GROUPS, 0, _array([_kstr(g) for g in groups]), False, timeout, host=host)
    r.take(">i")  # throttle_time_ms
    return {r.string(): r.take(">h") for _ in range(r.take(">i"))}


def group_values(port, group, **kw):
    """{key: (value, source)} of a group's DescribeConfigs (v1)."""
    res = describe_group(port, group, **kw)
    assert res["error"] == NONE, res
    return {k: (e["value"], e["source"]) for k, e in res["configs"].items()}
