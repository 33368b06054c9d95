"""One privacy budget for a sequence of releases: :class:`PrivacyBudget`.

A budget is an (epsilon, delta) guarantee that a whole analysis must meet.  Every release
(a mechanism call, an estimator's ``fit``) describes itself by a data-only event
(:mod:`dpfast.accounting`) and charges it *before* drawing any noise; the budget composes the
events with a privacy accountant (privacy-loss distributions by default, Koskela, Jalko &
Honkela 2020, Doroshenko et al. 2022; or Renyi DP, Mironov 2017) -- never by adding epsilons --
and refuses, with :class:`BudgetExceededError`, the first release whose composition with the
ones already made would exceed the budget.  A refused release changes nothing: no charge, no
noise drawn, the random generator untouched.

The guarantee (adaptive composition): if every release ``M_i`` is the mechanism its event
describes, run on the same data set with the same neighbouring relation, then the sequence of
accepted releases, each chosen adaptively from the previous outputs, is (epsilon, delta)-DP.
The composition theorems behind the accountants hold for adaptive sequences (Dwork, Rothblum &
Vadhan 2010 for approximate DP; Mironov 2017, Prop. 1 for RDP; Dong, Roth & Su 2022 / Zhu, Dong
& Wang 2022 for dominating pairs and PLDs).  That the decision to stop at a refused release
leaks nothing follows because it is a function of the (public) events only, never of the data.

Module functions used by every release:

* :func:`resolve` -- the budget that applies to a call: the explicit one, else the one made the
  default by ``with budget:``, else ``None``;
* :func:`charge` -- ``resolve(budget)`` then ``.charge(event, label=...)`` when there is one;
* :func:`check_scope` -- what an estimator's ``fit`` calls first: raise
  :class:`BudgetScopeError` now, before any data is read, when the release could not be charged;
* :func:`detached` -- for composite releases (an estimator's ``fit``, ``tables.aggregate``, a
  scaler) that charge their total event once and then call mechanisms internally: inside
  ``with detached():`` no default budget applies, so nothing is charged twice.

Example
-------
>>> import dpfast
>>> budget = dpfast.PrivacyBudget(epsilon=1.0, delta=1e-6)
>>> with budget:                                   # doctest: +SKIP
...     dpfast.laplace(x, 1.0, 0.5)                # charged to budget
...     dpfast.laplace(x, 1.0, 0.5)                # charged: 1.0 spent
...     dpfast.laplace(x, 1.0, 0.5)                # raises BudgetExceededError, nothing drawn
>>> print(budget)                                  # doctest: +SKIP
"""
from __future__ import annotations

import atexit
import contextlib
import contextvars
import dataclasses
import itertools
import multiprocessing
import os
import tempfile
import threading
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    NoReturn,
    Optional,
    Tuple,
    Union,
)

from dpfast._validation import check_delta, check_epsilon
from dpfast.accounting import DpEvent, PrivacyAccountant, from_dict, make_accountant, to_dict
from dpfast.accounting.incremental import IncrementalPLD

__all__ = ["PrivacyBudget", "BudgetExceededError", "BudgetScopeError", "Charge", "resolve", "charge",
           "check_scope", "detached"]

_ACCOUNTANTS = ("pld", "rdp")
_STATE_VERSION = 1


class BudgetExceededError(Exception):
    """A release would exceed its :class:`PrivacyBudget`; nothing was charged or released.

    Attributes
    ----------
    label : str
        The refused release's label.
    event : DpEvent
        Its event.
    spent : float
        Epsilon spent before it (at the budget's delta).
    requested : float
        The composed epsilon (at the budget's delta) had it been accepted (``inf`` when the
        composition has no finite epsilon at that delta).
    epsilon, delta : float
        The budget.
    """

    def __init__(self, label: str, event: Any, spent: float, requested: float,
                 epsilon: float, delta: float):
        self.label, self.event = label, event
        self.spent, self.requested = spent, requested
        self.epsilon, self.delta = epsilon, delta
        what = f"{label}: {_summary(event)}" if label else _summary(event)
        super().__init__(
            f"privacy budget exceeded by {what}: the composition would be ({requested:.6g}, {delta:.3g})-DP "
            f"but the budget is ({epsilon:.6g}, {delta:.3g})-DP; spent so far {spent:.6g}, remaining "
            f"{max(epsilon - spent, 0.0):.6g} (epsilon at delta={delta:.3g}). Nothing was charged or released."
        )


