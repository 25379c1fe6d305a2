"""The learning benchmark's labelled copies of a task set are made once per source and reused only for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aios_rl.contracts.errors import ConfigError


def _task_set(root: Path, names: list[str]) -> Path:
    for name in names:
        (root / name).mkdir(parents=True)
        manifest = {"task_id": name, "split": "train", "reference_patch": f"fix {name}"}
        (root / name / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_a_labelled_copy_is_not_reused_for_another_task_set(load_benchmark, tmp_path: Path) -> None:
    # OUT/tasks-labels-0.5 was reused whatever it was made from: a second run into the same --out with
    # another --tasks trained on the first set's copy while its header named the second.
    bench = load_benchmark("shell_learning")
    first = _task_set(tmp_path / "first", ["a1", "a2", "a3", "a4"])
    second = _task_set(tmp_path / "second", ["b1", "b2", "b3", "b4"])
    out = tmp_path / "out" / "tasks-labels-0.5"
    copy, _ = bench.derive_tasks(first, out, 0.5, 0.0)
    labelled = sorted(m.parent.name for m in copy.glob("*/manifest.json")
                      if json.loads(m.read_text())["reference_patch"])
    assert len(labelled) == 2 and set(labelled) <= {"a1", "a2", "a3", "a4"}
    assert bench.derive_tasks(first, out, 0.5, 0.0)[0] == copy  # the same source: reused as it is
    with pytest.raises(ConfigError, match="second"):
        bench.derive_tasks(second, out, 0.5, 0.0)
    assert sorted(m.parent.name for m in copy.glob("*/manifest.json")) == ["a1", "a2", "a3", "a4"]
