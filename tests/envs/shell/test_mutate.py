"""Mutation operators, their inverses (patch candidates), diffs and search/replace edits."""

from __future__ import annotations

import ast
import collections
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aios_rl
from aios_rl.contracts.errors import EnvError
from aios_rl.envs.shell.mutate import (
    NON_INVERTIBLE_OPERATORS,
    OPERATORS,
    Mutation,
    SearchReplace,
    apply_mutation,
    apply_search_replace,
    apply_unified_diff,
    difficulty_estimate,
    enumerate_mutations,
    fix_candidates,
    function_qualnames,
    is_invertible,
    unified_diff,
)
from aios_rl.envs.shell.seed_repos import SEEDS_DIR

SAMPLE = '''\
"""Sample module."""

LIMIT = 10  # module level: never mutated


def clamp(x, low, high):
    # keep this comment
    if x < low:
        return low
    elif x >= high:
        return high
    return x


def total(xs, scale):
    acc = 0
    for i in range(len(xs)):
        acc += xs[i] * scale
    return acc


def window(seq, n):
    out = []
    for k in range(0, len(seq) - n + 1):
        out.append(seq[k:k + n])
    return out


def ok(name, strict):
    valid = bool(name) and not name.startswith("_")
    if strict or valid:
        record(name, strict)
    return valid


def find(values, target):
    found = False
    for v in values:
        if v == target:
            found = True
            break
    return found


class Counter:
    def bump(self, step):
        self.count = self.count + step
        return self.count > 0
'''

# Constructs the simple sample lacks: parenthesised negations, chains, walrus, lambdas,
# comprehensions, negative indices, floats, non-ASCII text before a site, multi-line calls,
# nested functions and methods.
TRICKY = '''\
def tricky(items, lo, hi, flag):
    """Docstring is never dropped."""
    if not (lo < hi and flag):
        return []
    while lo <= hi and not flag:
        lo += 1
    picked = [x for x in items if x is not None and lo <= x < hi]
    key = lambda v: -v if flag else v
    if (n := len(picked)) > 2:
        picked = picked[1:-1]
    result = sorted(picked, key=key)[: n - 1]
    total = 0
    for i, x in enumerate(result, 1):
        total += x * i ** 2 - (x // 3) % 2
        if x in items and x not in result[:i]:
            continue
    label = "héllo" if total > 1.5 else "wörld"
    call_with(
        total,  # a comment inside a multi-line call
        label,
    )
    return total != 0 or label is None


class Box:
    def __init__(self, size=3):
        self.size = size
        self.items = []

    def put(self, item):
        if len(self.items) >= self.size:
            raise ValueError("full")
        self.items.append(item)
        return len(self.items) - 1

    def get(self, index):
        return self.items[index]


def outer(values):
    def inner(v):
        return v * 2
    return [inner(v) for v in values if not v > 0]
'''

# (operator, line before, line after), indentation stripped: checked by hand against SAMPLE.
HAND_CHECKED = [
    ("comparison_swap", "if x < low:", "if x <= low:"),
    ("comparison_swap", "elif x >= high:", "elif x > high:"),
    ("comparison_swap", "if v == target:", "if v != target:"),
    ("arithmetic_swap", "acc += xs[i] * scale", "acc -= xs[i] * scale"),
    ("arithmetic_swap", "acc += xs[i] * scale", "acc += xs[i] // scale"),
    ("arithmetic_swap", "self.count = self.count + step", "self.count = self.count - step"),
    ("boolean_swap", "if strict or valid:", "if strict and valid:"),
    ("boolean_swap", 'valid = bool(name) and not name.startswith("_")',
     'valid = bool(name) or not name.startswith("_")'),
    ("negate_condition", "if x < low:", "if not x < low:"),
    ("negate_condition", "if strict or valid:", "if not (strict or valid):"),
    ("range_off_by_one", "for i in range(len(xs)):", "for i in range(len(xs) + 1):"),
    ("range_off_by_one", "for k in range(0, len(seq) - n + 1):", "for k in range(0, len(seq) - n):"),
    ("range_off_by_one", "for k in range(0, len(seq) - n + 1):", "for k in range(1, len(seq) - n + 1):"),
    ("slice_index", "out.append(seq[k:k + n])", "out.append(seq[k:k + n + 1])"),
    ("slice_index", "out.append(seq[k:k + n])", "out.append(seq[k - 1:k + n])"),
    ("slice_index", "acc += xs[i] * scale", "acc += xs[i - 1] * scale"),
    ("constant_change", "acc = 0", "acc = 1"),
    ("constant_change", "found = False", "found = True"),
    ("constant_change", "return self.count > 0", "return self.count > 1"),
    ("drop_statement", "record(name, strict)", "pass"),
    ("swap_call_args", "record(name, strict)", "record(strict, name)"),
    ("wrong_variable", "return low", "return high"),
    ("wrong_variable", "acc += xs[i] * scale", "acc += xs[acc] * scale"),
    ("wrong_return", "return self.count > 0", "return not self.count > 0"),
    ("wrong_return", "return found", "return None"),
]


