"""Every reply of a real gandivad checked against its schema in messages.def: each
request a client may send, with real training jobs, on one node; a real migration
between two nodes, and the peer messages (migrate_prepare ... migrate_abort) driven
by hand against the destination with a real checkpoint stream. Each reply frame is
checked as it came off the wire (gandiva.protocol.validate_reply_frame), envelope
included, and every ok reply's fields strictly: no field the schema does not name."""

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import CNN_EXAMPLE, INTERVAL_JOB, PYTHON, wait_for
from nodes import Node
from standin_gpu import FATBIN as GPU_IMAGE, PROCADDR_APP as GPU_APP, SHIM, STANDIN_DIR, STANDIN_DRIVER, built

import gandiva  # noqa: E402  (conftest puts the built package on sys.path)
from gandiva.protocol import (BoundarySource, DeviceKind, JobState,  # noqa: E402
                              MigrateStartState, OperationKind, OperationState, SwapState,
                              validate_reply, validate_reply_frame)

# The messages a client sends to its node, and those one node sends another during a
# migration; together, every message of the schema (checked below).
CLIENT_MESSAGES = {"hello", "list_devices", "list_jobs", "register_job", "job_started",
                   "job_exited", "suspend", "resume", "kill", "set_slice", "set_weight",
                   "set_share_mode", "assign_device", "list_switches", "checkpoint", "launch",
                   "read_log"}
MIGRATION_MESSAGES = {"migrate", "migrate_prepare", "migrate_begin",
                      "migrate_commit", "migrate_start", "migrate_abort"}
# The messages a client sends to the cluster scheduler (which answers read_log too).
SCHEDULER_MESSAGES = {"submit", "queue", "cancel"}
CHUNK_BYTES = 1 << 20
MIB = 1 << 20