class BudgetScopeError(RuntimeError):
    """A release that could not be charged to the budget that applies to it; it is refused
    before it draws anything (an estimator's ``fit``: before it reads the data).

    Raised when the budget lives in another process (a worker process of joblib's ``loky`` or
    ``multiprocessing`` backends, a forked child, an unpickled copy), when a worker process
    (started by :mod:`multiprocessing`) whose parent (or an ancestor) has a ``with budget:`` block open makes a
    release without ``budget=``, and when threads of
    one process have entered different budgets so that a thread without its own ``with`` block
    has no single default (see "Default budget" in :class:`PrivacyBudget`).  The message is a
    function of the budgets' scope only, never of data."""


class Charge(NamedTuple):
    """One accepted release in a budget's ledger.

    ``epsilon`` is the cumulative epsilon of all releases up to and including this one, at the
    budget's delta (composed, not a sum)."""

    label: str
    event: Any
    epsilon: float


def _check_label(label: object) -> str:
    if not isinstance(label, str):
        raise TypeError(f"label must be a str, got {type(label).__name__}")
    return label


class PrivacyBudget:
    """An (epsilon, delta)-DP budget shared by a sequence of releases.

    Parameters
    ----------
    epsilon : float
        Total epsilon, > 0 and finite.
    delta : float
        Total delta, in (0, 1).  (A pure budget, delta = 0, is not offered: the PLD
        accountant's certified bounds carry a truncation mass ~1e-22, and the RDP conversion
        needs delta > 0.)
    accountant : {"pld", "rdp"}
        How releases are composed: ``"pld"`` (default; :class:`dpfast.accounting.PLDAccountant`,
        privacy-loss distributions composed by FFT, tight) or ``"rdp"``
        (:class:`dpfast.accounting.RDPAccountant`, Renyi DP with the improved conversion).

    Notes
    -----
    **When a release fits.**  :meth:`charge` composes the new event with the ledger's
    composition (incrementally: a PLD budget convolves the event's privacy-loss distribution
    into the ledger's, :mod:`dpfast.accounting.incremental`; the result is the from-scratch
    accountant's within 1e-6 relative) and accepts the release iff the composed epsilon at the
    budget's delta is ``<= epsilon`` (the certified, pessimistic value).  Testing epsilon at
    the budget's delta (rather than ``get_delta(epsilon) <= delta``, equivalent up to the
    accountants' rounding) makes the rule the same quantity that :meth:`spent` reports: a
    charge is accepted exactly when ``spent()`` afterwards is at most ``epsilon``.

    **Thread safety.**  Check and commit happen under one lock, so concurrent charges are
    serialised: the accepted ones are exactly those a sequential run in the order the lock was
    taken would accept, and the budget is never overspent.

    **Default budget.**  ``with budget:`` makes it the default of every release in the block
    (and in code it calls) that is not given ``budget=`` explicitly; blocks nest, the inner
    one wins and the outer is restored on exit.  The rule is that under an open ``with
    budget:`` block every release of the workflow is charged to it or refused before it reads
    data, whichever threads or processes scikit-learn or joblib run it in:

    * *this thread* (and asyncio task): the innermost block of its own context
      (:mod:`contextvars`) applies;
    * *other threads* of the process that have entered no block of their own (joblib's
      ``threading`` backend, ``n_jobs`` in scikit-learn, a ``threading.Thread``): the block
      open in the process applies -- the innermost one of each thread that holds blocks; when
      threads hold blocks of *different* budgets the default is ambiguous and such a release
      raises :class:`BudgetScopeError` (enter the budget in the worker, or pass ``budget=``);
    * *other processes* (joblib's ``loky`` and ``multiprocessing`` backends, ``fork``): a
      budget cannot be charged across processes, so a release there is refused with
      :class:`BudgetScopeError`: in a process started by :mod:`multiprocessing` (as joblib's
      workers are) whose parent or an ancestor has a block open (a nested worker pool), when no ``budget=`` is given (the parent
      leaves a marker file in the temporary directory while a block is open, so reused worker
      pools see it), and always when the budget is a copy from another
      process (unpickled or inherited by ``fork``).  Use ``n_jobs=1`` or joblib's
      ``threading`` backend under a budget.

    Inside :func:`detached` no default applies (in that context only; threads it starts fall
    back to the process's block, which at worst charges twice, never too little).  An explicit
    ``budget=`` is always honoured: it is charged, or refused if it is a copy (above).

    **Copies.**  ``copy.copy`` and ``copy.deepcopy`` raise ``TypeError``: a budget stands for
    the privacy loss of one data set, and a copy would be a second budget whose charges the
    original never sees, so the same data could be spent twice without an error.  A pickled
    budget unpickles as a read-only record (ledger, ``spent``, ``state_dict``) that refuses
    charges with :class:`BudgetScopeError`.  To continue an analysis elsewhere, or deliberately start an
    independent budget from a ledger, use ``PrivacyBudget.from_state_dict(b.state_dict())``.
    """

    def __init__(self, epsilon: float, delta: float, accountant: str = "pld"):
        self.epsilon = float(check_epsilon(epsilon, allow_array=False))
        self.delta = float(check_delta(delta, allow_zero=False))
        if not isinstance(accountant, str) or accountant not in _ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {_ACCOUNTANTS}, got {accountant!r}")
        self.accountant = accountant
        self._lock = threading.RLock()
        self._ledger: List[Charge] = []
        self._state: Any = None  # the composed ledger (_extend's result; None while empty)
        self._full: Optional[PrivacyAccountant] = None  # a from-scratch accountant of the ledger, for spent(other delta)
        self._spent = 0.0
        self._pid = os.getpid()  # a fork's copy (another pid) must not be charged

    #: why this object cannot be charged (an unpickled record), else None
    _record: Optional[str] = None
    _pid: Optional[int] = None

    def _check_live(self) -> None:
        """Raise :class:`BudgetScopeError` unless charges to this object reach the budget."""
        if self._record is not None:
            raise BudgetScopeError(self._record)
        if self._pid is not None and self._pid != os.getpid():
            raise BudgetScopeError(
                f"this PrivacyBudget belongs to process {self._pid}; process {os.getpid()} holds a copy "
                "(inherited by fork), and charges to it would not reach the budget. Run the releases in the "
                "budget's process (n_jobs=1 or joblib's threading backend). Nothing was charged or released.")

    # ----------------------------------------------------------------- charging
    def _composed(self, events: Iterable[DpEvent]) -> PrivacyAccountant:
        """A fresh accountant composing ``events``; equal events are composed once with their
        count (the accountants' results do not depend on the order, and a long ledger of
        repeated releases then costs one composition per distinct event)."""
        counts: Dict[Any, int] = {}
        unhashable: List[Any] = []
        for e in events:
            try:
                counts[e] = counts.get(e, 0) + 1
            except TypeError:
                unhashable.append(e)
        acc = make_accountant(self.accountant)
        for e, c in counts.items():
            acc.compose(e, c)
        for e in unhashable:
            acc.compose(e)
        return acc

    def _extend(self, state: Any, event: DpEvent) -> Tuple[Any, float]:
        """``state`` (the composed ledger, None when empty) with ``event`` composed once more, and
        its epsilon at the budget's delta; ``state`` itself is not changed.

        PLD: :class:`dpfast.accounting.incremental.IncrementalPLD` convolves the event's
        pessimistic PLD into the ledger's, so a charge costs the same at the 1000th release as
        at the first (recomposing the ledger made it O(n) compositions, ~n^3 in all); the
        epsilon is the from-scratch accountant's up to its discretization error.  RDP: a copy of
        the ledger's accountant (RDP curves add) composed with the event."""
        if self.accountant == "pld":
            new = (state if state is not None else IncrementalPLD()).extended(event)
            return new, float(new.epsilon(self.delta))
        new = state.copy() if state is not None else make_accountant(self.accountant)
        new.compose(event)
        return new, float(new.get_epsilon(self.delta))

    def charge(self, event: DpEvent, *, label: str = "") -> None:
        """Charge one release described by ``event``; raise if it does not fit.

        Composes the events already charged and ``event`` (incrementally: see :meth:`_extend`)
        and commits iff the composed epsilon at the budget's delta is ``<= epsilon``; the check
        and the commit hold the budget's lock.

        Raises
        ------
        BudgetExceededError
            The composition would exceed the budget; the budget is unchanged.
        BudgetScopeError
            This object cannot be charged (a copy from another process, an unpickled record);
            the budget is unchanged.
        dpfast.accounting.UnsupportedEventError
            ``event`` is not an event the accountant supports (e.g. a profile-only event with
            ``accountant="rdp"``); the budget is unchanged.
        TypeError, ValueError
            ``event`` is not an event, or it uses another neighbouring relation than the events
            already charged; the budget is unchanged.
        """
        label = _check_label(label)
        self._check_live()
        with self._lock:
            state, eps = self._extend(self._state, event)
            if not eps <= self.epsilon:  # also refuses NaN
                raise BudgetExceededError(label, event, self._spent, eps, self.epsilon, self.delta)
            self._ledger.append(Charge(label, event, eps))
            self._state, self._spent, self._full = state, eps, None

    # ----------------------------------------------------------------- queries
    @property
    def ledger(self) -> Tuple[Charge, ...]:
        """The accepted releases in order, as :class:`Charge` ``(label, event, epsilon)``."""
        with self._lock:
            return tuple(self._ledger)

    def spent(self, delta: Optional[float] = None) -> float:
        """Epsilon of the composition of every charged release, at ``delta`` (default: the
        budget's delta): the certified (pessimistic) ``get_epsilon(delta)`` of the accountant.
        0.0 while nothing has been charged."""
        with self._lock:
            if delta is not None:
                delta = check_delta(delta, allow_zero=False)
            if not self._ledger:
                return 0.0
            if delta is None or delta == self.delta:
                return self._spent
            if self._full is None:  # another delta: a from-scratch composition, kept until the next charge
                self._full = self._composed([c.event for c in self._ledger])
            return float(self._full.get_epsilon(delta))

    def remaining(self) -> float:
        """``epsilon - spent()``, floored at 0: the epsilon headroom at the budget's delta.

        Composition is not additive, so this is a summary, not a promise: whether a given
        release fits is decided by composing it (:meth:`charge`), and a release whose own
        epsilon is below ``remaining()`` may still be refused (e.g. an (eps, delta) release
        whose delta uses up the budget's delta), or one above it accepted."""
        with self._lock:
            return max(self.epsilon - self._spent, 0.0)

    # ----------------------------------------------------------------- display
    def __repr__(self) -> str:
        with self._lock:
            return (f"PrivacyBudget(epsilon={self.epsilon!r}, delta={self.delta!r}, "
                    f"accountant={self.accountant!r}, releases={len(self._ledger)}, spent={self._spent:.6g})")

    def __str__(self) -> str:
        """A header line, then one line a release: its number, label, event and the cumulative
        epsilon (at the budget's delta) after it."""
        with self._lock:
            lines = [f"PrivacyBudget(epsilon={self.epsilon:g}, delta={self.delta:g}, accountant={self.accountant!r}): "
                     f"{len(self._ledger)} release(s), spent {self._spent:.6g}, remaining "
                     f"{max(self.epsilon - self._spent, 0.0):.6g}"]
            for i, c in enumerate(self._ledger, 1):
                lines.append(f"{i:4d}. {c.label or '-'}  {_summary(c.event)}  epsilon={c.epsilon:.6g}")
            return "\n".join(lines)

    # ----------------------------------------------------------------- state
    def state_dict(self) -> dict:
        """A compact, JSON-able state: the budget, and per release its label, its event
        (``dpfast.accounting``'s dict form, never a PMF) and its cumulative epsilon.

        Raises ``TypeError`` when an event cannot be serialised (one holding a callable)."""
        with self._lock:
            return {
                "version": _STATE_VERSION,
                "epsilon": self.epsilon,
                "delta": self.delta,
                "accountant": self.accountant,
                "ledger": [{"label": c.label, "event": to_dict(c.event), "epsilon": c.epsilon}
                           for c in self._ledger],
            }

    @classmethod
    def from_state_dict(cls, state: dict) -> "PrivacyBudget":
        """The budget saved by :meth:`state_dict`: the same ledger and the same spent epsilon.

        The composition is rebuilt by charging the saved events in order (deterministic, so
        :meth:`spent` equals the saved value on the same build); a ledger whose composition
        exceeds the saved epsilon is refused with ``ValueError``."""
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict from PrivacyBudget.state_dict(), got {type(state).__name__}")
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"unsupported budget state version {state.get('version')!r} "
                             f"(this dpfast reads version {_STATE_VERSION})")
        try:
            budget = cls(state["epsilon"], state["delta"], state["accountant"])
            entries = [(_check_label(e["label"]), from_dict(e["event"]), float(e["epsilon"]))
                       for e in state["ledger"]]
        except KeyError as exc:
            raise ValueError(f"budget state lacks the key {exc.args[0]!r}") from None
        if entries:
            composed = None
            for _, e, _ in entries:
                composed, spent = budget._extend(composed, e)
            if not spent <= budget.epsilon:
                raise ValueError(f"the saved ledger composes to epsilon {spent:.6g} at delta {budget.delta:g}, "
                                 f"above the saved budget {budget.epsilon:g}")
            budget._state, budget._spent = composed, spent
            budget._ledger = [Charge(*e) for e in entries]
        return budget

    # ----------------------------------------------------------------- default budget
    def __enter__(self) -> "PrivacyBudget":
        self._check_live()  # a block whose every release would be refused: say so now
        token = _DEFAULT.set(self)
        entry = _register(self)
        _TOKENS.set(_TOKENS.get() + ((token, entry),))
        return self

    def __exit__(self, *exc: object) -> None:
        tokens = _TOKENS.get()
        _TOKENS.set(tokens[:-1])
        token, entry = tokens[-1]
        _unregister(entry)
        _DEFAULT.reset(token)

    # ----------------------------------------------------------------- copies
    def __copy__(self) -> NoReturn:
        raise TypeError(_NO_COPY)

    def __deepcopy__(self, memo: object) -> NoReturn:
        raise TypeError(_NO_COPY)

    # a lock is not state; the unpickled object is a record (see "Copies")
    def __getstate__(self) -> Dict[str, Any]:
        with self._lock:
            state = self.__dict__.copy()
        del state["_lock"]
        state["_state"] = state["_full"] = None  # arrays a record does not need (spent() is kept)
        state["_record"] = (
            "this PrivacyBudget was unpickled (e.g. sent to a joblib worker process): it is a read-only record, "
            "and charges to it would not reach the original budget. Run the releases in the budget's process "
            "(n_jobs=1 or joblib's threading backend), or use PrivacyBudget.from_state_dict(b.state_dict()) "
            "to continue a saved analysis. Nothing was charged or released.")
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()


