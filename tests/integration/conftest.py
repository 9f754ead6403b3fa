import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from sluice_harness import Broker  # noqa: E402


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
