import pytest

from statemachine import StateMachine, TransitionError, replay

ORDER = [
    ("new", "pay", "paid"),
    ("new", "cancel", "cancelled"),
    ("paid", "ship", "shipped"),
    ("paid", "refund", "refunded"),
    ("shipped", "deliver", "delivered"),
]


def order():
    return StateMachine("new", ORDER)


def test_init_rejects_conflicting_transitions():
    with pytest.raises(ValueError):
        StateMachine("a", [("a", "go", "b"), ("a", "go", "c")])


def test_init_allows_duplicate_identical_transition():
    machine = StateMachine("a", [("a", "go", "b"), ("a", "go", "b")])
    assert machine.fire("go") == "b"


def test_state_starts_initial():
    assert order().state == "new"


def test_states_lists_all():
    assert order().states() == {"new", "paid", "cancelled", "shipped", "refunded", "delivered"}


def test_states_includes_isolated_initial():
    assert StateMachine("idle", []).states() == {"idle"}


def test_can_fire_allowed():
    assert order().can_fire("pay")


def test_can_fire_not_allowed():
    assert not order().can_fire("ship")


def test_fire_moves_state():
    machine = order()
    assert machine.fire("pay") == "paid"
    assert machine.state == "paid"


def test_fire_chain():
    machine = order()
    machine.fire("pay")
    machine.fire("ship")
    assert machine.fire("deliver") == "delivered"


def test_fire_invalid_raises_and_keeps_state():
    machine = order()
    with pytest.raises(TransitionError):
        machine.fire("deliver")
    assert machine.state == "new"


def test_available_events_sorted():
    assert order().available_events() == ["cancel", "pay"]


def test_available_events_terminal_empty():
    machine = order()
    machine.fire("cancel")
    assert machine.available_events() == []


def test_history_records_transitions():
    machine = order()
    machine.fire("pay")
    machine.fire("ship")
    assert machine.history() == [("new", "pay", "paid"), ("paid", "ship", "shipped")]


def test_history_last_one():
    machine = order()
    machine.fire("pay")
    machine.fire("ship")
    assert machine.history(last=1) == [("paid", "ship", "shipped")]


def test_history_is_a_copy():
    machine = order()
    machine.fire("pay")
    machine.history().clear()
    assert len(machine.history()) == 1


def test_undo_one_step():
    machine = order()
    machine.fire("pay")
    machine.fire("ship")
    assert machine.undo() == "paid"


def test_undo_all_steps():
    machine = order()
    machine.fire("pay")
    machine.fire("ship")
    assert machine.undo(2) == "new"
    assert machine.history() == []


def test_undo_too_many_raises():
    machine = order()
    machine.fire("pay")
    with pytest.raises(ValueError):
        machine.undo(2)


def test_undo_zero_raises():
    with pytest.raises(ValueError):
        order().undo(0)


def test_reachable_from_start():
    assert order().reachable() == {"new", "paid", "cancelled", "shipped", "refunded", "delivered"}


def test_reachable_from_given_state():
    assert order().reachable("paid") == {"paid", "shipped", "refunded", "delivered"}


def test_reachable_from_terminal():
    assert order().reachable("delivered") == {"delivered"}


def test_is_terminal_for_end_state():
    assert order().is_terminal("refunded")


def test_is_terminal_current_state():
    machine = order()
    assert not machine.is_terminal()
    machine.fire("cancel")
    assert machine.is_terminal()


def test_replay_all_valid():
    machine = order()
    assert replay(machine, ["pay", "ship", "deliver"]) == 3
    assert machine.state == "delivered"


def test_replay_stops_at_first_invalid():
    machine = order()
    assert replay(machine, ["pay", "deliver", "ship"]) == 1
    assert machine.state == "paid"


def test_replay_empty():
    assert replay(order(), []) == 0
