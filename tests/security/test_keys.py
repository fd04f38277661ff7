"""Keys on the TCP endpoint have roles. Before, every authorized key was an
admin's, and the nodes' own keys had to be authorized for migrations: whoever
held one node's key (anyone who became root on that node) was admin on all of
them, and could have each `launch` any command as its gandivad's user. Now a
peer node's key (--peer-keys) may only carry out the destination's steps of a
migration; an operator's (--authorized-keys) may do everything."""

import os
import sys

import pytest

from conftest import SYNTHETIC_JOB

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import nodes  # noqa: E402  (the integration suite's multi-node helper)


@pytest.fixture
def two_nodes(tmp_path):
    if not os.path.exists(SYNTHETIC_JOB):
        pytest.skip("synthetic_state_job not built")
    (tmp_path / "keys").mkdir()
    ops_key, ops_public = nodes.keygen(tmp_path / "keys", "ops")
    a, b = nodes.Node(tmp_path, "a"), nodes.Node(tmp_path, "b")
    a.start([ops_public], [("b", b.tcp, b.public)], peer_keys=[b.public])
    b.start([ops_public], [("a", a.tcp, a.public)], peer_keys=[a.public])
    yield a, b, ops_key, tmp_path
    for n in (a, b):
        n.stop()


def remote(node, key, server, command, *args):
    """`gandiva COMMAND` against `server`'s TCP endpoint, authenticated by `key`."""
    return node.cli(command, "--endpoint", server.tcp, "--key", str(key), "--server-key",
                    server.public, *args, check=False)


def test_a_peer_nodes_key_may_only_migrate(two_nodes):
    a, b, ops_key, tmp = two_nodes
    # Node a's key, used as a CLI's against b: every operator's request is refused.
    marker = tmp / "launched-by-a-peer"
    for args in (("run", "--detach", "--", "touch", str(marker)), ("slice", "--device", "cpu0",
                                                                  "--ms", "60")):
        r = remote(a, a.key, b, *args)
        assert r.returncode != 0, args
        assert "the key of peer node peer-0 may only migrate jobs to this node" in r.stderr, r.stderr
    assert not marker.exists(), "a peer's key launched a command"
    assert remote(a, a.key, b, "ps").returncode == 0, "a peer may read"

    # The migration itself, which is what a peer's key is for, goes through.
    run = a.run(SYNTHETIC_JOB, "--mib", "1", "--iterations", "400", "--iteration-ms", "5",
                name="mover")
    nodes.wait_for(lambda: a.jobs() and a.jobs()[0]["iterations"] > 20, what="job training on a")
    a.cli("migrate", str(a.jobs()[0]["id"]), "--to", "b")
    nodes.wait_for(lambda: any(j["name"] == "mover" and j["state"] == "exited" for j in b.jobs()),
                   what="the job finishing on b")
    assert run.wait(timeout=60) == 0, run.stderr.read()

    # An operator's key may do what a peer's may not.
    r = remote(a, ops_key, b, "slice", "--device", "cpu0", "--ms", "60")
    assert r.returncode == 0, r.stderr
