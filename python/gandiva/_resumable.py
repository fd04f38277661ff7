"""A DataLoader that continues at the next batch after a restore or a migration.

    loader = gandiva.torch.resumable(DataLoader(ds, batch_size=32, shuffle=True,
                                                num_workers=2))
    gandiva.torch.register(model, optimizer, scheduler, loader)
    gandiva.torch.attach(loader)     # a restoring process loads everything here
    for epoch in loader.epochs(10):  # from the epoch in progress
        for x, y in loader:          # from the batch after the last one taken
            ...

Attached, the loader marks the iteration boundary: before it hands out the
next batch, when the loop's body for the previous one is over, so a
checkpoint there holds whatever the body did after optimizer.step().

What it records (its state_dict(), saved with the rest of the registered state):
the epoch in progress, how many of its batches the loop has taken, and the
state of the two generators the epoch drew from at its start: the one that
shuffles (it replaces the sampler's, so shuffling never touches torch's global
RNG) and the loader's, from which each epoch draws its workers' base seed.

On restore, the next `for batch in loader` replays the interrupted epoch's
draws from those generator states, so its order is the original one, and skips
the batches already taken by skipping their indices in the sampler: skipped
batches are never loaded. Batches that workers had prefetched but the loop had
not taken when the checkpoint was written are not in it: the restored process
loads them again, from the same indices.

Limits: map-style datasets with automatic batching (a batch_size, the default
BatchSampler) over a RandomSampler, a SequentialSampler or a sampler with
set_epoch() (DistributedSampler, which is told the epoch); randomness inside
dataset workers (random augmentation from the workers' torch RNG) is not
replayed exactly after a restore, since batches meet other workers than before:
draw it from a generator seeded by the sample index and the epoch.
"""

import itertools

import torch
from torch.utils.data import BatchSampler, RandomSampler, Sampler


def _draw_seed(generator):
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


class _SkippingSampler(Sampler):
    """The loader's own sampler, minus the first `skip` indices of the next epoch."""

    def __init__(self, inner):
        self.inner = inner
        self.skip = 0

    def __iter__(self):
        skip, self.skip = self.skip, 0
        return itertools.islice(iter(self.inner), skip, None)

    def __len__(self):
        return len(self.inner)


class ResumableLoader:
    """Wraps a DataLoader (see the module's documentation); iterate it as the
    DataLoader. Attributes: `epoch` (the epoch in progress, or the next one
    between epochs), `position` (batches of it the loop has taken), `loader`."""

    def __init__(self, loader):
        batch_sampler = getattr(loader, "batch_sampler", None)
        if type(batch_sampler) is not BatchSampler:  # noqa: E721 (a subclass may batch otherwise)
            raise ValueError("gandiva.torch.resumable: needs a DataLoader over a map-style "
                             "dataset with batch_size set and no custom batch_sampler")
        inner = batch_sampler.sampler
        if isinstance(inner, _SkippingSampler):
            raise ValueError("gandiva.torch.resumable: this DataLoader is wrapped already")
        self.loader = loader
        self.epoch = 0
        self.position = 0
        seed_from = loader.generator  # None: torch's global RNG, as DataLoader would
        self._shuffle = torch.Generator().manual_seed(_draw_seed(seed_from))
        if isinstance(inner, RandomSampler):
            inner.generator = self._shuffle
        if loader.generator is None:  # the workers' base seeds, off the global RNG too
            loader.generator = torch.Generator().manual_seed(_draw_seed(None))
        self._sampler = _SkippingSampler(inner)
        batch_sampler.sampler = self._sampler
        self._epoch_start = None  # (shuffle state, loader generator state) at the epoch's start
        self._resume = False
        self._boundary = None  # set by gandiva.torch.attach(loader)
        self._gandiva_state = None  # the TrainingState it is registered in, if any

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        if self._resume:  # the interrupted epoch, from its start, minus what was taken
            self._set_generators(self._epoch_start)
            self._sampler.skip = self.position * self.loader.batch_size
            self._resume = False
        else:
            self.position = 0
            self._epoch_start = self._generator_states()
        if hasattr(self._sampler.inner, "set_epoch"):
            self._sampler.inner.set_epoch(self.epoch)
        batches = iter(self.loader)
        for taken in itertools.count():
            # The loop's body for the last batch is over: the iteration boundary (once
            # attached), where a checkpoint holds everything the body did after
            # optimizer.step() too (scheduler, EMA, scaler, logging).
            if taken and self._boundary is not None:
                self._boundary()
            try:
                batch = next(batches)
            except StopIteration:
                break
            self.position += 1  # counted as it is handed over
            if self._gandiva_state is not None:
                self._gandiva_state.iteration += 1
            yield batch
        self._finish_epoch()

    def epochs(self, end):
        """Yields the epoch numbers from the one in progress (0 in a fresh run)
        up to end - 1: `for epoch in loader.epochs(E)` instead of
        `for epoch in range(E)`. An epoch the loop left early (break) counts
        as finished."""
        while self.epoch < end:
            epoch = self.epoch
            yield epoch
            if self.epoch == epoch:
                self._finish_epoch()

    def _finish_epoch(self):
        self.epoch += 1
        self.position = 0
        self._resume = False

    def _generator_states(self):
        return (self._shuffle.get_state(), self.loader.generator.get_state())

    def _set_generators(self, states):
        self._shuffle.set_state(states[0])
        self.loader.generator.set_state(states[1])

    def state_dict(self):
        return {"epoch": self.epoch, "position": self.position,
                "epoch_start": self._epoch_start, "generators": self._generator_states()}

    def load_state_dict(self, d):
        self.epoch = d["epoch"]
        self.position = d["position"]
        self._epoch_start = d["epoch_start"]
        self._set_generators(d["generators"])
        # Mid-epoch (or at its end, before the loop saw it end): replay that epoch.
        self._resume = self._epoch_start is not None and self.position > 0


def resumable(loader):
    """Wraps a torch DataLoader so that, registered with gandiva.torch.register,
    a restored or migrated job continues at exactly the next batch."""
    return ResumableLoader(loader)