def _changed_line(source: str, mutation: Mutation) -> tuple[str, str] | None:
    """(before, after) of the single changed line, or None if the mutation changes line count."""
    before, after = source.split("\n"), apply_mutation(source, mutation).split("\n")
    if len(before) != len(after):
        return None
    changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert len(changed) == 1, (mutation, changed)
    return changed[0]


def _expected_invertible(mutation: Mutation) -> bool:
    return mutation.operator not in NON_INVERTIBLE_OPERATORS


def _coverage_misses(source: str, path: str, mutations: list[Mutation]) -> list[Mutation]:
    misses = []
    for m in mutations:
        buggy = apply_mutation(source, m)
        if not any(apply_mutation(buggy, c) == source for c in fix_candidates(buggy, path, [m.qualname])):
            misses.append(m)
    return misses


@pytest.fixture(scope="module")
def sample_mutations() -> list[Mutation]:
    return enumerate_mutations(SAMPLE, "pkg/sample.py")


@pytest.mark.parametrize(("operator", "before", "after"), HAND_CHECKED)
def test_hand_checked_mutation(sample_mutations, operator: str, before: str, after: str) -> None:
    found = [_changed_line(SAMPLE, m) for m in sample_mutations if m.operator == operator]
    assert (before, after) in [(b.strip(), a.strip()) for b, a in filter(None, found)]


def test_every_operator_has_a_parseable_mutant(sample_mutations) -> None:
    by_operator = collections.Counter(m.operator for m in sample_mutations)
    assert set(by_operator) == set(OPERATORS) and len(OPERATORS) >= 11
    for m in sample_mutations:
        ast.parse(apply_mutation(SAMPLE, m))
        assert m.file == "pkg/sample.py" and m.operator in OPERATORS


def test_dropped_line_is_removed_whole(sample_mutations) -> None:
    drops = [m for m in sample_mutations if m.operator == "drop_statement"]
    (drop,) = [m for m in drops if "acc = 0" in m.original_segment]
    assert (drop.original_segment, drop.mutated_segment, drop.col) == ("    acc = 0\n", "", 0)
    assert apply_mutation(SAMPLE, drop) == SAMPLE.replace("    acc = 0\n", "", 1)
    assert [m.original_segment for m in drops if "break" in m.original_segment] == ["            break\n"]


def test_mutations_touch_only_their_lines(sample_mutations) -> None:
    for m in sample_mutations:
        mutant = apply_mutation(SAMPLE, m)
        before, after = SAMPLE.splitlines(keepends=True), mutant.splitlines(keepends=True)
        first = m.lineno - 1
        span = m.original_segment.count("\n") + (not m.original_segment.endswith("\n"))
        tail = before[first + span :]
        assert before[:first] == after[:first] and after[len(after) - len(tail) :] == tail, m
        assert "    # keep this comment\n" in mutant and "LIMIT = 10  # module level" in mutant


def test_module_level_code_is_never_mutated(sample_mutations) -> None:
    assert all(m.lineno > 5 for m in sample_mutations)
    assert {m.qualname for m in sample_mutations} == set(function_qualnames(SAMPLE))


def test_enumeration_is_deterministic_across_hash_seeds(sample_mutations) -> None:
    assert enumerate_mutations(SAMPLE, "pkg/sample.py") == sample_mutations
    script = (
        "import sys; from aios_rl.envs.shell.mutate import enumerate_mutations as e;"
        "print(repr(e(sys.stdin.read(), 'pkg/sample.py')))"
    )
    src_dir = str(Path(aios_rl.__file__).parents[1])
    outputs = set()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": src_dir}
        run = subprocess.run([sys.executable, "-c", script], input=SAMPLE, env=env, capture_output=True,
                             text=True, check=True, timeout=60)  # fmt: skip
        outputs.add(run.stdout)
    assert outputs == {repr(sample_mutations) + "\n"}


