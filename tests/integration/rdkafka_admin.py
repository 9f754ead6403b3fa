"""librdkafka's admin ListConsumerGroupOffsets (librdkafka 2.0+), called
through ctypes: Debian's confluent-kafka-python (1.7) does not wrap it, but
Debian's librdkafka (2.0.2) has it, and it is the call an admin tool makes
to read a group's committed offsets (FindCoordinator, then OffsetFetch to
the coordinator, retried on the coordinator errors).

    list_consumer_group_offsets("127.0.0.1:9092", "g")              # every partition
    list_consumer_group_offsets("127.0.0.1:9092", "g", [("t", 0)])  # these
    -> {(topic, partition): offset}; raises RuntimeError on an error

Each call makes its own client (no coordinator cached from an earlier call)
and destroys it.
"""

import ctypes
import ctypes.util

_lib = ctypes.CDLL(ctypes.util.find_library("rdkafka") or "librdkafka.so.1")

_RD_KAFKA_PRODUCER = 0


class _TopicPartition(ctypes.Structure):
    _fields_ = [("topic", ctypes.c_char_p), ("partition", ctypes.c_int32), ("offset", ctypes.c_int64),
                ("metadata", ctypes.c_void_p), ("metadata_size", ctypes.c_size_t), ("opaque", ctypes.c_void_p),
                ("err", ctypes.c_int), ("_private", ctypes.c_void_p)]


class _TopicPartitionList(ctypes.Structure):
    _fields_ = [("cnt", ctypes.c_int), ("size", ctypes.c_int), ("elems", ctypes.POINTER(_TopicPartition))]


_vp = ctypes.c_void_p
_lib.rd_kafka_conf_new.restype = _vp
_lib.rd_kafka_conf_set.argtypes = [_vp, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
_lib.rd_kafka_new.restype = _vp
_lib.rd_kafka_new.argtypes = [ctypes.c_int, _vp, ctypes.c_char_p, ctypes.c_size_t]
_lib.rd_kafka_destroy.argtypes = [_vp]
_lib.rd_kafka_queue_new.restype = _vp
_lib.rd_kafka_queue_new.argtypes = [_vp]
_lib.rd_kafka_queue_destroy.argtypes = [_vp]
_lib.rd_kafka_queue_poll.restype = _vp
_lib.rd_kafka_queue_poll.argtypes = [_vp, ctypes.c_int]
_lib.rd_kafka_event_type.argtypes = [_vp]
_lib.rd_kafka_event_error.argtypes = [_vp]
_lib.rd_kafka_event_error_string.restype = ctypes.c_char_p
_lib.rd_kafka_event_error_string.argtypes = [_vp]
_lib.rd_kafka_event_destroy.argtypes = [_vp]
_lib.rd_kafka_event_ListConsumerGroupOffsets_result.restype = _vp
_lib.rd_kafka_event_ListConsumerGroupOffsets_result.argtypes = [_vp]
_lib.rd_kafka_ListConsumerGroupOffsets_result_groups.restype = ctypes.POINTER(_vp)
_lib.rd_kafka_ListConsumerGroupOffsets_result_groups.argtypes = [_vp, ctypes.POINTER(ctypes.c_size_t)]
_lib.rd_kafka_group_result_error.restype = _vp
_lib.rd_kafka_group_result_error.argtypes = [_vp]
_lib.rd_kafka_error_string.restype = ctypes.c_char_p
_lib.rd_kafka_error_string.argtypes = [_vp]
_lib.rd_kafka_group_result_partitions.restype = ctypes.POINTER(_TopicPartitionList)
_lib.rd_kafka_group_result_partitions.argtypes = [_vp]
_lib.rd_kafka_topic_partition_list_new.restype = _vp
_lib.rd_kafka_topic_partition_list_new.argtypes = [ctypes.c_int]
_lib.rd_kafka_topic_partition_list_add.restype = _vp
_lib.rd_kafka_topic_partition_list_add.argtypes = [_vp, ctypes.c_char_p, ctypes.c_int32]
_lib.rd_kafka_topic_partition_list_destroy.argtypes = [_vp]
_lib.rd_kafka_ListConsumerGroupOffsets_new.restype = _vp
_lib.rd_kafka_ListConsumerGroupOffsets_new.argtypes = [ctypes.c_char_p, _vp]
_lib.rd_kafka_ListConsumerGroupOffsets_destroy.argtypes = [_vp]
_lib.rd_kafka_ListConsumerGroupOffsets.argtypes = [_vp, ctypes.POINTER(_vp), ctypes.c_size_t, _vp, _vp]


def list_consumer_group_offsets(bootstrap, group, partitions=None, timeout_s=60):
    errstr = ctypes.create_string_buffer(512)
    conf = _lib.rd_kafka_conf_new()
    for k, v in (("bootstrap.servers", bootstrap), ("client.id", "rdkafka-admin-it")):
        if _lib.rd_kafka_conf_set(conf, k.encode(), v.encode(), errstr, len(errstr)) != 0:
            raise RuntimeError(errstr.value.decode())
    rk = _lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
    if not rk:
        raise RuntimeError(errstr.value.decode())
    queue = _lib.rd_kafka_queue_new(rk)
    tpl = None
    if partitions is not None:
        tpl = _lib.rd_kafka_topic_partition_list_new(len(partitions))
        for t, p in partitions:
            _lib.rd_kafka_topic_partition_list_add(tpl, t.encode(), p)
    req = _lib.rd_kafka_ListConsumerGroupOffsets_new(group.encode(), tpl)
    try:
        reqs = (_vp * 1)(req)
        _lib.rd_kafka_ListConsumerGroupOffsets(rk, reqs, 1, None, queue)
        ev = _lib.rd_kafka_queue_poll(queue, int(timeout_s * 1000))
        if not ev:
            raise RuntimeError("no answer from ListConsumerGroupOffsets")
        try:
            if _lib.rd_kafka_event_error(ev):
                raise RuntimeError(_lib.rd_kafka_event_error_string(ev).decode())
            res = _lib.rd_kafka_event_ListConsumerGroupOffsets_result(ev)
            n = ctypes.c_size_t()
            groups = _lib.rd_kafka_ListConsumerGroupOffsets_result_groups(res, ctypes.byref(n))
            assert n.value == 1, f"{n.value} groups answered"
            err = _lib.rd_kafka_group_result_error(groups[0])
            if err:
                raise RuntimeError(_lib.rd_kafka_error_string(err).decode())
            out = {}
            lst = _lib.rd_kafka_group_result_partitions(groups[0])
            if lst:
                for i in range(lst.contents.cnt):
                    e = lst.contents.elems[i]
                    if e.err:
                        raise RuntimeError(f"{e.topic.decode()}-{e.partition}: error {e.err}")
                    out[(e.topic.decode(), e.partition)] = e.offset
            return out
        finally:
            _lib.rd_kafka_event_destroy(ev)
    finally:
        _lib.rd_kafka_ListConsumerGroupOffsets_destroy(req)
        if tpl:
            _lib.rd_kafka_topic_partition_list_destroy(tpl)
        _lib.rd_kafka_queue_destroy(queue)
        _lib.rd_kafka_destroy(rk)
