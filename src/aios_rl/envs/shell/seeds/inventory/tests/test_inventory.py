import pytest

from inventory import InsufficientStock, Ledger, Movement


def make_ledger():
    ledger = Ledger()
    ledger.receive("bolt", 10, 100)
    ledger.receive("bolt", 5, 130)
    ledger.receive("nut", 3, 20)
    return ledger


def test_receive_increases_on_hand():
    ledger = Ledger()
    ledger.receive("bolt", 4, 50)
    assert ledger.on_hand("bolt") == 4


def test_receive_rejects_zero_quantity():
    with pytest.raises(ValueError):
        Ledger().receive("bolt", 0, 50)


def test_receive_allows_free_items():
    ledger = Ledger()
    ledger.receive("sample", 2, 0)
    assert ledger.valuation("sample") == 0


def test_receive_rejects_negative_cost():
    with pytest.raises(ValueError):
        Ledger().receive("bolt", 1, -1)


def test_ship_within_first_lot():
    ledger = make_ledger()
    assert ledger.ship("bolt", 4) == 400


def test_ship_spans_lots_fifo():
    ledger = make_ledger()
    assert ledger.ship("bolt", 12) == 10 * 100 + 2 * 130


def test_ship_reduces_on_hand():
    ledger = make_ledger()
    ledger.ship("bolt", 12)
    assert ledger.on_hand("bolt") == 3


def test_ship_exactly_all_stock():
    ledger = make_ledger()
    assert ledger.ship("bolt", 15) == 1650
    assert ledger.on_hand("bolt") == 0


def test_ship_too_many_raises():
    ledger = make_ledger()
    with pytest.raises(InsufficientStock):
        ledger.ship("bolt", 16)


def test_ship_rejects_zero():
    with pytest.raises(ValueError):
        make_ledger().ship("bolt", 0)


def test_ship_consecutive_uses_remaining_lot():
    ledger = make_ledger()
    ledger.ship("bolt", 10)
    assert ledger.ship("bolt", 2) == 260


def test_on_hand_unknown_sku():
    assert Ledger().on_hand("ghost") == 0


def test_on_hand_sums_lots():
    assert make_ledger().on_hand("bolt") == 15


def test_valuation_single_sku():
    assert make_ledger().valuation("bolt") == 1650


def test_valuation_all_skus():
    assert make_ledger().valuation() == 1650 + 60


def test_valuation_after_ship():
    ledger = make_ledger()
    ledger.ship("bolt", 11)
    assert ledger.valuation("bolt") == 4 * 130


def test_average_cost_mixed_lots():
    assert make_ledger().average_cost("bolt") == 110


def test_average_cost_rounds_half_up():
    ledger = Ledger()
    ledger.receive("x", 1, 1)
    ledger.receive("x", 1, 2)
    assert ledger.average_cost("x") == 2


def test_average_cost_rounds_down_below_half():
    ledger = Ledger()
    ledger.receive("x", 2, 1)
    ledger.receive("x", 1, 2)
    assert ledger.average_cost("x") == 1


def test_average_cost_empty():
    assert Ledger().average_cost("x") == 0


def test_low_stock_below_threshold():
    assert make_ledger().low_stock(5) == ["nut"]


def test_low_stock_threshold_is_strict():
    assert make_ledger().low_stock(3) == []


def test_low_stock_includes_sold_out_sorted():
    ledger = make_ledger()
    ledger.ship("bolt", 15)
    assert ledger.low_stock(1) == ["bolt"]
    assert ledger.low_stock(100) == ["bolt", "nut"]


def test_history_records_movements():
    ledger = make_ledger()
    ledger.ship("bolt", 12)
    assert ledger.history("bolt") == [
        Movement("bolt", 10, 1000),
        Movement("bolt", 5, 650),
        Movement("bolt", -12, 1260),
    ]


def test_history_last_n():
    ledger = make_ledger()
    ledger.ship("bolt", 1)
    assert ledger.history("bolt", last=2) == [Movement("bolt", 5, 650), Movement("bolt", -1, 100)]


def test_history_last_zero_is_empty():
    assert make_ledger().history("bolt", last=0) == []


def test_history_other_sku_excluded():
    assert make_ledger().history("nut") == [Movement("nut", 3, 60)]


def test_history_last_one():
    ledger = make_ledger()
    ledger.ship("bolt", 2)
    assert ledger.history("bolt", last=1) == [Movement("bolt", -2, 200)]
