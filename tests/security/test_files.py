"""Paths and files on a shared node: gandivad runs as root, so a directory it
keeps files in must be its own (or root's) and writable by no one else, and
what it writes for a job is never written through a link. Each attack here is
refused with a clear error; the daemon (or the one already serving) keeps
serving; nothing is written where the attacker pointed, nor lost.

- a squatted socket directory, or state directory, of another user: refused,
  and left as it was (the old gandivad chmod'ed it and used it);
- the /tmp directory the old gandivad fell back to for a deep --state-dir,
  made first by another user with a link planted where a job log rotates:
  nothing goes to /tmp any more;
- a link where gandivad (root) writes a rotated job log, or where a root job
  writes its checkpoint: not followed;
- the directory of an existing socket is left with its own mode;
- checkpoints are 0600 in 0700 directories, and a checkpoint another user
  could have written is not restored."""

import os
import pwd
import shutil
import stat
import subprocess
import sys
import time

from conftest import GANDIVA, GANDIVAD, SYNTHETIC_JOB, as_user, cli, jobs, other_users_dir, wait_for

PRECIOUS = "precious: root's own file\n"


def uid(user):
    return pwd.getpwnam(user).pw_uid


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def start_gandivad(root, *args, env=None, endpoint=None):
    """A root gandivad on cpu:1 with `args`; (proc, env, log path)."""
    endpoint = endpoint or f"ipc://{root}/run/gd.sock"
    log_path = os.path.join(root, f"gandivad-{time.monotonic_ns()}.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen([GANDIVAD, "--endpoint", endpoint, "--devices", "cpu:1", *args],
                                stdout=log, stderr=subprocess.STDOUT,
                                env=env if env is not None else os.environ)
    cli_env = dict(os.environ, GANDIVA_ENDPOINT=endpoint, OMP_NUM_THREADS="1")
    return proc, cli_env, log_path


def serving(env):
    return subprocess.run([GANDIVA, "ps"], env=env, capture_output=True).returncode == 0


def refused_to_start(proc, log_path):
    """gandivad's exit code and output, once it gave up (it must, quickly)."""
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("gandivad started where it must refuse to: " + open(log_path).read())
    return code, open(log_path).read()


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=20)


def sticky_dir(root):
    """A directory every user may make entries in, as /tmp (sticky: none may
    remove or rename another's)."""
    path = os.path.join(root, "tmp")
    if not os.path.isdir(path):
        os.mkdir(path)
        os.chmod(path, 0o1777)
    return path


def fnv1a(text):
    """The hash the old gandivad named its /tmp fallback after (FNV-1a, 64 bits)."""
    h = 0xcbf29ce484222325
    for c in text.encode():
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def test_a_socket_directory_another_user_made_is_refused_and_left_alone(shared_node):
    """Bob makes the directory a second gandivad's socket would go in. Had root
    bound there, bob could swap the socket and stand in for gandivad (handing
    LD_PRELOAD to Slurm's steps). It refuses, naming bob; the directory keeps
    bob's mode and holds nothing; the node's gandivad keeps serving."""
    root = shared_node["root"]
    squat = os.path.join(sticky_dir(root), "squat")
    assert as_user("gd-bob", "mkdir", "-m", "0755", squat).returncode == 0
    proc, env, log = start_gandivad(root, "--shared-socket", "--state-dir",
                                    os.path.join(root, "state2"),
                                    endpoint=f"ipc://{squat}/gd.sock")
    try:
        code, output = refused_to_start(proc, log)
    finally:
        stop(proc)
    assert code != 0
    assert "the API socket's directory" in output and "belongs to gd-bob" in output, output
    st = os.lstat(squat)
    assert (st.st_uid, mode_of(squat)) == (uid("gd-bob"), 0o755)
    assert os.listdir(squat) == []
    assert serving(shared_node["env"])


def test_the_cli_trusts_no_socket_in_a_directory_another_user_made(shared_node):
    """Bob makes a directory and stands in for gandivad there (any socket will
    do). Alice's CLI, pointed at it, refuses to connect, naming bob: it would
    have sent bob her job's command and whole environment. Her own node
    (a directory of root's) still serves her."""
    root = shared_node["root"]
    squat = os.path.join(sticky_dir(root), "squat-cli")
    assert as_user("gd-bob", "mkdir", "-m", "0755", squat).returncode == 0
    r = as_user("gd-alice", GANDIVA, "ps", env=dict(shared_node["env"],
                                                    GANDIVA_ENDPOINT=f"ipc://{squat}/gd.sock"))
    assert r.returncode != 0
    assert "will not trust the socket" in r.stderr and "gd-bob" in r.stderr, r.stderr
    assert cli(shared_node, "gd-alice", "ps").returncode == 0


