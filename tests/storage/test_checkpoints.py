"""Checkpoint store: exact round trips, verification of every read, atomic writes under SIGKILL."""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from aios_rl.contracts.errors import StorageError
from aios_rl.storage.checkpoints import (
    META_FILE,
    TENSORS_FILE,
    CheckpointStore,
    capture_rng,
    flatten_state,
    restore_rng,
    unflatten_state,
)

SRC = Path(__file__).resolve().parents[2] / "src"


def assert_same_state(a: Any, b: Any, where: str = "state") -> None:
    """Recursive equality that also checks container and scalar types (tuple vs list, int vs float)."""
    same_kind = type(a) is type(b) or (isinstance(a, dict) and isinstance(b, dict))
    assert same_kind, f"{where}: {type(a)} vs {type(b)}"
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} vs {list(b)}"
        for key in a:
            assert_same_state(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_state(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def train_steps(model: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(8, 4, generator=gen)
        optimizer.zero_grad()
        ((model(x) - 1.0) ** 2).mean().backward()
        optimizer.step()


def draw() -> tuple[float, float, torch.Tensor]:
    return random.random(), float(np.random.rand()), torch.rand(3)


def test_round_trip_restores_weights_optimizer_and_rng(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.95))
    train_steps(model, optimizer, steps=3, seed=1)

    optim_tensors, optim_structure = flatten_state("optim", optimizer.state_dict())
    rng_tensors, rng_structure = flatten_state("rng", capture_rng())
    model_tensors = {f"model/{k}": v.detach().clone() for k, v in model.state_dict().items()}
    meta = {"config": {"lr": 0.01, "layers": [4, 5, 3]}, "optim": optim_structure, "rng": rng_structure}
    store = CheckpointStore(tmp_path / "ckpt")
    files = store.save("step-3", {**model_tensors, **optim_tensors, **rng_tensors}, meta)
    assert files.directory == tmp_path / "ckpt" / "step-3" and files.size_bytes > 0

    expected_draws = draw()
    expected_state = copy.deepcopy(optimizer.state_dict())  # Adam updates its step tensors in place
    train_steps(model, optimizer, steps=1, seed=2)
    expected_params = [p.detach().clone() for p in model.parameters()]
    draw()  # move every generator on, so only restore_rng can bring the draws back

    tensors, loaded_meta = store.load("step-3", sha256=files.sha256, meta_sha256=files.meta_sha256)
    assert loaded_meta["config"] == meta["config"]
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    fresh.load_state_dict({k.removeprefix("model/"): v for k, v in tensors.items() if k.startswith("model/")})
    for key, value in model_tensors.items():
        assert torch.equal(tensors[key], value), key
    loaded_optim_state = unflatten_state("optim", tensors, loaded_meta["optim"])
    assert_same_state(loaded_optim_state, expected_state)
    fresh_optimizer = torch.optim.Adam(fresh.parameters(), lr=0.5)
    fresh_optimizer.load_state_dict(loaded_optim_state)
    train_steps(fresh, fresh_optimizer, steps=1, seed=2)
    for got, want in zip(fresh.parameters(), expected_params, strict=True):
        assert torch.equal(got.detach(), want)

    restore_rng(unflatten_state("rng", tensors, loaded_meta["rng"]))
    got_draws = draw()
    assert got_draws[:2] == expected_draws[:2] and torch.equal(got_draws[2], expected_draws[2])


def test_loaded_weights_equal_saved_weights(tmp_path: Path) -> None:
    torch.manual_seed(3)
    model = torch.nn.Linear(6, 2)
    store = CheckpointStore(tmp_path)
    store.save("w", model.state_dict(), {"shape": (6, 2), "note": "é"})
    tensors, meta = store.load("w")
    assert meta == {"shape": [6, 2], "note": "é"} and set(tensors) == {"weight", "bias"}
    for key, value in model.state_dict().items():
        assert torch.equal(tensors[key], value)


def test_flatten_state_keeps_exact_types() -> None:
    nested = {
        "state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.ones(2)}, 7: {}},
        "groups": [{"betas": (0.9, 0.999), "params": [0, 7], "fused": None, "amsgrad": False}],
        "odd": [float("inf"), float("-inf"), float("nan"), 1, 1.0, "x", (torch.zeros(1),)],
    }
    tensors, structure = flatten_state("optim", nested)
    assert sorted(tensors) == ["optim/odd/6/0", "optim/state/0/exp_avg", "optim/state/0/step"]
    through_json = json.loads(json.dumps(structure, allow_nan=False))
    assert_same_state(unflatten_state("optim", tensors, through_json), nested)
    # The same structure can be reattached under another prefix (tensors renamed consistently).
    renamed = {k.replace("optim/", "old/", 1): v for k, v in tensors.items()}
    assert_same_state(unflatten_state("old", renamed, through_json), nested)


@pytest.mark.parametrize(
    "nested",
    [{"a/b": torch.ones(1), "a": {"b": torch.ones(1)}}, {0: torch.ones(1), "0": torch.ones(1)}],
    ids=["slash-in-key", "int-and-str-key"],
)
def test_flatten_state_rejects_colliding_keys(nested: dict) -> None:
    with pytest.raises(StorageError, match="flat key"):
        flatten_state("p", nested)


def test_flatten_state_rejects_unstorable_values() -> None:
    with pytest.raises(StorageError, match=r"p/a/1 is a set"):
        flatten_state("p", {"a": [1, {2, 3}, torch.ones(1)]})
    with pytest.raises(StorageError, match="key 1.5"):
        flatten_state("p", {1.5: 1})


def test_unflatten_state_names_missing_tensor() -> None:
    tensors, structure = flatten_state("p", {"w": torch.ones(2)})
    with pytest.raises(StorageError, match="'p/w'"):
        unflatten_state("p", {}, structure)
    with pytest.raises(StorageError, match="malformed"):
        unflatten_state("p", tensors, {"dict": [["w"]]})


def test_restore_rng_rejects_malformed_state_before_touching_generators() -> None:
    draw()
    other = capture_rng()  # a valid but different state for python and numpy
    draw()
    state = capture_rng()
    bad = {**other, "torch": torch.zeros(5056)}  # float tensor: not a torch RNG state
    with pytest.raises(StorageError, match="RNG"):
        restore_rng(bad)
    with pytest.raises(StorageError, match="RNG"):
        restore_rng({"python": other["python"]})
    first = draw()  # would differ if a failed restore had already set python or numpy
    restore_rng(state)
    second = draw()
    assert first[:2] == second[:2] and torch.equal(first[2], second[2])


@pytest.mark.parametrize("part", ["python", "numpy"])
def test_a_state_vector_of_the_wrong_size_changes_no_generator(part: str) -> None:
    state = capture_rng()
    if part == "python":
        bad = {**state, "python": {**state["python"], "internal": state["python"]["internal"][:10]}}
    else:
        bad = {**state, "numpy": {**state["numpy"], "key": state["numpy"]["key"][:10]}}
    draw()
    expected = capture_rng()
    with pytest.raises(StorageError, match="RNG"):
        restore_rng(bad)
    after = capture_rng()
    assert after["python"] == expected["python"] and after["numpy"] == expected["numpy"]
    assert torch.equal(after["torch"], expected["torch"])


def test_non_contiguous_and_shared_tensors_are_saved_as_copies(tmp_path: Path) -> None:
    base = torch.arange(12.0).reshape(3, 4)
    tensors = {"t": base.t(), "row0": base[0], "row1": base[1], "param": torch.nn.Parameter(torch.ones(2))}
    store = CheckpointStore(tmp_path)
    store.save("views", tensors, {})
    base.add_(100)  # mutating the source after save must not affect the checkpoint
    loaded, _ = store.load("views")
    assert torch.equal(loaded["t"], torch.arange(12.0).reshape(3, 4).t())
    assert torch.equal(loaded["row1"], torch.arange(4.0, 8.0))
    assert not loaded["param"].requires_grad


@pytest.fixture
def saved(tmp_path: Path) -> tuple[CheckpointStore, Any]:
    store = CheckpointStore(tmp_path / "root")
    tensors = {"w": torch.arange(1000, dtype=torch.float32), "b": torch.ones(3, dtype=torch.int64)}
    files = store.save("c1", tensors, {"config": {"lr": 0.1, "name": "x"}, "step": 5})
    return store, files


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) - 17] ^= 0x01  # inside the tensor data, after the header
    path.write_bytes(bytes(data))


