"""The generation benchmark refuses a generator setting out of range as a usage error."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("flag", ["--count=0", "--workers=0"])
def test_a_setting_out_of_range_is_a_usage_error(load_benchmark, usage_error, flag: str) -> None:
    bench = load_benchmark("shell_generate")
    err = usage_error(bench, ["shell_generate.py", flag])
    assert flag.split("=")[0] in err
