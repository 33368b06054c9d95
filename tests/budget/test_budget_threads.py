"""PrivacyBudget under concurrency: 8 threads charging one budget never overspend.

The expected number of accepted releases is computed sequentially with a fresh accountant
(an independent composition), not read from the budget.
"""
import threading

import numpy as np
import pytest

import dpfast
from dpfast import accounting as A
from dpfast.budget import BudgetExceededError, PrivacyBudget, resolve

N_THREADS = 8
EPS, DELTA = 1.0, 1e-6


def number_that_fit(kind: str, event) -> int:
    """Largest k with the k-fold composition of ``event`` within (EPS, DELTA), sequentially."""
    k = 0
    while True:
        acc = A.PLDAccountant() if kind == "pld" else A.RDPAccountant()
        acc.compose(event, k + 1)
        if acc.get_epsilon(DELTA) > EPS:
            return k
        k += 1


def run_threads(target):
    barrier = threading.Barrier(N_THREADS)
    errors = []

    def wrapped(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


@pytest.mark.parametrize("kind", ["pld", "rdp"])
def test_concurrent_charges_accept_exactly_the_number_that_fit(kind):
    event = A.Laplace(scale=10.0)  # 0.1-DP
    expected = number_that_fit(kind, event)
    assert expected >= 9  # basic composition alone admits 10 (9 with RDP's conversion slack)
    b = PrivacyBudget(EPS, DELTA, accountant=kind)
    accepted = [0] * N_THREADS
    refused = [0] * N_THREADS

    def work(i):
        while True:
            try:
                b.charge(event, label=f"thread {i}")
            except BudgetExceededError:
                refused[i] += 1
                return
            accepted[i] += 1

    run_threads(work)
    assert sum(accepted) == expected == len(b.ledger)
    assert refused == [1] * N_THREADS
    assert b.spent() <= EPS


def test_concurrent_heterogeneous_charges_never_overspend():
    """Threads charge different events; whichever order the lock gave, the ledger is a valid
    sequential history: each cumulative epsilon is the composition of its prefix, the total
    fits, and every refused event still does not fit (composition only grows)."""
    b = PrivacyBudget(EPS, DELTA)
    events = [A.Laplace(scale=1.0 / e) for e in (0.05, 0.1, 0.15, 0.2, 0.07, 0.12, 0.3, 0.09)]
    refused = []
    lock = threading.Lock()

    def work(i):
        for _ in range(6):
            try:
                b.charge(events[i], label=str(i))
            except BudgetExceededError as exc:
                with lock:
                    refused.append(exc.event)

    run_threads(work)
    ledger = b.ledger
    assert len(ledger) + len(refused) == 6 * N_THREADS
    for j in (len(ledger) // 2, len(ledger) - 1):
        acc = A.PLDAccountant()
        for c in ledger[: j + 1]:
            acc.compose(c.event)
        assert ledger[j].epsilon == pytest.approx(acc.get_epsilon(DELTA), rel=1e-9)
    assert b.spent() <= EPS
    for ev in set(refused):
        acc = A.PLDAccountant()
        for c in ledger:
            acc.compose(c.event)
        acc.compose(ev)
        assert acc.get_epsilon(DELTA) > EPS


def test_concurrent_mechanism_calls_release_only_what_fits():
    expected = number_that_fit("pld", A.Laplace(scale=1.0 / 0.15, sensitivity=1.0))
    b = PrivacyBudget(EPS, DELTA)
    released = [0] * N_THREADS
    untouched = [True] * N_THREADS

    def work(i):
        rng = np.random.default_rng(100 + i)
        while True:
            state = rng.bit_generator.state
            try:
                dpfast.laplace(np.zeros(4), 1.0, 0.15, rng=rng, budget=b)
            except BudgetExceededError:
                untouched[i] = rng.bit_generator.state == state
                return
            released[i] += 1

    run_threads(work)
    assert sum(released) == expected == len(b.ledger)
    assert all(untouched)


def test_each_thread_has_its_own_default_budget():
    budgets = [PrivacyBudget(5.0, DELTA) for _ in range(N_THREADS)]

    def work(i):
        with budgets[i]:
            assert resolve(None) is budgets[i]
            for _ in range(i + 1):
                dpfast.laplace(np.zeros(2), 1.0, 0.1, rng=i)

    run_threads(work)
    assert [len(b.ledger) for b in budgets] == list(range(1, N_THREADS + 1))
    assert resolve(None) is None
