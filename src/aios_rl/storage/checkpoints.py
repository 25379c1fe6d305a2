"""Checkpoint files: safetensors tensors plus JSON metadata, written atomically, verified on every read.

Layout: ``<root>/<checkpoint_id>/tensors.safetensors`` holds every tensor (model weights, optimizer state
tensors, the torch RNG state) under flat string keys; ``<root>/<checkpoint_id>/meta.json`` holds the
caller's JSON metadata (sorted keys) plus three reserved keys: ``checkpoint_format``, ``tensors_sha256``
(hex sha256 of the tensors file) and ``content_sha256`` (sha256 of the caller's metadata as canonical
JSON, so an edited value is caught even when the control store's ``meta_sha256`` is not at hand).

Crash safety: a checkpoint is built in ``<root>/.tmp-<id>-<random>/``; each file is written to a temp name,
fsynced and renamed, then the directory is renamed to its final name and the root fsynced. A directory
under a final name is therefore always complete; a crash leaves at most a ``.tmp-*`` directory, which
:meth:`CheckpointStore.sweep_temp` removes, or a complete checkpoint the control store never registered,
which :meth:`CheckpointStore.remove_unregistered` removes (the control plane's writer runs both on open).

Nested state (an optimizer ``state_dict()``, :func:`capture_rng`) goes through :func:`flatten_state`: flat
tensors for the tensors file and a JSON structure for ``meta.json``, which :func:`unflatten_state` turns
back into the exact original (int keys, tuples and non-finite floats included).

Example:
    >>> store = CheckpointStore(run_dir / "checkpoints")
    >>> optim_tensors, optim_structure = flatten_state("optim", optimizer.state_dict())
    >>> files = store.save("step-100", {**model.state_dict(), **optim_tensors}, {"optim": optim_structure})
    >>> tensors, meta = store.load("step-100", sha256=files.sha256, meta_sha256=files.meta_sha256)
    >>> optimizer.load_state_dict(unflatten_state("optim", tensors, meta["optim"]))
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import re
import secrets
import shutil
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import Field
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from aios_rl.contracts.episode import Record
from aios_rl.contracts.errors import StorageError
from aios_rl.storage.files import fsync_dir, write_atomic

__all__ = [
    "TENSORS_FILE",
    "META_FILE",
    "RESERVED_META_KEYS",
    "CheckpointFiles",
    "CheckpointStore",
    "validate_checkpoint_id",
    "flatten_state",
    "unflatten_state",
    "capture_rng",
    "restore_rng",
]

logger = logging.getLogger(__name__)

TENSORS_FILE = "tensors.safetensors"
META_FILE = "meta.json"
CHECKPOINT_FORMAT = 1
RESERVED_META_KEYS = frozenset({"checkpoint_format", "tensors_sha256", "content_sha256"})

_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,128}")
_TMP_PREFIX = ".tmp-"
_HASH_CHUNK = 4 * 1024 * 1024
# Errors safetensors and torch raise on bad tensors or bad files; turned into StorageError with the path.
_IO_ERRORS = (OSError, SafetensorError, ValueError, RuntimeError, TypeError)


class CheckpointFiles(Record):
    """Where a verified checkpoint lives and the hashes the control store records for it."""

    checkpoint_id: str = Field(description="Directory name of the checkpoint under the store root.")
    directory: Path = Field(description="The checkpoint's directory: the store root / checkpoint_id.")
    sha256: str = Field(description="Hex sha256 of the tensors.safetensors bytes.")
    meta_sha256: str = Field(description="Hex sha256 of the meta.json bytes.")
    size_bytes: int = Field(ge=0, description="Bytes of tensors.safetensors plus meta.json.")


def validate_checkpoint_id(checkpoint_id: str) -> str:
    """Return ``checkpoint_id`` if it is a safe directory name, else raise.

    Safe means 1-128 characters from ``[A-Za-z0-9._-]``, no ``..`` and no leading dot (dot names are
    reserved for the store's ``.tmp-*`` work directories).

    Raises:
        StorageError: naming the bad id and the rule.
    """
    if (
        not isinstance(checkpoint_id, str)
        or not _ID_PATTERN.fullmatch(checkpoint_id)
        or ".." in checkpoint_id
        or checkpoint_id.startswith(".")
    ):
        raise StorageError(
            f"invalid checkpoint id {checkpoint_id!r}: use 1-128 characters from [A-Za-z0-9._-], "
            "without '..' and not starting with '.'"
        )
    return checkpoint_id


class CheckpointStore:
    """Immutable checkpoints under one root directory (the only writer of checkpoint files).

    Args:
        root: directory holding one sub-directory per checkpoint; created on the first save.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, checkpoint_id: str) -> Path:
        """The directory of ``checkpoint_id`` (which need not exist).

        Raises:
            StorageError: when the id is not a safe directory name (so do :meth:`exists`, :meth:`save`,
                :meth:`load` and :meth:`verify`).
        """
        return self.root / validate_checkpoint_id(checkpoint_id)

    def exists(self, checkpoint_id: str) -> bool:
        """Whether both files of the checkpoint are present (cheap; :meth:`verify` checks the content)."""
        directory = self.path(checkpoint_id)
        return (directory / TENSORS_FILE).is_file() and (directory / META_FILE).is_file()

    def list_ids(self) -> list[str]:
        """Ids of the complete checkpoints, sorted; work directories of unfinished saves are skipped."""
        if not self.root.is_dir():
            return []
        return sorted(
            entry.name
            for entry in self.root.iterdir()
            if _is_valid_id(entry.name) and self.exists(entry.name)
        )

    def sweep_temp(self) -> int:
        """Remove the ``.tmp-*`` work directories left by saves that crashed; return how many.

        Call it when no save is in flight (e.g. when the single-writer control plane starts): it would
        also remove the work directory of a save running right now, which then fails.

        Raises:
            StorageError: when a leftover directory cannot be removed.
        """
        if not self.root.is_dir():
            return 0
        removed = 0
        for entry in sorted(self.root.iterdir()):
            if entry.name.startswith(_TMP_PREFIX) and entry.is_dir() and not entry.is_symlink():
                try:
                    shutil.rmtree(entry)
                except OSError as exc:
                    raise StorageError(f"cannot remove leftover temp directory {entry}: {exc}") from exc
                removed += 1
        if removed:
            fsync_dir(self.root)
            logger.warning("removed %d leftover checkpoint temp directories under %s", removed, self.root)
        return removed

    def remove_unregistered(self, registered: Collection[str]) -> list[str]:
        """Remove the complete checkpoints not in ``registered``; return their ids.

        A save publishes its files before the control store registers them, so a crash in between leaves a
        checkpoint no event names; its id would then refuse the next save of other content. Call it, like
        :meth:`sweep_temp`, only while holding the run's writer lock. Directories that are not checkpoints
        (not both files) are left alone.

        Raises:
            StorageError: when one cannot be removed.
        """
        orphans = [cid for cid in self.list_ids() if cid not in registered]
        for checkpoint_id in orphans:
            directory = self.path(checkpoint_id)
            # Renamed to a work directory first (one atomic step), so a kill while its files are deleted
            # leaves a ``.tmp-*`` directory for :meth:`sweep_temp`, never a half checkpoint under the id.
            doomed = self.root / f"{_TMP_PREFIX}{checkpoint_id}-{secrets.token_hex(6)}"
            try:
                os.rename(directory, doomed)
                fsync_dir(self.root)
                shutil.rmtree(doomed)
            except OSError as exc:
                raise StorageError(f"cannot remove unregistered checkpoint {directory}: {exc}") from exc
        if orphans:
            fsync_dir(self.root)
            logger.warning("removed %d checkpoint(s) under %s that a crash left unregistered: %s",
                           len(orphans), self.root, ", ".join(orphans))
        return orphans

    def save(
        self, checkpoint_id: str, tensors: Mapping[str, torch.Tensor], meta: Mapping[str, Any]
    ) -> CheckpointFiles:
        """Write a checkpoint atomically and return its files and hashes.

        Saving the same content under an existing id is a no-op that returns the existing files, so a
        retried save after a crash is safe.

        Args:
            checkpoint_id: safe directory name (see :func:`validate_checkpoint_id`).
            tensors: flat tensors; copied to contiguous CPU tensors first (safetensors rejects shared or
                non-contiguous storage, and the copy lets training continue while the file is written).
            meta: JSON-serialisable metadata with string keys; must not use :data:`RESERVED_META_KEYS`.

        Raises:
            StorageError: on an invalid id, a non-tensor value, meta that is not JSON (naming the key),
                an existing checkpoint with different content or one that does not verify, or an I/O
                failure (naming the path).
        """
        final = self.path(checkpoint_id)
        body = _checked_meta(meta)
        cpu_tensors = _cpu_copies(tensors)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create checkpoint root {self.root}: {exc}") from exc
        work = self.root / f"{_TMP_PREFIX}{checkpoint_id}-{secrets.token_hex(6)}"
        try:
            files = self._write_work_dir(work, final, cpu_tensors, body)
            del cpu_tensors  # as large as the model: drop them before comparing with an existing copy
            return self._publish(work, final, files)
        finally:
            _remove_quietly(work)

    def verify(
        self, checkpoint_id: str, *, sha256: str | None = None, meta_sha256: str | None = None
    ) -> CheckpointFiles:
        """Check a checkpoint's files without decoding tensors (run before every pointer move).

        Args:
            checkpoint_id: the checkpoint to check.
            sha256: expected tensors-file sha256 from the control store, if known.
            meta_sha256: expected meta.json sha256 from the control store, if known.

        Raises:
            StorageError: naming the file and what is wrong (missing, unreadable, sha256 mismatch with
                the expected and actual values).
        """
        files, _ = self._verified_meta(checkpoint_id, sha256, meta_sha256)
        return files

    def load(
        self, checkpoint_id: str, *, sha256: str | None = None, meta_sha256: str | None = None
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """Verify a checkpoint (as :meth:`verify`) and return its tensors and the caller's metadata.

        The returned metadata is what was passed to :meth:`save` (tuples read back as lists), without
        the reserved keys. Nothing is returned unless every check passed.

        Raises:
            StorageError: as :meth:`verify`, or when the tensors file cannot be decoded.
        """
        files, body = self._verified_meta(checkpoint_id, sha256, meta_sha256)
        tensors_path = files.directory / TENSORS_FILE
        try:
            tensors = load_file(str(tensors_path))
        except _IO_ERRORS as exc:
            raise StorageError(f"{tensors_path}: unreadable safetensors file: {exc}") from exc
        return tensors, body

    def _write_work_dir(
        self, work: Path, final: Path, tensors: dict[str, torch.Tensor], body: dict[str, Any]
    ) -> CheckpointFiles:
        tensors_path, meta_path = work / TENSORS_FILE, work / META_FILE
        try:
            work.mkdir()
            write_atomic(tensors_path, lambda tmp: save_file(tensors, str(tmp)))
            sha, tensors_size = _sha256_file(tensors_path)
            meta_bytes = _meta_file_bytes(body, sha)
            write_atomic(meta_path, lambda tmp: tmp.write_bytes(meta_bytes))
        except _IO_ERRORS as exc:
            raise StorageError(f"cannot write checkpoint files under {work}: {exc}") from exc
        return CheckpointFiles(
            checkpoint_id=final.name,
            directory=final,
            sha256=sha,
            meta_sha256=hashlib.sha256(meta_bytes).hexdigest(),
            size_bytes=tensors_size + len(meta_bytes),
        )

    def _publish(self, work: Path, final: Path, files: CheckpointFiles) -> CheckpointFiles:
        try:
            # Fails on an existing non-empty directory, so a complete checkpoint is never replaced.
            os.rename(work, final)
        except OSError as exc:
            if not final.exists():
                raise StorageError(f"cannot move {work} to {final}: {exc}") from exc
            return self._same_as_existing(files)
        fsync_dir(self.root)
        logger.info("saved checkpoint %s (%d bytes, sha256 %s)", final, files.size_bytes, files.sha256)
        return files

    def _same_as_existing(self, new: CheckpointFiles) -> CheckpointFiles:
        try:
            existing = self.verify(new.checkpoint_id)
        except StorageError as exc:
            raise StorageError(
                f"checkpoint {new.checkpoint_id!r} already exists at {new.directory} but does not verify "
                f"({exc}); inspect and remove it by hand, or save under a new id"
            ) from exc
        if (existing.sha256, existing.meta_sha256) != (new.sha256, new.meta_sha256):
            raise StorageError(
                f"checkpoint {new.checkpoint_id!r} already exists at {new.directory} with different content "
                f"(sha256 {existing.sha256}, new {new.sha256}; meta_sha256 {existing.meta_sha256}, new "
                f"{new.meta_sha256}); checkpoints are immutable: save under a new id"
            )
        logger.info("checkpoint %s already saved with identical content", new.directory)
        return existing

    def _verified_meta(
        self, checkpoint_id: str, sha256: str | None, meta_sha256: str | None
    ) -> tuple[CheckpointFiles, dict[str, Any]]:
        directory = self.path(checkpoint_id)
        if not directory.is_dir():
            raise StorageError(f"checkpoint {checkpoint_id!r}: directory {directory} is missing")
        meta_path, tensors_path = directory / META_FILE, directory / TENSORS_FILE
        meta_bytes = _read_bytes(meta_path)
        got_meta_sha = hashlib.sha256(meta_bytes).hexdigest()
        _check_sha(meta_path, meta_sha256, got_meta_sha, "control store meta_sha256")
        body, recorded_sha = _parse_meta_file(meta_path, meta_bytes)
        got_sha, tensors_size = _sha256_file(tensors_path)
        _check_sha(tensors_path, sha256, got_sha, "control store sha256")
        _check_sha(tensors_path, recorded_sha, got_sha, "tensors_sha256 in meta.json")
        files = CheckpointFiles(
            checkpoint_id=checkpoint_id,
            directory=directory,
            sha256=got_sha,
            meta_sha256=got_meta_sha,
            size_bytes=tensors_size + len(meta_bytes),
        )
        return files, body


def flatten_state(prefix: str, nested: Any) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split nested state into flat tensors and a JSON structure that :func:`unflatten_state` inverts.

    Tensors get keys ``<prefix>/<path>`` (e.g. ``optim/state/0/exp_avg``); everything else (dicts with
    str or int keys, lists, tuples, None, bool, int, float incl. inf/nan, str) is recorded in the
    structure with its exact type.

    Args:
        prefix: key prefix without a trailing ``/`` (may be empty).
        nested: e.g. ``optimizer.state_dict()`` or :func:`capture_rng`'s result.

    Returns:
        ``(tensors, structure)``: tensors to merge into the tensors passed to ``save``, and a
        JSON-serialisable structure to put into its meta.

    Raises:
        StorageError: for a value of another type, a key of another type, or two paths that map to the
            same flat key (a key containing ``/``, or both ``0`` and ``"0"`` in one dict).

    Example:
        >>> tensors, structure = flatten_state("optim", {"state": {0: {"step": torch.tensor(3.0)}}})
        >>> sorted(tensors)
        ['optim/state/0/step']
    """
    if prefix.endswith("/"):
        raise StorageError(f"flatten_state prefix {prefix!r} must not end with '/'")
    tensors: dict[str, torch.Tensor] = {}
    return tensors, _encode(nested, [], prefix, tensors)


def unflatten_state(prefix: str, tensors: Mapping[str, torch.Tensor], structure: Any) -> Any:
    """Rebuild the nested state :func:`flatten_state` split, taking tensors from ``tensors``.

    Args:
        prefix: the prefix given to :func:`flatten_state` (the tensors may also be renamed by using
            another prefix consistently).
        tensors: flat tensors, e.g. as returned by :meth:`CheckpointStore.load`.
        structure: the structure returned by :func:`flatten_state` (after a JSON round trip).

    Raises:
        StorageError: when a tensor named by the structure is absent or the structure is malformed.
    """
    return _decode(structure, prefix, tensors)


def capture_rng() -> dict[str, Any]:
    """Snapshot the python ``random``, numpy global and torch CPU generators.

    The torch state is a uint8 tensor; the python and numpy states are plain JSON values, so the result
    can go through :func:`flatten_state`. Generators created separately (``np.random.default_rng``,
    ``torch.Generator``) and CUDA generators are not included.
    """
    version, internal, gauss_next = random.getstate()
    np_state = np.random.get_state(legacy=False)
    return {
        "python": {"version": version, "internal": list(internal), "gauss_next": gauss_next},
        "numpy": {
            "bit_generator": np_state["bit_generator"],
            "key": np_state["state"]["key"].tolist(),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
    }


def restore_rng(state: Mapping[str, Any]) -> None:
    """Put back the generator states :func:`capture_rng` returned.

    Raises:
        StorageError: when ``state`` lacks a part or a part is malformed; all parts are converted before
            any generator is touched.
    """
    try:
        python, numpy_part, torch_state = state["python"], state["numpy"], state["torch"]
        internal = tuple(int(x) for x in python["internal"])
        python_state = (int(python["version"]), internal, python["gauss_next"])
        numpy_state = {
            "bit_generator": str(numpy_part["bit_generator"]),
            "state": {"key": np.asarray(numpy_part["key"], dtype=np.uint32), "pos": int(numpy_part["pos"])},
            "has_gauss": int(numpy_part["has_gauss"]),
            "gauss": float(numpy_part["gauss"]),
        }
        if not isinstance(torch_state, torch.Tensor) or torch_state.dtype != torch.uint8:
            raise TypeError(f"torch state must be a uint8 tensor, got {torch_state!r:.60}")
        torch_state = torch_state.detach().cpu()
        # Tried on throwaway generators first: a part the global one would refuse (a state vector of the
        # wrong size) must fail before any global generator has changed.
        torch.Generator().set_state(torch_state)
        np.random.RandomState().set_state(numpy_state)
        random.Random().setstate(python_state)
        torch.set_rng_state(torch_state)
        np.random.set_state(numpy_state)
        random.setstate(python_state)
    except (LookupError, TypeError, ValueError, RuntimeError) as exc:
        raise StorageError(f"cannot restore RNG state: {exc!r}") from exc


# --- helpers -------------------------------------------------------------------------------------------


def _is_valid_id(name: str) -> bool:
    return bool(_ID_PATTERN.fullmatch(name)) and ".." not in name and not name.startswith(".")


def _cpu_copies(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    if not isinstance(tensors, Mapping):
        raise StorageError(f"tensors must be a mapping of str to torch.Tensor, got {type(tensors).__name__}")
    copies: dict[str, torch.Tensor] = {}
    for key, tensor in tensors.items():
        if not isinstance(key, str) or not key:
            raise StorageError(f"tensor keys must be non-empty strings, got {key!r}")
        if not isinstance(tensor, torch.Tensor):
            raise StorageError(f"tensors[{key!r}] is a {type(tensor).__name__}, expected torch.Tensor")
        copies[key] = tensor.detach().to("cpu", copy=True, memory_format=torch.contiguous_format)
    return copies


def _json_problem(value: Any, where: str) -> str | None:
    """Describe the first part of ``value`` that is not plain JSON, or None."""
    if value is None or isinstance(value, (bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is {value!r} (JSON has no NaN or Infinity)"
    if isinstance(value, (list, tuple)):
        return next((p for i, v in enumerate(value) if (p := _json_problem(v, f"{where}[{i}]"))), None)
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has non-string key {key!r} (use flatten_state for int-keyed state)"
            if problem := _json_problem(item, f"{where}[{key!r}]"):
                return problem
        return None
    return f"{where} is a {type(value).__name__}, which is not JSON-serialisable"


def _checked_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(meta, Mapping):
        raise StorageError(f"meta must be a mapping, got {type(meta).__name__}")
    if problem := _json_problem(meta, "meta"):
        raise StorageError(f"checkpoint meta is not JSON-serialisable: {problem}")
    if reserved := sorted(RESERVED_META_KEYS.intersection(meta)):
        raise StorageError(f"meta uses reserved keys {reserved}; the store writes these itself")
    return dict(meta)


def _canonical_sha(body: Mapping[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _meta_file_bytes(body: dict[str, Any], tensors_sha: str) -> bytes:
    document = {
        **body,
        "checkpoint_format": CHECKPOINT_FORMAT,
        "tensors_sha256": tensors_sha,
        "content_sha256": _canonical_sha(body),
    }
    text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=True, allow_nan=False)
    return (text + "\n").encode("ascii")


def _parse_meta_file(meta_path: Path, meta_bytes: bytes) -> tuple[dict[str, Any], str]:
    """Return the caller's meta and the recorded tensors sha256 after checking the file's own hashes."""
    try:
        document = json.loads(meta_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StorageError(f"{meta_path}: unreadable JSON: {exc}") from exc
    if not isinstance(document, dict) or document.get("checkpoint_format") != CHECKPOINT_FORMAT:
        raise StorageError(f"{meta_path}: unreadable: not a checkpoint_format {CHECKPOINT_FORMAT} object")
    recorded_sha, content_sha = document.get("tensors_sha256"), document.get("content_sha256")
    if not isinstance(recorded_sha, str) or not isinstance(content_sha, str):
        raise StorageError(f"{meta_path}: unreadable: tensors_sha256 or content_sha256 missing")
    body = {key: value for key, value in document.items() if key not in RESERVED_META_KEYS}
    try:
        got = _canonical_sha(body)
    except ValueError as exc:  # NaN/Infinity edited into the file
        raise StorageError(f"{meta_path}: unreadable: {exc}") from exc
    _check_sha(meta_path, content_sha, got, "content_sha256 in meta.json (metadata edited or corrupt)")
    return body, recorded_sha


def _check_sha(path: Path, expected: str | None, got: str, source: str) -> None:
    if expected is not None and expected.lower() != got:
        raise StorageError(f"{path}: sha256 mismatch: expected {expected} ({source}) got {got}")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise StorageError(f"{path}: missing") from exc
    except OSError as exc:
        raise StorageError(f"{path}: unreadable: {exc}") from exc


def _sha256_file(path: Path) -> tuple[str, int]:
    """Hex sha256 and size of a file, streamed in chunks so large models never sit in memory twice."""
    digest, size = hashlib.sha256(), 0
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(_HASH_CHUNK):
                digest.update(chunk)
                size += len(chunk)
    except FileNotFoundError as exc:
        raise StorageError(f"{path}: missing") from exc
    except OSError as exc:
        raise StorageError(f"{path}: unreadable: {exc}") from exc
    return digest.hexdigest(), size


def _remove_quietly(work: Path) -> None:
    if not work.exists():
        return
    try:
        shutil.rmtree(work)
    except OSError as exc:
        # The save's own outcome matters more; sweep_temp removes what is left here later.
        logger.warning("could not remove checkpoint work directory %s: %s", work, exc)


# --- structure encoding for flatten_state / unflatten_state ----------------------------------------------
# Each node is a one-key object: {"tensor": rel_key} | {"value": json} | {"float": "inf"|"-inf"|"nan"}
# | {"list": [node...]} | {"tuple": [node...]} | {"dict": [[key, node]...]}. Dicts are pair lists because
# JSON object keys are strings and optimizer state is keyed by int; lists of plain JSON scalars are
# stored whole as a "value" to keep RNG states and param index lists compact.


def _is_plain_scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (bool, int, str))


def _join(prefix: str, rel: str) -> str:
    return f"{prefix}/{rel}" if prefix and rel else prefix or rel


def _encode(value: Any, parts: list[str], prefix: str, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    where = _join(prefix, "/".join(parts)) or "<root>"
    if isinstance(value, torch.Tensor):
        rel = "/".join(parts)
        key = _join(prefix, rel)
        if not key:
            raise StorageError("flatten_state needs a non-empty prefix to store a bare tensor")
        if key in tensors:
            raise StorageError(
                f"flatten_state: two paths map to the flat key {key!r} (a key containing '/', or 0 and '0')"
            )
        tensors[key] = value
        return {"tensor": rel}
    if _is_plain_scalar(value):
        return {"value": value}
    if isinstance(value, float):
        return {"float": repr(value)}
    if isinstance(value, list) and all(_is_plain_scalar(item) for item in value):
        return {"value": list(value)}
    if isinstance(value, (list, tuple)):
        items = [_encode(item, [*parts, str(i)], prefix, tensors) for i, item in enumerate(value)]
        return {"tuple" if isinstance(value, tuple) else "list": items}
    if isinstance(value, Mapping):
        pairs = []
        for key, item in value.items():
            if isinstance(key, bool) or not isinstance(key, (int, str)):
                raise StorageError(f"flatten_state: {where} has key {key!r}; only str and int keys work")
            pairs.append([key, _encode(item, [*parts, str(key)], prefix, tensors)])
        return {"dict": pairs}
    raise StorageError(f"flatten_state: {where} is a {type(value).__name__}, which cannot be stored")


def _decode(node: Any, prefix: str, tensors: Mapping[str, torch.Tensor]) -> Any:
    if not isinstance(node, Mapping) or len(node) != 1:
        raise StorageError(f"malformed state structure node {node!r:.100}")
    ((tag, body),) = node.items()
    if tag == "tensor":
        key = _join(prefix, body)
        if key not in tensors:
            raise StorageError(f"state structure names tensor {key!r}, which is not in the checkpoint")
        return tensors[key]
    if tag == "value":
        return body
    if tag == "float" and body in ("inf", "-inf", "nan"):
        return float(body)
    if tag in ("list", "tuple") and isinstance(body, list):
        items = [_decode(item, prefix, tensors) for item in body]
        return items if tag == "list" else tuple(items)
    if tag == "dict" and isinstance(body, list) and all(isinstance(p, list) and len(p) == 2 for p in body):
        return {key: _decode(item, prefix, tensors) for key, item in body}
    raise StorageError(f"malformed state structure node {node!r:.100}")
