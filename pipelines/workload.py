"""A workload simulator: random tuple trees played through Storm's or FsShelter's ack protocol.

Trees have random fan-out and depth; some are anchored together (one tuple in two trees, as an
aggregating bolt does), some fail, some lose an ack (and so time out), some acks are delivered
twice, some inits arrive a batch late. The result is a list of ``ack_events`` rows, each tagged
with the micro-batch it arrives in, deterministic for a seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

__all__ = ["Edge", "Event", "WorkloadSpec", "generate_edges", "generate_workload", "new_id"]


@dataclass(frozen=True)
class Event:
    """One ``ack_events`` row and the micro-batch it arrives in."""

    anchor_id: int | None
    event_type: str | None
    xor_value: int | None
    spout_task: int | None
    source_msg_id: str | None
    component: str | None
    event_time: datetime | None
    event_id: str | None
    batch: int = 0

    def row(self) -> tuple[object, ...]:
        """The row in ``ack_events`` column order."""
        return (
            self.anchor_id,
            self.event_type,
            self.xor_value,
            self.spout_task,
            self.source_msg_id,
            self.component,
            self.event_time,
            self.event_id,
        )


@dataclass(frozen=True)
class Edge:
    """One tuple of a simulated tree: the component that emitted it, the one that processed
    it, and its fate there: ``acked``, ``failed`` (a fail was sent) or ``lost`` (no ack was
    ever sent, so the tree can only time out)."""

    anchor_id: int
    edge_id: int
    emitted_by: str
    processed_by: str
    fate: str


@dataclass(frozen=True)
class WorkloadSpec:
    """The shape of a generated workload."""

    trees: int = 1000
    batches: int = 4
    max_fanout: int = 3
    max_depth: int = 3
    fail_rate: float = 0.03
    lost_ack_rate: float = 0.03
    duplicate_rate: float = 0.03
    late_init_rate: float = 0.05
    multi_anchor_rate: float = 0.05
    fsshelter_share: float = 0.25
    spout_tasks: int = 4
    seed: int = 0
    start: datetime = field(default_factory=lambda: datetime(2026, 1, 1))
    trees_per_s: float = 0.0
    """Trees started per second of event time; 0: each batch's trees over its first 10 s."""
    slow_rate: float = 0.0
    """Share of trees whose last acks come ``slow_delay_s`` late: a bolt that holds a tuple."""
    slow_delay_s: tuple[float, float] = (30.0, 300.0)
    """How late a slow tree's last acks come: 1 to 10 timeouts of 30 s by default."""
    ack_before_init_rate: float = 0.0
    """Share of trees whose init is sent after their first ack (the acker receives both from
    different tasks, in either order)."""

    @classmethod
    def realistic(cls, trees: int, trees_per_s: float, seed: int = 0) -> WorkloadSpec:
        """The mix a production topology produces, as a stream of ``trees`` trees at
        ``trees_per_s``: fan-out and multi-anchoring, 5% fails, 3% lost acks, 8% slow trees,
        5% acks before their init, 3% duplicated acks, a quarter FsShelter trees."""
        return cls(
            trees=trees,
            batches=1,
            max_depth=2,
            fail_rate=0.05,
            lost_ack_rate=0.03,
            duplicate_rate=0.03,
            late_init_rate=0.0,
            seed=seed,
            trees_per_s=trees_per_s,
            slow_rate=0.08,
            ack_before_init_rate=0.05,
        )


def new_id(rng: random.Random) -> int:
    """A random signed 64-bit id, never 0 (0 would vanish from a XOR checksum)."""
    while True:
        value = rng.getrandbits(64) - (1 << 63)
        if value != 0:
            return value


@dataclass
class _Tree:
    anchor_id: int
    spout_task: int
    source_msg_id: str
    batch: int
    start: datetime
    events: list[Event] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    serial: int = 0

    def edge(self, edge_id: int, depth: int, fate: str, emitted_by: str | None = None) -> None:
        """Record the fate of a tuple processed at ``depth`` (1 = emitted by the spout)."""
        emitter = emitted_by or ("spout" if depth == 1 else f"bolt-{depth - 1}")
        self.edges.append(Edge(self.anchor_id, edge_id, emitter, f"bolt-{depth}", fate))

    def emit(self, event_type: str, value: int | None, component: str, at: datetime) -> Event:
        self.serial += 1
        is_init = event_type == "init"
        event = Event(
            anchor_id=self.anchor_id,
            event_type=event_type,
            xor_value=value,
            spout_task=self.spout_task if is_init else None,
            source_msg_id=self.source_msg_id if is_init else None,
            component=component,
            event_time=at,
            event_id=f"{self.anchor_id}-{self.serial}",
            batch=self.batch,
        )
        self.events.append(event)
        return event


