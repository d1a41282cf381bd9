"""The per-case bookkeeping of a run spread over workers: one entry per case (queued, sent in a part, running,
done), the parts in flight, how long each finished point took and, from those, how long the rest will take.

It decides what goes next: with warm workers (one long-lived workload child each) a part is one case, and the
next case sent is the longest one left by the current estimate (longest processing time first: the long points
start early and the short ones fill the ends, so the workers finish together); without, every case is dealt up
front into parts of about equal estimated work. The estimate starts as the target's cost model and is learnt
from the points measured so far: per backend a line ``seconds = a + b * model`` through its finished points
(one point: a ratio), any backend's points for a backend not seen yet.

A worker lost under a part costs its cases *thirds* of a loss: the case it was running 3 (the suspect), a case
only queued on it 2 (not a suspect, but a case at whose every start a worker dies must end too); at 6 a case is
given up (a ``crashed`` row): twice for a case that was running, three times for one that was only queued.

Pure Python -- no Dask: profctl.pipelines.dask_executor drives it with its workers' events, and
tests/unit/test_ledger.py with events alone.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from profctl.pipelines.executors import Part, split

QUEUED, SENT, RUNNING, DONE = "queued", "sent", "running", "done"
#: a lost worker's cost to a case in thirds of a loss (see the module's docstring), and where a case is given up
LOSS_RUNNING, LOSS_QUEUED, GIVE_UP = 3, 2, 6


@dataclass
class Case:
    """One case: its cost model and what learns with it (`key`: its backend), where it is, what it took."""

    index: int
    model: float
    key: str
    state: str = QUEUED
    part: int | None = None
    started: float | None = None  # the worker's clock at its start event
    seconds: float | None = None  # start -> row (or lost), as the worker's clock saw it
    losses: int = 0  # in thirds


@dataclass
class Flight:
    """A part sent to the workers and not back yet: its cases, where it runs, the case it runs now, how many
    events it sent (told by its result) and how many arrived."""

    part: Part
    where: dict[str, Any] = field(default_factory=dict)
    running: int | None = None
    events_sent: int | None = None
    events_seen: int = 0


@dataclass(frozen=True)
class Loss:
    """What a lost part leaves: parts to send again, and cases given up with the reason for their rows."""

    retry: list[Part]
    given_up: list[tuple[int, str]]


class Ledger:
    """Every case of one run over `slots` workers (see the module docstring). `models`: the target's cost model
    per case index (None: all alike); `keys`: what learns together per case index (the backend); `ahead`: warm
    parts queued on each worker behind its running one."""

    def __init__(self, cases: Sequence[int], *, slots: int, warm: bool, models: Sequence[float] | None = None,
                 keys: Sequence[str] | None = None, parts_per_slot: int = 1, ahead: int = 1) -> None:
        def at(seq: Sequence[Any] | None, i: int, default: Any) -> Any:
            return seq[i] if seq is not None and 0 <= i < len(seq) else default

        self.cases = {int(c): Case(int(c), max(float(at(models, c, 1.0)), 1e-12), str(at(keys, c, "")))
                      for c in cases}
        self.slots, self.warm, self.parts_per_slot = max(1, slots), warm, max(1, parts_per_slot)
        self.ahead = max(0, ahead)
        self.flights: dict[int, Flight] = {}
        self.ended: dict[int, Flight] = {}
        self._fits: dict[str | None, tuple[float, float] | None] | None = None  # per key (None: all); stale: None
        self._n = 0

    # ---- dealing
    def _part(self, cases: tuple[int, ...] | None, retry: bool = False) -> Part:
        part = Part(self._n, cases, retry=retry)
        self._n += 1
        self.flights[part.index] = Flight(part)
        for c in cases or ():
            self.cases[c].state, self.cases[c].part = SENT, part.index
        return part

    def deal(self) -> list[Part]:
        """The parts to send now: warm, the longest queued cases (one a part) until each slot has its running part
        and `ahead` more waiting on it (so a worker goes on without waiting for this process to answer);
        otherwise, the first time, every case in parts of about equal estimated work (a lost part's cases come
        back from :meth:`lost`). A
        run without cases is one part over nothing (a program: the part runs it once)."""
        if not self.cases:
            return [] if self._n else [self._part(None)]
        out: list[Part] = []
        queued = [c for c in self.cases.values() if c.state == QUEUED]
        if self.warm:
            queued.sort(key=lambda c: (-self.estimate(c.index), c.index))
            free = max(0, self.slots * (1 + self.ahead) - len(self.flights))
            out += [self._part((c.index,), retry=c.losses > 0) for c in queued[:free]]
        elif self._n == 0:
            weights = {c.index: self.estimate(c.index) for c in queued}
            n = self.slots * self.parts_per_slot
            w = [weights.get(i, 0.0) for i in range(max(weights, default=-1) + 1)]
            out += [self._part(g) for g in split(sorted(weights), n, w)]
        return out

    def estimate(self, case: int) -> float:
        """Seconds the case takes: measured when done, else the fit of its backend's finished points, else of
        all finished points, else the cost model as it is (only the order matters before any point ends)."""
        c = self.cases[case]
        if c.seconds is not None:
            return c.seconds
        if self._fits is None:
            done = [x for x in self.cases.values() if x.seconds is not None and x.state == DONE]
            fits: dict[str | None, tuple[float, float] | None] = {None: _fit([(x.model, x.seconds) for x in done
                                                                               if x.seconds is not None])}
            for key in {x.key for x in done}:
                fits[key] = _fit([(x.model, x.seconds) for x in done if x.key == key and x.seconds is not None])
            self._fits = fits
        fit = self._fits.get(c.key) or self._fits.get(None)
        return fit[0] + fit[1] * c.model if fit else c.model

    # ---- events
    def event(self, part: int, ev: dict[str, Any]) -> None:
        """A part's event (``start``, ``row``, ``lost``: of a case; any other counts as seen)."""
        f = self.flights.get(part) or self.ended.get(part)
        if f is None:
            return
        f.events_seen += 1
        if ev.get("where"):
            f.where = dict(ev["where"])
        kind, i, t = ev.get("event"), ev.get("index"), ev.get("t")
        if i is None or int(i) not in self.cases:
            return
        c = self.cases[int(i)]
        if kind == "start" and c.state != DONE:
            c.state, c.part, f.running = RUNNING, part, c.index
            c.started = float(t) if t is not None else None
        elif kind in ("row", "lost") and c.state != DONE:
            c.state, self._fits = DONE, None
            if kind == "row" and c.started is not None and t is not None and c.part == part:
                c.seconds = max(0.0, float(t) - c.started)
            if f.running == c.index:
                f.running = None

    def finished(self, part: int, events: int | None = None) -> None:
        """The part's result came back (`events`: how many events it sent)."""
        f = self.flights.pop(part, None)
        if f is None:
            return
        f.events_sent = events
        self.ended[part] = f
        for c in f.part.cases or ():  # a case the part never reported is sent again (a part that failed is not
            if self.cases[c].state in (SENT, RUNNING) and self.cases[c].part == part:  # retried: its error is
                self.cases[c].state = DONE  # its cases' row, made by the pipeline)

    def missing_events(self) -> int:
        """Events parts said they sent that have not arrived yet."""
        return sum(max(0, (f.events_sent or 0) - f.events_seen) for f in self.ended.values())

    def lost(self, part: int) -> Loss:
        """The worker under `part` died: its unfinished cases go again (the one it was running alone); a case
        whose losses reach GIVE_UP is given up."""
        f = self.flights.pop(part, None)
        if f is None:
            return Loss([], [])
        self.ended[part] = f
        todo = [c for c in f.part.cases or () if self.cases[c].state != DONE]
        running = f.running if f.running in todo else None
        # a part that had not started a case was only queued on the worker that died: its cases are not suspects,
        # but they pay a little, so that a case at whose every start a worker dies ends too
        suspects = [running] if running is not None else todo
        given_up = []
        for c in suspects:
            case = self.cases[c]
            case.losses += LOSS_RUNNING if running is not None else LOSS_QUEUED
            if case.losses >= GIVE_UP:
                case.state, self._fits = DONE, None
                todo.remove(c)
                given_up.append((c, "its worker process died twice while running this point"
                                 if running is not None else "its worker process died at each of its starts"))
        retry: list[Part] = []
        if self.warm:  # back in the queue: dealt again, longest first
            for c in todo:
                self.cases[c].state, self.cases[c].part, self.cases[c].started = QUEUED, None, None
        else:  # parts were dealt up front: the case it was running alone, the rest together
            if running in todo:
                todo.remove(running)
                retry.append(self._part((running,), retry=True))
            if todo:
                retry.append(self._part(tuple(todo), retry=True))
        return Loss(retry, given_up)

    # ---- questions
    def flight(self, part: int) -> Flight | None:
        return self.flights.get(part) or self.ended.get(part)

    def done(self) -> bool:
        """No part in flight and nothing left to send."""
        return not self.flights and all(c.state == DONE for c in self.cases.values())

    def describe(self) -> dict[str, Any]:
        """What the manifest keeps: how cases were dealt, and the estimate against the measured time per case."""
        return {"deal": "longest first, as workers free up" if self.warm else "equal estimated work per part",
                "points_s": {str(c.index): round(c.seconds, 3) for c in self.cases.values()
                             if c.seconds is not None}}


def _fit(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """(a, b) of ``seconds = a + b * model`` through `points` (least squares, a >= 0, b > 0); one point, or
    points of one model value: a ratio through the origin; none: None."""
    if not points:
        return None
    ms = [m for m, _ in points]
    ratio = (0.0, statistics.median(s / m for m, s in points))
    if len(points) < 2 or max(ms) - min(ms) <= 1e-12 * max(ms):
        return ratio
    mm, ss = statistics.fmean(ms), statistics.fmean(s for _, s in points)
    var = sum((m - mm) ** 2 for m in ms)
    b = sum((m - mm) * (s - ss) for m, s in points) / var
    a = ss - b * mm
    if b <= 0:
        return ratio
    if a < 0:
        return 0.0, sum(m * s for m, s in points) / sum(m * m for m in ms)
    return a, b