def test_a_state_directory_another_user_made_or_may_write_is_refused():
    root = other_users_dir()
    try:
        bobs = os.path.join(sticky_dir(root), "bobs-state")
        assert as_user("gd-bob", "mkdir", "-m", "0700", bobs).returncode == 0
        proc, env, log = start_gandivad(root, "--state-dir", bobs)
        code, output = refused_to_start(proc, log)
        assert code != 0 and "--state-dir" in output and "belongs to gd-bob" in output, output
        assert as_user("gd-bob", "ls", "-A", bobs).stdout == ""
        assert mode_of(bobs) == 0o700 and os.lstat(bobs).st_uid == uid("gd-bob")

        # Root's, but anyone may write to it: refused too, and not chmod'ed.
        open_dir = os.path.join(root, "open-state")
        os.mkdir(open_dir)
        os.chmod(open_dir, 0o777)
        proc, env, log = start_gandivad(root, "--state-dir", open_dir)
        code, output = refused_to_start(proc, log)
        assert code != 0 and "mode 0777" in output and "writable by users other" in output, output
        assert mode_of(open_dir) == 0o777 and os.listdir(open_dir) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_deep_state_directory_never_falls_back_to_a_tmp_directory_another_user_made():
    """The old gandivad put a --state-dir too deep for socket paths in
    /tmp/gandivad-<hash of the endpoint>, whoever owned it. Bob makes it first,
    world-writable, with a link where a rotated job log is written, pointing at
    a file of root's. Now the short directory is in the runtime directory
    ($XDG_RUNTIME_DIR), bob's stays as he left it, and root's file is intact."""
    root = other_users_dir()
    endpoint = f"ipc://{root}/run/gd.sock"
    squat = f"/tmp/gandivad-{fnv1a(endpoint):016x}"
    victim = os.path.join(root, "victim")
    with open(victim, "w") as f:
        f.write(PRECIOUS)
    proc = None
    try:
        shutil.rmtree(squat, ignore_errors=True)
        assert as_user("gd-bob", "mkdir", "-m", "0777", squat).returncode == 0
        os.chmod(squat, 0o777)  # whatever bob's umask
        assert as_user("gd-bob", "ln", "-s", victim, f"{squat}/job-1.stdout.1.tmp").returncode == 0
        runtime = os.path.join(root, "xdg")
        os.mkdir(runtime, 0o700)
        deep = os.path.join(root, "s" * 80)
        proc, env, log = start_gandivad(root, "--state-dir", deep, "--job-log-cap-kib", "1",
                                        env=dict(os.environ, XDG_RUNTIME_DIR=runtime))
        wait_for(lambda: serving(env), 20, "gandivad up")
        # A job writing well past the cap: its log rotates.
        r = subprocess.run([GANDIVA, "run", "--detach", "--", "/bin/sh", "-c",
                            "yes gandiva | head -c 20000"], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        jid = r.stdout.strip().split()[-1]
        subprocess.run([GANDIVA, "wait", jid], env=env, capture_output=True, timeout=60)
        logs = subprocess.run([GANDIVA, "logs", jid], env=env, capture_output=True, text=True,
                              timeout=60)
        assert logs.returncode == 0 and logs.stdout.endswith("gandiva\n"), logs

        short = os.path.join(runtime, f"gandivad-{fnv1a(endpoint):016x}")
        assert os.path.exists(os.path.join(short, f"job-{jid}.stdout")), os.listdir(runtime)
        assert mode_of(short) == 0o700
        with open(log) as f:
            assert "bytes long" in f.read()
        assert open(victim).read() == PRECIOUS
        assert sorted(os.listdir(squat)) == ["job-1.stdout.1.tmp"]
        assert (os.lstat(squat).st_uid, mode_of(squat)) == (uid("gd-bob"), 0o777)
        assert serving(env)
    finally:
        if proc:
            stop(proc)
        shutil.rmtree(squat, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


def test_a_link_where_a_job_log_rotates_is_not_followed(tmp_path):
    """A link in place of the file a rotation writes (planted by whoever won a
    race, here by root for the test): the rotation makes its own file, and the
    link's target keeps its bytes."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text(PRECIOUS)
    (state / "job-1.stdout.1.tmp").symlink_to(victim)
    (state / "job-1.stderr.1.tmp").symlink_to(victim)
    proc, env, log = start_gandivad(str(tmp_path), "--state-dir", str(state),
                                    "--job-log-cap-kib", "1")
    try:
        wait_for(lambda: serving(env), 20, "gandivad up")
        r = subprocess.run([GANDIVA, "run", "--detach", "--", "/bin/sh", "-c",
                            "yes gandiva | head -c 20000; yes oops | head -c 20000 >&2"],
                           env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        jid = r.stdout.strip().split()[-1]
        subprocess.run([GANDIVA, "wait", jid], env=env, capture_output=True, timeout=60)
        for args, tail in (((), "gandiva\n"), (("--stderr",), "oops\n")):
            logs = subprocess.run([GANDIVA, "logs", jid, *args], env=env, capture_output=True,
                                  text=True, timeout=60)
            assert logs.returncode == 0 and logs.stdout.endswith(tail), logs
        assert victim.read_text() == PRECIOUS
        assert (state / "job-1.stdout.1").exists() and not (state / "job-1.stdout.1").is_symlink()
        assert mode_of(state / "job-1.stdout") == 0o600
        assert serving(env)
    finally:
        stop(proc)


def test_the_socket_directory_keeps_its_mode(tmp_path):
    """An existing directory the socket goes into is gandivad's to use, not to
    chmod (the old one made it 0700, and 0755 for --shared-socket)."""
    run = tmp_path / "run"
    run.mkdir()
    run.chmod(0o711)
    proc, env, log = start_gandivad(str(tmp_path), endpoint=f"ipc://{run}/gd.sock")
    try:
        wait_for(lambda: serving(env), 20, "gandivad up")
        assert mode_of(run) == 0o711
        assert mode_of(run / "gd.sock") == 0o600
    finally:
        stop(proc)
    # --shared-socket in a directory other users cannot reach: said, not chmod'ed.
    run.chmod(0o700)
    proc, env, log = start_gandivad(str(tmp_path), "--shared-socket",
                                    "--state-dir", str(tmp_path / "state"),
                                    endpoint=f"ipc://{run}/gd.sock")
    try:
        code, output = refused_to_start(proc, log)
    finally:
        stop(proc)
    assert code != 0 and "other users cannot reach the socket" in output, output
    assert mode_of(run) == 0o700


def start_job_as(node, user, name):
    result = os.path.join(node["work"], f"{name}.json")
    run = subprocess.Popen(["runuser", "-u", user, "--", GANDIVA, "run", "--name", name, "--",
                            SYNTHETIC_JOB, "--mib", "1", "--iterations", "100000", "--result",
                            result], env=node["env"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    job = wait_for(lambda: next((j for j in jobs(node).values()
                                 if j["name"] == name and j["iterations"] > 10), None), 60,
                   f"{name} training")
    return run, job


def end_job(node, user, run, job):
    assert cli(node, user, "kill", str(job["id"])).returncode == 0
    run.wait(timeout=60)


def test_checkpoints_are_owner_only_and_one_another_user_could_write_is_not_restored(shared_node):
    node = shared_node
    alices = os.path.join(sticky_dir(node["root"]), "alice")
    assert as_user("gd-alice", "mkdir", "-m", "0755", alices).returncode == 0
    run, job = start_job_as(node, "gd-alice", "alices")
    try:
        ckpt = os.path.join(alices, "ckpt", "deep")
        r = cli(node, "gd-alice", "checkpoint", str(job["id"]), "--to", ckpt)
        assert r.returncode == 0 and "checkpointed" in r.stdout, r.stderr
        files = os.listdir(ckpt)
        assert "state.gdck" in files, files
        for name in files:
            path = os.path.join(ckpt, name)
            assert os.lstat(path).st_uid == uid("gd-alice")
            assert mode_of(path) == 0o600, (name, oct(mode_of(path)))
        for d in (ckpt, os.path.dirname(ckpt)):
            assert mode_of(d) == 0o700, (d, oct(mode_of(d)))
        # Alice's own directory, made by her 0755, keeps its mode.
        assert mode_of(alices) == 0o755
    finally:
        end_job(node, "gd-alice", run, job)

    # Bob copies it into a directory of his and offers it: alice's restore
    # refuses to load what bob could have written.
    bobs = os.path.join(sticky_dir(node["root"]), "bob")
    assert as_user("gd-bob", "mkdir", "-m", "0755", bobs).returncode == 0
    with open(os.path.join(ckpt, "state.gdck"), "rb") as f:
        data = f.read()
    r = subprocess.run(["runuser", "-u", "gd-bob", "--", "sh", "-c",
                        f"cat > {bobs}/state.gdck && chmod 0644 {bobs}/state.gdck"], input=data,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    result = os.path.join(node["work"], "restored.json")
    r = as_user("gd-alice", GANDIVA, "run", "--restore", bobs, "--", SYNTHETIC_JOB, "--mib", "1",
                "--iterations", "20", "--result", result, env=node["env"])
    assert r.returncode != 0, r.stdout
    assert "will not restore" in r.stderr and "belongs to uid" in r.stderr, r.stderr
    assert not os.path.exists(result)
    assert jobs(node) is not None  # still serving


def test_a_link_where_a_root_job_checkpoints_is_not_written_through(shared_node):
    """Root's job checkpoints into a sticky directory everyone may write (as
    /tmp). Bob plants a link at the name of its temporary file, pointing at a
    file of root's. The save is refused (the directory is not root's alone),
    and root's file keeps its bytes; the job runs on."""
    node = shared_node
    drop = os.path.join(node["root"], "drop")
    os.mkdir(drop)
    os.chmod(drop, 0o1777)
    victim = os.path.join(node["root"], "victim")
    with open(victim, "w") as f:
        f.write(PRECIOUS)
    run, job = start_job_as(node, "root", "roots")
    try:
        link = os.path.join(drop, f".state.gdck.tmp.{job['pid']}")
        assert as_user("gd-bob", "ln", "-s", victim, link).returncode == 0
        r = cli(node, "root", "checkpoint", str(job["id"]), "--to", drop, "--timeout", "20")
        assert r.returncode != 0, r.stdout
        assert "will not write a checkpoint there" in r.stderr, r.stderr
        assert open(victim).read() == PRECIOUS
        assert not os.path.exists(os.path.join(drop, "state.gdck"))
        assert jobs(node)[job["id"]]["state"] == "running"

        # In a directory of root's alone, a leftover link there is replaced, not followed.
        mine = os.path.join(node["root"], "roots-ckpt")
        os.mkdir(mine, 0o700)
        os.symlink(victim, os.path.join(mine, f".state.gdck.tmp.{job['pid']}"))
        r = cli(node, "root", "checkpoint", str(job["id"]), "--to", mine)
        assert r.returncode == 0 and "checkpointed" in r.stdout, r.stderr
        assert open(victim).read() == PRECIOUS
        assert mode_of(os.path.join(mine, "state.gdck")) == 0o600
    finally:
        end_job(node, "root", run, job)


