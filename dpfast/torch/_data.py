"""Poisson-sampled data loading and virtual batches.

* :class:`PoissonBatchSampler`: each batch includes each of the n examples independently with
  probability q (dpfast's native O(batch) sampler, geometric skips on the engine's generator:
  ``dpfast._clip.poisson_sample``); an epoch is ``steps_per_epoch`` such batches.  Batches may be
  empty; their size is random (the privacy analysis of Poisson subsampling needs exactly this:
  Mironov, Talwar & Zhang 2019).
* :class:`DPDataLoader`: a ``torch.utils.data.DataLoader`` over that sampler, whose collate turns
  an empty batch into tensors with a batch axis of 0 (shapes from the first example, a public
  property of the data's format).
* :class:`BatchMemoryManager`: splits each logical (Poisson) batch into physical chunks of at most
  ``max_physical_batch_size`` examples and tells the optimizer to only accumulate on all but the
  last, so the noise is added once per logical batch; a logical batch left unfinished (an
  exception or a ``break`` between its chunks) is discarded, never added to the next one.

Checkpointing: the sampler's ``state_dict`` holds the generator's state at the start of the
current epoch and how many of its batches the optimizer has consumed; a resumed sampler replays
the epoch's draws (discarding the consumed batches) and yields the rest, so that a resumed run
sees the same batches as an uninterrupted one, whatever the DataLoader prefetched.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Dict, Iterator, List, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler
from torch.utils.data._utils.collate import default_collate

from dpfast import _clip
from dpfast.random import is_secure, native_stream

__all__ = ["PoissonBatchSampler", "DPDataLoader", "BatchMemoryManager"]


class PoissonBatchSampler(Sampler[List[int]]):
    """Batches of indices of {0, ..., n-1}, each index included independently with probability
    ``sample_rate``; ``steps_per_epoch`` batches per epoch (``len``).

    ``step_counter`` (a callable returning the optimizer's logical step count) lets
    ``state_dict`` record how many batches of the epoch were consumed, not just drawn.
    """

    def __init__(self, n: int, sample_rate: float, steps_per_epoch: int, generator: np.random.Generator,
                 step_counter: Optional[Callable[[], int]] = None, rank: int = 0, world_size: int = 1) -> None:
        self.n = int(n)
        # distributed: this rank samples its shard {rank, rank + world_size, ...}; the union over the
        # ranks is one Poisson sample of the whole dataset at rate sample_rate
        self.rank, self.world_size = int(rank), int(world_size)
        self._shard = len(range(self.rank, self.n, self.world_size))
        self.sample_rate = float(sample_rate)
        self.steps_per_epoch = int(steps_per_epoch)
        self.generator = generator
        self._step_counter = step_counter
        self._drawn = 0
        self._epoch_state: Optional[dict] = None
        self._epoch_step = 0
        self._resume: Optional[Dict[str, Any]] = None

    def __len__(self) -> int:
        return self.steps_per_epoch

    def _count(self) -> int:
        return self._step_counter() if self._step_counter is not None else self._drawn

    def _draw(self) -> List[int]:
        with native_stream(self.generator) as cap:
            idx = _clip.poisson_sample(cap, self._shard, self.sample_rate)
        return (idx * self.world_size + self.rank).tolist() if self.world_size > 1 else idx.tolist()

    def __iter__(self) -> Iterator[List[int]]:
        secure = is_secure(self.generator)
        skip = 0
        start_state: Any = None if secure else copy.deepcopy(self.generator.bit_generator.state)
        if self._resume is not None:
            r, self._resume = self._resume, None
            consumed = max(0, int(r["consumed"])) if r["epoch_state"] is not None or secure else 0
            if r["epoch_state"] is not None and not secure:
                self.generator.bit_generator.state = copy.deepcopy(r["epoch_state"])
                for _ in range(min(consumed, self.steps_per_epoch)):
                    self._draw()  # replay the consumed batches of the saved epoch
                start_state = copy.deepcopy(r["epoch_state"])
            if consumed >= self.steps_per_epoch:  # the checkpoint closed an epoch: start the next one
                consumed = 0
                start_state = None if secure else copy.deepcopy(self.generator.bit_generator.state)
            skip = consumed
        self._epoch_state = start_state
        self._epoch_step = self._count() - skip
        self._drawn = skip
        for _ in range(self.steps_per_epoch - skip):
            self._drawn += 1
            yield self._draw()

    def state_dict(self) -> Dict[str, Any]:
        """{'epoch_state': the generator's state when the current epoch began (None in secure mode
        or before the first epoch), 'consumed': batches of that epoch the optimizer consumed}."""
        consumed = self._count() - self._epoch_step if self._step_counter is not None else self._drawn
        return {"epoch_state": copy.deepcopy(self._epoch_state), "consumed": int(consumed)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume: the next iteration replays the saved epoch from its start, skipping the consumed
        batches (secure mode: the remaining batches are drawn afresh)."""
        self._resume = {"epoch_state": state.get("epoch_state"), "consumed": int(state.get("consumed", 0))}


