"""The first thing a user does: produce with kcat and read it back."""

import subprocess


def kcat(*args, input=None, timeout=60):
    return subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=timeout, check=True)


def test_produce_and_consume_with_kcat(broker):
    kcat("-P", "-b", broker.bootstrap, "-t", "smoke", "-K", ":", input=b"k1:hello\nk2:world\n")
    out = kcat("-C", "-b", broker.bootstrap, "-t", "smoke", "-o", "beginning", "-e", "-f", "%k=%s@%o\n")
    assert out.stdout.decode().splitlines() == ["k1=hello@0", "k2=world@1"]


def test_data_survives_a_clean_restart(broker):
    kcat("-P", "-b", broker.bootstrap, "-t", "durable", input=b"a\nb\nc\n")
    assert broker.stop() == 0
    broker.start()
    out = kcat("-C", "-b", broker.bootstrap, "-t", "durable", "-o", "beginning", "-e", "-f", "%s\n")
    assert out.stdout.decode().splitlines() == ["a", "b", "c"]