def test_a_launch_restores_only_what_its_user_may_reach(shared_node):
    """Root keeps a checkpoint in a directory of its own (0700). Alice asks
    gandivad to launch her job restoring from it, past the CLI (which looks as
    her and would refuse first). gandivad used to look at the directory as
    root, found the checkpoint, and started her job; now it looks as alice,
    finds nothing she may read, and refuses before anything starts."""
    private = os.path.join(shared_node["root"], "root-only")
    os.mkdir(private, 0o700)
    with open(os.path.join(private, "state.gdck"), "wb") as f:
        f.write(b"root's")
    script = ("import sys\nfrom gandiva.client import Client, GandivaError\n"
              "try:\n    Client().call('launch', command=['/bin/true'], cwd='/', restore=sys.argv[1])\n"
              "    print('launched')\n"
              "except GandivaError as e:\n    print(e)\n")
    env = dict(shared_node["env"], PYTHONPATH=os.path.join(os.path.dirname(GANDIVA), "..", "python"))
    before = len(jobs(shared_node))
    r = as_user("gd-alice", sys.executable, "-c", script, private, env=env)
    assert r.returncode == 0, r.stderr
    assert "restore: no checkpoint at" in r.stdout, r.stdout
    assert len(jobs(shared_node)) == before, "a job was registered for the refused launch"
    # Her own checkpoint directory passes the same check (the job then restores
    # nothing real: the file is not a checkpoint, and it fails as it would anywhere).
    own = os.path.join(shared_node["work"], "alice-ckpt")
    assert as_user("gd-alice", "mkdir", "-m", "0700", own).returncode == 0
    assert as_user("gd-alice", "sh", "-c", f"echo x > {own}/state.gdck").returncode == 0
    r = as_user("gd-alice", sys.executable, "-c", script, own, env=env)
    assert r.stdout.strip() == "launched", r.stdout + r.stderr
