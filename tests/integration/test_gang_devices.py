"""A job across several devices (`--devices cpu0,cpu1`): a real 2-rank DDP job
over gloo, one rank per device, sliced as one job. Its devices switch together:
it runs only when both are its, and a job on either device runs only while it
is parked. Time-sliced with a job on each device, checkpointed and restored,
and migrated to a node where it again spans two devices, its every rank's loss
history stays bitwise equal to an undisturbed run. Bad device lists get clear
errors and leave the daemon serving."""

import json
import threading
import time

from conftest import INTERVAL_JOB, PYTHON, wait_for
from nodes import Node
from test_gang import assert_same_training, ddp_cmd, job, progress, read, reference  # noqa: F401


def states(d):
    return {j["name"]: j for j in d.cli_json("ps")}


class Watcher:
    """Samples list_jobs while the gang trains: every sample where the gang and
    another job on one of its devices both ran is a failure to switch together."""

    def __init__(self, d):
        self.d, self.samples, self.overlaps, self.gang_running = d, 0, [], 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stop.is_set():
            jobs = states(self.d)
            gang = jobs.get("ddp")
            if gang and gang["state"] == "running":
                self.gang_running += 1
                others = [n for n, j in jobs.items() if n != "ddp" and j["state"] == "running"]
                if others:
                    self.overlaps.append(others)
            self.samples += 1
            time.sleep(0.01)

    def finish(self):
        self.stop.set()
        self.thread.join()


def test_a_job_across_two_devices_takes_turns_with_a_job_on_each(daemon_factory, tmp_path,
                                                                   reference):
    d = daemon_factory("--devices", "cpu:2", "--slice-ms", "50")
    one = d.run(PYTHON, INTERVAL_JOB, "--iterations", "100000", "--work-ms", "4",
                "--out", str(tmp_path / "one.json"), name="one", device="cpu0")
    two = d.run(PYTHON, INTERVAL_JOB, "--iterations", "100000", "--work-ms", "4",
                "--out", str(tmp_path / "two.json"), name="two", device="cpu1")
    d.wait_for(lambda: all(d.jobs().get(n, {}).get("iterations", 0) > 10 for n in ("one", "two")),
               what="a job on each device")
    out = tmp_path / "ddp"
    gang = d.cli("run", "--detach", "--ranks", "2", "--devices", "cpu0,cpu1", "--name", "ddp",
                 "--", *ddp_cmd(out, work_ms=20)).stdout.strip()
    watcher = Watcher(d)
    try:
        waited = d.cli("wait", gang, check=False, timeout=180)
    finally:
        watcher.finish()
    assert waited.returncode == 0, d.cli("logs", gang, "--stderr").stdout
    jobs = d.jobs()
    assert jobs["ddp"]["devices"] == ["cpu0", "cpu1"] and jobs["ddp"]["device"] == "cpu0"
    assert [read(out, k)["device"] for k in range(2)] == ["cpu0", "cpu1"]
    # Both single-device jobs ran throughout, beside each other and in turn with the gang.
    assert one.poll() is None and two.poll() is None
    assert jobs["ddp"]["slices"] >= 2 and jobs["one"]["slices"] >= 2 and jobs["two"]["slices"] >= 2
    assert watcher.gang_running >= 5, f"the gang was seen running {watcher.gang_running} times"
    assert not watcher.overlaps, f"ran beside the gang: {watcher.overlaps[:5]}"
    devices = {x["name"]: x for x in d.cli_json("devices")}
    assert set(devices) == {"cpu0", "cpu1"}
    assert jobs["ddp"]["id"] in devices["cpu0"]["jobs"] or jobs["ddp"]["state"] == "exited"
    switches = json.loads(d.cli("switches", "--json").stdout)
    ids = {jobs[n]["id"]: n for n in ("ddp", "one", "two")}
    handed = {(ids.get(s["from"]), ids.get(s["to"])) for s in switches}
    assert ("ddp", "one") in handed or ("ddp", "two") in handed, handed
    assert ("one", "ddp") in handed or ("two", "ddp") in handed, handed
    assert_same_training(out, reference)
    for j in ("one", "two"):
        d.cli("kill", str(jobs[j]["id"]))
    one.wait(timeout=30)
    two.wait(timeout=30)


