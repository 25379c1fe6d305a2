"""Stock ledger with first-in-first-out (FIFO) cost accounting.

Quantities are whole units and costs are integer cents, so valuations are exact.
"""

from dataclasses import dataclass


class InsufficientStock(Exception):
    """Raised when a shipment asks for more units than are on hand."""


@dataclass(frozen=True)
class Movement:
    """One entry of the ledger: positive quantity for receipts, negative for shipments."""

    sku: str
    quantity: int
    cost_cents: int


class Ledger:
    """Tracks stock per SKU as a queue of lots ``[quantity, unit_cost_cents]``."""

    def __init__(self) -> None:
        self._lots: dict[str, list[list[int]]] = {}
        self._movements: list[Movement] = []

    def receive(self, sku: str, quantity: int, unit_cost_cents: int) -> None:
        """Add a lot of ``quantity`` units bought at ``unit_cost_cents`` each.

        Raises:
            ValueError: for a non-positive quantity or a negative cost.
        """
        if quantity <= 0:
            raise ValueError(f"quantity must be positive, got {quantity}")
        if unit_cost_cents < 0:
            raise ValueError(f"unit cost must not be negative, got {unit_cost_cents}")
        self._lots.setdefault(sku, []).append([quantity, unit_cost_cents])
        self._movements.append(Movement(sku, quantity, quantity * unit_cost_cents))

    def ship(self, sku: str, quantity: int) -> int:
        """Remove ``quantity`` units, oldest lots first, and return their cost in cents.

        Raises:
            ValueError: for a non-positive quantity.
            InsufficientStock: when fewer than ``quantity`` units are on hand.
        """
        if quantity <= 0:
            raise ValueError(f"quantity must be positive, got {quantity}")
        available = self.on_hand(sku)
        if available < quantity:
            raise InsufficientStock(f"{sku}: asked {quantity}, have {available}")
        lots = self._lots[sku]
        remaining = quantity
        cost = 0
        while remaining > 0:
            lot = lots[0]
            taken = min(lot[0], remaining)
            cost += taken * lot[1]
            lot[0] -= taken
            remaining -= taken
            if lot[0] == 0:
                lots.pop(0)
        self._movements.append(Movement(sku, -quantity, cost))
        return cost

    def on_hand(self, sku: str) -> int:
        """Units of ``sku`` currently in stock (0 for unknown SKUs)."""
        return sum(lot[0] for lot in self._lots.get(sku, []))

    def valuation(self, sku: str | None = None) -> int:
        """Value in cents of the stock of one SKU, or of all SKUs when ``sku`` is None."""
        skus = [sku] if sku is not None else list(self._lots)
        total = 0
        for name in skus:
            for quantity, unit_cost in self._lots.get(name, []):
                total += quantity * unit_cost
        return total

    def average_cost(self, sku: str) -> int:
        """Average unit cost in cents of the stock on hand, rounded half up; 0 if none."""
        units = self.on_hand(sku)
        if units == 0:
            return 0
        return (2 * self.valuation(sku) + units) // (2 * units)

    def low_stock(self, threshold: int) -> list[str]:
        """SKUs ever received whose quantity on hand is below ``threshold``, sorted."""
        return sorted(sku for sku in self._lots if self.on_hand(sku) < threshold)

    def history(self, sku: str, last: int | None = None) -> list[Movement]:
        """Movements of ``sku`` in order; only the ``last`` most recent if given."""
        moves = [m for m in self._movements if m.sku == sku]
        if last is None:
            return moves
        if last <= 0:
            return []
        return moves[-last:]
