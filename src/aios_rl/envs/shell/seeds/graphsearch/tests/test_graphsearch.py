import pytest

from graphsearch import (
    bfs_order,
    bfs_path,
    connected_components,
    dfs_order,
    dijkstra,
    dijkstra_path,
    shortest_hops,
    topological_sort,
)

G = {"a": ["b", "c"], "b": ["d"], "c": ["d", "e"], "d": ["f"], "e": ["f"], "f": []}
W = {"a": [("b", 4), ("c", 1)], "c": [("b", 2), ("d", 7)], "b": [("d", 1)], "d": []}


def test_bfs_order_levels():
    assert bfs_order(G, "a") == ["a", "b", "c", "d", "e", "f"]


def test_bfs_order_isolated_start():
    assert bfs_order({}, "z") == ["z"]


def test_bfs_order_cycle_visits_once():
    assert bfs_order({1: [2], 2: [3], 3: [1]}, 2) == [2, 3, 1]


def test_dfs_order_preorder():
    assert dfs_order(G, "a") == ["a", "b", "d", "f", "c", "e"]


def test_dfs_order_respects_neighbour_order():
    assert dfs_order({"r": ["x", "y", "z"]}, "r") == ["r", "x", "y", "z"]


def test_dfs_order_cycle():
    assert dfs_order({1: [2], 2: [1, 3], 3: []}, 1) == [1, 2, 3]


def test_bfs_path_shortest():
    assert bfs_path(G, "a", "f") == ["a", "b", "d", "f"]


def test_bfs_path_same_node():
    assert bfs_path(G, "c", "c") == ["c"]


def test_bfs_path_unreachable():
    assert bfs_path(G, "f", "a") == []


def test_shortest_hops_distance():
    assert shortest_hops(G, "a", "e") == 2


def test_shortest_hops_zero():
    assert shortest_hops(G, "d", "d") == 0


def test_shortest_hops_unreachable():
    assert shortest_hops(G, "e", "b") == -1


def test_dijkstra_distances():
    assert dijkstra(W, "a") == {"a": 0, "b": 3, "c": 1, "d": 4}


def test_dijkstra_partial_reach():
    assert dijkstra(W, "c") == {"c": 0, "b": 2, "d": 3}


def test_dijkstra_zero_weight_edge():
    assert dijkstra({"a": [("b", 0)], "b": []}, "a") == {"a": 0, "b": 0}


def test_dijkstra_negative_weight_raises():
    with pytest.raises(ValueError):
        dijkstra({"a": [("b", -1)]}, "a")


def test_dijkstra_path_cheapest():
    assert dijkstra_path(W, "a", "d") == (4, ["a", "c", "b", "d"])


def test_dijkstra_path_start_is_goal():
    assert dijkstra_path(W, "b", "b") == (0, ["b"])


def test_dijkstra_path_unreachable():
    assert dijkstra_path(W, "d", "a") == (float("inf"), [])


def test_topological_sort_dag():
    assert topological_sort(G) == ["a", "b", "c", "d", "e", "f"]


def test_topological_sort_ties_sorted():
    assert topological_sort({"z": [], "y": [], "x": ["y"]}) == ["x", "y", "z"]


def test_topological_sort_nodes_only_as_targets():
    assert topological_sort({"a": ["b"]}) == ["a", "b"]


def test_topological_sort_cycle_raises():
    with pytest.raises(ValueError):
        topological_sort({"a": ["b"], "b": ["a"]})


def test_connected_components_two_groups():
    graph = {1: [2], 3: [4], 4: [5], 6: []}
    assert connected_components(graph) == [[3, 4, 5], [1, 2], [6]]


def test_connected_components_direction_ignored():
    assert connected_components({"b": ["a"], "c": ["a"]}) == [["a", "b", "c"]]


def test_connected_components_empty():
    assert connected_components({}) == []


def test_dijkstra_path_keeps_first_of_equal_paths():
    graph = {"a": [("b", 1), ("c", 1)], "b": [("d", 1)], "c": [("d", 1)], "d": []}
    assert dijkstra_path(graph, "a", "d") == (2, ["a", "b", "d"])
