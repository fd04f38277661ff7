"""A parked job takes nothing from the running one: gandivad stops a parked
job's whole process tree (SIGSTOP) and continues it before it acts again.

Real gandivad, real PyTorch jobs with torch's default thread settings (no
set_num_threads, no OMP_NUM_THREADS) and a 2-worker DataLoader."""

import os
import signal
import subprocess
import time

from conftest import PYTHON, HERE, read_result, wait_for

LOADER_JOB = os.path.join(HERE, "jobs", "loader_cnn_job.py")
TICK = os.sysconf("SC_CLK_TCK")


def default_threads(d):
    """The daemon fixture pins jobs to one thread; these run as users run them."""
    d.env.pop("OMP_NUM_THREADS", None)
    return d


def tree(pid):
    """pid and its descendants, from /proc/PID/task/*/children."""
    out = [pid]
    for p in out:
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    out += [int(c) for c in f.read().split() if int(c) not in out]
        except OSError:
            pass
    return out


def stat_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return s[s.rindex(")") + 2:].split()


def cpu_ticks(pids):
    """User + system CPU of every thread of pids (a dead thread counts nothing)."""
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{pid}/task/{t}/stat") as f:
                    s = f.read()
            except OSError:
                continue
            fields = s[s.rindex(")") + 2:].split()
            total += int(fields[11]) + int(fields[12])
    return total


def all_stopped(pids):
    try:
        return all(stat_of(p)[0] == "T" for p in pids)
    except OSError:
        return False


def start_reference(d, tmp_path, iterations):
    """The same job, undisturbed and without gandiva (unmanaged); returns (process, result)."""
    out = tmp_path / "reference.json"
    env = {k: v for k, v in d.env.items() if k != "GANDIVA_ENDPOINT"}
    return subprocess.Popen([PYTHON, LOADER_JOB, "--iterations", str(iterations), "--result",
                             str(out)], env=env, stdout=subprocess.DEVNULL), out


def test_held_job_is_stopped_quiet_checkpointable_and_resumes_exactly(daemon_factory, tmp_path):
    iterations = 60
    d = default_threads(daemon_factory("--devices", "cpu:1", "--slice-ms", "100"))
    reference, reference_out = start_reference(d, tmp_path, iterations)
    outs = {n: tmp_path / f"{n}.json" for n in ("a", "b")}
    procs = {n: d.run(PYTHON, LOADER_JOB, "--iterations", str(iterations), "--result", str(o),
                      name=n) for n, o in outs.items()}
    d.wait_for(lambda: all(j.get("iterations", 0) >= 5 for j in d.jobs().values())
               and len(d.jobs()) == 2, timeout=60, what="both jobs training, time-sliced")
    a = d.jobs()["a"]
    d.cli("suspend", str(a["id"]))
    pids = d.wait_for(lambda: (lambda t: t if len(t) >= 3 and all_stopped(t) else None)(
        tree(a["pid"])), what="job a's process and its DataLoader workers stopped")
    # Held by `suspend`: over a second, the whole tree uses (almost) no CPU.
    before, t0 = cpu_ticks(pids), time.monotonic()
    time.sleep(1.0)
    used = (cpu_ticks(pids) - before) / TICK / (time.monotonic() - t0)
    assert used < 0.02, f"parked job a used {used:.1%} of a core"
    progress = d.jobs()["a"]["iterations"]

    # A checkpoint of the stopped job: the transfer continues it first.
    r = d.cli("checkpoint", str(a["id"]), "--to", str(tmp_path / "ckpt"), check=False, timeout=60)
    assert r.returncode == 0, r.stderr + d.read_log()
    assert (tmp_path / "ckpt" / "state.gdck").stat().st_size > 1000
    assert d.jobs()["a"]["iterations"] == progress  # still held: no training meanwhile
    d.wait_for(lambda: all_stopped(tree(a["pid"])), what="job a stopped again after the checkpoint")

    d.cli("resume", str(a["id"]))
    for n, p in procs.items():
        assert p.wait(timeout=120) == 0, p.stderr.read()
    assert reference.wait(timeout=120) == 0
    reference = read_result(reference_out)["losses"]
    assert len(reference) == iterations
    for n, o in outs.items():
        assert read_result(o)["losses"] == reference, f"job {n}'s loss history differs"


def test_killed_daemon_leaves_no_job_stopped(daemon_factory, tmp_path):
    d = default_threads(daemon_factory("--devices", "cpu:1", "--lease-ms", "500"))
    out = tmp_path / "a.json"
    p = d.run(PYTHON, LOADER_JOB, "--iterations", "30", "--result", str(out), name="a")
    d.wait_for(lambda: d.jobs().get("a", {}).get("iterations", 0) >= 5, timeout=60,
               what="job a training")
    pid = d.jobs()["a"]["pid"]
    d.cli("suspend", str(d.jobs()["a"]["id"]))
    d.wait_for(lambda: all_stopped(tree(pid)) and len(tree(pid)) >= 3, what="job a stopped")
    d.stop(signal.SIGKILL)  # no goodbye: the guardian continues it, the lease frees it
    wait_for(lambda: not any(stat_of(q)[0] == "T" for q in tree(pid) if os.path.exists(f"/proc/{q}")),
             timeout=10, what="job a continued after the daemon died")
    assert p.wait(timeout=120) == 0, p.stderr.read()
    assert "lease expired" in p.stderr.read()
    assert len(read_result(out)["losses"]) == 30
