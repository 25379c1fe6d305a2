"""Configuration models: one per component, loaded from YAML and CLI flags, strict about unknown keys.

Every component defines a subclass of :class:`ConfigModel` with a default and a one-line ``description``
for each field. :func:`load_config` merges an optional YAML file with CLI overrides and raises
:class:`ConfigError` naming an unknown key and the closest valid one.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from aios_rl.contracts.errors import ConfigError
from aios_rl.contracts.validate import bool_as_number, problems_from

C = TypeVar("C", bound="ConfigModel")

MIN_SEED = -(2**63 // 7919)
MAX_SEED = (2**64 - 2**20) // 7919
"""The seeds a run takes (MIN_SEED..MAX_SEED): seeds are mixed into torch's generator seeds as ``seed * 7919 +
epoch``, which torch takes from -2**63 to 2**64 - 1 and beyond overflows with a bare ValueError. No tighter:
runs stored before the bound with any seed torch took (e.g. a microsecond timestamp) resume and evaluate."""
MAX_TORCH_THREADS = 1024  # torch.set_num_threads overflows at 2**31; no CPU student gains from more
# Upper bounds of counts that set how long a run takes: far beyond any real use, they refuse a typo (an extra
# digit or ten) before a run directory exists, where the run would otherwise never end.
MAX_GROUP_SIZE = 1024  # episodes of one task at a time: a GRPO group, an allocator's -N, eval --samples
MAX_PASSES = 100_000  # epochs, distillation passes, update passes
MAX_WORKERS = 1024  # parallel environment workers (each a sandbox at a time)
MAX_ROLLOUTS = 100_000_000  # a rollout budget that must be spent
MAX_RESAMPLES = 1000  # fresh groups DAPO draws for one zero-variance group (each a group of N rollouts)


class ConfigModel(BaseModel):
    """Base of every component config: frozen, unknown keys forbidden, non-finite numbers rejected, and
    no boolean taken for a number."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """pydantic's lax mode reads true as 1 and false as 0, so ``epochs: true`` (or YAML's ``yes``/``on``)
        would silently run one epoch. Strings stay lax: YAML 1.1 reads ``lr: 1e-4`` as the string '1e-4'."""
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and bool_as_number(field.annotation, value, checks_itself=ConfigModel):
            message = "a number, not a boolean (true/false; yes/no/on/off in YAML)"
            raise PydanticCustomError("bool_as_number", message)
        return value

    def config_hash(self) -> str:
        """sha256 of the canonical JSON of this config (recorded on checkpoints)."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def _unknown_keys(model: type[BaseModel], data: dict[str, Any], prefix: str = "") -> list[str]:
    problems = []
    fields = model.model_fields
    for key, value in data.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; valid keys: {', '.join(sorted(fields))}"
            problems.append(f"unknown config key '{prefix}{key}'{hint}")
            continue
        sub = fields[key].annotation
        if isinstance(value, dict) and isinstance(sub, type) and issubclass(sub, BaseModel):
            problems.extend(_unknown_keys(sub, value, f"{prefix}{key}."))
    return problems


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"config key '{dotted}': '{part}' is not a section")
    node[parts[-1]] = value


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping that names a key twice: PyYAML would keep the last value and
    drop the first without a word, so one of two settings the user wrote would silently not apply.

    Each mapping's own keys are checked once, before it is flattened: a merge (``<<``) flattens the mapping
    it merges in place, whose override of a merged key would then read as a key given twice."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._checked: set[yaml.Node] = set()  # the mappings whose own keys were checked

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        if node not in self._checked:
            self._checked.add(node)
            self._check_unique(node)
        super().flatten_mapping(node)

    def _check_unique(self, node: yaml.MappingNode) -> None:
        first: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # keys beside a merge (<<) override the merged ones, as YAML intends
            key = self.construct_object(key_node, deep=True)
            try:
                seen = first.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the safe loader reports it below
                continue
            if seen is not key_node:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r} (first on line {seen.start_mark.line + 1}); "
                    "give each key once",
                    key_node.start_mark,
                )


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping, raising ConfigError for a missing or unreadable file, bad YAML (text that is not
    UTF-8 included, a key given twice) or a non-mapping."""
    try:
        # bytes: YAML decodes them (UTF-8, or UTF-16 with a BOM)
        loaded = yaml.load(path.read_bytes(), Loader=_UniqueKeyLoader)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}; pass a YAML file") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level, got {type(loaded).__name__}")
    return loaded


def load_config(
    model: type[C], path: Path | None = None, overrides: dict[str, Any] | None = None
) -> C:
    """Build ``model`` from an optional YAML file plus overrides (dotted keys allowed; None means unset).

    Raises:
        ConfigError: unknown key (with the closest valid one) or an invalid value (with what was expected).
    """
    data: dict[str, Any] = read_yaml(path) if path is not None else {}
    for key, value in (overrides or {}).items():
        if value is not None:
            _set_dotted(data, key, value)
    unknown = _unknown_keys(model, data)
    if unknown:
        raise ConfigError("\n".join(unknown))
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError("invalid configuration:\n" + "\n".join(problems_from(exc))) from None


def validate_stored(model: type[C], stored: dict[str, Any], run_dir: Path, action: str) -> C:
    """A configuration a run stored, validated by this version's rules.

    Raises:
        ConfigError: it does not validate (a value stored by an older version that a bound added since
            refuses, or an edited store): ``cannot ACTION RUN_DIR:`` and each problem.
    """
    try:
        return model.model_validate(stored)
    except ValidationError as exc:
        raise ConfigError(f"cannot {action} {run_dir}:\n" + "\n".join(problems_from(exc))) from None
