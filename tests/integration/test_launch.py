"""gandivad launches jobs itself: `gandiva run --detach` (the launch request),
`gandiva logs` and `gandiva wait`, how a process ended (exited, killed, failed to
start), the per-job log cap, memory limits said as they are, and bad launches that
get clear errors while the daemon and its other jobs run on. Real gandivad, real
processes."""

import json
import os

import pytest

import gandiva
from conftest import PYTHON, MLP_EXAMPLE
from test_migration import mlp_cmd, reference, same_training


@pytest.fixture
def daemon(daemon_factory):
    return daemon_factory("--devices", "cpu:2", "--job-log-cap-kib", "8")


def detach(d, *cmd, flags=(), check=True):
    r = d.cli("run", "--detach", *flags, "--", *cmd, check=check)
    return int(r.stdout) if r.returncode == 0 else r


def record(d, job):
    return next(j for j in d.cli_json("ps", "--all") if j["id"] == job)


def wait_code(d, job, timeout=60):
    return d.cli("wait", str(job), check=False, timeout=timeout).returncode


def test_launch_logs_and_wait_report_what_the_process_did(daemon):
    job = detach(daemon, "sh", "-c", "echo to-out; echo to-err >&2; exit 3")
    assert wait_code(daemon, job) == 3
    assert daemon.cli("logs", str(job)).stdout == "to-out\n"
    assert daemon.cli("logs", str(job), "--stderr").stdout == "to-err\n"
    j = record(daemon, job)
    assert (j["state"], j["exit_reason"], j["exit_code"]) == ("failed", "exited", 3)
    assert j["launched"] and j["user"] and j["stdout_log"].endswith(f"job-{job}.stdout")
    # gandivad is the job's parent: the process is reaped, no zombie is left.
    assert j["pid"] > 0 and not os.path.exists(f"/proc/{j['pid']}")

    ok = detach(daemon, "true")
    assert wait_code(daemon, ok) == 0
    assert record(daemon, ok)["state"] == "exited"


def test_logs_follow_streams_until_the_job_ended(daemon):
    job = detach(daemon, "sh", "-c", "for i in 1 2 3 4 5; do echo tick $i; sleep 0.2; done")
    r = daemon.cli("logs", str(job), "--follow", "--interval-ms", "50", timeout=30)
    assert r.stdout == "".join(f"tick {i}\n" for i in range(1, 6))
    assert record(daemon, job)["exit_reason"] == "exited"


def test_a_job_killed_by_a_signal(daemon):
    job = detach(daemon, "sleep", "60")
    daemon.cli("kill", str(job), "--signal", "9")
    assert wait_code(daemon, job) == 128 + 9
    j = record(daemon, job)
    assert (j["exit_reason"], j["exit_signal"], j["exit_code"]) == ("killed", 9, 137)
    assert "signal 9" in j["exit_detail"]


def test_a_command_that_cannot_start(daemon, tmp_path):
    r = detach(daemon, "no-such-command-gandiva", check=False)
    assert r.returncode == 1 and "No such file or directory" in r.stderr
    missing = int(r.stderr.split("job ")[1].split(":")[0])  # the error names the job
    assert wait_code(daemon, missing) == 127
    j = record(daemon, missing)
    assert (j["state"], j["exit_reason"]) == ("failed", "failed_to_start")

    script = tmp_path / "not-executable.sh"
    script.write_text("echo hi\n")
    r = detach(daemon, str(script), check=False)
    assert r.returncode == 1 and "Permission denied" in r.stderr
    denied = int(r.stderr.split("job ")[1].split(":")[0])
    assert wait_code(daemon, denied) == 126
    assert record(daemon, denied)["exit_reason"] == "failed_to_start"


def test_the_log_keeps_the_newest_output_under_its_cap(daemon):
    # 2000 numbered lines of 40 bytes = 80 KB through an 8 KiB cap.
    writer = "for i in range(2000): print(f'line {i:05d} ' + 'x' * 29, flush=True)"
    job = detach(daemon, PYTHON, "-c", writer)
    assert wait_code(daemon, job) == 0
    r = daemon.cli("logs", str(job))
    lines = r.stdout.splitlines()
    assert lines[-1].startswith("line 01999"), "the newest output is kept"
    assert len(r.stdout) <= 2 * 8192
    assert "dropped by the log cap" in r.stderr
    path = record(daemon, job)["stdout_log"]
    assert os.path.getsize(path) + os.path.getsize(path + ".1") <= 2 * 8192 + 4096


