"""The automatic PyTorch boundaries (gandiva/_autotorch.py and the start-up hook
gandiva/_startup/sitecustomize.py): the counting logic on its own, and the hook
in fresh processes as `gandiva run` starts them (its folder first on PYTHONPATH),
with a control block name that does not exist: the runtime then runs unmanaged
and still counts the iterations it is shown."""

import os
import subprocess
import sys
import textwrap

BUILD = os.environ.get("GANDIVA_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
PYDIR = os.path.join(BUILD, "python")
STARTUP = os.path.join(PYDIR, "gandiva", "_startup")
sys.path.insert(0, PYDIR)

from gandiva._autotorch import StepRounds  # noqa: E402


def boundaries(steps):
    """Where StepRounds marks boundaries in a sequence of steps ("D", "G", ...):
    a list of (index, "before"|"after")."""
    rounds, marks = StepRounds(), []
    for i, key in enumerate(steps):
        if rounds.before(key):
            marks.append((i, "before"))
        if rounds.after(key):
            marks.append((i, "after"))
    return marks


def iterations(steps):
    return max(0, len(boundaries(steps)) - 1)  # the first boundary starts the first


def test_one_optimizer_counts_one_iteration_per_step():
    for n in (2, 3, 10):
        assert iterations(["A"] * n) == n


def test_two_optimizers_count_one_iteration_per_round():
    for n in (2, 3, 25):
        assert iterations(["D", "G"] * n) == n
    # Once learned, the boundary falls right after the round's last step.
    assert boundaries(["D", "G"] * 3) == [(0, "before"), (2, "before"), (3, "after"), (5, "after")]


def test_three_optimizers_in_a_round():
    assert iterations(["E", "D", "G"] * 7) == 7


def test_nested_steps_count_once():
    rounds = StepRounds()
    marks = 0
    for _ in range(4):
        marks += rounds.before("A")
        marks += rounds.before("A")  # a subclass's step() calling super().step()
        marks += rounds.after("A")
        marks += rounds.after("A")
    assert marks - 1 == 4


def test_a_step_that_raised_is_not_in_progress():
    rounds = StepRounds()
    assert rounds.before("A") and not rounds.after("A")  # the start
    assert rounds.before("A")  # the first round is over
    rounds.abandon()           # that step raised
    assert not rounds.before("A")  # stepped again: an outermost step, not a nested one,
    assert rounds.after("A")       # which ends the second round


def run_hooked(code, tmp_path, extra_path=(), **env):
    """Runs the pieces of `code` (each dedented) as a script started as gandiva starts jobs."""
    e = dict(os.environ, OMP_NUM_THREADS="1", **env)
    e["PYTHONPATH"] = os.pathsep.join([STARTUP, *extra_path, PYDIR])
    e.setdefault("GANDIVA_CONTROL_BLOCK", "/gandiva.test-autotorch-none")
    script = tmp_path / "script.py"
    script.write_text("\n".join(textwrap.dedent(piece) for piece in code))
    return subprocess.run(["/usr/bin/python3", str(script)], env=e, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)


# The scripts' last line says how many iterations the runtime in the process counted.
COUNTED = """
import gandiva
print("counted", gandiva.stats()["iterations"])
"""

GAN_WITH_SCHEDULER = """
import torch
from torch import nn
d, g = nn.Linear(2, 1), nn.Linear(2, 2)
opt_d = torch.optim.Adam(d.parameters(), lr=1e-3)
opt_g = torch.optim.SGD(g.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.StepLR(opt_g, step_size=2)  # re-wraps opt_g.step
for _ in range(7):
    opt_d.zero_grad(); d(g(torch.randn(4, 2))).mean().backward(); opt_d.step()
    opt_g.zero_grad(); d(g(torch.randn(4, 2))).mean().backward(); opt_g.step()
    sched.step()
"""


def counted(r):
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split("counted")[-1])


def test_hook_counts_rounds_in_a_fresh_process(tmp_path):
    r = run_hooked((GAN_WITH_SCHEDULER, COUNTED), tmp_path)
    assert counted(r) == 7


def test_a_subclass_whose_step_calls_super_counts_once(tmp_path):
    r = run_hooked(("""
        import torch
        class MySGD(torch.optim.SGD):
            def step(self, closure=None):
                return super().step(closure)
        w = torch.nn.Parameter(torch.ones(3))
        plain = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)  # SGD wrapped too
        opt = MySGD([w], lr=0.1)
        for _ in range(5):
            opt.zero_grad(); (w * w).sum().backward(); opt.step()
    """, COUNTED), tmp_path)
    assert counted(r) == 5


def test_off_switch_and_no_control_block_leave_torch_alone(tmp_path):
    assert counted(run_hooked((GAN_WITH_SCHEDULER, COUNTED), tmp_path, GANDIVA_AUTO_TORCH="0")) == 0
    assert counted(run_hooked((GAN_WITH_SCHEDULER, COUNTED), tmp_path, GANDIVA_CONTROL_BLOCK="")) == 0


def test_explicit_marks_take_over(tmp_path):
    r = run_hooked(("""
        import torch, gandiva
        w = torch.nn.Parameter(torch.ones(3))
        opt = torch.optim.SGD([w], lr=0.1)
        for _ in range(6):
            opt.zero_grad(); (w * w).sum().backward(); opt.step()
            gandiva.step()
    """, COUNTED), tmp_path)
    # The hook's first boundary (before the first step), then the script's six.
    assert counted(r) == 6


def test_the_users_sitecustomize_still_runs(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "sitecustomize.py").write_text("import os\nos.environ['USER_SITECUSTOMIZE'] = 'ran'\n")
    r = run_hooked(("""
        import os, sys, sitecustomize
        print(os.environ.get("USER_SITECUSTOMIZE"), sitecustomize.__file__)
        print("torch" in sys.modules)
    """,), tmp_path, extra_path=[str(mine)])
    assert r.returncode == 0, r.stderr
    ran, path = r.stdout.splitlines()[0].split()
    assert ran == "ran" and path == str(mine / "sitecustomize.py")
    assert r.stdout.splitlines()[1] == "False"  # torch is not imported by the hook
    assert r.stderr == ""