def _edit_meta_value(path: Path) -> None:
    path.write_text(path.read_text().replace('"lr": 0.1', '"lr": 0.2'))


def _edit_meta_tensors_sha(path: Path) -> None:
    document = json.loads(path.read_text())
    document["tensors_sha256"] = "0" * 64
    path.write_text(json.dumps(document, sort_keys=True, indent=2) + "\n")


def _reformat_meta(path: Path) -> None:
    # Same JSON content, other bytes: only the control store's meta_sha256 can catch this.
    path.write_text(json.dumps(json.loads(path.read_text()), sort_keys=True))


# case: (file to corrupt, how, file the error must name, what it must say, pass the control-store meta sha)
CORRUPTIONS = {
    "missing-tensors": (TENSORS_FILE, lambda p: p.unlink(), TENSORS_FILE, "missing", False),
    "missing-meta": (META_FILE, lambda p: p.unlink(), META_FILE, "missing", False),
    "truncated-tensors": (TENSORS_FILE, _truncate, TENSORS_FILE, "sha256 mismatch", False),
    "flipped-byte": (TENSORS_FILE, _flip_byte, TENSORS_FILE, "sha256 mismatch", False),
    "meta-value-edited": (META_FILE, _edit_meta_value, META_FILE, "content_sha256", False),
    "meta-sha-edited": (META_FILE, _edit_meta_tensors_sha, TENSORS_FILE, "tensors_sha256 in meta", False),
    "meta-reformatted": (META_FILE, _reformat_meta, META_FILE, "control store meta_sha256", True),
    "garbage-meta": (META_FILE, lambda p: p.write_bytes(b"\xff{not json"), META_FILE, "unreadable", False),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupted_checkpoint_is_never_returned(saved: tuple[CheckpointStore, Any], case: str) -> None:
    store, files = saved
    corrupted_file, corrupt, named_file, problem, needs_meta_sha = CORRUPTIONS[case]
    corrupt(files.directory / corrupted_file)
    kwargs = {"meta_sha256": files.meta_sha256} if needs_meta_sha else {}
    for read in (store.load, store.verify):
        with pytest.raises(StorageError) as info:
            read("c1", **kwargs)
        message = str(info.value)
        assert str(files.directory / named_file) in message and problem in message, message


def test_wrong_expected_sha256_is_rejected(saved: tuple[CheckpointStore, Any]) -> None:
    store, files = saved
    wrong = "ab" * 32
    with pytest.raises(StorageError) as info:
        store.load("c1", sha256=wrong)
    message = str(info.value)
    assert TENSORS_FILE in message and wrong in message and files.sha256 in message
    with pytest.raises(StorageError, match=META_FILE):
        store.verify("c1", meta_sha256=wrong)
    assert store.verify("c1", sha256=files.sha256.upper(), meta_sha256=files.meta_sha256) == files


def test_missing_checkpoint_names_directory(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="nope.*missing"):
        CheckpointStore(tmp_path).load("nope")


def test_overwrite_with_different_content_is_refused(saved: tuple[CheckpointStore, Any]) -> None:
    store, files = saved
    tensors, meta = store.load("c1")
    assert store.save("c1", tensors, meta) == files  # identical content: idempotent
    with pytest.raises(StorageError, match="already exists.*different content"):
        store.save("c1", {**tensors, "w": tensors["w"] + 1}, meta)
    with pytest.raises(StorageError, match="already exists.*different content"):
        store.save("c1", tensors, {**meta, "step": 6})
    assert store.verify("c1", sha256=files.sha256, meta_sha256=files.meta_sha256) == files
    assert store.list_ids() == ["c1"] and not [p for p in store.root.iterdir() if p.name.startswith(".")]


def test_existing_corrupt_checkpoint_is_not_replaced(saved: tuple[CheckpointStore, Any]) -> None:
    store, files = saved
    tensors, meta = store.load("c1")
    _flip_byte(files.directory / TENSORS_FILE)
    with pytest.raises(StorageError, match="does not verify"):
        store.save("c1", tensors, meta)


@pytest.mark.parametrize(
    "bad_id", ["", "..", ".", "a/b", "../x", "a..b", ".tmp-x", "x" * 129, "sp ace", "é", "a\x00b", 5]
)
def test_invalid_ids_are_rejected(tmp_path: Path, bad_id: Any) -> None:
    store = CheckpointStore(tmp_path)
    with pytest.raises(StorageError, match="invalid checkpoint id"):
        store.save(bad_id, {"w": torch.ones(1)}, {})
    with pytest.raises(StorageError, match="invalid checkpoint id"):
        store.load(bad_id)
    assert list(tmp_path.iterdir()) == []


def test_valid_id_edge_cases_are_accepted(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    for good in ["x" * 128, "a.b-c_D9", "v1.2"]:
        store.save(good, {"w": torch.ones(1)}, {})
    assert store.list_ids() == sorted(["x" * 128, "a.b-c_D9", "v1.2"])


@pytest.mark.parametrize(
    ("meta", "named"),
    [
        ({"config": {"lr": object()}}, "meta['config']['lr'] is a object"),
        ({"x": [1, float("nan")]}, "meta['x'][1]"),
        ({"state": {0: 1}}, "meta['state'] has non-string key 0"),
        ({"n": np.int64(3)}, "meta['n'] is a int64"),
        ({"t": torch.ones(1)}, "meta['t'] is a Tensor"),
        ({"tensors_sha256": "x"}, "reserved"),
    ],
)
def test_non_json_meta_is_rejected_naming_the_key(tmp_path: Path, meta: dict, named: str) -> None:
    store = CheckpointStore(tmp_path / "root")
    with pytest.raises(StorageError) as info:
        store.save("m", {"w": torch.ones(1)}, meta)
    assert named in str(info.value)
    assert store.list_ids() == [] and store.sweep_temp() == 0


def test_non_tensor_values_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match=r"tensors\['w'\] is a ndarray"):
        CheckpointStore(tmp_path).save("c", {"w": np.ones(2)}, {})


def test_list_ids_skips_unfinished_dirs_and_sweep_removes_temp(saved: tuple[CheckpointStore, Any]) -> None:
    store, _ = saved
    (store.root / ".tmp-c2-abc123").mkdir()
    (store.root / ".tmp-c2-abc123" / TENSORS_FILE).write_bytes(b"partial")
    (store.root / "half").mkdir()
    (store.root / "half" / TENSORS_FILE).write_bytes(b"x")
    assert store.list_ids() == ["c1"]
    assert store.exists("c1") and not store.exists("half") and not store.exists("c2")
    assert store.sweep_temp() == 1
    assert store.sweep_temp() == 0
    assert sorted(p.name for p in store.root.iterdir()) == ["c1", "half"]


CHILD = """
import sys, torch
from aios_rl.storage.checkpoints import CheckpointStore
store, tag = CheckpointStore(sys.argv[1]), sys.argv[2]
# 200 MB of float32 in four tensors, so one save takes long enough to be killed in the middle.
tensors = {f"w{i}": torch.full((12_500_000,), float(i)) for i in range(4)}
print("ready", flush=True)
for n in range(1000):
    tensors["step"] = torch.tensor(n)
    files = store.save(f"{tag}-{n}", tensors, {"step": n})
    print(files.checkpoint_id, files.sha256, files.meta_sha256, flush=True)
"""


def _kill_round(
    root: Path, script: Path, tag: str, wait_saves: int, delay: float
) -> tuple[list[list[str]], float]:
    """Start a saving child, SIGKILL it after ``wait_saves`` saves plus ``delay`` s (-1: before "ready").

    Returns the lines of the saves it reported and the seconds from "ready" to its last awaited save.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    with (root.parent / f"{tag}.stderr").open("w") as stderr:
        child = subprocess.Popen(
            [sys.executable, str(script), str(root), tag],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
        assert child.stdout is not None
        lines: list[list[str]] = []
        save_time = 0.0
        if wait_saves >= 0:
            assert child.stdout.readline() == "ready\n", (root.parent / f"{tag}.stderr").read_text()
            start = time.monotonic()
            for _ in range(wait_saves):
                lines.append(child.stdout.readline().split())
                save_time = time.monotonic() - start
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        rest, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, (root.parent / f"{tag}.stderr").read_text()
    lines += [line.split() for line in rest.splitlines() if line != "ready"]
    return lines, save_time


def test_a_kill_while_an_unregistered_checkpoint_is_removed_leaves_nothing_that_blocks_its_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The removal deletes the files one by one; a kill between them must not leave a half checkpoint under
    the final name, which no later removal would take (it is no complete checkpoint) and which would refuse
    the next save under that id."""
    store = CheckpointStore(tmp_path / "ckpts")
    store.save("ckpt-0001", {"w": torch.ones(2)}, {})  # published, never registered: then the crash

    class Killed(BaseException):
        pass

    real_rmtree = shutil.rmtree

    def killed_midway(path: Any, *args: Any, **kwargs: Any) -> None:
        files = sorted(Path(path).iterdir())
        files[0].unlink()  # the first file is gone, then the kill
        monkeypatch.setattr(shutil, "rmtree", real_rmtree)
        raise Killed

    monkeypatch.setattr(shutil, "rmtree", killed_midway)
    with pytest.raises(Killed):
        store.remove_unregistered([])
    reopened = CheckpointStore(tmp_path / "ckpts")  # the next writer: sweep and removal, as on open
    reopened.sweep_temp()
    reopened.remove_unregistered([])
    files = reopened.save("ckpt-0001", {"w": torch.zeros(2)}, {})  # the id is free for other content
    assert reopened.load("ckpt-0001", sha256=files.sha256)[0]["w"].tolist() == [0.0, 0.0]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_sigkill_during_save_never_leaves_a_partial_checkpoint(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    root = tmp_path / "ckpts"
    store = CheckpointStore(root)
    seed = random.randrange(10**6)
    rng = random.Random(seed)
    # (saves to wait for, then a delay as a fraction of one save's time); -1 kills while the child starts.
    # The first round waits for one save to measure its time, then kills inside the second save.
    plan = [(1, rng.random()), (-1, 0.0), (0, 0.0), (0, rng.uniform(0.2, 0.8)), (0, 0.97)]
    save_time = 1.0
    temp_dirs_seen = 0
    # A loaded machine can shift every kill outside the write; up to 8 more rounds at random points then.
    for round_no in range(len(plan) + 8):
        if round_no >= len(plan) and temp_dirs_seen:
            break
        wait_saves, fraction = plan[round_no] if round_no < len(plan) else (0, rng.uniform(0.05, 0.95))
        tag = f"r{round_no}"
        delay = fraction * save_time
        lines, measured = _kill_round(root, script, tag, wait_saves, delay)
        save_time = measured or save_time
        context = f"seed={seed} round={round_no} wait_saves={wait_saves} delay={delay:.3f}s lines={lines}"

        reported = [line[0] for line in lines]
        assert reported == [f"{tag}-{n}" for n in range(len(reported))], context
        in_flight = f"{tag}-{len(reported)}"
        listed = [i for i in store.list_ids() if i.startswith(f"{tag}-")]
        assert sorted(listed) in (sorted(reported), sorted([*reported, in_flight])), context
        for checkpoint_id, sha, meta_sha in lines:
            store.verify(checkpoint_id, sha256=sha, meta_sha256=meta_sha)
        if in_flight in listed:  # finished its rename just before the kill: must be whole
            tensors, meta = store.load(in_flight)
            assert meta == {"step": len(reported)} and int(tensors["step"]) == len(reported), context

        leftovers = [p for p in root.iterdir() if p.name.startswith(".")] if root.exists() else []
        assert all(p.name.startswith(f".tmp-{in_flight}-") for p in leftovers), (leftovers, context)
        temp_dirs_seen += len(leftovers)
        assert store.sweep_temp() == len(leftovers), context
        if root.exists():
            assert not [p for p in root.iterdir() if p.name.startswith(".")], context
    for checkpoint_id in store.list_ids():  # earlier checkpoints survive later crashes intact
        store.verify(checkpoint_id)
    # The kills must have hit the middle of a write at least once, or this test proved nothing.
    assert temp_dirs_seen >= 1, f"seed={seed}: no kill landed inside a save"
