#!/usr/bin/python3
"""The house's rooms (folders under src/) and their floors: a room's code may
include only rooms on floors below its own, so every arrow points down and
there is no cycle. docs/architecture.md draws the same map; when a room is
added or an arrow has to point somewhere new, change both.

Tests beside the code (*_test.cc) and test fixtures (test_*.h, testing/) may
reach up for fixtures (a partition's tests open partitions through the
partition manager): they are not part of the architecture and are only
counted. Exits non-zero naming every arrow that points up or sideways.
"""
import os
import re
import sys

FLOORS = [
    ["base"],
    ["etcd", "io", "model", "metrics", "net"],
    ["controller", "storage", "protocol", "config"],
    ["partition"],
    ["replication"],
    ["metadata"],
    ["maintenance", "group", "txn", "share"],
    ["kafka"],
    ["broker"],
    ["cli", "sim"],
]
FLOOR = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


def is_test(path):
    name = os.path.basename(path)
    return name.endswith("_test.cc") or name.startswith("test_") or "/testing/" in path


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "src")
    bad, unknown, test_arrows, arrows = [], set(), 0, set()
    for room in sorted(os.listdir(src)):
        if not os.path.isdir(os.path.join(src, room)):
            continue
        if room not in FLOOR:
            unknown.add(room)
            continue
        for root, _, files in os.walk(os.path.join(src, room)):
            for f in files:
                if not f.endswith((".h", ".cc")):
                    continue
                path = os.path.join(root, f)
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                for target in INCLUDE.findall(text):
                    if target == room or not os.path.isdir(os.path.join(src, target)):
                        continue
                    if target not in FLOOR:
                        unknown.add(target)
                        continue
                    if FLOOR[target] < FLOOR[room]:
                        arrows.add((room, target))
                    elif is_test(path):
                        test_arrows += 1
                    else:
                        bad.append(f"{os.path.relpath(path, src)} includes {target}/ "
                                   f"(floor {FLOOR[target]}, not below {room}/ on floor {FLOOR[room]})")
    for room in sorted(unknown):
        bad.append(f"src/{room}/ is on no floor: add it to FLOORS here and to docs/architecture.md")
    for line in bad:
        print("arrow not pointing down:", line)
    print(f"{len(FLOOR)} rooms on {len(FLOORS)} floors, {len(arrows)} arrows between rooms, "
          f"{len(bad)} pointing up or sideways; tests reaching up for fixtures: {test_arrows} includes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
