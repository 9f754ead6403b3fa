"""Reads a stopped broker's partition files (docs/log_format.md) for tests
that compare replicas byte for byte or record by record: the batches of a
partition's segments, the records in them, and the checkpoints that say
where the log starts and how far it is committed.

Only for brokers that are not running (or a partition nobody writes): a
segment being appended to may end in a torn batch.
"""

import struct
from pathlib import Path

COMPRESSION_MASK = 0x07
CONTROL_BIT = 0x20
BATCH_HEADER = 61  # base offset .. record count


def partition_dir(data_dir, topic, partition):
    """The directory of topic-partition under a broker's data directory
    (under logs/, where the broker keeps them, or at the top)."""
    for d in (Path(data_dir) / "logs" / f"{topic}-{partition}", Path(data_dir) / f"{topic}-{partition}"):
        if d.is_dir():
            return d
    raise AssertionError(f"no directory for {topic}-{partition} under {data_dir}")


def _batches(part_dir):
    """(segment path, position, header tuple, batch bytes) of every batch, in
    offset order; a zero-filled prepared tail ends a segment."""
    for seg in sorted(Path(part_dir).glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + BATCH_HEADER <= len(data):
            base, length, ple, magic, crc, attrs, lod = struct.unpack_from(">qiibIhi", data, pos)
            if length == 0 and base == 0 and magic == 0:
                break  # the prepared tail
            assert magic == 2 and length >= 49 and pos + 12 + length <= len(data), \
                f"{seg} at {pos}: a bad batch header (magic {magic}, length {length})"
            yield seg, pos, (base, length, ple, crc, attrs, lod), data[pos:pos + 12 + length]
            pos += 12 + length


def read_batches(part_dir):
    """[(base offset, last offset delta, partition leader epoch, crc)] of
    every batch of a partition directory's segments, in offset order."""
    return [(base, lod, ple, crc) for _, _, (base, _len, ple, crc, _a, lod), _ in _batches(part_dir)]


def _varint(data, pos):
    """A zig-zag varint at `pos`: (value, next position)."""
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


def read_records(part_dir):
    """[(offset, key, value)] of every data record of a partition directory's
    segments, in offset order (control batches left out); key and value are
    bytes, or None when null. Compressed batches are refused: the tests that
    call this produce without compression, and the cleaner keeps a batch's
    codec."""
    out = []
    for seg, pos, (base, _len, _ple, _crc, attrs, _lod), batch in _batches(part_dir):
        if attrs & CONTROL_BIT:
            continue
        assert attrs & COMPRESSION_MASK == 0, f"{seg} at {pos}: a compressed batch (attributes {attrs:#x})"
        (count,) = struct.unpack_from(">i", batch, 57)
        at = BATCH_HEADER
        for _ in range(count):
            length, at = _varint(batch, at)
            end = at + length
            at += 1  # record attributes
            _ts_delta, at = _varint(batch, at)
            offset_delta, at = _varint(batch, at)
            klen, at = _varint(batch, at)
            key = None if klen < 0 else bytes(batch[at:at + klen])
            at += max(klen, 0)
            vlen, at = _varint(batch, at)
            value = None if vlen < 0 else bytes(batch[at:at + vlen])
            out.append((base + offset_delta, key, value))
            at = end  # headers are not looked at
    return out


def read_checkpoint_offset(part_dir, name):
    """The offset in a one-line checkpoint of a partition directory
    (log-start-offset-checkpoint, cleaner-offset-checkpoint), or None when
    the file is missing."""
    try:
        lines = (Path(part_dir) / name).read_text().split()
    except OSError:
        return None
    assert len(lines) == 3 and lines[1] == "1", f"{part_dir}/{name}: {lines}"
    return int(lines[2])


def read_hw_checkpoint(data_dir):
    """meta/high_watermarks: {(topic, partition): offset}."""
    out = {}
    try:
        text = (Path(data_dir) / "meta" / "high_watermarks").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3:
            out[(parts[0], int(parts[1]))] = int(parts[2])
    return out
