"""One model of a kernel's time, and what it becomes after any set of fixes (issue 47).

Every saving ``profctl explain`` prints comes from here, and nothing else caps one. A kernel's time is taken as
the largest of three kinds of term:

* **the units** (profctl.analysis.floor): each unit's practical time for the work it did, ``floor / ceiling``. A
  fix that removes work scales that unit's term by the fraction it leaves (``Cause.relieves``). Where the grid
  leaves SMs idle (too-few-blocks), the SM-clocked units' work sits on the SMs that have blocks: their term is the
  busy SMs' own, ``floor / fill``, until the grid is fixed.
* **the holds**: a fault whose mechanism is a wait (loads issued late, barriers, ...) or a unit doing excess work
  keeps the kernel at no less than the time it accounts for, ``share x time``, until it is fixed. Two faults that
  claim the same waiting time (an uncoalesced read in a loop whose loads are not pipelined) mask each other: fixing
  either alone leaves the other's hold, and only fixing both gives the time back. Fixing a fault that hides
  latency with more resident warps shortens every remaining hold by its share; more blocks do not: each block's
  loop, and the waits along it, stay as long (tests/data/ladders gemm_tiles: 4x the blocks of smaller tiles ran 19 %
  faster while its loads were not pipelined, 2.5x faster once they were). A fix that removes another fault's
  mechanism removes its hold too (``relieves[hold_key(id)]``): in a pair, reordering for reuse takes the misses,
  and the wait for them that reads as late loads, away (tests/data/pairs projections_reuse).
* **the exposed latency**: the time not set by a unit, ``time x product(1 - share)`` over the fixed causes (shares
  of one kernel's warp time compose multiplicatively).

So a fault alone saves ``T - T({c})``; all named faults together ``T - T(all)``; and a fault that saves little
alone but much with another is said to be masked by it. In a pair, a fixed unit keeps at least B's work there (A
fixed does what B does) and no fix saves more than the gap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from profctl.analysis.floor import Floor, UnitFloor

#: what a cause's fix changes (the catalog's ``effect``): work removed from units, a wait removed, latency hidden
WORK, WAIT, HIDE, ROOF = "work", "wait", "hide", "roof"


def hold_key(cause_id: str) -> str:
    """The key under which an effect's ``relieves`` gives the fraction of another fault's hold its fix leaves."""
    return f"hold:{cause_id}"


@dataclass(frozen=True)
class Effect:
    """What fixing one cause changes in the model."""

    id: str
    kind: str                          # WORK | WAIT | HIDE | ROOF
    share: float                       # the fraction of the kernel's time it accounts for (uncapped)
    #: unit -> fraction of its work left; ``hold_key(id)`` -> fraction of that fault's hold left (its wait was
    #: this fault's consequence: a thrashing pair's extra wait for loads is the misses' latency)
    relieves: Mapping[str, float] = field(default_factory=dict)
    spreads: bool = False              # the grid: SM units' work is on the busy SMs until it is fixed


@dataclass(frozen=True)
class Prediction:
    """The kernel's predicted time after a set of fixes, and the term that sets it."""

    time_us: float
    binds: str          # "unit:<key>", "hold:<cause id>" or "latency"
    label: str          # in words: "the DRAM", "loads-not-pipelined", "the exposed latency"