def _empty_like(batch):
    if isinstance(batch, torch.Tensor):
        return batch[:0]
    if isinstance(batch, (list, tuple)):
        return type(batch)(_empty_like(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _empty_like(v) for k, v in batch.items()}
    return batch


class _EmptySafeCollate:
    def __init__(self, dataset, collate_fn):
        self.dataset = dataset
        self.collate_fn = collate_fn or default_collate

    def __call__(self, batch):
        if len(batch) == 0:
            return _empty_like(self.collate_fn([self.dataset[0]]))
        return self.collate_fn(batch)


class DPDataLoader(DataLoader):
    """A DataLoader whose batches are Poisson samples (:class:`PoissonBatchSampler`); built from a
    user's DataLoader by :meth:`from_data_loader` (same dataset, collate, workers)."""

    @classmethod
    def from_data_loader(cls, data_loader: DataLoader, *, sample_rate: float, steps_per_epoch: int,
                         generator: np.random.Generator, step_counter=None, rank: int = 0,
                         world_size: int = 1) -> "DPDataLoader":
        ds = data_loader.dataset
        n = len(ds)  # type: ignore[arg-type]
        sampler = PoissonBatchSampler(n, sample_rate, steps_per_epoch, generator, step_counter, rank, world_size)
        kw = dict(num_workers=data_loader.num_workers, pin_memory=data_loader.pin_memory,
                  timeout=data_loader.timeout, worker_init_fn=data_loader.worker_init_fn,
                  multiprocessing_context=data_loader.multiprocessing_context)
        if data_loader.num_workers > 0:
            kw.update(prefetch_factor=data_loader.prefetch_factor, persistent_workers=data_loader.persistent_workers)
        dl = cls(ds, batch_sampler=sampler, collate_fn=_EmptySafeCollate(ds, data_loader.collate_fn), **kw)
        dl.sample_rate = float(sample_rate)
        dl.n_samples = n
        return dl

    def __iter__(self):
        # the sampling rate, the plan and the mean's divisor were fixed for n examples: a dataset that
        # grew would never sample its new examples, one that shrank would index past its end
        n = getattr(self, "n_samples", None)
        if n is not None and len(self.dataset) != n:
            raise RuntimeError(f"the dataset has {len(self.dataset)} examples, make_private saw {n}: the sampling "
                               "rate and the plan were computed for its length then; make_private a new run")
        return super().__iter__()


def _batch_len(batch) -> int:
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0])
    if isinstance(batch, (list, tuple)) and batch:
        return _batch_len(batch[0])
    if isinstance(batch, dict) and batch:
        return _batch_len(next(iter(batch.values())))
    raise TypeError("BatchMemoryManager needs batches of tensors (or tuples/lists/dicts of them)")


def _slice(batch, a: int, b: int):
    if isinstance(batch, torch.Tensor):
        return batch[a:b]
    if isinstance(batch, (list, tuple)):
        return type(batch)(_slice(x, a, b) for x in batch)
    if isinstance(batch, dict):
        return {k: _slice(v, a, b) for k, v in batch.items()}
    return batch


class BatchMemoryManager:
    """Virtual batches: ``with BatchMemoryManager(data_loader=dl, max_physical_batch_size=m,
    optimizer=opt) as loader: for x, y in loader: ...`` yields each logical batch of ``dl`` in
    chunks of at most m examples and calls ``optimizer.signal_skip_step(True)`` before every chunk
    but the last, so ``optimizer.step()`` after each chunk clips and accumulates, and the noise is
    added once per logical batch (an empty logical batch is yielded once, empty, and its step
    adds the noise alone).  Same names as Opacus's ``BatchMemoryManager``."""

    def __init__(self, *, data_loader: DataLoader, max_physical_batch_size: int, optimizer) -> None:
        if isinstance(max_physical_batch_size, bool) or not isinstance(max_physical_batch_size, int) \
                or max_physical_batch_size < 1:
            raise ValueError(f"max_physical_batch_size must be an int >= 1, got {max_physical_batch_size!r}")
        if not hasattr(optimizer, "signal_skip_step"):
            raise TypeError("optimizer must be the private optimizer returned by make_private")
        self.data_loader = data_loader
        self.max_physical_batch_size = max_physical_batch_size
        self.optimizer = optimizer

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.optimizer.signal_skip_step(False)
        self._discard_partial()

    def _discard_partial(self) -> None:
        # the clipped sum of a logical batch left unfinished (an exception or a break between its
        # chunks, a last chunk without optimizer.step()) must not flow into the next logical batch:
        # an example of both would count twice in one noisy sum (sensitivity 2C)
        if getattr(self.optimizer, "_summed", None):
            self.optimizer._summed = {}

    def __len__(self) -> int:
        return len(self.data_loader)

    def __iter__(self):
        m = self.max_physical_batch_size
        for batch in self.data_loader:
            self._discard_partial()
            B = _batch_len(batch)
            starts = list(range(0, B, m)) or [0]
            for k, a in enumerate(starts):
                self.optimizer.signal_skip_step(k < len(starts) - 1)
                yield _slice(batch, a, min(a + m, B)) if B else batch