class Checked:
    """Sends requests to one gandivad and checks every reply against the schema.
    `checked` counts the ok replies checked, by message type."""

    def __init__(self, endpoint, checked):
        self.api = gandiva.Client(endpoint, timeout_ms=60000)
        self.checked = checked

    def call(self, request_type, **fields):
        frame = self.api.raw_call(json.dumps({"v": 1, "type": request_type, **fields}).encode())
        validate_reply_frame(request_type, frame)  # envelope, and the fields when ok
        reply = json.loads(frame)
        if not reply.pop("ok"):
            raise gandiva.GandivaError(reply["error"]["code"], reply["error"]["message"])
        del reply["v"]
        validate_reply(request_type, reply)
        self.checked[request_type] = self.checked.get(request_type, 0) + 1
        return reply

    def job(self, job_id):
        return self.call("list_jobs", job=job_id)["jobs"][0]

    def wait_for(self, predicate, what, timeout=90):
        return wait_for(predicate, timeout, what)

    def follow(self, job_id, timeout=180):
        """Polls the job's operation until it ends (each poll's reply checked)."""
        seen_running = False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            op = self.job(job_id)["operation"]
            if op and op["state"] == OperationState.RUNNING:
                seen_running = True
            elif op:
                return op, seen_running
            time.sleep(0.02)
        raise AssertionError(f"job {job_id}'s operation did not end")

    def kill_everything(self):
        """Ends every live job: a daemon that stops releases its jobs to run on unmanaged."""
        try:
            for j in self.api.jobs():
                if not JobState(j["state"]).ended and j["pid"] > 0:
                    try:
                        os.kill(j["pid"], signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        except gandiva.GandivaError:
            pass


def interval_cmd(tmp_path, name):
    return [PYTHON, INTERVAL_JOB, "--iterations", "100000", "--work-ms", "4",
            "--out", str(tmp_path / f"{name}.json")]


def cnn_cmd(iterations=100000):
    return [PYTHON, CNN_EXAMPLE, "--iterations", str(iterations), "--report-every", "0"]


def test_the_schema_names_exactly_the_messages_exercised_here():
    assert CLIENT_MESSAGES | MIGRATION_MESSAGES | SCHEDULER_MESSAGES == set(
        gandiva._gandiva.message_types())


def test_every_client_request_gets_a_reply_that_matches_the_schema(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:2", "--node", "solo")
    checked = {}
    c = Checked(d.endpoint, checked)
    runners = []
    manual = None
    try:
        hello = c.call("hello")
        assert hello["version"] == gandiva.protocol.PROTOCOL_VERSION and hello["node"] == "solo"
        assert [dev["name"] for dev in c.call("list_devices")["devices"]] == ["cpu0", "cpu1"]
        assert c.call("list_jobs") == {"jobs": []}
        assert c.call("list_switches") == {"switches": []}

        # A job started the way `gandiva run` starts one, by the test: register_job,
        # start it with the job's environment, job_started; job_exited at the end.
        env = dict(d.env)
        reg = c.call("register_job", name="manual", device="cpu0", weight=1.0,
                     command=interval_cmd(tmp_path, "manual"), cwd=str(tmp_path), env=env)
        assert reg["device"] == "cpu0" and reg["device_kind"] == DeviceKind.CPU
        a = reg["job"]
        env.update(GANDIVA_CONTROL_BLOCK=reg["control_block"], GANDIVA_JOB_ID=str(a),
                   GANDIVA_ENDPOINT=d.endpoint)
        manual = subprocess.Popen(interval_cmd(tmp_path, "manual"), env=env, cwd=tmp_path,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert c.call("job_started", job=a, pid=manual.pid, env=env) == {}

        # Two more under `gandiva run`: one sharing cpu0 (so there are switches), a CNN
        # with registered state on cpu1 (so it can be checkpointed).
        runners.append(d.run(*interval_cmd(tmp_path, "shared"), name="shared", device="cpu0"))
        runners.append(d.run(*cnn_cmd(), name="cnn", device="cpu1"))
        c.wait_for(lambda: len(c.call("list_jobs")["jobs"]) == 3, "three jobs")
        ids = {j["name"]: j["id"] for j in c.call("list_jobs")["jobs"]}
        b, cnn = ids["shared"], ids["cnn"]
        c.wait_for(lambda: c.call("list_switches", device="cpu0", limit=5)["switches"],
                   "a switch on cpu0")
        c.wait_for(lambda: c.job(cnn)["boundary_source"] == BoundarySource.EXPLICIT,
                   "the CNN's first boundary")
        assert len(c.call("list_switches", limit=1)["switches"]) == 1
        devices = c.call("list_devices")["devices"]
        assert sorted(devices[0]["jobs"]) == sorted([a, b]) and devices[1]["jobs"] == [cnn]

        assert c.call("set_slice", device="cpu0", ms=50) == {}
        assert c.call("set_share_mode", device="cpu0", mode="auto", capacity=2,
                      window_ms=500) == {}
        c.wait_for(lambda: c.call("list_devices")["devices"][0]["share_decision"],
                   "auto mode's decision on cpu0")
        assert c.call("set_share_mode", device="cpu0", mode="slice") == {}
        assert c.call("set_weight", job=b, weight=2.0) == {}
        assert c.job(b)["weight"] == 2.0

        # The state in these replies is the job's at that moment (the slicer may be
        # parking or resuming it), so only "live" is certain.
        assert not JobState(c.call("suspend", job=a)["state"]).ended
        c.wait_for(lambda: c.job(a)["state"] == JobState.SUSPENDED, "job a to park")
        assert c.job(a)["held"] is True
        assert not JobState(c.call("resume", job=a)["state"]).ended

        assert c.call("assign_device", job=b, device="cpu1") == {}
        c.wait_for(lambda: c.job(b)["device"] == "cpu1", "job b to move")
        assert c.call("assign_device", job=b, device="cpu1") == {}  # already there

        assert c.call("checkpoint", job=cnn, dir=str(tmp_path / "ckpt")) == {}
        op, _ = c.follow(cnn)
        assert op["kind"] == OperationKind.CHECKPOINT and op["state"] == OperationState.DONE, op
        assert op["bytes"] == (tmp_path / "ckpt" / "state.gdck").stat().st_size > 0

        # A job gandivad starts itself, and its output.
        launched = c.call("launch", command=["sh", "-c", "echo launched"], cwd=str(tmp_path),
                          name="launched", device="cpu1")["job"]
        c.wait_for(lambda: c.job(launched)["exit_reason"] == "exited", "the launched job to end")
        assert c.call("read_log", job=launched)["data"] == "launched\n"

        # Endings: killed by the daemon (kill), and reported by the runner (job_exited).
        assert c.call("kill", job=b) == {}
        c.wait_for(lambda: JobState(c.job(b)["state"]).ended, "job b to end")
        assert c.call("kill", job=a, signal=int(signal.SIGKILL)) == {}
        manual.wait(timeout=30)
        assert c.call("job_exited", job=a, exit_code=128 + signal.SIGKILL,
                      signal=int(signal.SIGKILL)) == {}
        assert c.job(a)["state"] == JobState.FAILED and c.job(a)["exit_code"] == 137
        assert c.job(a)["exit_reason"] == "killed" and c.job(a)["exit_signal"] == 9
        c.call("list_jobs")

        # Error replies have their envelope too (checked by Checked.call).
        for request, fields in [("suspend", {"job": 999}), ("resume", {"job": cnn}),
                                ("set_slice", {"device": "cpu0", "ms": 7}),
                                ("set_share_mode", {"device": "cpu0", "mode": "stack"}),
                                ("list_jobs", {"job": 999}), ("kill", {"job": a})]:
            with pytest.raises(gandiva.GandivaError):
                c.call(request, **fields)

        # What the CLI prints with --json is the reply's content, schema and all.
        validate_reply("list_jobs", {"jobs": d.cli_json("ps", "--all")})
        validate_reply("list_devices", {"devices": d.cli_json("devices")})
        validate_reply("list_switches", {"switches": d.cli_json("switches")})
        validate_reply("suspend", d.cli_json("suspend", str(cnn)))
        validate_reply("resume", d.cli_json("resume", str(cnn)))
    finally:
        c.kill_everything()
        for r in runners:
            r.wait(timeout=30)
        if manual:
            manual.wait(timeout=30)
    assert set(checked) == CLIENT_MESSAGES, sorted(CLIENT_MESSAGES - set(checked))


@pytest.fixture
def two_nodes(tmp_path):
    (tmp_path / "keys").mkdir()
    a, b = Node(tmp_path, "a"), Node(tmp_path, "b")
    for node, other in ((a, b), (b, a)):
        node.start([a.public, b.public], [(other.name, other.tcp, other.public)])
    yield a, b
    for n in (a, b):
        n.stop()


def send_sealed(port, key, job, stream):
    """The source's side of the bulk channel, written from the format in
    docs/migration.md rather than from gandivad's code: a hello naming the job,
    the stream in AES-256-GCM frames (Python's `cryptography`, over OpenSSL),
    the last frame."""
    import socket
    import struct
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    gcm = AESGCM(key)
    def nonce(seq):  # the frame's number, little-endian, then four zero bytes
        return struct.pack("<Q", seq) + bytes(4)
    hello, data, last = 1, 2, 4
    frames = [(hello, struct.pack("<Q", job))]
    frames += [(data, stream[i:i + CHUNK_BYTES]) for i in range(0, len(stream), CHUNK_BYTES)]
    frames.append((last, b""))
    def receive_exactly(s, n):
        got = b""
        while len(got) < n:
            more = s.recv(n - len(got))
            assert more, "the destination closed the bulk connection early"
            got += more
        return got

    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        for seq, (flags, payload) in enumerate(frames):
            header = struct.pack("<QII", seq, len(payload), flags)
            s.sendall(header + gcm.encrypt(nonce(seq), payload, header))
            if seq == 0:
                # The destination's one message back: what its copy holds already,
                # numbered from the upper half. Read it as a source does; left
                # unread, closing the socket would reset the connection under
                # the destination's last reads.
                header = receive_exactly(s, 16)
                reply_seq, length, reply_flags = struct.unpack("<QII", header)
                assert reply_seq == 1 << 63 and reply_flags == data, (reply_seq, reply_flags)
                sealed = receive_exactly(s, length + 16)
                gcm.decrypt(nonce(reply_seq), sealed, header)


def test_migration_replies_match_the_schema(two_nodes, tmp_path):
    a, b = two_nodes
    checked = {}
    ca, cb = Checked(a.endpoint, checked), Checked(b.endpoint, checked)
    runner = a.run(*cnn_cmd(), name="cnn")
    try:
        ca.wait_for(lambda: ca.call("list_jobs")["jobs"] and ca.job(1)["iterations"] >= 3,
                    "the job to train on a")
        # A real migration, followed on the source.
        assert ca.call("migrate", job=1, to="b") == {}
        op, _ = ca.follow(1)
        assert op["kind"] == OperationKind.MIGRATE and op["state"] == OperationState.DONE, op
        assert ca.job(1)["state"] == JobState.MIGRATED
        moved = cb.job(op["to_job"])
        assert moved["migrated_from"] == "a/1", moved
        assert runner.wait(timeout=60) == 0

        # The peer messages by hand, with a real checkpoint stream: checkpoint the moved
        # job on b, then send its bytes to a fresh copy on b, as a source node would.
        assert cb.call("checkpoint", job=moved["id"], dir=str(tmp_path / "ckpt")) == {}
        ck, _ = cb.follow(moved["id"])
        assert ck["state"] == OperationState.DONE, ck
        stream = (tmp_path / "ckpt" / "state.gdck").read_bytes()

        env = dict(b.env)
        prepared = cb.call("migrate_prepare", name="by-hand", command=cnn_cmd(), cwd=str(tmp_path),
                           env=env, device="cpu0", weight=1.0, source_node="a", source_job=1)
        job = prepared["job"]
        assert os.path.isabs(prepared["log"])
        cb.wait_for(lambda: cb.job(job)["state"] == JobState.SUSPENDED, "the copy to warm up")
        key = os.urandom(32)
        begun = cb.call("migrate_begin", job=job, bulk_key=key.hex())
        assert set(begun) == {"bulk_port"}, begun
        send_sealed(begun["bulk_port"], key, job, stream)
        assert cb.call("migrate_commit", job=job) == {"bytes": len(stream)}
        MigrateStartState(cb.call("migrate_start", job=job)["state"])  # running or queued
        assert cb.job(job)["migrated_from"] == "a/1"

        # And a copy that is given up.
        dropped = cb.call("migrate_prepare", name="dropped", command=cnn_cmd(), cwd=str(tmp_path),
                          env=env, source_node="a", source_job=1)["job"]
        assert cb.call("migrate_abort", job=dropped) == {}
        cb.wait_for(lambda: JobState(cb.job(dropped)["state"]).ended, "the dropped copy to end")
        cb.call("list_jobs")
        ca.call("list_jobs")
    finally:
        for c in (ca, cb):
            c.kill_everything()
        if runner.poll() is None:
            runner.kill()
    assert {"migrate", "migrate_prepare", "migrate_begin", "migrate_commit",
            "migrate_start", "migrate_abort"} <= set(checked)


@built(SHIM, STANDIN_DRIVER, GPU_APP, GPU_IMAGE)
def test_gpu_job_replies_match_the_schema(daemon_factory, tmp_path):
    """GPU jobs under the shim that do not fit the device together: the replies carry
    what CPU jobs never show (a gpu device, device memory, inferred boundaries, memory
    swapped out)."""
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("the CUDA shim cannot be preloaded under ASan (scripts/test_sanitized.sh)")
    d = daemon_factory("--devices", "gpu:1", "--device-memory-mib", "80", "--slice-ms", "50")
    d.env["LD_LIBRARY_PATH"] = STANDIN_DIR
    d.env["GANDIVA_SHIM"] = SHIM
    c = Checked(d.endpoint, {})
    procs = [d.run(GPU_APP, "--image", GPU_IMAGE, "--iterations", "400", "--buffers", "2",
                   "--buffer-bytes", str(24 * MIB), "--sleep-us", "1000", name=n)
             for n in ("a", "b")]
    seen = set()
    try:
        deadline = time.monotonic() + 120
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            for j in c.call("list_jobs")["jobs"]:
                seen.add((j["swap_state"], j["boundary_source"]))
            device = c.call("list_devices")["devices"][0]
            assert device["kind"] == DeviceKind.GPU and device["memory_bytes"] == 80 * MIB
            seen.add(("resident_bytes", device["resident_bytes"] > 0))
            time.sleep(0.02)
        c.call("list_switches")
    finally:
        c.kill_everything()
        for p in procs:
            p.wait(timeout=30)
    assert (SwapState.SWAPPED_OUT, BoundarySource.INFERRED) in seen, seen
    assert ("resident_bytes", True) in seen


def test_scheduler_replies_match_the_schema(tmp_path):
    from sched_cluster import SchedCluster
    cluster = SchedCluster(tmp_path, names=("a",))
    try:
        cluster.start(policy="fifo")
        checked = {}
        c = Checked(cluster.endpoint, checked)
        job = c.call("submit", command=["/bin/sh", "-c", "echo out; sleep 30"], cwd=str(tmp_path),
                     name="replies", user="u", vc="vc1", gpus=1, ranks=1, restartable=False)["job"]
        waiting = c.call("submit", command=["/bin/true"], cwd=str(tmp_path))["job"]
        wait_for(lambda: c.call("queue", job=job)["jobs"][0]["state"] == "running")
        wait_for(lambda: "out" in c.call("read_log", job=job, stream="stdout", offset=0)["data"])
        q = c.call("queue", all=True)
        assert [j["id"] for j in q["jobs"]] == [job, waiting] and q["policy"] == "fifo"
        assert q["nodes"] == [{"name": "a", "up": True, "devices": ["cpu0"]}]
        assert c.call("cancel", job=waiting)["state"] == "cancelled"
        c.call("cancel", job=job)
        wait_for(lambda: c.call("queue", job=job)["jobs"][0]["state"] == "cancelled")
        # Errors come as error replies, in the envelope the schema checks.
        for request, fields in (("submit", {"command": [], "cwd": "/"}),
                                ("submit", {"command": ["x"], "cwd": "relative"}),
                                ("queue", {"job": 99}), ("cancel", {"job": 99}),
                                ("read_log", {"job": 99}), ("submit", {"cwd": "/"})):
            with pytest.raises(gandiva.GandivaError):
                c.call(request, **fields)
        assert set(checked) == SCHEDULER_MESSAGES | {"read_log"}
    finally:
        cluster.stop()


def test_device_memory_caps_the_devices_found(daemon_factory):
    """Without --devices gandivad takes the devices it finds (NVML's GPUs; on this
    machine none, so cpu:1); --device-memory-mib caps the memory each one reports."""
    d = daemon_factory("--device-memory-mib", "64")
    device = Checked(d.endpoint, {}).call("list_devices")["devices"][0]
    assert device["memory_bytes"] == 64 * MIB, device
