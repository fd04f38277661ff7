"""Automatic iteration boundaries for unmodified PyTorch scripts.

Jobs that gandiva starts load gandiva/_startup/sitecustomize.py, which calls
install() once the script imports torch. From then on every optimizer step is
an iteration boundary, with no change to the script:

- torch >= 2.0: the global optimizer step hooks
  (torch.optim.optimizer.register_optimizer_step_pre_hook / _post_hook);
- older torch (Debian's 1.13) has none: Optimizer.__init__ is wrapped so that
  the class of each optimizer constructed gets its step() wrapped, once per
  class (class-level, so LR schedulers, which re-wrap the bound method, still
  work).

What counts as one iteration is StepRounds' business (below): one round of
optimizer steps, however many optimizers a loop steps (a GAN's two). A script
that marks its own boundaries (gandiva.step(), gandiva.torch.attach, a
registered TrainingState) takes over: the hook marks nothing once the script
has marked one itself (docs/python.md, "Unmodified PyTorch scripts").
"""

import functools
import importlib
import os
import sys

from . import _gandiva

class StepRounds:
    """Decides where the boundaries fall in a stream of optimizer steps.

    A round is the steps of a loop's body: each optimizer once (a plain loop:
    one optimizer; a GAN: the discriminator's, then the generator's). Which
    optimizer ends a round is not known until one optimizer steps again, so:

    - the first step of all is the first boundary (the job's start; the node
      may park it there before it trains on);
    - a step of an optimizer that stepped already in the round marks a boundary
      before it (the round before is over) and learns which optimizer ended
      that round;
    - from then on a step of that optimizer marks a boundary after it.

    N rounds make N iterations (the second one measured short: it starts just
    before the round's first step). Gradient accumulation (backward several
    times, one step) counts one iteration per step. An optimizer that steps
    several times in a round (a WGAN's critic) makes each of its steps a round
    once it is seen stepping twice. Nested steps (a subclass's step() calling
    super().step(), both wrapped) count once: only the outermost.

    Pure logic on opaque keys (optimizer ids), unit-tested without torch.
    """

    def __init__(self):
        self._stepped = []   # keys stepped in this round, in order
        self._last = None    # the key whose step ends a round, once learned
        self._started = False
        self._depth = 0      # steps in progress (nested ones do not count)

    def before(self, key):
        """Called before an optimizer's step; True: mark a boundary now."""
        self._depth += 1
        if self._depth > 1:
            return False
        if not self._started:
            self._started = True
            return True
        if key in self._stepped:
            self._last = self._stepped[-1]
            self._stepped = []
            return True
        return False

    def after(self, key):
        """Called after an optimizer's step; True: mark a boundary now."""
        if self._depth > 0:
            self._depth -= 1
        if self._depth > 0:
            return False
        if key == self._last:
            self._stepped = []
            return True
        self._stepped.append(key)
        return False

    def abandon(self):
        """A step raised: it is not in progress any more (and not counted)."""
        if self._depth > 0:
            self._depth -= 1


_rounds = StepRounds()
_installed = None  # how, once install() ran: "global step hooks" or "Optimizer.step wrapper"
_undo = []         # what uninstall() calls, last first


_failed = False  # a boundary raised: the hook marks no more


def _skip(optimizer):
    # An optimizer the script attached itself marks its own boundaries.
    return _failed or getattr(optimizer, "_gandiva_attached", False)


_release_cached_memory = None  # gandiva.torch's, looked up at the first boundary


def _mark():
    global _release_cached_memory, _failed
    try:
        if _release_cached_memory is None:
            from . import torch as gtorch  # imports torch: only once the script has
            _release_cached_memory = gtorch._release_cached_memory_if_swapping
        _release_cached_memory()  # before a park that swaps, as attach() does
        _gandiva.auto_boundary()
    except Exception as e:  # never fail the script's step over a boundary: stop marking
        _failed = True
        print(f"gandiva: optimizer steps no longer mark iteration boundaries: "
              f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)


def _before(optimizer):
    if not _skip(optimizer) and _rounds.before(id(optimizer)):
        _mark()


def _after(optimizer):
    if not _skip(optimizer) and _rounds.after(id(optimizer)):
        _mark()


def _pre_hook(optimizer, args, kwargs):
    _before(optimizer)


def _post_hook(optimizer, args, kwargs):
    _after(optimizer)


def _wrap_step(step):
    @functools.wraps(step)
    def step_with_boundary(self, *args, **kwargs):
        _before(self)
        try:
            result = step(self, *args, **kwargs)
        except BaseException:
            if not _skip(self):
                _rounds.abandon()
            raise
        _after(self)
        return result

    step_with_boundary._gandiva_auto = True
    return step_with_boundary


def _wrap_class_step(cls):
    step = getattr(cls, "step", None)
    if step is None or getattr(step, "_gandiva_auto", False):
        return  # wrapped already (here or in a base class this one inherits it from)
    cls.step = _wrap_step(step)
    _undo.append(lambda: setattr(cls, "step", step))


def _install_wrapper(optimizer_class):
    original_init = optimizer_class.__init__
    if getattr(original_init, "_gandiva_auto", False):
        return

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        _wrap_class_step(type(self))

    __init__._gandiva_auto = True
    optimizer_class.__init__ = __init__
    _undo.append(lambda: setattr(optimizer_class, "__init__", original_init))


def install(torch_module):
    """Makes every optimizer step of this process an iteration boundary (see
    the module's docstring). Idempotent. Returns how: "global step hooks" or
    "Optimizer.step wrapper"."""
    global _installed
    if _installed:
        return _installed
    # By name: torch.optim deletes its `optimizer` attribute (torch 1.13).
    optimizer_module = importlib.import_module(torch_module.__name__ + ".optim.optimizer")
    pre = getattr(optimizer_module, "register_optimizer_step_pre_hook", None)
    post = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    if pre is not None and post is not None:
        _undo.append(pre(_pre_hook).remove)
        _undo.append(post(_post_hook).remove)
        _installed = "global step hooks"
    else:
        _install_wrapper(optimizer_module.Optimizer)
        _installed = "Optimizer.step wrapper"
    if os.environ.get("GANDIVA_AUTO_TORCH_VERBOSE"):
        print(f"gandiva: optimizer steps mark iteration boundaries ({_installed})",
              file=sys.stderr, flush=True)
    return _installed


def uninstall():
    """Undoes install() (the benchmark's baseline, tests): optimizers step
    unhooked again, the counting starts over."""
    global _installed, _rounds
    while _undo:
        _undo.pop()()
    _installed = None
    _rounds = StepRounds()