def test_bad_launches_get_clear_errors_and_nothing_else_stops(daemon, tmp_path):
    keeper = detach(daemon, "sleep", "60")
    c = gandiva.Client(daemon.endpoint)

    r = detach(daemon, "true", flags=("--device", "gpu7"), check=False)
    assert r.returncode == 1 and "no device 'gpu7'" in r.stderr
    bad = [
        (dict(command=["true"], cwd="relative/dir"), "absolute"),
        (dict(command=["true"], cwd=str(tmp_path / "missing")), "not a directory"),
        (dict(command=["true"], cwd=str(tmp_path), restore=str(tmp_path / "nope")),
         "not a directory"),
        (dict(command=["true"], cwd=str(tmp_path), restore=str(tmp_path)), "no checkpoint"),
        (dict(command=["true"], cwd=str(tmp_path), env={}), "env must not be empty"),
    ]
    for fields, says in bad:
        with pytest.raises(gandiva.GandivaError) as e:
            c.call("launch", **fields)
        assert e.value.code == "invalid_argument" and says in str(e.value), (fields, e.value)
    with pytest.raises(gandiva.GandivaError) as e:
        c.read_log(keeper, stream="stdin")
    assert e.value.code == "invalid_argument"

    assert c.hello()["pid"] == daemon.proc.pid
    assert record(daemon, keeper)["state"] in ("starting", "running")
    daemon.cli("kill", str(keeper))
    assert wait_code(daemon, keeper) == 128 + 15


def test_memory_limit_is_enforced_or_says_why_not(daemon):
    said = gandiva.Client(daemon.endpoint).hello()["memory_limits"]
    assert said.startswith("enforced: ") or said.startswith("not enforced: ")
    r = daemon.cli("run", "--detach", "--memory-mib", "256", "--json", "--", "sleep", "30")
    reply = json.loads(r.stdout)
    j = record(daemon, reply["job"])
    assert j["memory_limit"] == reply["memory_limit"]
    if said.startswith("enforced"):
        cgroup = reply["memory_limit"].split(" in ")[1]
        assert open(f"{cgroup}/memory.max").read().strip() == str(256 << 20)
        assert str(reply["pid"]) in open(f"{cgroup}/cgroup.procs").read().split()
    else:
        assert reply["memory_limit"] == said  # not enforced, and why
        assert "not enforced" in r.stderr
    assert "memory limits of launched jobs: " + said in daemon.cli("devices").stdout
    daemon.cli("kill", str(reply["job"]))


def test_gandiva_run_without_detach_works_as_before(daemon):
    r = daemon.cli("run", "--name", "attached", "--", "sh", "-c", "echo here; exit 5", check=False)
    assert (r.returncode, r.stdout) == (5, "here\n")
    j = daemon.jobs()["attached"]
    assert not j["launched"] and j["stdout_log"] == ""
    daemon.wait_for(lambda: record(daemon, j["id"])["exit_reason"] == "exited", what="exit reported")
    assert wait_code(daemon, j["id"]) == 5
    r = daemon.cli("logs", str(j["id"]), check=False)
    assert r.returncode == 1 and "no log here" in r.stderr
    # Killed by a signal: `gandiva run` reports which, and the record says so.
    r = daemon.cli("run", "--name", "signalled", "--", "sh", "-c", "kill -9 $$", check=False)
    assert r.returncode == 137
    k = daemon.jobs()["signalled"]["id"]
    daemon.wait_for(lambda: record(daemon, k)["exit_reason"] == "killed", what="signal reported")
    assert record(daemon, k)["exit_signal"] == 9


def test_a_launched_job_restores_from_a_checkpoint(daemon, tmp_path):
    if not os.path.exists(MLP_EXAMPLE):
        pytest.skip("the libtorch example is not built in this tree")
    ref = reference(mlp_cmd, tmp_path, "mlp")
    out = tmp_path / "mlp.json"
    job = detach(daemon, *mlp_cmd(out))
    daemon.wait_for(lambda: record(daemon, job)["iterations"] > 300, what="training")
    ckpt = tmp_path / "ckpt"
    assert "checkpointed" in daemon.cli("checkpoint", str(job), "--to", str(ckpt)).stdout
    daemon.cli("kill", str(job), "--signal", "9")
    assert wait_code(daemon, job) == 137
    again = detach(daemon, *mlp_cmd(out), flags=("--restore", str(ckpt)))
    assert wait_code(daemon, again, timeout=120) == 0, daemon.cli("logs", str(again), "--stderr").stdout
    same_training(ref, json.loads(out.read_text()))


def test_a_node_refuses_jobs_past_its_limit(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1", "--max-jobs", "2")
    ids = [int(d.cli("run", "--detach", "--", "/bin/sleep", "60").stdout.split()[-1]) for _ in range(2)]
    r = d.cli("run", "--detach", "--", "/bin/sleep", "60", check=False)
    assert r.returncode != 0 and "its limit (--max-jobs)" in r.stderr, r.stderr
    d.cli("kill", str(ids[0]), "--signal", "9")
    d.wait_for(lambda: d.cli_json("ps", "--all")[0]["exit_reason"] != "none", 30, "the kill")
    r = d.cli("run", "--detach", "--", "/bin/true")
    assert r.returncode == 0
    d.cli("kill", str(ids[1]), "--signal", "9")
