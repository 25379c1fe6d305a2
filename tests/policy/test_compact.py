"""Compact student: sampling, act/evaluate agreement, padding invariance, learning, featurisation."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aios_rl.algos.losses import entropy_from_logits, masked_log_softmax
from aios_rl.contracts.episode import DecodingRegime, Observation
from aios_rl.contracts.errors import ConfigError, PolicyError
from aios_rl.policy.base import Policy
from aios_rl.policy.compact import (
    CompactStudent,
    CompactStudentConfig,
    _entropy_from_logits,
    _masked_log_softmax,
    _sampling_probs,
)
from aios_rl.policy.featurize import (
    FeatureHasher,
    TextHasher,
    _parse_diff,
    _tokenize,
    lexical_overlap,
    stable_hash,
)

SMALL = CompactStudentConfig(buckets=2**12, embed_dim=16, hidden_size=32, mlp_size=64, feature_slots=32)
T1 = DecodingRegime(temperature=1.0, top_p=1.0)


def patch(path: str, before: str, after: str, func: str = "total") -> str:
    return (
        f"patch\n--- a/{path}\n+++ b/{path}\n@@ -1,4 +1,4 @@\n def {func}(xs, n):\n     s = 0\n"
        f"-    {before}\n+    {after}\n     return s\n"
    )


def shell_obs(i: int, n_patches: int = 5) -> Observation:
    text = (
        f"Fix the bug in pkg/mod{i}.py.\n"
        f"FAILED tests/test_mod{i}.py::test_total_{i} - assert {i} == {i + 1}\n"
        f'  File "pkg/mod{i}.py", line 3, in total\n    if xs[k] < n:\n'
    )
    cands = ["read pkg/mod.py", "run python -m pytest -q tests", "stop done"]
    cands += [patch(f"pkg/mod{i}.py", f"if xs[k] < n{j}:", f"if xs[k] <= n{j}:") for j in range(n_patches)]
    feats = [{"kind_patch": float(c.startswith("patch")), "tb_prox": 0.1 * k} for k, c in enumerate(cands)]
    return Observation(text=text, candidates=cands, candidate_features=feats, features={"step": float(i)})


def hasher(
    buckets: int = 2**12,
    char_ngram: int = 3,
    diff_weight: float = 3.0,
    max_chars: int = 8000,
    cache_size: int = 16,
) -> TextHasher:
    return TextHasher(buckets, char_ngram, diff_weight, max_chars, cache_size, cache_size)



@pytest.fixture(scope="module")
def student() -> CompactStudent:
    return CompactStudent(SMALL)


# ---------------------------------------------------------------- size, config, protocol


def test_default_size_is_within_budget_and_counted_exactly() -> None:
    s = CompactStudent()
    n = s.num_parameters()
    assert n == sum(p.numel() for p in s.parameters())
    assert 1_000_000 < n <= 5_000_000
    assert isinstance(s, Policy)
    assert s.hidden_size == 64


def test_config_round_trips_through_json_and_state_dict() -> None:
    s = CompactStudent(SMALL)
    data = json.loads(json.dumps(s.config_dict()))
    other = CompactStudent.from_config_dict({**data, "seed": 7})
    obs = [shell_obs(1)]
    assert not torch.equal(other(obs, ["shell"]).logits, s(obs, ["shell"]).logits)
    other.load_state_dict(s.state_dict())
    assert torch.equal(other(obs, ["shell"]).logits, s(obs, ["shell"]).logits)


def test_same_config_gives_same_initial_weights_regardless_of_global_rng() -> None:
    torch.manual_seed(1)
    a = CompactStudent(SMALL)
    torch.manual_seed(2)
    b = CompactStudent(SMALL)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_config_rejects_too_few_environment_rows() -> None:
    with pytest.raises(ConfigError, match="env_buckets"):
        CompactStudentConfig(environments=("a", "b"), env_buckets=2)
    with pytest.raises(ConfigError, match="duplicates"):
        CompactStudentConfig(environments=("a", "a"))


# ---------------------------------------------------------------- sampling


def test_seeded_sampling_is_deterministic_and_the_seed_matters(student: CompactStudent) -> None:
    obs = [shell_obs(i) for i in range(16)]
    envs = ["shell"] * 16

    def draw(seed: int) -> list[int | None]:
        return [s.index for s in student.act(obs, envs, T1, torch.Generator().manual_seed(seed))]

    assert draw(3) == draw(3)
    assert draw(3) != draw(4)  # 8 near-uniform candidates x 16 rows: equal draws have prob ~8^-16


def test_tiny_temperature_takes_the_argmax_with_logprob_zero(student: CompactStudent) -> None:
    obs = [shell_obs(i) for i in range(8)]
    logits = student(obs, ["shell"] * 8).logits.detach()
    for seed in range(3):
        regime = DecodingRegime(temperature=1e-6)
        out = student.act(obs, ["shell"] * 8, regime, torch.Generator().manual_seed(seed))
        assert [s.index for s in out] == logits.argmax(-1).tolist()
        assert all(s.logprob == 0.0 for s in out)


def test_tiny_top_p_keeps_only_the_top_candidate(student: CompactStudent) -> None:
    obs = [shell_obs(i) for i in range(8)]
    argmax = student(obs, ["shell"] * 8).logits.detach().argmax(-1).tolist()
    regime = DecodingRegime(temperature=1.0, top_p=1e-4)
    for seed in range(5):
        out = student.act(obs, ["shell"] * 8, regime, torch.Generator().manual_seed(seed))
        assert [s.index for s in out] == argmax
        assert all(abs(s.logprob) < 1e-6 for s in out)  # renormalised over a nucleus of one


def ref_sampling_probs(
    logits: list[float], valid: list[bool], temperature: float, top_p: float
) -> tuple[list[float], bool]:
    """Nucleus probabilities by a plain loop, and whether the cut was clear of float round-off."""
    exps = [math.exp(x / temperature) if v else 0.0 for x, v in zip(logits, valid)]
    probs = [e / sum(exps) for e in exps]
    order = sorted(range(len(probs)), key=lambda k: (-probs[k], k))
    kept, mass, clear = set(), 0.0, True
    for k in order:
        clear = clear and abs(mass - top_p) > 1e-9
        if mass >= top_p and top_p < 1.0:
            break
        kept.add(k)
        mass += probs[k]
    out = [p if k in kept else 0.0 for k, p in enumerate(probs)]
    # A near-tie (not an exact one: both sides order exact ties by index) split by the cut is ambiguous too.
    cut = [probs[k] for k in kept], [probs[k] for k in set(order) - kept]
    clear = clear and all(a == b or abs(a - b) > 1e-12 for a in cut[0] for b in cut[1])
    return [p / sum(out) for p in out], clear


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.lists(st.tuples(st.floats(-5, 5), st.booleans()), min_size=1, max_size=7).filter(
            lambda r: any(v for _, v in r)
        ),
        min_size=1,
        max_size=4,
    ),
    temperature=st.floats(0.05, 3.0),
    top_p=st.floats(0.01, 1.0),
)
def test_sampling_probs_match_a_plain_loop(rows, temperature: float, top_p: float) -> None:
    width = max(len(r) for r in rows)
    logits = torch.tensor([[x for x, _ in r] + [0.0] * (width - len(r)) for r in rows], dtype=torch.float64)
    mask = torch.tensor([[v for _, v in r] + [False] * (width - len(r)) for r in rows])
    got = _sampling_probs(logits, mask, temperature, top_p)
    for b in range(len(rows)):
        want, clear = ref_sampling_probs(logits[b].tolist(), mask[b].tolist(), temperature, top_p)
        assert got[b].sum().item() == pytest.approx(1.0)
        assert torch.all(got[b][~mask[b]] == 0)
        # A cut that lands within round-off of top_p may fall either way in float arithmetic.
        if clear:
            assert got[b].tolist() == pytest.approx(want, abs=1e-9)


def test_local_softmax_helpers_agree_with_algos_losses() -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 9, generator=g) * 3
    mask = torch.rand(6, 9, generator=g) > 0.4
    mask[0] = False  # a row without any valid entry
    assert torch.equal(_masked_log_softmax(logits, mask)[0], masked_log_softmax(logits, mask)[0])
    assert torch.allclose(_entropy_from_logits(logits, mask), entropy_from_logits(logits, mask))


# ---------------------------------------------------------------- act vs evaluate, padding, environments


def test_act_logprob_entropy_value_equal_evaluate_at_temperature_one(student: CompactStudent) -> None:
    obs = [shell_obs(i) for i in range(6)]
    envs = ["shell", "browser"] * 3
    out = student.act(obs, envs, T1, torch.Generator().manual_seed(0))
    ev = student.evaluate(obs, envs, [s.action for s in out])
    assert [s.logprob for s in out] == pytest.approx(ev.logprobs.tolist(), abs=1e-5)
    assert [s.entropy for s in out] == pytest.approx(ev.entropy.tolist(), abs=1e-5)
    assert [s.value for s in out] == pytest.approx(ev.values.tolist(), abs=1e-6)
    assert all(len(s.hidden) == student.hidden_size for s in out)
    assert ev.candidate_logits.shape == ev.candidate_mask.shape == (6, 8)


def test_duplicate_action_strings_share_probability_in_act_and_evaluate(student: CompactStudent) -> None:
    cands = ["stop done", "read a.py", "stop done"]
    obs = Observation(text="x", candidates=cands, candidate_features=[{"f": 0.0}, {"f": 0.0}, {"f": 1.0}])
    ev = student.evaluate([obs], ["shell"], ["stop done"])
    logp, _ = masked_log_softmax(ev.candidate_logits, ev.candidate_mask)
    assert ev.logprobs.item() == pytest.approx(torch.logsumexp(logp[0, [0, 2]], 0).item(), abs=1e-6)
    for seed in range(10):
        s = student.act([obs], ["shell"], T1, torch.Generator().manual_seed(seed))[0]
        want = ev.logprobs.item() if s.action == "stop done" else logp[0, 1].item()
        assert s.logprob == pytest.approx(want, abs=1e-5)


def test_padding_never_changes_a_rows_results(student: CompactStudent) -> None:
    small = shell_obs(0, n_patches=1)  # 4 candidates
    alone = student([small], ["shell"])
    batch = [shell_obs(1, n_patches=30), small, shell_obs(2, n_patches=12)]
    batched = student(batch, ["browser", "shell", "x"])
    c = len(small.candidates)
    assert batched.logits.shape == (3, 33)
    assert torch.allclose(batched.logits[1, :c], alone.logits[0], atol=1e-6, rtol=0)
    assert not batched.mask[1, c:].any() and torch.all(batched.logits[1, c:] == 0)
    assert torch.allclose(batched.values[1], alone.values[0], atol=1e-6, rtol=0)
    assert torch.allclose(batched.hidden[1], alone.hidden[0], atol=1e-6, rtol=0)
    ev_alone = student.evaluate([small], ["shell"], ["stop done"])
    ev_batched = student.evaluate([small, shell_obs(3, n_patches=30)], ["shell", "shell"], ["stop done"] * 2)
    assert ev_batched.logprobs[0].item() == pytest.approx(ev_alone.logprobs[0].item(), abs=1e-6)
    assert ev_batched.entropy[0].item() == pytest.approx(ev_alone.entropy[0].item(), abs=1e-6)


def test_environment_id_changes_scores_and_value(student: CompactStudent) -> None:
    obs = [shell_obs(0)]
    shell, browser = student(obs, ["shell"]), student(obs, ["browser"])
    assert not torch.allclose(shell.logits, browser.logits)
    assert shell.values.item() != browser.values.item()
    assert [student.environment_row(e) for e in SMALL.environments] == [0, 1, 2]
    unknown = student.environment_row("my-new-env")
    assert 3 <= unknown < SMALL.env_buckets and unknown == CompactStudent(SMALL).environment_row("my-new-env")


# ---------------------------------------------------------------- errors


def test_evaluate_names_an_action_that_is_not_a_candidate(student: CompactStudent) -> None:
    with pytest.raises(PolicyError, match="rm -rf /"):
        student.evaluate([shell_obs(0)], ["shell"], ["rm -rf /"])


@pytest.mark.parametrize(
    "obs, envs, match",
    [
        (Observation(text="no candidates"), ["shell"], "no candidates"),
        (
            Observation(text="t", candidates=["a", "b"], candidate_features=[{}]),
            ["shell"],
            "candidate_features",
        ),
        (Observation(text="t", candidates=["a"]), ["shell", "shell"], "environment ids"),
    ],
)
def test_act_and_evaluate_reject_malformed_batches(student: CompactStudent, obs, envs, match: str) -> None:
    with pytest.raises(PolicyError, match=match):
        student.act([obs], envs, T1)
    with pytest.raises(PolicyError, match=match):
        student.evaluate([obs], envs, ["a"])


def test_empty_batches(student: CompactStudent) -> None:
    assert student.act([], [], T1) == []
    with pytest.raises(PolicyError, match="empty batch"):
        student.evaluate([], [], [])


# ---------------------------------------------------------------- gradients and learning


def test_gradients_reach_every_parameter() -> None:
    s = CompactStudent(SMALL)
    obs = [shell_obs(i) for i in range(4)]
    ev = s.evaluate(obs, ["shell", "browser", "shell", "other"], [o.candidates[-1] for o in obs])
    (ev.logprobs.sum() + ev.values.sum() + ev.entropy.sum()).backward()
    # The feature head's output bias adds one constant to every candidate of a row: a softmax over the row
    # is invariant to it, so its gradient is zero up to round-off (exactly zero on some CPUs).
    shift_only = {"feature_head.2.bias"}
    for name, p in s.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        if name in shift_only:
            assert p.grad.abs().sum() < 1e-5, f"{name} should only shift whole rows"
        else:
            assert p.grad.abs().sum() > 0, f"no gradient reaches {name}"


def train(s: CompactStudent, data: list[tuple[Observation, int]], steps: int, lr: float = 3e-3) -> None:
    opt = torch.optim.Adam(s.parameters(), lr=lr)
    obs, target = [o for o, _ in data], torch.tensor([t for _, t in data])
    for _ in range(steps):
        ev = s.evaluate(obs, ["shell"] * len(obs), [o.candidates[0] for o in obs])
        logp, _ = masked_log_softmax(ev.candidate_logits, ev.candidate_mask)
        loss = -logp.gather(1, target[:, None]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def target_probs(s: CompactStudent, data: list[tuple[Observation, int]]) -> torch.Tensor:
    with torch.no_grad():
        scores = s([o for o, _ in data], ["shell"] * len(data))
        logp, _ = masked_log_softmax(scores.logits, scores.mask)
    return logp.exp()[torch.arange(len(data)), [t for _, t in data]]


def test_a_few_adam_steps_learn_to_pick_the_candidate_the_text_points_at() -> None:
    # The observation names the module to read; the target is the matching `read` candidate.
    modules = ["alpha", "beta", "gamma", "delta", "omega", "sigma"]
    data = []
    for i, mod in enumerate(modules):
        cands = [f"read pkg/{m}.py" for m in modules[i:] + modules[:i]][::-1]
        text = f"FAILED tests/test_{mod}.py::test_{mod}_works - AssertionError in pkg/{mod}.py"
        data.append((Observation(text=text, candidates=cands), cands.index(f"read pkg/{mod}.py")))
    s = CompactStudent(SMALL.model_copy(update={"text_scorer": True}))  # the n-gram text scorer's job
    assert target_probs(s, data).max() < 0.5
    train(s, data, steps=60)
    assert target_probs(s, data).min() > 0.9


def test_numeric_features_alone_can_decide() -> None:
    # Identical candidate texts; only the `tb_prox` feature marks the right one, at varying positions.
    text = patch("pkg/mod.py", "if a < b:", "if a <= b:")
    data = []
    for i in range(8):
        feats = [{"tb_prox": 0.0, "kind_patch": 1.0} for _ in range(4)]
        feats[i % 4]["tb_prox"] = 1.0
        data.append((Observation(text=f"step {i}", candidates=[text] * 4, candidate_features=feats), i % 4))
    s = CompactStudent(SMALL.model_copy(update={"text_scorer": True}))  # the n-gram text scorer's job
    assert target_probs(s, data).max() < 0.5
    train(s, data, steps=60)
    assert target_probs(s, data).min() > 0.9
    held_out = Observation(
        text="step 99",
        candidates=[text] * 3,
        candidate_features=[{"tb_prox": 0.0}, {"tb_prox": 0.0}, {"tb_prox": 1.0}],
    )
    logits = s([held_out], ["shell"]).logits[0].detach()
    assert logits[2] > logits[0] + 1.0 and logits[0] == pytest.approx(logits[1].item())


# ---------------------------------------------------------------- featurisation


def test_patch_featurisation_separates_edits_and_weighs_changed_lines() -> None:
    h = hasher(buckets=2**16)
    le = h.candidate(patch("m.py", "if a < b:", "if a <= b:"))
    ge = h.candidate(patch("m.py", "if a < b:", "if a >= b:"))
    swapped = h.candidate(patch("m.py", "if a <= b:", "if a < b:"))
    assert le.kind == "patch" and h.candidate("read m.py").kind == "read"
    # Same tokens overall, opposite direction: the removed/added roles and the edit bag tell them apart.
    assert set(le.edit.ids.tolist()) != set(swapped.edit.ids.tolist())
    assert set(le.bag.ids.tolist()) != set(swapped.bag.ids.tolist())
    assert le.edit.ids.size == 4  # kind, lost `<`, gained `<=`, pair (`<`, `<=`)
    assert set(le.edit.ids.tolist()) != set(ge.edit.ids.tolist())
    assert {"total", "m"} & le.words == {"total"}
    # The kind id comes first with weight 1; changed-line tokens weigh diff_weight times that.
    assert le.bag.weights.max() / le.bag.weights[0] == pytest.approx(3.0)
    assert float((le.bag.weights**2).sum()) == pytest.approx(1.0, abs=1e-5)


def test_lexical_overlap_sees_the_function_named_in_the_traceback() -> None:
    h = hasher()
    obs = h.observation('Traceback:\n  File "pkg/mod.py", line 3, in total\n    if xs[k] < limit:')
    near = h.candidate(patch("pkg/mod.py", "if xs[k] < limit:", "if xs[k] <= limit:", func="total"))
    far = h.candidate(patch("pkg/other.py", "if y > z:", "if y >= z:", func="unrelated"))
    assert lexical_overlap(obs, near)[0] > 0.5 > lexical_overlap(obs, far)[0]


def test_text_cache_is_bounded_and_reused() -> None:
    h = hasher(cache_size=4)
    first = h.candidate("read a.py")
    assert h.candidate("read a.py") is first
    for i in range(10):
        h.candidate(f"read f{i}.py")
        h.observation(f"obs {i}")
    assert len(h._candidates) == 4 and len(h._observations) == 4
    assert h.candidate("read a.py") is not first


def test_long_texts_keep_both_ends() -> None:
    h = hasher(char_ngram=0, diff_weight=1.0, max_chars=100)
    text = "prompt_head " + "filler " * 1000 + " failing_tail"
    words = h.observation(text).words
    assert {"prompt_head", "failing_tail"} <= words and h.observation(text).bag.ids.size < 60


def test_feature_hasher_is_order_free_and_distinguishes_names() -> None:
    fh = FeatureHasher(slots=16)
    a = fh.matrix([{"x": 1.0, "y": 2.0}, {"y": 2.0, "x": 1.0}, {"x": 2.0, "y": 1.0}, {}])
    assert (a[0] == a[1]).all() and not (a[0] == a[2]).all() and not a[3].any()
    assert (a[0] != 0).sum() >= 2
    assert all(len({fh._place(n)[0], fh._place(n)[1]}) == 2 for n in map(str, range(200)))


def test_feature_hasher_matches_a_plain_loop_row_by_row() -> None:
    """The grouped, array-at-a-time matrix equals adding each name's two signed squashed values in turn."""
    rng = random.Random(3)
    names = [f"f{i}" for i in range(40)]
    for seed in range(5):
        fh = FeatureHasher(slots=8)  # 8 slots for up to 40 names: many collisions
        schemas = [rng.sample(names, rng.randint(0, 12)) for _ in range(4)]
        rows = [{n: rng.choice([0.0, 1.0, -2.5, rng.uniform(-50, 50), 3]) for n in rng.choice(schemas)}
                for _ in range(60)]
        expected = np.zeros((len(rows), 8), dtype=np.float32)
        for r, row in enumerate(rows):
            for name, value in row.items():
                a, b, sa, sb = fh._place(name)
                for col, sign in ((a, sa), (b, sb)):
                    v = np.float32(sign * value)
                    expected[r, col] = expected[r, col] + np.sign(v) * np.log1p(abs(v)) / np.sqrt(2)
        assert np.array_equal(fh.matrix(rows), expected), seed


