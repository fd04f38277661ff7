"""A real Slurm cluster on this machine for integration tests: its own munged,
a slurmctld and, per node, a slurmd (and optionally a gandivad), each node in
its own network namespace (nodes.NetnsLan) and UTS namespace (hostname = the
Slurm node name), slurmctld on the bridge address 10.78.<tag>.254 in a UTS
namespace of its own (hostname `ctl`). Every file (keys, sockets, state,
spool, logs) lives under the test's tmp_path; nothing under /etc is used.

    with SlurmCluster(tmp_path) as cluster:
        job = cluster.sbatch("-w", "n1", wrap="hostname")
        cluster.wait_state(job, "COMPLETED")

SlurmCluster.unavailable() says why Slurm cannot run here (None where it can).

Timing facts of Slurm 22.05 that tests must live with:
- Preemption (partition low -> high, PreemptMode=REQUEUE): a job selected for
  preemption keeps running for the partition's GraceTime, but slurmctld ends
  the grace only on its 30 s job-time-limit timer (PERIODIC_TIMEOUT, not
  configurable), so the preempted job is requeued at the first such tick after
  the grace: with GraceTime=20, between 20 and 50 s after the preemptor's
  submission. GraceTime=0 requeues at once.
- During the grace the batch script is signalled only if the job asked for a
  signal to the batch shell (`--signal=B:USR1@<s>`): SlurmctldParameters=
  preempt_send_user_signal sends it when preemption starts. Without it, a
  plain batch script (no srun steps) gets nothing until SIGTERM at grace end.
- A requeued job stays PENDING (Reason=BeginTime) for cred_expire + 1 s
  (AuthInfo cred_expire=5, Slurm's minimum): 6 s.
"""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import nodes
from conftest import GANDIVA, GANDIVAD

SLURM_PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "squeue", "scancel",
                  "unshare", "nsenter")

# Job states after which a job will not change any more (unless requeued by hand).
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


def _in_uts(hostname, *cmd):
    """cmd in a new UTS namespace whose hostname is hostname (exec'd: same pid)."""
    return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname, *cmd]


def _in_netns(netns, *cmd):
    """cmd in the named network namespace (exec'd: same pid). nsenter, not `ip
    netns exec`, which mounts a sysfs of the namespace's own over /sys and so
    hides /sys/fs/cgroup, without which slurmd 22.05 does not start (its cgroup
    plugin is loaded even with proctrack/linuxproc and task/none)."""
    return ["nsenter", f"--net=/run/netns/{netns}", *cmd]


def parse_job(line):
    """`scontrol show job -o` output as a dict. Values may contain spaces
    (a word without '=' belongs to the value before it)."""
    job, key = {}, None
    for word in line.split():
        name, eq, value = word.partition("=")
        if eq and name and (name[0].isupper() or key is None):
            key = name
            job[key] = value
        elif key is not None:
            job[key] += " " + word
    return job


