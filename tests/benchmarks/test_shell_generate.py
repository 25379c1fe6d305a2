"""The generation benchmark refuses a generator setting out of range as a usage error."""

from __future__ import annotations

import sys

import pytest


@pytest.mark.parametrize("flag", ["--count=0", "--workers=0"])
def test_a_setting_out_of_range_is_a_usage_error(load_benchmark, monkeypatch, capsys, flag: str) -> None:
    bench = load_benchmark("shell_generate")
    monkeypatch.setattr(sys, "argv", ["shell_generate.py", flag])
    with pytest.raises(SystemExit) as exited:
        bench.main()
    assert exited.value.code == 2
    assert flag.split("=")[0] in capsys.readouterr().err
