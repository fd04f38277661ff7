"""gandivad restarted, after SIGKILL or a plain stop, takes its jobs back from the
job table in its state directory (STATE/jobs.db): four real jobs time-sliced on
one device, one of them suspended by its user, are managed again within a second
of the new daemon answering, under their ids, with nothing lost: each job counts
every iteration exactly once (its state checksum equals a run alone), the
suspended one stays suspended, and slicing goes on. A job that ended while no
gandivad ran is recorded as ended."""

import json
import os
import signal
import sqlite3
import subprocess
import time

import pytest

from conftest import GANDIVA, GANDIVAD, SYNTHETIC_JOB, wait_for

ITERATIONS = 2500
ITERATION_MS = 2.0
LEASE_MS = 1000


def job_cmd(result, seed, iteration_ms=ITERATION_MS):
    return [SYNTHETIC_JOB, "--mib", "4", "--seed", str(seed), "--iterations", str(ITERATIONS),
            "--iteration-ms", str(iteration_ms), "--result", str(result)]


class RestartableDaemon:
    """One gandivad on a fixed endpoint and state directory, killed and started again."""

    def __init__(self, tmp_path):
        self.dir = tmp_path
        self.endpoint = f"ipc://{tmp_path}/gd.sock"
        self.env = dict(os.environ, GANDIVA_ENDPOINT=self.endpoint, OMP_NUM_THREADS="1")
        self.proc = None
        self.starts = 0
        self.devices = "cpu:1"

    def start(self):
        self.starts += 1
        self.log_path = self.dir / f"gandivad.{self.starts}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [GANDIVAD, "--endpoint", self.endpoint, "--devices", self.devices, "--slice-ms", "50",
             "--lease-ms", str(LEASE_MS)], stdout=self.log, stderr=subprocess.STDOUT)
        # The socket file outlives a killed daemon: wait until this one answers.
        deadline = time.monotonic() + 20
        while self.cli("ps", check=False).returncode != 0:
            assert self.proc.poll() is None, self.read_log()
            assert time.monotonic() < deadline, "gandivad did not come up"
            time.sleep(0.02)
        return time.monotonic()

    def stop(self, sig=signal.SIGTERM):
        if self.proc is None:  # never started (the test skipped)
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)
        self.log.close()

    def read_log(self):
        return "".join((self.dir / f"gandivad.{i}.log").read_text()
                       for i in range(1, self.starts + 1))

    def cli(self, *args, check=True):
        r = subprocess.run([GANDIVA, *args], env=self.env, capture_output=True, text=True,
                           timeout=30)
        if check:
            assert r.returncode == 0, f"gandiva {' '.join(args)}: {r.stderr}\n{self.read_log()}"
        return r

    def jobs(self):
        return {j["id"]: j for j in json.loads(self.cli("ps", "--all", "--json").stdout)}


@pytest.fixture
def daemon(tmp_path):
    d = RestartableDaemon(tmp_path)
    yield d
    d.stop()


def reference(tmp_path, seed):
    out = tmp_path / f"reference-{seed}.json"
    subprocess.run(job_cmd(out, seed, iteration_ms=0), check=True, capture_output=True,
                   timeout=120, env={k: v for k, v in os.environ.items()
                                     if not k.startswith("GANDIVA_")})
    return json.loads(out.read_text())