class _Simulator:
    def __init__(self, spec: WorkloadSpec) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)

    def later(self, at: datetime) -> datetime:
        return at + timedelta(milliseconds=self.rng.randint(1, 400))

    def children(self, depth: int) -> list[int]:
        if depth >= self.spec.max_depth:
            return []
        return [new_id(self.rng) for _ in range(self.rng.randint(0, self.spec.max_fanout))]

    def storm_tree(self, tree: _Tree) -> list[tuple[int, Event]]:
        """Storm: init carries the XOR of the first edges; each ack is tuple id ^ children.

        Returns the leaf acks as (edge id, event) so that multi-anchoring can join two trees.
        """
        first = [new_id(self.rng) for _ in range(self.rng.randint(1, self.spec.max_fanout))]
        init_value = 0
        for edge in first:
            init_value ^= edge
        tree.emit("init", init_value, "spout", tree.start)
        leaves: list[tuple[int, Event]] = []
        frontier = [(edge, 1, tree.start) for edge in first]
        while frontier:
            edge, depth, at = frontier.pop(0)
            at = self.later(at)
            roll = self.rng.random()
            if roll < self.spec.fail_rate:
                tree.emit("fail", None, f"bolt-{depth}", at)
                tree.edge(edge, depth, "failed")
                continue
            kids = self.children(depth)
            ack_value = edge
            for kid in kids:
                ack_value ^= kid
            frontier.extend((kid, depth + 1, at) for kid in kids)
            if roll < self.spec.fail_rate + self.spec.lost_ack_rate:
                tree.edge(edge, depth, "lost")
                continue
            tree.edge(edge, depth, "acked")
            event = tree.emit("ack", ack_value, f"bolt-{depth}", at)
            if not kids:
                leaves.append((edge, event))
        return leaves

    def fsshelter_tree(self, tree: _Tree) -> None:
        """FsShelter: Track (init 0), Anchor per new tuple id, Ok per processed tuple."""
        tree.emit("init", 0, "spout", tree.start)
        frontier = []
        for _ in range(self.rng.randint(1, self.spec.max_fanout)):
            tuple_id = new_id(self.rng)
            tree.emit("anchor", tuple_id, "spout", tree.start)
            frontier.append((tuple_id, 1, tree.start))
        while frontier:
            tuple_id, depth, at = frontier.pop(0)
            at = self.later(at)
            roll = self.rng.random()
            if roll < self.spec.fail_rate:
                tree.emit("fail", None, f"bolt-{depth}", at)
                tree.edge(tuple_id, depth, "failed")
                continue
            for kid in self.children(depth):
                tree.emit("anchor", kid, f"bolt-{depth}", at)
                frontier.append((kid, depth + 1, at))
            if roll >= self.spec.fail_rate + self.spec.lost_ack_rate:
                tree.edge(tuple_id, depth, "acked")
                tree.emit("ack", tuple_id, f"bolt-{depth}", self.later(at))
            else:
                tree.edge(tuple_id, depth, "lost")

    def join(
        self, first: tuple[_Tree, tuple[int, Event]], second: tuple[_Tree, tuple[int, Event]]
    ) -> None:
        """An aggregating bolt anchors one tuple to a leaf of each tree: the same edge id
        enters both checksums, and its ack is sent to both roots."""
        joined = new_id(self.rng)
        at = datetime.min
        for tree, (_, leaf) in (first, second):
            index = tree.events.index(leaf)
            tree.events[index] = replace(leaf, xor_value=(leaf.xor_value or 0) ^ joined)
            at = max(at, leaf.event_time or at)
        for tree, (_, leaf) in (first, second):
            tree.emit("ack", joined, "aggregator", self.later(at))
            tree.edges.append(
                Edge(tree.anchor_id, joined, leaf.component or "", "aggregator", "acked")
            )

    def retime(self, tree: _Tree) -> None:
        """A slow tree's last acks come late; some trees' init comes after their first ack.
        Draws nothing from the generator where the spec asks for neither."""
        spec = self.spec
        acks = sorted(
            (i for i, e in enumerate(tree.events) if e.event_type == "ack"),
            key=lambda i: tree.events[i].event_time or datetime.min,
        )
        if not acks:
            return
        if spec.slow_rate and self.rng.random() < spec.slow_rate:
            delay = timedelta(seconds=self.rng.uniform(*spec.slow_delay_s))
            for i in acks[-self.rng.randint(1, 2) :]:
                late = tree.events[i]
                tree.events[i] = replace(late, event_time=(late.event_time or tree.start) + delay)
        if spec.ack_before_init_rate and self.rng.random() < spec.ack_before_init_rate:
            first_ack = tree.events[acks[0]].event_time or tree.start
            after = first_ack + timedelta(milliseconds=self.rng.randint(1, 500))
            tree.events = [
                replace(e, event_time=after) if e.event_type == "init" else e for e in tree.events
            ]

    def deliver(self, tree: _Tree) -> list[Event]:
        """Apply delivery faults: duplicates (same or next batch), a late init, straddling."""
        last_batch = self.spec.batches - 1
        delivered: list[Event] = []
        for position, event in enumerate(tree.events):
            batch = tree.batch
            if position > 0 and self.rng.random() < 0.15:
                batch = min(batch + 1, last_batch)
            if event.event_type == "init" and self.rng.random() < self.spec.late_init_rate:
                batch = min(tree.batch + 1, last_batch)
            delivered.append(replace(event, batch=batch))
            if (
                event.event_type in ("ack", "anchor")
                and self.rng.random() < self.spec.duplicate_rate
            ):
                delivered.append(
                    replace(event, batch=min(batch + self.rng.randint(0, 1), last_batch))
                )
        return delivered


