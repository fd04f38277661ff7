"""Waiting on real daemons and jobs, for the pytest suites (tests/integration,
tests/security): one poll loop, so that each suite fails the same way."""

import time


def wait_for(predicate, timeout=30, what="condition", log=None):
    """Polls predicate until it returns something true, and returns that; fails
    the test after timeout seconds (with log(), e.g. a daemon's log, if given)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}" +
                         (f"\n--- gandivad log ---\n{log()}" if log else ""))
