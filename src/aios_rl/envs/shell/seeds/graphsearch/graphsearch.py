"""Graph traversal and shortest paths on adjacency-list dictionaries.

Unweighted graphs map a node to a list of neighbours; weighted graphs map a node
to a list of ``(neighbour, weight)`` pairs. Neighbours are visited in list order.
"""

import heapq
from collections import deque


def bfs_order(graph: dict, start) -> list:
    """Nodes reachable from ``start`` in breadth-first order."""
    seen = {start}
    order = []
    queue = deque([start])
    while queue:
        node = queue.popleft()
        order.append(node)
        for nxt in graph.get(node, []):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return order


def dfs_order(graph: dict, start) -> list:
    """Nodes reachable from ``start`` in depth-first preorder."""
    seen = set()
    order = []
    stack = [start]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        order.append(node)
        neighbours = graph.get(node, [])
        for i in range(len(neighbours) - 1, -1, -1):
            if neighbours[i] not in seen:
                stack.append(neighbours[i])
    return order


def bfs_path(graph: dict, start, goal) -> list:
    """A shortest path by number of edges from ``start`` to ``goal``; ``[]`` if none."""
    parents = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = []
            while node is not None:
                path.append(node)
                node = parents[node]
            return path[::-1]
        for nxt in graph.get(node, []):
            if nxt not in parents:
                parents[nxt] = node
                queue.append(nxt)
    return []


def shortest_hops(graph: dict, start, goal) -> int:
    """Number of edges on a shortest path, or -1 when ``goal`` is unreachable."""
    path = bfs_path(graph, start, goal)
    return len(path) - 1 if path else -1


def dijkstra(graph: dict, start) -> dict:
    """Smallest total weight from ``start`` to every reachable node.

    Raises:
        ValueError: if a negative edge weight is found.
    """
    dist = {start: 0}
    heap = [(0, start)]
    while heap:
        d, node = heapq.heappop(heap)
        if d > dist[node]:
            continue
        for nxt, weight in graph.get(node, []):
            if weight < 0:
                raise ValueError(f"negative weight on edge {node}->{nxt}")
            candidate = d + weight
            if nxt not in dist or candidate < dist[nxt]:
                dist[nxt] = candidate
                heapq.heappush(heap, (candidate, nxt))
    return dist


def dijkstra_path(graph: dict, start, goal) -> tuple[float, list]:
    """Cheapest ``(cost, path)`` from ``start`` to ``goal``; ``(inf, [])`` if unreachable."""
    dist = {start: 0}
    parents = {start: None}
    heap = [(0, start)]
    while heap:
        d, node = heapq.heappop(heap)
        if node == goal:
            path = []
            while node is not None:
                path.append(node)
                node = parents[node]
            return d, path[::-1]
        if d > dist[node]:
            continue
        for nxt, weight in graph.get(node, []):
            candidate = d + weight
            if nxt not in dist or candidate < dist[nxt]:
                dist[nxt] = candidate
                parents[nxt] = node
                heapq.heappush(heap, (candidate, nxt))
    return float("inf"), []


def topological_sort(graph: dict) -> list:
    """Kahn's algorithm; ties are broken by sorted node order.

    Raises:
        ValueError: if the graph has a cycle.
    """
    indegree = {node: 0 for node in graph}
    for node in graph:
        for nxt in graph[node]:
            indegree[nxt] = indegree.get(nxt, 0) + 1
    ready = sorted(node for node, deg in indegree.items() if deg == 0)
    order = []
    while ready:
        node = ready.pop(0)
        order.append(node)
        for nxt in graph.get(node, []):
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
                ready.sort()
    if len(order) != len(indegree):
        raise ValueError("graph has a cycle")
    return order


def connected_components(graph: dict) -> list[list]:
    """Components of the graph viewed as undirected, each sorted, largest first."""
    undirected: dict = {}
    for node, neighbours in graph.items():
        undirected.setdefault(node, set())
        for nxt in neighbours:
            undirected[node].add(nxt)
            undirected.setdefault(nxt, set()).add(node)
    seen: set = set()
    components = []
    for node in sorted(undirected):
        if node in seen:
            continue
        component = bfs_order({k: sorted(v) for k, v in undirected.items()}, node)
        seen.update(component)
        components.append(sorted(component))
    components.sort(key=lambda c: (-len(c), c[0]))
    return components