class TimeModel:
    """The model of one kernel (A in a pair): its time, its floor, and the effects of the causes found in it."""

    def __init__(self, duration_us: float, floor: Floor | None, effects: Iterable[Effect],
                 other: Floor | None = None) -> None:
        self.t = duration_us
        self.floor = floor if floor is not None and floor.units else None
        self.effects = {e.id: e for e in effects}
        self.other = other if other is not None and other.units else None
        grid = [e for e in self.effects.values() if e.spreads]
        self.fill = max(1.0 - max(e.share for e in grid), 0.05) if grid else 1.0

    # ---------------------------------------------------------------- the terms
    def _left(self, e: Effect, key: str) -> float:
        """The fraction of `key`'s work fixing `e` leaves; in a pair at least B's work there."""
        left = e.relieves.get(key, 1.0)
        if left < 1.0 and self.other is not None and self.floor is not None:
            mine, theirs = self.floor.get(key), self.other.get(key)
            if mine is not None and theirs is not None and mine.floor_us > 0:
                left = max(left, min(theirs.floor_us / mine.floor_us, 1.0))
        return min(max(left, 0.0), 1.0)

    def _unit_time(self, u: UnitFloor, fixed: set[str]) -> float:
        frac = u.pct / 100.0
        assert self.floor is not None
        if u.domain == "sm" and self.fill < 1.0 and not any(self.effects[i].spreads for i in fixed):
            frac = min(frac / self.fill, 1.0)  # the SMs that have blocks do all of it
        best = u.floor_us if u.key == "l2" and self.floor.l2_carries_dram else self.t * frac / max(u.ceiling, frac)
        for i in fixed:
            best *= self._left(self.effects[i], u.key)
        return best

    def predict(self, fixed: Iterable[str]) -> Prediction:
        """The kernel's time once the causes in `fixed` are fixed (ids not in the model are ignored)."""
        done = {i for i in fixed if i in self.effects}
        out = Prediction(0.0, "latency", "the exposed latency")
        if self.floor is not None:
            for u in self.floor.units:
                x = self._unit_time(u, done)
                if x > out.time_us:
                    out = Prediction(x, f"unit:{u.key}", f"the {u.label}")
        hidden = 1.0
        for i in done:  # more warps overlap the waits; more blocks leave each block's loop, and its waits, as long
            if self.effects[i].kind == HIDE and not self.effects[i].spreads:
                hidden *= 1.0 - self.effects[i].share
        for e in self.effects.values():
            if e.id not in done and e.kind in (WORK, WAIT):
                x = self.t * min(e.share, 1.0) * hidden
                for i in done:  # a fix that takes away another fault's mechanism takes its hold with it
                    x *= min(max(self.effects[i].relieves.get(hold_key(e.id), 1.0), 0.0), 1.0)
                if x > out.time_us:
                    out = Prediction(x, f"hold:{e.id}", e.id)
        exposed = self.t
        for i in done:
            exposed *= 1.0 - min(max(self.effects[i].share, 0.0), 1.0)
        if exposed > out.time_us:
            out = Prediction(exposed, "latency", "the exposed latency")
        return Prediction(min(out.time_us, self.t), out.binds, out.label)

    def saving(self, fixed: Iterable[str]) -> float:
        return max(self.t - self.predict(fixed).time_us, 0.0)


@dataclass(frozen=True)
class Joint:
    """The named fixes together: the time they leave and what then binds, and each cause's part in it."""

    ids: tuple[str, ...]
    time_us: float
    saving_us: float
    binds: str
    #: cause id -> what fixing it adds once the others are fixed (its marginal saving in the joint fix)
    marginal: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"causes": list(self.ids), "time_us": round(self.time_us, 3), "saving_us": round(self.saving_us, 3),
                "then_binds": self.binds, "marginal_us": {k: round(v, 3) for k, v in self.marginal.items()}}


def joint(model: TimeModel, ids: Iterable[str], cap: float | None = None) -> Joint:
    """All of `ids` fixed together, and each one's marginal part (the time fixing it adds after the others)."""
    ids = tuple(dict.fromkeys(ids))
    p = model.predict(ids)
    sav = model.t - p.time_us
    marginal = {i: model.predict([j for j in ids if j != i]).time_us - p.time_us for i in ids}
    if cap is not None:
        sav = min(sav, cap)
        marginal = {i: min(v, cap) for i, v in marginal.items()}
    return Joint(ids, model.t - sav, max(sav, 0.0), p.label, marginal)


__all__ = ["HIDE", "ROOF", "WAIT", "WORK", "Effect", "Joint", "Prediction", "TimeModel", "hold_key", "joint"]
