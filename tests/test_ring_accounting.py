"""The cp.async group accounting of decode::detail::run_ring and run_ring_early (kernels/decode/mainloop.cuh),
modelled step for step on the CPU: every copy joins the open group, commit closes it, wait<N> completes all
but the newest N groups. Each consume must find every copy of its unit (weights, scales, activations) landed,
and no copy may target a slot whose unit is not yet consumed."""

from __future__ import annotations

import pytest


class Ring:
    def __init__(self, S):
        self.S, self.groups, self.open, self.slot_unit, self.consumed = S, [], [], {}, set()

    def copy(self, slot, unit, what):
        held = self.slot_unit.get(slot)
        assert held is None or held == unit or held in self.consumed, f"slot {slot} of unit {held} overwritten"
        self.slot_unit[slot] = unit
        self.open.append((unit, what))

    def commit(self):
        self.groups.append(self.open)
        self.open = []

    def wait(self, n):  # cp.async.wait_group n: every group but the newest n has landed
        self.groups = self.groups[max(0, len(self.groups) - n):] if n else []

    def pending(self, unit):
        return [w for g in self.groups + [self.open] for (u, w) in g if u == unit]

    def consume(self, unit, slot):
        assert self.slot_unit.get(slot) == unit, f"slot {slot} holds {self.slot_unit.get(slot)}, not {unit}"
        assert not self.pending(unit), f"unit {unit} consumed with {self.pending(unit)} in flight"
        self.consumed.add(unit)


def ring_loop(r, S, n, prod, issued):
    """detail::ring_loop: unit it + S - 1 refills the slot of unit it - 1, then unit it is consumed."""
    cons = 0
    for it in range(n):
        if issued < n:
            for w in ("weights", "x", "scales"):
                r.copy(prod % S, issued, w)
            issued += 1
        r.commit()
        prod += 1
        r.wait(S - 1)
        r.consume(it, cons % S)
        cons += 1


def run_ring(S, n):
    r, prod, issued = Ring(S), 0, 0
    for _ in range(S - 1):
        if issued < n:
            for w in ("weights", "x", "scales"):
                r.copy(prod, issued, w)
            issued += 1
        r.commit()
        prod += 1
    ring_loop(r, S, n, prod, issued)


def run_ring_early(S, n):
    r, prod, issued = Ring(S), 0, 0
    for _ in range(S - 1):
        if issued < n:
            r.copy(prod, issued, "weights")
            r.copy(prod, issued, "scales")
            issued += 1
        r.commit()
        prod += 1
    for s in range(S - 1):  # after dep_wait
        if s < issued:
            r.copy(s, s, "x")
    r.commit()
    r.wait(0)
    ring_loop(r, S, n, prod, issued)


@pytest.mark.parametrize("S", [2, 3, 5, 6])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 13])
@pytest.mark.parametrize("loop", [run_ring, run_ring_early])
def test_every_consume_finds_its_unit_landed(loop, S, n):
    loop(S, n)


def test_the_model_catches_a_short_wait():
    """A mutation: the early loop without its wait<0> consumes unit 0 with its activations in flight."""
    r = Ring(3)
    r.copy(0, 0, "weights")
    r.commit()
    r.copy(0, 0, "x")
    r.commit()
    r.wait(2)
    with pytest.raises(AssertionError, match="in flight"):
        r.consume(0, 0)