def generate_workload(spec: WorkloadSpec) -> list[Event]:
    """Generate the events of ``spec.trees`` tuple trees, ordered by batch then event time.

    Example: ``events = generate_workload(WorkloadSpec(trees=200, seed=7))``.
    """
    sim = _Simulator(spec)
    trees = _grow_trees(sim)
    for tree in trees:
        sim.retime(tree)
    events = [event for tree in trees for event in sim.deliver(tree)]
    return sorted(events, key=lambda e: (e.batch, e.event_time or datetime.min))


def generate_edges(spec: WorkloadSpec) -> list[Edge]:
    """The tuples of the trees ``generate_workload(spec)`` generates, with their fates: what
    the events alone cannot show, such as which tuple of a timed-out tree was never acked.

    Example: ``lost = [e for e in generate_edges(spec) if e.fate == "lost"]``.
    """
    return [edge for tree in _grow_trees(_Simulator(spec)) for edge in tree.edges]


def _grow_trees(sim: _Simulator) -> list[_Tree]:
    spec = sim.spec
    trees: list[_Tree] = []
    storm_leaves: list[tuple[_Tree, tuple[int, Event]]] = []
    for index in range(spec.trees):
        batch = index * spec.batches // spec.trees
        offset_s = (
            index / spec.trees_per_s
            if spec.trees_per_s
            else index * 10 / max(1, spec.trees // spec.batches)
        )
        tree = _Tree(
            anchor_id=new_id(sim.rng),
            spout_task=sim.rng.randrange(spec.spout_tasks),
            source_msg_id=f"msg-{spec.seed}-{index}",
            batch=batch,
            start=spec.start + timedelta(seconds=offset_s),
        )
        tree.start = tree.start.replace(microsecond=tree.start.microsecond // 1000 * 1000)
        if sim.rng.random() < spec.fsshelter_share:
            sim.fsshelter_tree(tree)
        else:
            leaves = sim.storm_tree(tree)
            if leaves:
                candidate = (tree, sim.rng.choice(leaves))
                previous = storm_leaves[-1] if storm_leaves else None
                if (
                    previous is not None
                    and previous[0].batch == batch
                    and sim.rng.random() < spec.multi_anchor_rate
                ):
                    sim.join(previous, candidate)
                    storm_leaves.pop()
                else:
                    storm_leaves.append(candidate)
        trees.append(tree)
    return trees