_NO_COPY = ("a PrivacyBudget cannot be copied: a copy would be a second budget for the same data, whose charges "
            "the original never sees. Share the budget itself, or use PrivacyBudget.from_state_dict(b.state_dict()) "
            "for a deliberately independent budget.")


_DETACHED = object()  # the default inside ``detached()`` (None: no block in this context)
_DEFAULT: contextvars.ContextVar[Any] = contextvars.ContextVar("dpfast_budget", default=None)
_TOKENS: contextvars.ContextVar[tuple] = contextvars.ContextVar("dpfast_budget_tokens", default=())

# Process-wide registry of the open ``with budget:`` blocks: entry number -> (thread, budget).
# A thread whose own context has no block falls back to it (joblib's threads do not inherit
# context variables).  While it is non-empty a marker file names this process, so that worker
# processes (which cannot charge it) refuse their releases -- also workers started earlier.
_REG_LOCK = threading.Lock()
_ENTERED: Dict[int, Tuple[int, PrivacyBudget]] = {}
_ENTRY = itertools.count()


def _register(budget: PrivacyBudget) -> int:
    entry = next(_ENTRY)
    with _REG_LOCK:
        _ENTERED[entry] = (threading.get_ident(), budget)
        if len(_ENTERED) == 1:
            _marker_write()
    return entry


