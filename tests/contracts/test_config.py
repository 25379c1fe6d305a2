"""Config loading: YAML plus overrides, unknown keys named with the closest valid one, stored with the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field, ValidationError

from aios_rl.contracts.config import ConfigModel, load_config, read_yaml
from aios_rl.contracts.errors import ConfigError
from aios_rl.control.events import ControlConfig
from aios_rl.control.ledger import LedgerConfig
from aios_rl.control.plane import ControlPlane
from aios_rl.storage.db import RunStore


class Inner(ConfigModel):
    rate: float = Field(default=0.5, gt=0, description="A rate.")


class Outer(ConfigModel):
    name: str = Field(default="x", description="A name.")
    inner: Inner = Field(default_factory=Inner, description="Nested section.")


def test_defaults_without_file() -> None:
    assert load_config(Outer) == Outer()


def test_yaml_and_overrides_merge(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("name: from-yaml\ninner:\n  rate: 0.25\n")
    cfg = load_config(Outer, path, {"inner.rate": 0.75, "name": None})
    assert cfg.name == "from-yaml" and cfg.inner.rate == 0.75


def test_unknown_top_level_key_names_closest(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("nmae: y\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'nmae'; did you mean 'name'\?"):
        load_config(Outer, path)


def test_unknown_nested_key_names_closest() -> None:
    with pytest.raises(ConfigError, match=r"unknown config key 'inner.rtae'; did you mean 'rate'\?"):
        load_config(Outer, overrides={"inner.rtae": 1.0})


def test_unknown_key_without_close_match_lists_valid_keys() -> None:
    with pytest.raises(ConfigError, match="valid keys: inner, name"):
        load_config(Outer, overrides={"zzzzzz": 1})


def test_bad_value_says_what_was_expected() -> None:
    with pytest.raises(ConfigError, match=r"inner.rate: got -1; expected input should be greater than 0"):
        load_config(Outer, overrides={"inner.rate": -1})


def test_bad_yaml_and_non_mapping(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(Outer, bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping at the top level"):
        load_config(Outer, listy)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(Outer, tmp_path / "missing.yaml")


def test_every_config_field_has_a_default_and_help() -> None:
    from aios_rl.control.compare import CompareConfig
    from aios_rl.control.replay import ReplayConfig
    from aios_rl.control.reward import RewardConfig

    for model in (ControlConfig, LedgerConfig, ReplayConfig, RewardConfig, CompareConfig):
        model()  # every field has a default
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no help text"


def test_config_hash_is_stable_and_sensitive() -> None:
    assert LedgerConfig().config_hash() == LedgerConfig().config_hash()
    assert LedgerConfig(batch_size=5).config_hash() != LedgerConfig().config_hash()


def test_resolved_config_is_stored_with_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_config(ControlConfig, overrides={"ledger.batch_size": 2, "max_consecutive_rollbacks": 1})
    ControlPlane(tmp_path / "run", cfg).close()
    reopened = ControlPlane(tmp_path / "run")  # no config given: the run's own is used
    assert reopened.config == cfg
    reopened.close()
    closed: list[RunStore] = []
    close = RunStore.close
    monkeypatch.setattr(RunStore, "close", lambda store: (closed.append(store), close(store))[1])
    with pytest.raises(ConfigError, match="different control config"):
        ControlPlane(tmp_path / "run", ControlConfig())
    assert len(closed) == 1  # the refused opener closed its store


def test_unreadable_config_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(Outer, tmp_path)  # a directory given to --config
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: café\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(Outer, latin)


def test_yaml_in_utf8_with_non_ascii_values(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes("name: café ☕\n".encode())
    assert load_config(Outer, path).name == "café ☕"


def test_a_key_given_twice_is_refused_at_any_depth(tmp_path: Path) -> None:
    """PyYAML keeps the last of two equal keys without a word, so the first setting was silently dropped."""
    top = tmp_path / "top.yaml"
    top.write_text("name: a\ninner:\n  rate: 2\nname: b\n")
    with pytest.raises(ConfigError, match=r"(?s)not valid YAML.*duplicate key 'name' \(first on line 1\)"):
        load_config(Outer, top)
    nested = tmp_path / "nested.yaml"
    nested.write_text("inner:\n  rate: 2\n  rate: 3\n")
    with pytest.raises(ConfigError, match=r"duplicate key 'rate' \(first on line 2\)"):
        load_config(Outer, nested)
    flow = tmp_path / "flow.yaml"
    flow.write_text("inner: {rate: 2, rate: 3}\n")
    with pytest.raises(ConfigError, match=r"duplicate key 'rate' \(first on line 1\)"):
        load_config(Outer, flow)


def test_a_merge_key_may_be_overridden(tmp_path: Path) -> None:
    """A key beside a YAML merge (<<) overrides the merged one: that is no duplicate."""
    merged = tmp_path / "merged.yaml"
    merged.write_text("inner:\n  <<: {rate: 2}\n  rate: 3\n")
    assert load_config(Outer, merged).inner.rate == 3


def test_a_nested_mapping_with_a_merge_and_an_override_merged_again_is_no_duplicate(tmp_path: Path) -> None:
    """A merged mapping's keys were checked after another mapping's merge had flattened it (PyYAML flattens
    the anchored node in place), so its override of a merged key read as a key given twice."""
    path = tmp_path / "anchors.yaml"
    anchored = "shared:\n  fast: &fast\n    <<: {rate: 1}\n    rate: 2\n"
    path.write_text(anchored + "inner:\n  <<: *fast\n  name: b\n")
    loaded = read_yaml(path)
    assert loaded["shared"]["fast"] == {"rate": 2}
    assert loaded["inner"]["name"] == "b"
    path.write_text(anchored + "    rate: 3\ninner:\n  <<: *fast\n")
    with pytest.raises(ConfigError, match=r"duplicate key 'rate' \(first on line 4\)"):
        read_yaml(path)  # a real duplicate beside a merge is still one


class Counts(ConfigModel):
    epochs: int = Field(default=1, ge=1, description="A count.")
    budget: float | None = Field(default=None, description="An optional number.")
    sizes: tuple[int, ...] = Field(default=(), description="Numbers.")
    flag: bool = Field(default=False, description="A switch.")
    inner: Inner = Field(default_factory=Inner, description="Nested section.")


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("epochs: true\n", "epochs", True),
        ("epochs: yes\n", "epochs", True),  # YAML 1.1 reads yes/no/on/off as booleans
        ("budget: false\n", "budget", False),
        ("sizes: [2, true]\n", "sizes", [2, True]),
        ("inner:\n  rate: on\n", "inner.rate", True),
    ],
)
def test_a_boolean_where_a_number_belongs_is_refused(
    tmp_path: Path, text: str, key: str, value: object
) -> None:
    """pydantic's lax mode reads true as 1 and false as 0, so `epochs: true` silently ran one epoch."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    expected = rf"{key}: got (true|false|\[2, true\]); expected a number, not a boolean"
    with pytest.raises(ConfigError, match=expected):
        load_config(Counts, path)
    with pytest.raises(ConfigError, match=expected):
        load_config(Counts, overrides={key: value})
    # stored configs are read back from JSON
    with pytest.raises(ValidationError, match="a number, not a boolean"):
        Counts.model_validate_json('{"epochs": true}')


def test_numbers_and_booleans_still_load_where_they_belong(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("epochs: 3\nbudget: 1e-4\nsizes: [1, 2]\nflag: true\ninner:\n  rate: 2\n")
    cfg = load_config(Counts, path)  # YAML 1.1 reads 1e-4 as a string: the lax reading of it stays
    assert (cfg.epochs, cfg.budget, cfg.sizes, cfg.flag, cfg.inner.rate) == (3, 1e-4, (1, 2), True, 2.0)
