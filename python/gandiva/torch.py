"""PyTorch integration: mark an iteration boundary after every optimizer step.

    model = ...
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    gandiva.torch.attach(optimizer)

torch >= 2.0 has optimizer step hooks; older versions (Debian's 1.13) do not, so
there `optimizer.step` is wrapped. Both give the same boundaries.
"""

import functools

from . import _gandiva


class Attachment:
    """What attach() returns; remove() detaches the boundary from the optimizer."""

    def __init__(self, remover):
        self._remover = remover

    def remove(self):
        if self._remover:
            self._remover()
            self._remover = None


def _post_step_hook(optimizer, args, kwargs):
    _gandiva.boundary()


def attach(optimizer):
    """Marks a gandiva boundary after every optimizer.step(), and one now: the
    job may be parked here before its first iteration if its device is busy."""
    if getattr(optimizer, "_gandiva_attached", False):
        raise RuntimeError("gandiva.torch.attach: this optimizer is attached already")
    optimizer._gandiva_attached = True
    _gandiva.boundary()

    register = getattr(optimizer, "register_step_post_hook", None)
    if register is not None:
        handle = register(_post_step_hook)

        def remove():
            handle.remove()
            optimizer._gandiva_attached = False

        return Attachment(remove)

    original = optimizer.step

    @functools.wraps(original)
    def step(*args, **kwargs):
        result = original(*args, **kwargs)
        _gandiva.boundary()
        return result

    optimizer.step = step

    def remove():
        optimizer.step = original
        optimizer._gandiva_attached = False

    return Attachment(remove)