def test_equivalent_mutants_are_filtered() -> None:
    source = "def f(a, b):\n    return g(a, a, b) == h(b)\n"
    mutants = {apply_mutation(source, m) for m in enumerate_mutations(source, "f.py")}
    assert "def f(a, b):\n    return h(b) == g(a, a, b)\n" not in mutants  # no operand swaps
    swaps = [m for m in enumerate_mutations(source, "f.py") if m.operator == "swap_call_args"]
    pairs = [(m.original_segment, m.mutated_segment) for m in swaps]
    assert pairs == [("a, a, b", "b, a, a"), ("a, b", "b, a")]  # a <-> a is skipped
    assert all(ast.dump(ast.parse(m)) != ast.dump(ast.parse(source)) for m in mutants)


def test_spelling_variants_are_one_mutant_but_several_candidates() -> None:
    source = "def f(x, y):\n    if x < y:\n        return 1\n    return 2\n"
    negations = [m for m in enumerate_mutations(source, "f.py") if m.operator == "negate_condition"]
    assert [m.mutated_segment for m in negations] == ["not x < y"]
    candidates = fix_candidates(source, "f.py", ["f"])
    spellings = {m.mutated_segment for m in candidates if m.operator == "negate_condition"}
    assert spellings == {"not x < y", "not (x < y)"}


def test_fix_candidates_restore_parenthesised_not() -> None:
    original = "def f(a, b):\n    if not (a and b):\n        return 1\n    return 0\n"
    buggy = "def f(a, b):\n    if a and b:\n        return 1\n    return 0\n"
    assert original in {apply_mutation(buggy, c) for c in fix_candidates(buggy, "f.py", ["f"])}


def test_fix_candidates_never_drop_and_are_unique() -> None:
    candidates = fix_candidates(TRICKY, "t.py", ["tricky", "Box.put"])
    assert candidates and all(c.operator not in NON_INVERTIBLE_OPERATORS for c in candidates)
    texts = [apply_mutation(TRICKY, c) for c in candidates]
    assert len(texts) == len(set(texts)) and TRICKY not in texts


@pytest.mark.parametrize(("name", "source"), [("sample", SAMPLE), ("tricky", TRICKY)])
def test_every_invertible_mutation_is_undone_by_a_fix_candidate(name: str, source: str) -> None:
    mutations = enumerate_mutations(source, f"{name}.py")
    assert len(mutations) > 80
    invertible = [m for m in mutations if _expected_invertible(m)]
    assert _coverage_misses(source, f"{name}.py", invertible) == []
    assert all(is_invertible(source, m) for m in invertible[::25])
    drops = [m for m in mutations if m.operator == "drop_statement"]
    assert drops and not any(is_invertible(source, m) for m in drops)  # documented as non-invertible


def test_non_ascii_columns_are_characters() -> None:
    mutations = enumerate_mutations(TRICKY, "t.py", ["tricky"], operators=["comparison_swap"])
    (site,) = {(m.lineno, m.col) for m in mutations if "héllo" in TRICKY.splitlines()[m.lineno - 1]}
    assert TRICKY.splitlines()[site[0] - 1][site[1]] == ">"
    assert all(ast.parse(apply_mutation(TRICKY, m)) for m in mutations)


def test_qualnames_and_nested_scopes() -> None:
    assert function_qualnames(TRICKY) == ["tricky", "Box.__init__", "Box.put", "Box.get", "outer",
                                          "outer.<locals>.inner"]  # fmt: skip
    outer_only = enumerate_mutations(TRICKY, "t.py", ["outer"])
    inner_line = TRICKY.splitlines().index("        return v * 2") + 1
    assert outer_only and all(m.lineno != inner_line for m in outer_only)
    assert any(m.lineno == inner_line for m in enumerate_mutations(TRICKY, "t.py", ["outer.<locals>.inner"]))
    with pytest.raises(EnvError, match="did you mean Box.put"):
        enumerate_mutations(TRICKY, "t.py", ["Box.putt"])
    with pytest.raises(EnvError, match="unknown mutation operator"):
        enumerate_mutations(TRICKY, "t.py", operators=["typo_swap"])
    with pytest.raises(EnvError, match="cannot parse"):
        function_qualnames("def broken(:\n")