def _unregister(entry: int) -> None:
    with _REG_LOCK:
        _ENTERED.pop(entry, None)
        if not _ENTERED:
            _marker_remove()


_MARKER_DIR: List[str] = []


def _marker_path(pid: int) -> str:
    if not _MARKER_DIR:
        _MARKER_DIR.append(tempfile.gettempdir())
    return os.path.join(_MARKER_DIR[0], f"dpfast-budget-open-{pid}")


def _stat_field(pid: int, i: int) -> bytes:
    """Field ``i`` after the command name of ``/proc/<pid>/stat`` (Linux; b'' elsewhere or when
    it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[i]
    except (OSError, IndexError):
        return b""


def _start_time(pid: int) -> str:
    """The process's start time ('' where unknown): tells a live process from a stale marker
    left by a dead one whose pid was reused."""
    return _stat_field(pid, 19).decode()


def _marker_write() -> None:
    try:  # never through a link another user planted in a shared temporary directory
        fd = os.open(_marker_path(os.getpid()), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
        with os.fdopen(fd, "w") as f:
            f.write(_start_time(os.getpid()))
    except OSError:  # no writable temporary directory: worker processes cannot be warned
        import warnings

        warnings.warn("dpfast could not write its budget marker in the temporary directory: releases in "
                      "worker processes cannot see that a budget is open; use n_jobs=1 or threads",
                      RuntimeWarning, stacklevel=3)


def _marker_remove() -> None:
    try:
        os.remove(_marker_path(os.getpid()))
    except OSError:
        pass


@atexit.register
def _marker_cleanup() -> None:
    if _ENTERED:
        _marker_remove()


def _after_fork_in_child() -> None:
    # the child inherits the parent's registry (its budgets refuse charges there: another pid)
    # but not its marker file; a lock held by another thread at fork time is reset.
    global _REG_LOCK
    _REG_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _ppid(pid: int) -> int:
    """The parent of process ``pid`` (0 where unknown)."""
    field = _stat_field(pid, 1)
    return int(field) if field.isdigit() else 0


def _open_budget_ancestor() -> int:
    """The pid of the nearest ancestor with a ``with budget:`` block open (its marker), else 0.

    Runs on every release without a budget, so only in processes started by multiprocessing
    (joblib's loky and multiprocessing workers, Pools, Process), and then one access() call per
    ancestor.  Ancestors, not only the parent: a worker's own workers (a nested loky Parallel,
    a Pool inside a task) are as unable to charge the budget as the worker itself."""
    if multiprocessing.parent_process() is None:
        return 0
    pid = os.getppid()
    for _ in range(64):  # a bounded walk up the process tree
        if pid <= 1:
            return 0
        if _has_marker(pid):
            return pid
        pid = _ppid(pid)
    return 0


def _has_marker(pid: int) -> bool:
    path = _marker_path(pid)
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return False  # not written by this user's processes
    try:
        with open(path) as f:
            saved = f.read().strip()
    except OSError:
        return True
    now = _start_time(pid)
    return not (saved and now and saved != now)  # a stale marker of a dead process: ignore


def resolve(budget: Optional[PrivacyBudget]) -> Optional[PrivacyBudget]:
    """The budget a release charges: ``budget`` when given, else the default (the innermost
    ``with some_budget:`` block of this context; in a thread without one, the block open in
    the process), else ``None`` (no charge).

    Raises :class:`BudgetScopeError` (nothing read, drawn or charged) when the release cannot
    be charged: the budget is a copy from another process, this process's parent or an ancestor has a block
    open, or threads have entered different budgets (the rule: "Default budget" in
    :class:`PrivacyBudget`)."""
    if budget is None:
        b = _DEFAULT.get()
        if b is _DETACHED:
            return None
        if b is None:
            b = _process_default()
            if b is None:
                return None
        b._check_live()
        return b  # type: ignore[no-any-return]  # (a PrivacyBudget: the ContextVar holds _DETACHED too)
    if not isinstance(budget, PrivacyBudget):
        raise TypeError(f"budget must be a dpfast.PrivacyBudget or None, got {type(budget).__name__}")
    budget._check_live()
    return budget


def _process_default() -> Optional[PrivacyBudget]:
    entries = None
    if _ENTERED:  # (unlocked peek: the common case, no block anywhere, takes no lock)
        with _REG_LOCK:
            entries = sorted(_ENTERED.items())
    if entries:
        innermost: Dict[int, PrivacyBudget] = {}
        for _, (thread, b) in entries:  # in entry order: the last one of a thread is its innermost
            innermost[thread] = b
        budgets = {id(b): b for b in innermost.values()}
        if len(budgets) == 1:
            return next(iter(budgets.values()))
        raise BudgetScopeError(
            f"{len(budgets)} different privacy budgets are open in 'with' blocks of other threads, so this thread "
            "has no single default: enter one with 'with budget:' in this thread or pass budget=. "
            "Nothing was charged or released.")
    owner = _open_budget_ancestor()
    if owner:
        raise BudgetScopeError(
            f"the parent process ({owner}; this process's parent or an ancestor of it) has a 'with budget:' block open, and a budget cannot be charged "
            "from another process (e.g. a joblib loky/multiprocessing worker): run the releases in the budget's "
            "process (n_jobs=1 or joblib's threading backend), or pass an explicit budget=. "
            "Nothing was charged or released.")
    return None


def check_scope(budget: Optional[PrivacyBudget] = None) -> None:
    """Raise :class:`BudgetScopeError` (or ``TypeError`` for a non-budget) now if a release
    with ``budget=budget`` could not be charged; estimators call it before reading data."""
    resolve(budget)


def charge(budget: Optional[PrivacyBudget], event: Union[DpEvent, Callable[[], DpEvent]],
           label: str = "") -> None:
    """The one budget-charging helper of every release: charge ``event`` to ``resolve(budget)``
    (the explicit budget, else the ``with budget:`` default) when there is one; call it before
    drawing any noise.  ``event`` may be a zero-argument callable that builds the event, called
    only when a budget applies (mechanism calls without a budget build none).  Raises
    :class:`BudgetExceededError` when the release does not fit."""
    b = resolve(budget)
    if b is not None:
        b.charge(event() if callable(event) else event, label=label)


def refuse_unbudgeted(name: str) -> None:
    """Refuse, before it reads data, a private release function that takes no ``budget=`` when a
    default budget applies to it (a ``with budget:`` block reaches here, or a worker's ancestor
    has one open): it could not charge that budget, and releasing outside it would break the
    rule that every release under an open budget is charged to it or refused.  Estimators that
    charge their event and then call such a function do so inside :func:`detached`."""
    if resolve(None) is not None:
        raise BudgetScopeError(
            f"{name} takes no budget= and cannot charge the budget open here: use the estimator that "
            "wraps it (it charges the release's event), or charge the event yourself and call "
            f"{name} inside dpfast.budget.detached()")


@contextlib.contextmanager
def detached() -> Iterator[None]:
    """Run a block with no default budget (``with budget:`` does not reach into it).

    For composite releases: a function that charges the event of its whole release (e.g. an
    estimator's ``fit`` or ``dpfast.tables.aggregate``) and then calls mechanism functions to
    draw its noise runs those calls inside ``with detached():``, so that the default budget is
    charged once, with the composite's event, not again for each inner call.  Explicit
    ``budget=`` arguments inside the block are still charged."""
    token = _DEFAULT.set(_DETACHED)
    try:
        yield
    finally:
        _DEFAULT.reset(token)


def _summary(event: object, width: int = 96) -> str:
    """A one-line, human-sized description of an event for the printed ledger: the class name
    and its fields with 4 significant digits, nested events the same way, cut at ``width``
    characters (``state_dict`` and ``ledger`` keep the exact event)."""

    def fmt(v: Any, depth: int) -> str:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            if depth > 3:
                return type(v).__name__ + "(...)"
            parts = []
            for f in dataclasses.fields(v):
                x = getattr(v, f.name)
                if f.name == "neighbours" and getattr(x, "value", x) == "add_remove":
                    continue  # the default relation: left out to keep lines short
                if x is None:
                    continue
                parts.append(f"{f.name}={fmt(x, depth + 1)}" if not dataclasses.is_dataclass(x)
                             and not isinstance(x, tuple) else fmt(x, depth + 1))
            return f"{type(v).__name__}({', '.join(parts)})"
        if isinstance(v, tuple):
            return "[" + ", ".join(fmt(x, depth + 1) for x in v) + "]"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(getattr(v, "value", v))

    try:
        text = fmt(event, 0)
    except Exception:  # an event that is not a dataclass: its own repr
        text = repr(event)
    return text if len(text) <= width else text[: width - 3] + "..."
