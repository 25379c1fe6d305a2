"""`aios-rl lineage show`: the checkpoint tree of a run, however long its lineage."""

from __future__ import annotations

from aios_rl.cli.lineage_cmd import lineage_tree
from aios_rl.control import lineage
from aios_rl.control.lineage import CheckpointRecord, LineageState


def chain(n: int) -> LineageState:
    state = LineageState()
    parent = None
    for i in range(n):
        cid = f"c{i:05d}"
        state = lineage.register(state, CheckpointRecord(checkpoint_id=cid, parent=parent, sha256="ab" * 32,
                                                         meta_sha256="cd" * 32))
        parent = cid
    return lineage.initialize(state, "c00000")


def test_tree_of_a_long_chain_of_updates() -> None:
    """A long campaign updates thousands of times, each checkpoint the child of the one before."""
    state = chain(3000)  # deeper than the recursion limit (1000)
    lines = lineage_tree(state)
    assert len(lines) == 1 + 3000
    assert lines[1].startswith("c00000 ") and lines[1].endswith("<- active, last_stable")
    assert lines[-1].lstrip().startswith("c02999 ")
    assert lines[-1].startswith("  " * 2999 + "c02999")


def test_tree_lists_siblings_in_registration_order() -> None:
    state = LineageState()
    for cid, parent in [("root", None), ("a", "root"), ("a1", "a"), ("b", "root")]:
        state = lineage.register(state, CheckpointRecord(checkpoint_id=cid, parent=parent, sha256="0" * 64,
                                                         meta_sha256="1" * 64))
    assert [line.split()[0] for line in lineage_tree(state)[1:]] == ["root", "a", "a1", "b"]
    assert [len(line) - len(line.lstrip()) for line in lineage_tree(state)[1:]] == [0, 2, 4, 2]