def test_feature_values_beyond_float32_stay_finite(student: CompactStudent) -> None:
    """Contracts accept any finite float; one past float32's range must squash, not overflow to inf/NaN."""
    fh = FeatureHasher(slots=8)
    m = fh.matrix([{"bytes": 1e39}, {"bytes": -1e300}, {"bytes": float(np.finfo(np.float32).max)}])
    assert np.isfinite(m).all() and np.array_equal(m[0], -m[1]) and np.array_equal(m[0], m[2])
    obs = Observation(text="1 failed", candidates=["read a.py", "stop"], features={"bytes": 1e39},
                      candidate_features=[{"size": 1e39}, {"size": 1.0}])
    (sample,) = student.act([obs], ["shell"], T1, generator=torch.Generator().manual_seed(0))
    ev = student.evaluate([obs], ["shell"], [sample.action])
    assert math.isfinite(sample.logprob)
    assert torch.isfinite(ev.logprobs).all() and torch.isfinite(ev.values).all()


def test_hashes_are_stable_across_processes() -> None:
    code = (
        "from aios_rl.policy.featurize import TextHasher, FeatureHasher;"
        "h = TextHasher(2**16, 3, 3.0, 8000, 4, 4);"
        "d = 'patch\\n--- a/m.py\\n+++ b/m.py\\n@@ -1 +1 @@\\n-a < b\\n+a <= b\\n';"
        "print(h.candidate(d).bag.ids.tolist(),"
        " FeatureHasher(64).matrix([{'tb_prox': 1.0}]).nonzero()[1].tolist())"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1 and outs.pop().startswith("[")
    assert stable_hash("abc") == 0x352441C2  # the standard crc32 check value: no per-run salt


def test_feature_scorer_scores_candidates_by_their_numeric_features_alone() -> None:
    """With the n-gram scorer silenced, only the feature scorer can tell identical texts apart by features."""
    obs_a = Observation(text="1 failed", candidates=["patch x", "patch y"],
                        candidate_features=[{"line_suspicion": 1.0}, {"line_suspicion": 0.0}])
    obs_b = obs_a.model_copy(update={"candidate_features": [{"line_suspicion": 0.0}, {"line_suspicion": 1.0}]})
    for enabled in (True, False):
        student = CompactStudent(CompactStudentConfig(buckets=256, feature_scorer=enabled, text_scorer=True))
        with torch.no_grad():
            student.scorer[-1].weight.zero_()
            student.scorer[-1].bias.zero_()
            logits = student([obs_a, obs_b], ["shell", "shell"]).logits
        if enabled:
            assert student.feature_head is not None
            assert torch.allclose(logits[0], logits[1].flip(0)) and not torch.allclose(logits[0, 0], logits[0, 1])
        else:
            assert student.feature_head is None and torch.count_nonzero(logits) == 0


def test_a_student_needs_at_least_one_scorer() -> None:
    with pytest.raises(ConfigError, match="text_scorer or feature_scorer"):
        CompactStudentConfig(text_scorer=False, feature_scorer=False)
    assert CompactStudent(CompactStudentConfig(buckets=256)).scorer is None  # default: features only


def test_a_second_files_headers_are_file_tokens_not_changed_code() -> None:
    body = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n"
            "+    return a + b\n--- a/other.py\n+++ b/other.py\n@@ -3 +3 @@\n-x = old\n+x = new\n")
    parts = _parse_diff(body)
    assert parts.file == _tokenize("calc.py calc.py other.py other.py")
    assert "other" not in parts.removed + parts.added + parts.context
    assert parts.removed == _tokenize("return a - b x = old")
    assert parts.added == _tokenize("return a + b x = new")