def start_four(daemon, tmp_path):
    runs = {}
    for i in range(1, 5):
        runs[i] = subprocess.Popen([GANDIVA, "run", "--name", f"j{i}", "--", *job_cmd(
            tmp_path / f"result-{i}.json", seed=i)], env=daemon.env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
    wait_for(lambda: len(daemon.jobs()) == 4 and
             all(j["iterations"] > 20 for j in daemon.jobs().values()), 60, "four jobs training")
    # Keyed by job id from here (the runs register in any order).
    ids = {j["name"]: i for i, j in daemon.jobs().items()}
    return {ids[f"j{k}"]: (k, run) for k, run in runs.items()}


def stored_slices(state_dir):
    """Each job's slice count as the job table on disk (STATE/jobs.db) holds it."""
    db = sqlite3.connect(f"file:{state_dir}/jobs.db?mode=ro", uri=True, timeout=10)
    try:
        return {i: json.loads(usage).get("slices", 0)
                for i, usage in db.execute("SELECT id, usage FROM jobs")}
    finally:
        db.close()


def is_suspended(job):
    return job["state"] == "suspended" and job["held"]


def slices(daemon):
    return {i: j["slices"] for i, j in daemon.jobs().items()}


def check_results(daemon, tmp_path, runs):
    """Every job ran to its end with each iteration counted once; returns their stderr."""
    stderr = {}
    for i, (k, run) in runs.items():
        _, stderr[i] = run.communicate(timeout=180)
        assert run.returncode == 0, stderr[i]
        res = json.loads((tmp_path / f"result-{k}.json").read_text())
        assert res["iterations"] == ITERATIONS, res
        assert res["checksum"] == reference(tmp_path, k)["checksum"], f"job {i} lost its state"
    jobs = daemon.jobs()
    assert all(jobs[i]["state"] == "exited" for i in runs), jobs
    return stderr


@pytest.mark.parametrize("how,down_s", [
    ("sigkill", 0.3),              # back before any lease ran out: parked jobs stay parked
    ("sigkill", 2 * LEASE_MS / 1e3),  # after: they failed open, ran unmanaged, and rejoin
    ("sigterm", 0.3),              # a plain stop (systemctl restart): they ran on meanwhile
])
def test_restarted_gandivad_takes_its_jobs_back(daemon, tmp_path, how, down_s):
    if not os.path.exists(SYNTHETIC_JOB):
        pytest.skip("synthetic_state_job not built")
    daemon.start()
    runs = start_four(daemon, tmp_path)
    daemon.cli("suspend", "2")
    wait_for(lambda: is_suspended(daemon.jobs()[2]), 30, "job 2 suspended", log=daemon.read_log)
    before = daemon.jobs()
    # The device figures reach the job table on disk once a second (later on a
    # busy machine): wait until the table holds at least these slice counts.
    wait_for(lambda: all(stored_slices(daemon.dir).get(i, -1) >= before[i]["slices"] for i in before),
             30, "the figures in the job table")
    first_pid = daemon.proc.pid

    daemon.stop(signal.SIGKILL if how == "sigkill" else signal.SIGTERM)
    time.sleep(down_s)
    up = daemon.start()
    assert daemon.proc.pid != first_pid

    # Managed again within a second: the same ids, processes and names, job 2 still
    # (or again) suspended by its user, the others taking turns.
    after = wait_for(lambda: (lambda j: j if is_suspended(j[2]) else None)(daemon.jobs()), 10,
                     "job 2 suspended after the restart")
    assert time.monotonic() - up < 1.0 + 0.5, "not managed again within a second"
    for i in range(1, 5):
        assert after[i]["name"] == before[i]["name"] and after[i]["pid"] == before[i]["pid"]
        assert after[i]["state"] not in ("exited", "failed"), after[i]
        assert after[i]["slices"] >= before[i]["slices"], (before[i], after[i])
    log = daemon.read_log()
    assert "re-adopted 4 job(s)" in log, log
    # Slicing goes on: every job not suspended gets new slices; job 2 gets none.
    s0 = slices(daemon)
    held_iterations = daemon.jobs()[2]["iterations"]
    wait_for(lambda: all(slices(daemon)[i] > s0[i] + 2 for i in (1, 3, 4)), 30,
             "slices for jobs 1, 3 and 4")
    assert daemon.jobs()[2]["iterations"] == held_iterations, "the suspended job ran"
    assert slices(daemon)[2] == s0[2]

    daemon.cli("resume", "2")
    stderr = check_results(daemon, tmp_path, runs)
    if how == "sigkill" and down_s > LEASE_MS / 1e3:
        # Parked when gandivad died, job 2 ran on its expired lease, then rejoined.
        assert "lease expired" in stderr[2] and "managed again" in stderr[2], stderr


def test_a_job_that_ended_while_gandivad_was_down_is_recorded(daemon, tmp_path):
    if not os.path.exists(SYNTHETIC_JOB):
        pytest.skip("synthetic_state_job not built")
    daemon.start()
    runs = start_four(daemon, tmp_path)
    pid3, name3 = daemon.jobs()[3]["pid"], daemon.jobs()[3]["name"]
    daemon.stop(signal.SIGKILL)
    os.kill(pid3, signal.SIGKILL)
    # Reaped by its `gandiva run` (which then keeps trying to tell a gandivad).
    wait_for(lambda: not os.path.exists(f"/proc/{pid3}"), 10, "job 3's process gone")
    daemon.start()
    jobs = daemon.jobs()
    assert jobs[3]["state"] == "failed", jobs[3]
    log = daemon.read_log()
    assert f"({name3}): it ended while gandivad was away" in log and "re-adopted 3 job(s)" in log, log
    # Then its `gandiva run`, which saw it killed, says so (or has already).
    wait_for(lambda: daemon.jobs()[3]["exit_detail"] == "killed by signal 9 (Killed)", 60,
             "job 3's end reported")
    # New jobs get new ids: none is handed out twice.
    extra = subprocess.run([GANDIVA, "run", "--name", "extra", "--", SYNTHETIC_JOB, "--mib", "1",
                            "--iterations", "5"], env=daemon.env, capture_output=True, timeout=60)
    assert extra.returncode == 0, extra.stderr
    assert max(daemon.jobs()) == 5
    # Ended before a restart, a job keeps its figures (frozen when it ended).
    daemon.stop()
    daemon.start()
    assert daemon.jobs()[5]["iterations"] == 5 and daemon.jobs()[5]["state"] == "exited"
    assert runs[3][1].wait(timeout=60) == 128 + signal.SIGKILL
    del runs[3]
    check_results(daemon, tmp_path, runs)


def test_a_second_gandivad_on_the_same_state_directory_is_refused(daemon, tmp_path):
    daemon.start()
    r = subprocess.run([GANDIVAD, "--endpoint", f"ipc://{tmp_path}/other.sock", "--state-dir",
                        str(tmp_path), "--devices", "cpu:1"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0
    assert "another gandivad uses the state directory" in r.stdout + r.stderr


def test_an_unreadable_job_table_is_set_aside(tmp_path):
    (tmp_path / "jobs.db").write_bytes(b"this is not a database" * 100)
    d = RestartableDaemon(tmp_path)
    try:
        d.start()
        assert d.jobs() == {}
        kept = [p for p in os.listdir(tmp_path) if p.startswith("jobs.db.unreadable.")]
        assert kept, os.listdir(tmp_path)
        assert (tmp_path / kept[0]).read_bytes().startswith(b"this is not a database")
        assert "moved to" in d.read_log()
    finally:
        d.stop()


def test_a_job_gandivad_launched_is_taken_back_with_its_output(daemon, tmp_path):
    if not os.path.exists(SYNTHETIC_JOB):
        pytest.skip("synthetic_state_job not built")
    daemon.start()
    out = tmp_path / "launched.json"
    r = daemon.cli("run", "--detach", "--name", "launched", "--", *job_cmd(out, seed=9)[:-2],
                   "--report-every", "200", "--result", str(out))
    job_id = int(r.stdout.strip())
    wait_for(lambda: daemon.jobs()[job_id]["iterations"] > 250, 60, "the launched job training")
    daemon.stop(signal.SIGKILL)
    daemon.start()
    job = daemon.jobs()[job_id]
    assert job["launched"] and job["state"] not in ("exited", "failed"), job
    # Its output file is gandivad's to serve again.
    assert "[synthetic] iter 200" in daemon.cli("logs", str(job_id)).stdout
    r = daemon.cli("wait", str(job_id), "--timeout-s", "120", check=False)
    job = daemon.jobs()[job_id]
    # It detached at its end; its exit status went with the gandivad that was its parent.
    assert job["state"] == "exited" and job["exit_reason"] == "lost", job
    res = json.loads(out.read_text())
    assert res["iterations"] == ITERATIONS
    assert res["checksum"] == reference(tmp_path, 9)["checksum"]


_gang_reference = []  # each rank's loss history in a run never disturbed


@pytest.mark.parametrize("devices", [[], ["cpu0", "cpu1"]], ids=["one device", "two devices"])
def test_a_gang_is_taken_back_with_every_rank(daemon, tmp_path, devices):
    from conftest import BUILD as build
    from test_gang import assert_same_training, ddp_cmd, progress, read
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"), OMP_NUM_THREADS="1")
    env.pop("GANDIVA_CONTROL_BLOCK", None)
    # Long enough (~5 s) to outlast the restart: under ASan gandivad takes seconds to
    # come back, and a gang of 120 iterations ran to its end unmanaged meanwhile.
    iterations = 400
    if not _gang_reference:  # one undisturbed run serves both placements
        ref_out = tmp_path / "reference"
        subprocess.run(ddp_cmd(ref_out, iterations, work_ms=10), check=True, env=env,
                       capture_output=True, timeout=180)
        _gang_reference.extend(read(ref_out, k) for k in range(2))
    reference_losses = list(_gang_reference)

    # Across two devices: taken back across both, sliced together again.
    daemon.devices = f"cpu:{max(1, len(devices))}"
    placement = ["--devices", ",".join(devices)] if devices else []
    daemon.start()
    out = tmp_path / "ddp"
    run = subprocess.Popen([GANDIVA, "run", "--ranks", "2", "--name", "ddp", *placement, "--",
                            *ddp_cmd(out, iterations, work_ms=10)], env=dict(daemon.env, **{
                                "PYTHONPATH": env["PYTHONPATH"]}),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: progress(out) >= 15, 90, "the gang training")
    gang_id = next(iter(daemon.jobs()))
    daemon.stop(signal.SIGKILL)
    time.sleep(0.3)
    daemon.start()
    assert "re-adopted 1 job(s)" in daemon.read_log(), daemon.read_log()
    if devices:
        assert daemon.jobs()[gang_id]["devices"] == devices
        listed = json.loads(daemon.cli("devices", "--json").stdout)
        assert all(gang_id in d["jobs"] for d in listed), listed
    # Managed as one job again: a suspend parks every rank at one iteration.
    daemon.cli("suspend", str(gang_id))
    wait_for(lambda: daemon.jobs()[gang_id]["state"] == "suspended", 30, "the gang parked")
    parked = [read(out, k) for k in range(2)]
    time.sleep(0.5)
    assert [read(out, k) for k in range(2)] == parked, "a rank trained while suspended"
    daemon.cli("resume", str(gang_id))
    assert run.wait(timeout=120) == 0, run.stderr.read()
    rec = daemon.jobs()[gang_id]
    assert rec["state"] == "exited" and rec["gang_error"] == "", rec
    assert_same_training(out, reference_losses)