def test_checkpoint_and_restore_across_two_devices(daemon_factory, tmp_path, reference):
    d = daemon_factory("--devices", "cpu:2")
    out, ckpt = tmp_path / "ddp", tmp_path / "ckpt"
    first = d.cli("run", "--detach", "--ranks", "2", "--devices", "cpu0,cpu1", "--name", "ddp",
                  "--", *ddp_cmd(out)).stdout.strip()
    d.wait_for(lambda: progress(out) >= 30, what="the gang training")
    d.cli("checkpoint", first, "--to", str(ckpt))
    d.wait_for(lambda: (job(d)["operation"] or {}).get("state") == "done", what="the checkpoint")
    assert (ckpt / "gang").read_text() == "ranks 2\n"
    assert d.cli("wait", first, timeout=120).returncode == 0
    restored = tmp_path / "restored"
    again = d.cli("run", "--detach", "--ranks", "2", "--devices", "cpu1,cpu0", "--name", "again",
                  "--restore", str(ckpt), "--", *ddp_cmd(restored)).stdout.strip()
    assert d.cli("wait", again, check=False, timeout=120).returncode == 0, \
        d.cli("logs", again, "--stderr").stdout
    assert d.jobs()["again"]["devices"] == ["cpu1", "cpu0"]
    assert [read(restored, k)["device"] for k in range(2)] == ["cpu1", "cpu0"]
    for k in range(2):
        assert read(restored, k)["restored_at"] >= 30
    assert_same_training(restored, reference)


def test_migration_arrives_across_as_many_devices(tmp_path, reference):
    (tmp_path / "keys").mkdir()
    a = Node(tmp_path, "a", extra=("--devices", "cpu:2"))
    b = Node(tmp_path, "b", extra=("--devices", "cpu:2"))
    try:
        for node, other in ((a, b), (b, a)):
            node.start([a.public, b.public], [(other.name, other.tcp, other.public)])
        out = tmp_path / "ddp"
        run = a.cli("run", "--detach", "--ranks", "2", "--devices", "cpu0,cpu1", "--name", "ddp",
                    "--", *ddp_cmd(out, work_ms=100))
        first = run.stdout.strip()
        wait_for(lambda: progress(out) >= 20, what="the gang training on a")
        # Held while b warms up its copy (torchrun and two ranks importing torch: on
        # a loaded machine longer than the rest of the run), so the move is mid-run.
        a.cli("suspend", first)
        op = json.loads(a.cli("migrate", first, "--to", "b", "--json").stdout)
        assert op["state"] == "done", op
        wait_for(lambda: b.job(op["to_job"]).get("state") in ("exited", "failed"),
                 what="the gang to finish on b")
        moved = b.job(op["to_job"])
        assert moved["state"] == "exited" and moved["ranks"] == 2, b.read_log()
        assert sorted(moved["devices"]) == ["cpu0", "cpu1"], moved
        for k in range(2):
            assert read(out, k)["restored_at"] >= 20
        assert_same_training(out, reference)
    finally:
        a.stop()
        b.stop()


def test_bad_device_lists_get_clear_errors(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:2")
    cases = [
        (["--devices", "cpu0,cpu7"], "no device 'cpu7'"),
        (["--devices", "cpu0,cpu0"], "given twice"),
        (["--devices", "cpu0,"], "separated by commas"),
        (["--device", "cpu0", "--devices", "cpu0,cpu1"], "not both"),
    ]
    for flags, message in cases:
        r = d.cli("run", "--detach", *flags, "--", "true", check=False)
        assert r.returncode != 0 and message in r.stderr, (flags, r.stderr)
    # A device whose jobs pack is not joined to another: they would be sliced
    # under it. Without jobs it is simply set to slice.
    d.cli("share", "cpu1", "pack")
    busy = d.run(PYTHON, INTERVAL_JOB, "--iterations", "100000", "--work-ms", "4",
                 "--out", str(tmp_path / "busy.json"), name="busy", device="cpu1")
    d.wait_for(lambda: d.jobs().get("busy", {}).get("iterations", 0) > 0, what="a packed job")
    r = d.cli("run", "--detach", "--devices", "cpu0,cpu1", "--", "true", check=False)
    assert r.returncode != 0 and "slice mode" in r.stderr, r.stderr
    d.cli("kill", str(d.jobs()["busy"]["id"]))
    busy.wait(timeout=30)
    d.cli("share", "cpu0", "pack")
    r = d.cli("run", "--detach", "--devices", "cpu0,cpu1", "--name", "joined", "--", "true")
    assert d.cli("wait", r.stdout.strip(), check=False).returncode == 0
    modes = {x["name"]: x["share_mode"] for x in d.cli_json("devices")}
    assert modes == {"cpu0": "slice", "cpu1": "slice"}, modes
    d.cli("ps")  # the daemon is fine