def test_wrong_variable_respects_scope_and_kinds() -> None:
    source = (
        "def f(words: list[str], limit: int):\n"
        "    count = 0\n"
        "    for w in words:\n"
        "        count += len(w)\n"
        "    late = count\n"
        "    return count > limit\n"
    )
    mutants = enumerate_mutations(source, "f.py", operators=["wrong_variable"])
    at = {(m.lineno, m.original_segment): sorted(x.mutated_segment for x in mutants
          if (x.lineno, x.col) == (m.lineno, m.col)) for m in mutants}  # fmt: skip
    assert at[(4, "w")] == ["count", "limit", "words"]  # w has no known kind, so all in-scope names
    assert at[(6, "count")] == ["late", "limit"]  # not words (a list), not w (loop ended), late bound before
    assert (3, "words") not in at  # words is a list and nothing else in scope is
    assert all(m.mutated_segment != "self" for m in enumerate_mutations(TRICKY, "t.py", ["Box.put"]))


def test_apply_mutation_rejects_a_stale_mutation(sample_mutations) -> None:
    m = sample_mutations[0]
    with pytest.raises(EnvError, match="does not match"):
        apply_mutation("# a new first line shifts every site\n" + SAMPLE, m)
    with pytest.raises(EnvError, match="outside"):
        apply_mutation("x = 1\n", m)


# ---------------------------------------------------------------- seeds


def _seed_modules() -> list[Path]:
    return sorted(p for p in SEEDS_DIR.glob("*/*.py")) if SEEDS_DIR.is_dir() else []


