"""A deterministic finite state machine with history and undo."""

from collections import deque


class TransitionError(Exception):
    """Raised when an event is not allowed in the current state."""


class StateMachine:
    """States and events are strings; each ``(state, event)`` pair has one target."""

    def __init__(self, initial: str, transitions: list[tuple[str, str, str]]) -> None:
        self._table: dict[tuple[str, str], str] = {}
        for source, event, target in transitions:
            key = (source, event)
            if key in self._table and self._table[key] != target:
                raise ValueError(f"conflicting transitions for {source!r} on {event!r}")
            self._table[key] = target
        self.initial = initial
        self._state = initial
        self._history: list[tuple[str, str, str]] = []

    @property
    def state(self) -> str:
        """The current state."""
        return self._state

    def states(self) -> set[str]:
        """Every state mentioned by a transition, plus the initial state."""
        found = {self.initial}
        for (source, _), target in self._table.items():
            found.add(source)
            found.add(target)
        return found

    def can_fire(self, event: str) -> bool:
        """Whether ``event`` is allowed in the current state."""
        return (self._state, event) in self._table

    def fire(self, event: str) -> str:
        """Apply ``event`` and return the new state.

        Raises:
            TransitionError: if the event is not allowed in the current state.
        """
        key = (self._state, event)
        if key not in self._table:
            raise TransitionError(f"{event!r} not allowed in state {self._state!r}")
        target = self._table[key]
        self._history.append((self._state, event, target))
        self._state = target
        return target

    def available_events(self) -> list[str]:
        """Events allowed in the current state, sorted."""
        return sorted(event for (source, event) in self._table if source == self._state)

    def history(self, last: int = 0) -> list[tuple[str, str, str]]:
        """Applied transitions, oldest first; only the ``last`` ones if positive."""
        if last > 0:
            return self._history[-last:]
        return list(self._history)

    def undo(self, steps: int = 1) -> str:
        """Revert the last ``steps`` transitions and return the resulting state.

        Raises:
            ValueError: if there are fewer than ``steps`` transitions to undo.
        """
        if steps < 1 or steps > len(self._history):
            raise ValueError(f"cannot undo {steps} step(s), history has {len(self._history)}")
        for _ in range(steps):
            source, _, _ = self._history.pop()
            self._state = source
        return self._state

    def reachable(self, start: str | None = None) -> set[str]:
        """States reachable from ``start`` (default: current state), itself included."""
        origin = self._state if start is None else start
        seen = {origin}
        queue = deque([origin])
        while queue:
            current = queue.popleft()
            for (source, _), target in self._table.items():
                if source == current and target not in seen:
                    seen.add(target)
                    queue.append(target)
        return seen

    def is_terminal(self, state: str | None = None) -> bool:
        """True when no event leaves ``state`` (default: the current state)."""
        name = self._state if state is None else state
        return all(source != name for (source, _) in self._table)


def replay(machine: StateMachine, events: list[str]) -> int:
    """Fire ``events`` in order until one is rejected; return how many were applied."""
    applied = 0
    for event in events:
        if not machine.can_fire(event):
            break
        machine.fire(event)
        applied += 1
    return applied
