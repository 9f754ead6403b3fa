import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sluice_harness import Broker  # noqa: E402
from share_client import ShareConsumer  # noqa: E402


@pytest.fixture
def broker():
    b = Broker()
    b.start()
    yield b
    rc = b.stop()
    try:
        assert rc == 0, f"broker exited with {rc} on SIGTERM:\n{b.log_text()}"
    finally:
        b.close()


@pytest.fixture
def broker_factory():
    made = []

    def make(**kw):
        b = Broker(**kw)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


@pytest.fixture
def share_consumer_factory():
    """Makes started share_client.ShareConsumer processes (same arguments);
    whatever is still running at the end of the test is killed."""
    made = []

    def make(*args, **kw):
        c = ShareConsumer(*args, **kw)
        made.append(c)
        return c.start()

    yield make
    for c in made:
        c.close()