def test_seed_mutants_parse_and_invertible_ones_are_covered() -> None:
    modules = _seed_modules()
    if not modules:
        pytest.skip("no seed repositories bundled yet")
    per_operator: dict[str, list[tuple[str, str, Mutation]]] = collections.defaultdict(list)
    for path in modules:
        source = path.read_text(encoding="utf-8")
        for i, m in enumerate(enumerate_mutations(source, path.name)):
            if i % 3 == 0:  # a third keeps the test fast; parse-free operators rely on this check
                ast.parse(apply_mutation(source, m))
            per_operator[m.operator].append((path.name, source, m))
    assert set(per_operator) == set(OPERATORS)
    # Every operator, ~20 mutations spread evenly over the seeds: checking all of them takes a minute.
    misses = []
    for operator, items in sorted(per_operator.items()):
        if operator in NON_INVERTIBLE_OPERATORS:
            continue
        for name, source, m in items[:: max(1, len(items) // 20)]:
            misses += [(name, x) for x in _coverage_misses(source, name, [m])]
    assert misses == []


# ---------------------------------------------------------------- difficulty


def test_difficulty_is_bounded_and_monotone(sample_mutations) -> None:
    for m in sample_mutations:
        values = [difficulty_estimate(m, n, f) for n in (0, 5, 50, 5000) for f in (0, 1, 10)]
        assert all(0.0 <= v <= 1.0 for v in values)
        assert difficulty_estimate(m, 10, 1) < difficulty_estimate(m, 200, 1)
        assert difficulty_estimate(m, 10, 5) < difficulty_estimate(m, 10, 1)
    easy = next(m for m in sample_mutations if m.operator == "negate_condition")
    hard = next(m for m in sample_mutations if m.operator == "drop_statement")
    assert difficulty_estimate(easy, 20, 2) < difficulty_estimate(hard, 20, 2)
    with pytest.raises(EnvError):
        difficulty_estimate(easy, -1, 0)


# ---------------------------------------------------------------- diffs


def test_unified_diff_round_trip_and_reverse(sample_mutations) -> None:
    for m in sample_mutations[::7]:
        mutant = apply_mutation(SAMPLE, m)
        diff = unified_diff(SAMPLE, mutant, "pkg/sample.py")
        assert diff.startswith("--- a/pkg/sample.py\n+++ b/pkg/sample.py\n@@ ")
        assert apply_unified_diff({"pkg/sample.py": SAMPLE}, diff) == {"pkg/sample.py": mutant}
        back = unified_diff(mutant, SAMPLE, "pkg/sample.py")
        assert apply_unified_diff({"pkg/sample.py": mutant, "other.py": "x\n"}, back) == {
            "pkg/sample.py": SAMPLE,
            "other.py": "x\n",
        }
    assert unified_diff(SAMPLE, SAMPLE, "a.py") == ""


_LINES = st.lists(st.sampled_from(["a", "b", "c", "", "  d # e"]), max_size=12)


@settings(max_examples=150, deadline=None)
@given(before=_LINES, after=_LINES, end_before=st.booleans(), end_after=st.booleans())
def test_diff_round_trip_property(before: list[str], after: list[str], end_before: bool, end_after: bool):
    old = "\n".join(before) + ("\n" if end_before and before else "")
    new = "\n".join(after) + ("\n" if end_after and after else "")
    diff = unified_diff(old, new, "f.txt")
    if old == new:
        assert diff == ""
    else:
        assert apply_unified_diff({"f.txt": old}, diff) == {"f.txt": new}


def test_strict_diff_rejects_mismatched_context() -> None:
    old = "a\nb\nc\nd\n"
    diff = unified_diff(old, "a\nb\nX\nd\n", "f.py")
    with pytest.raises(EnvError, match="does not match"):
        apply_unified_diff({"f.py": "a\nB\nc\nd\n"}, diff)
    with pytest.raises(EnvError, match="does not exist"):
        apply_unified_diff({"g.py": old}, diff)
    with pytest.raises(EnvError, match="ends early"):
        apply_unified_diff({"f.py": old}, diff.rsplit("\n", 2)[0] + "\n")
    with pytest.raises(EnvError, match="stay inside"):
        apply_unified_diff({"f.py": old}, diff.replace("a/f.py", "a/../f.py"))
    # Wrong line numbers are tolerated when the context matches exactly one place.
    shifted = diff.replace("@@ -1,4 +1,4 @@", "@@ -3,4 +3,4 @@")
    assert apply_unified_diff({"f.py": old}, shifted) == {"f.py": "a\nb\nX\nd\n"}
    plain = "diff --git a/f.py b/f.py\nindex 1..2 100644\n--- f.py\n+++ f.py\n@@ -3 +3 @@\n-c\n+Y\n"
    assert apply_unified_diff({"f.py": old}, plain) == {"f.py": "a\nb\nY\nd\n"}  # no a/ b/, git headers
    assert apply_unified_diff({"f.py": old}, diff.rstrip("\n")) == {"f.py": "a\nb\nX\nd\n"}
    with pytest.raises(EnvError, match="matches 2 places"):
        apply_unified_diff({"f.py": old + old}, shifted.replace("@@ -3,4 +3,4 @@", "@@ -9,4 +9,4 @@"))


def test_multi_file_diff_on_a_directory_is_all_or_nothing(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("y = 2\n")
    diff = (
        unified_diff("x = 1\n", "x = 10\n", "pkg/a.py")
        + unified_diff("y = 2\n", "y = 20\n", "b.py")
        + "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+z = 3\n"
    )
    assert apply_unified_diff(tmp_path, diff) == ["b.py", "new.py", "pkg/a.py"]
    assert (tmp_path / "pkg" / "a.py").read_text() == "x = 10\n"
    assert (tmp_path / "new.py").read_text() == "z = 3\n"
    bad = unified_diff("x = 10\n", "x = 11\n", "pkg/a.py") + unified_diff("nope\n", "no\n", "b.py")
    with pytest.raises(EnvError):
        apply_unified_diff(tmp_path, bad)
    assert (tmp_path / "pkg" / "a.py").read_text() == "x = 10\n"  # first file untouched
    (tmp_path / "crlf.py").write_bytes(b"a = 1\r\nb = 2\r\n")
    assert apply_unified_diff(tmp_path, unified_diff("a = 1\r\nb = 2\r\n", "a = 1\r\nb = 3\r\n", "crlf.py"))
    assert (tmp_path / "crlf.py").read_bytes() == b"a = 1\r\nb = 3\r\n"
    delete = "--- a/new.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-z = 3\n"
    assert apply_unified_diff(tmp_path, delete) == ["new.py"] and not (tmp_path / "new.py").exists()


def test_diff_of_a_file_without_final_newline() -> None:
    old, new = "a\nb", "a\nc"
    diff = unified_diff(old, new, "f")
    assert diff.endswith("+c\n\\ No newline at end of file\n")
    assert apply_unified_diff({"f": old}, diff) == {"f": new}


# ---------------------------------------------------------------- search / replace


def test_search_replace_needs_exactly_one_occurrence() -> None:
    assert apply_search_replace("a = 1\nb = 2\n", "b = 2", "b = 3") == "a = 1\nb = 3\n"
    with pytest.raises(EnvError, match="not found"):
        apply_search_replace("a = 1\n", "c = 1", "c = 2")
    with pytest.raises(EnvError, match="more than once"):
        apply_search_replace("x\nx\n", "x\n", "y\n")
    with pytest.raises(EnvError, match="more than once"):
        apply_search_replace("aaa", "aa", "b")  # overlapping occurrences are ambiguous too
    with pytest.raises(EnvError, match="empty"):
        apply_search_replace("abc", "", "x")


def test_structured_search_replace_edit() -> None:
    edit = SearchReplace.from_dict({"path": "m.py", "search": "x < 1", "replace": "x <= 1"})
    assert edit.apply({"m.py": "if x < 1:\n    pass\n", "n.py": "x < 1\n"}) == {
        "m.py": "if x <= 1:\n    pass\n",
        "n.py": "x < 1\n",
    }
    with pytest.raises(EnvError, match="unknown file"):
        edit.apply({"other.py": "x < 1"})
    with pytest.raises(EnvError, match="exactly string fields"):
        SearchReplace.from_dict({"path": "m.py", "search": "a", "replace": "b", "extra": 1})
    with pytest.raises(EnvError, match="exactly string fields"):
        SearchReplace.from_dict({"path": "m.py", "search": 1, "replace": "b"})


def test_a_diff_in_a_directory_never_writes_into_a_pipe_or_half_applies(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("a\nb\n")
    os.mkfifo(tmp_path / "p")
    create_p = "--- /dev/null\n+++ b/p\n@@ -0,0 +1 @@\n+x\n"
    with pytest.raises(EnvError, match="not a regular file"):  # writing would block the host for good
        apply_unified_diff(tmp_path, create_p)
    # calc.py's hunk applies, but calc.py/extra.py cannot be made: nothing is written at all
    both = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"
            "--- /dev/null\n+++ b/calc.py/extra.py\n@@ -0,0 +1 @@\n+y\n")
    with pytest.raises(EnvError, match="not a directory"):
        apply_unified_diff(tmp_path, both)
    assert (tmp_path / "calc.py").read_text() == "a\nb\n"


def test_a_lone_carriage_return_is_refused_not_mislocated() -> None:
    # Python ends a line at a lone "\r" too, so AST lines no longer match the text's "\n" lines: sites
    # were taken from the wrong characters (a space or a letter replaced), or an IndexError was raised.
    shifted = "X = 1  # old\rY = 2\n\ndef g(a, b):\n    c = a + b\n    return c < b\n"
    old_mac = "def f(a, b):\r    x = a + b\r    return x - 1\r"
    for source, qualname in ((shifted, "g"), (old_mac, "f")):
        with pytest.raises(EnvError, match="carriage return"):
            enumerate_mutations(source, "m.py", [qualname])
        with pytest.raises(EnvError, match="carriage return"):
            fix_candidates(source, "m.py", [qualname])
    crlf = "def f(a, b):\r\n    return a < b\r\n"
    swaps = enumerate_mutations(crlf, "m.py", operators=["comparison_swap"])
    assert {apply_mutation(crlf, m) for m in swaps} == {"def f(a, b):\r\n    return a <= b\r\n",
                                                        "def f(a, b):\r\n    return a > b\r\n"}


def test_a_module_starting_with_a_utf8_bom_is_mutated_like_one_without() -> None:
    # Python ignores a leading BOM in a source file; editors on Windows write one.
    plain = "def f(a): return a < 1\n\n\ndef g(b):\n    return b + 1\n"
    bom = "\ufeff" + plain
    assert function_qualnames(bom) == ["f", "g"]
    expected = enumerate_mutations(plain, "m.py")
    found = enumerate_mutations(bom, "m.py")
    assert [(m.lineno, m.col - (m.lineno == 1)) for m in found] == [(m.lineno, m.col) for m in expected]
    assert [apply_mutation(bom, m) for m in found] == ["\ufeff" + apply_mutation(plain, m) for m in expected]
    assert len(fix_candidates(bom, "m.py", ["f", "g"])) == len(fix_candidates(plain, "m.py", ["f", "g"]))