class SlurmCluster:
    """Start: munged, slurm.conf, slurmctld, a slurmd (and gandivad) per node;
    then waits for every node to be idle. stop() (also on a failed start, and
    at the end of a `with`) cancels the jobs, ends every process it started and
    deletes the namespaces and the bridge."""

    def __init__(self, tmp_path, names=("n1", "n2"), plugstack_lines=(), gandivad=True, cpus=1,
                 grace_time=20, idle_timeout=30, gres=None):
        """gres: None, or (gres_conf, node_gres): the text of gres.conf (written
        beside slurm.conf, where Slurm looks for it) and every node's Gres=
        ("gpu:1,shard:4"); GresTypes= lists the names in node_gres."""
        self.tmp = Path(tmp_path)
        self.names = tuple(names)
        self.cpus = cpus
        self.grace_time = grace_time
        self.gres = gres
        self.procs = []  # (label, Popen, log file), in start order
        self.lan = None
        self.slurmctld = None
        self.slurmd = {}
        self.gandivad = {}
        self.conf = self.tmp / "slurm.conf"
        self.munge_socket = self.tmp / "munge" / "munge.socket"
        self.gandivad_endpoint_template = f"ipc://{self.tmp}/%n/gandivad.sock"
        # Slurm commands get a clean environment: our SLURM_CONF, and no GANDIVA_
        # or SLURM_ variables of the test's own (sbatch exports its environment
        # to the job by default, and jobs must show only what Slurm gave them).
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("GANDIVA_", "SLURM_", "SBATCH_", "SALLOC_", "SRUN_"))}
        self.env["SLURM_CONF"] = str(self.conf)
        self.started_s = None
        t0 = time.monotonic()
        try:
            self._start(plugstack_lines, gandivad, idle_timeout)
        except BaseException:
            self.stop()
            raise
        self.started_s = time.monotonic() - t0

    @staticmethod
    def unavailable():
        """Why a Slurm cluster cannot be started here, or None."""
        if os.geteuid() != 0:
            return "needs root"
        missing = [p for p in SLURM_PROGRAMS if shutil.which(p) is None]
        if missing:
            return "missing " + ", ".join(missing)
        if not nodes.netns_available():
            return "needs ip netns"
        return None

    # -- start ----------------------------------------------------------------

    def _start(self, plugstack_lines, gandivad, idle_timeout):
        # A tag no other LAN on this machine holds (another suite may run beside this one).
        self.lan = nodes.NetnsLan(self.names)
        self.tag = self.lan.tag
        self.host_addr = f"10.78.{self.lan.tag}.254"
        self.nodes = dict(self.lan.spaces)  # name -> (netns, address)
        self._start_munged()
        self._write_conf(plugstack_lines)
        self.slurmctld = self._spawn("slurmctld", _in_uts("ctl", "slurmctld", "-D", "-f", str(self.conf)))
        for name in self.names:
            (self.tmp / name).mkdir(exist_ok=True)
            if gandivad:
                self._start_gandivad(name)
        for name in self.names:
            netns = self.nodes[name][0]
            self.slurmd[name] = self._spawn(
                f"slurmd.{name}",
                _in_netns(netns, *_in_uts(name, "slurmd", "-D", "-f", str(self.conf))))
        self._wait_idle(idle_timeout)

    def _spawn(self, label, cmd, env=None):
        log = open(self.tmp / f"{label}.out", "w")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env or self.env, cwd=self.tmp)
        self.procs.append((label, proc, log))
        return proc

    def _wait(self, predicate, timeout, what, procs=()):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            for label, proc in procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{label} exited ({proc.returncode}) while waiting for {what}\n"
                                       + self.logs())
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}\n" + self.logs())
            time.sleep(0.05)

    def _start_munged(self):
        d = self.munge_socket.parent
        d.mkdir(mode=0o700)
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        proc = self._spawn("munged", [
            "munged", "--foreground", "--force", f"--socket={self.munge_socket}",
            f"--key-file={key}", f"--pid-file={d / 'munged.pid'}", f"--log-file={d / 'munged.log'}",
            f"--seed-file={d / 'munged.seed'}"])
        self._wait(self.munge_socket.exists, 10, "munged's socket", [("munged", proc)])

    def _start_gandivad(self, name):
        sock = self.tmp / name / "gandivad.sock"
        env = dict(self.env, OMP_NUM_THREADS="1")
        proc = self._spawn(f"gandivad.{name}", _in_netns(
            self.nodes[name][0], GANDIVAD, "--node", name, "--devices", "cpu:1", "--endpoint", self.endpoint(name)),
            env)
        self.gandivad[name] = proc
        self._wait(sock.exists, 10, f"gandivad on {name}", [(f"gandivad.{name}", proc)])

    def _write_conf(self, plugstack_lines):
        t = self.tmp
        for d in ("state", "spool"):
            (t / d).mkdir(exist_ok=True)
        for name in self.names:
            (t / "spool" / name).mkdir(exist_ok=True)
        (t / "plugstack.conf").write_text("".join(f"{line}\n" for line in plugstack_lines))
        self.ctld_port, self.slurmd_port = nodes.free_port(), nodes.free_port()
        node_gres, gres_types = "", ""
        if self.gres is not None:
            gres_conf, gres_of_node = self.gres
            (t / "gres.conf").write_text(gres_conf)
            node_gres = f" Gres={gres_of_node}"
            kinds = dict.fromkeys(g.split(":")[0] for g in gres_of_node.split(","))
            gres_types = f"GresTypes={','.join(kinds)}\n"
        node_lines = "".join(f"NodeName={name} NodeAddr={self.nodes[name][1]} CPUs={self.cpus}{node_gres}"
                             " State=UNKNOWN\n" for name in self.names)
        self.conf.write_text(f"""\
ClusterName=gd{self.tag}
SlurmctldHost=ctl({self.host_addr})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket},cred_expire=5
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
StateSaveLocation={t}/state
SlurmdSpoolDir={t}/spool/%n
SlurmctldPidFile={t}/slurmctld.pid
SlurmdPidFile={t}/slurmd.%n.pid
SlurmctldLogFile={t}/slurmctld.log
SlurmdLogFile={t}/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=3600
JobRequeue=1
KillWait=5
PlugStackConfig={t}/plugstack.conf
MailProg=/bin/true
SlurmctldParameters=preempt_send_user_signal
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=1,bf_interval=1
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
{gres_types}{node_lines}\
PartitionName=low Nodes=ALL Default=YES PriorityTier=1 GraceTime={self.grace_time} OverSubscribe=NO MaxTime=INFINITE State=UP
PartitionName=high Nodes=ALL PriorityTier=10 OverSubscribe=NO MaxTime=INFINITE State=UP
""")

    def _node_states(self):
        r = self.slurm("sinfo", "-h", "-N", "-o", "%n %t", check=False)
        states = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
        return states

    def _wait_idle(self, timeout):
        watched = [("slurmctld", self.slurmctld)] + [(f"slurmd.{n}", p) for n, p in self.slurmd.items()]
        self._wait(lambda: all(self._node_states().get(n) == "idle" for n in self.names), timeout,
                   "every node idle in sinfo", watched)

    # -- use ------------------------------------------------------------------

    def endpoint(self, name):
        """The gandivad endpoint of node name."""
        return self.gandivad_endpoint_template.replace("%n", name)

    def slurm(self, *cmd, check=True, timeout=30):
        """Runs a Slurm command (sinfo, scontrol, ...) against this cluster."""
        r = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.tmp)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr}")
        return r

    def sbatch(self, *args, script=None, wrap=None):
        """Submits a batch job (script: the script's text; wrap: --wrap's command);
        returns its id. Output goes to <tmp>/slurm-<id>.out unless args say -o."""
        cmd = ["sbatch", "--parsable", "-o", str(self.tmp / "slurm-%j.out"), *args]
        if wrap is not None:
            cmd.append(f"--wrap={wrap}")
        if script is not None:
            path = self.tmp / f"script-{time.monotonic_ns()}.sh"
            path.write_text(script if script.startswith("#!") else "#!/bin/sh\n" + script)
            cmd.append(str(path))
        r = self.slurm(*cmd)
        return int(r.stdout.strip().split(";")[0])

    def job(self, job_id):
        """`scontrol show job -o <id>` as a dict (JobState, NodeList, Restarts, ExitCode, ...)."""
        r = self.slurm("scontrol", "show", "job", "-o", str(job_id))
        return parse_job(r.stdout.strip())

    def wait_state(self, job_id, states, timeout=30):
        """Waits until the job's JobState is one of states (a name or names); returns
        the job. Fails with the job and the daemons' logs on timeout or when it
        reaches another final state."""
        states = {states} if isinstance(states, str) else set(states)
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            state = job.get("JobState")
            if state in states:
                return job
            if state in FINAL_STATES or time.monotonic() > deadline:
                why = f"is {state}" if state in FINAL_STATES else f"timed out ({timeout} s)"
                raise AssertionError(f"job {job_id} {why} waiting for {sorted(states)}: {job}\n"
                                     f"--- output ---\n{self.output(job_id)}\n{self.logs()}")
            time.sleep(0.1)

    def output(self, job_id):
        """Text of the job's output file ('' while there is none)."""
        path = self.job(job_id).get("StdOut") or str(self.tmp / f"slurm-{job_id}.out")
        try:
            return Path(path).read_text(errors="replace")
        except OSError:
            return ""

    def node_cli(self, name, *args, check=True, timeout=30):
        """Runs the gandiva CLI against node name's gandivad."""
        r = subprocess.run([GANDIVA, *args], env=dict(self.env, GANDIVA_ENDPOINT=self.endpoint(name)),
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"gandiva {' '.join(args)} on {name}: {r.stderr}\n{self.logs()}")
        return r

    def node_jobs(self, name):
        """`gandiva ps --all --json` on node name."""
        return json.loads(self.node_cli(name, "ps", "--all", "--json").stdout)

    def logs(self, tail=60):
        """The last lines of every daemon's log, for failure messages."""
        paths = [self.tmp / "slurmctld.log", self.tmp / "slurmctld.out"]
        for name in self.names:
            paths += [self.tmp / f"slurmd.{name}.log", self.tmp / f"slurmd.{name}.out",
                      self.tmp / f"gandivad.{name}.out"]
        paths += [self.tmp / "munge" / "munged.log", self.tmp / "munged.out"]
        parts = []
        for p in paths:
            try:
                lines = p.read_text(errors="replace").splitlines()
            except OSError:
                continue
            if lines:
                parts.append(f"--- {p.name} ---\n" + "\n".join(lines[-tail:]))
        return "\n".join(parts)

    # -- stop -----------------------------------------------------------------

    def stop(self):
        """Cancels every job, ends every process this cluster started (and what they
        left in the node namespaces: slurmstepd, job processes), deletes the
        namespaces and the bridge. Safe to call twice and after a failed start."""
        ctld_up = self.slurmctld is not None and self.slurmctld.poll() is None
        if ctld_up and any(p.poll() is None for p in self.slurmd.values()):
            self.slurm("scancel", "--user=root", check=False, timeout=10)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                r = self.slurm("squeue", "-h", "-t", "RUNNING,COMPLETING,CONFIGURING", "-o", "%i",
                               check=False, timeout=10)
                if r.returncode != 0 or not r.stdout.strip():
                    break
                time.sleep(0.1)
        # Nodes first (slurmd, gandivad, then anything left in their namespace),
        # then slurmctld and munged.
        order = [e for e in self.procs if e[0].startswith("slurmd.")]
        order += [e for e in self.procs if e[0].startswith("gandivad.")]
        for label, proc, _ in order:
            _terminate(proc)
        if self.lan is not None:
            for netns, _ in self.lan.spaces.values():
                _kill_netns_processes(netns)
        for label, proc, _ in self.procs:
            _terminate(proc)
        for _, _, log in self.procs:
            log.close()
        self.procs = []
        if self.lan is not None:
            self.lan.delete()
            self.lan = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _terminate(proc, timeout=10):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


def _kill_netns_processes(netns):
    """SIGKILLs what still runs in the namespace (slurmstepd and job processes
    outlive slurmd), until nothing does."""
    for _ in range(50):
        r = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
        pids = [int(p) for p in r.stdout.split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
