"""The naturalness score of patches: diff parsing, n-gram counts and the gain, by hand."""

from __future__ import annotations

import math

import pytest

from aios_rl.envs.shell.candidates import History, assemble, patch_pool
from aios_rl.envs.shell.mutate import unified_diff
from aios_rl.envs.shell.naturalness import diff_lines, line_ngrams, naturalness_gain, ngram_counts


def test_line_ngrams_frame_and_tokenise() -> None:
    assert line_ngrams("a <= b", 2) == [("<s>", "a"), ("a", "<="), ("<=", "b"), ("b", "</s>")]
    assert line_ngrams("x", 4) == [("<s>", "x", "</s>")]  # shorter than the order: one short gram
    with pytest.raises(ValueError, match="at least 1"):
        line_ngrams("x", 0)


def test_diff_lines_reads_hunks_by_their_lengths() -> None:
    before = "a = 1\n--- not a header\nc = 3\n"
    after = "a = 1\n+++ still content\nc = 4\n"
    removed, added = diff_lines(unified_diff(before, after, "m.py"))
    assert removed == ["--- not a header", "c = 3"]
    assert added == ["+++ still content", "c = 4"]
    assert diff_lines("no diff here") == ([], [])


def test_gain_by_hand() -> None:
    # The repository uses "i <= n" twice elsewhere and "i < n" only on the buggy line.
    source = "if i <= n:\n    pass\nwhile i <= n:\n    pass\nif i < n:\n    pass\n"
    files = {"m.py": source, "README": "i < n"}
    counts = ngram_counts(files, order=2)
    assert counts[("i", "<=")] == 2 and counts[("i", "<")] == 1  # README is not Python: not counted
    diff = unified_diff(files["m.py"], files["m.py"].replace("if i < n:", "if i <= n:"), "m.py")
    # removed "if i < n:" -> <s> if, if i, i <, < n, n :, : </s>; its own counts are taken out:
    # <s> if (2-1), if i (2-1), i < (1-1), < n (1-1), n : (3-1), : </s> (3-1)
    removed = [1, 1, 0, 0, 2, 2]
    # added "if i <= n:" -> <s> if, if i, i <=, <= n, n :, : </s>, counted minus the removed line's own
    added = [1, 1, 2, 2, 2, 2]
    expected = sum(map(math.log1p, added)) / 6 - sum(map(math.log1p, removed)) / 6
    assert naturalness_gain(diff, counts, order=2) == pytest.approx(expected)
    reverse = unified_diff(files["m.py"], files["m.py"].replace("if i < n:", "if i > n:"), "m.py")
    # "i >" and "> n" occur nowhere else, just like "i <" and "< n": no more natural than the bug
    assert naturalness_gain(reverse, counts, order=2) == 0.0 < naturalness_gain(diff, counts, order=2)


def test_patch_pool_scores_the_fix_as_more_natural_than_other_edits() -> None:
    source = (
        "def within(lo, x, hi):\n    return lo <= x and x <= hi\n\n"
        "def inside(lo, x, hi):\n    return lo <= x and x < hi\n"
    )
    test = "from m import inside\n\ndef test_inside():\n    assert inside(1, 2, 2)\n"
    files = {"m.py": source, "test_m.py": test}
    pool = patch_pool(files, None, small_repo_functions=20)
    fix = next(c for c in pool if "+    return lo <= x and x <= hi" in c.text and c.qualname == "inside")
    others = [c for c in pool if c.qualname == "inside" and c is not fix]
    assert others and all(c.naturalness < fix.naturalness for c in others)

    # Without a line spectrum every line suspicion is 0, so the localization rank is the naturalness rank.
    texts, features = assemble(pool, files, None, ["pytest"], History(step=0, max_steps=12), 256)
    patches = [(t, f) for t, f in zip(texts, features) if t.startswith("patch")]
    by_text = dict(patches)
    assert by_text[fix.text]["naturalness"] == fix.naturalness
    assert by_text[fix.text]["naturalness_rank"] == by_text[fix.text]["localization_rank"] == 0.0
    assert all(f["localization_rank"] > 0.0 for t, f in patches if f["naturalness"] < fix.naturalness)
    assert all(f["naturalness_rank"] == 1.0 for t, f in zip(texts, features) if not t.startswith("patch"))
