"""Tests of the causal-LM student on a tiny random Qwen2 built locally (no download)."""

from __future__ import annotations

import math
import shutil
import time
import warnings
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from aios_rl.algos.trainer import Trainer
from aios_rl.contracts.episode import DecodingRegime, Observation
from aios_rl.contracts.errors import ConfigError, PolicyError
from aios_rl.policy.base import Policy
from aios_rl.policy.causal_lm import (
    CausalLMStudent,
    CausalLMStudentConfig,
    check_trainable,
    sampling_logprobs,
)
from aios_rl.policy.factory import build_policy, policy_spec
from aios_rl.policy.lm_prompt import (
    TRUNCATION_MARK,
    build_prompt_ids,
    candidate_response,
    is_json_action,
    parse_action_json,
    render_prompt,
    system_message,
    user_message,
)
from aios_rl.policy.tiny_lm import build_tiny_lm

ENV = "shell"
OBSERVATIONS = [
    Observation(text="FAILED test_mean: 2.5 != 3.0", candidates=["run pytest -q", "read stats.py", "stop"]),
    Observation(text="1 failed, 4 passed", candidates=['{"action": "read", "path": "a.py"}', "stop"]),
    Observation(text="all tests pass", candidates=["stop", "run pytest -q", "read the test file", "x"]),
]


def student(model_dir: Path, **overrides: object) -> CausalLMStudent:
    return CausalLMStudent(CausalLMStudentConfig(model_path=str(model_dir), **overrides))


def manual_token_logprobs(
    s: CausalLMStudent, obs: Observation, answer: list[int], with_candidates: bool, temperature: float = 1.0
) -> list[float]:
    """log p(answer token | prefix) from one unpadded forward pass over an independently built prompt."""
    messages = [
        {"role": "system", "content": system_message(ENV, with_candidates)},
        {"role": "user", "content": user_message(obs.text, obs.candidates if with_candidates else [])},
    ]
    text = s.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt = s.tokenizer(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = s.model(input_ids=torch.tensor([prompt + answer])).logits[0].float()  # (L, V)
    logp = torch.log_softmax(logits / temperature, dim=-1)
    positions = range(len(prompt) - 1, len(prompt) + len(answer) - 1)
    return [float(logp[t, tok]) for t, tok in zip(positions, answer)]


def test_tiny_lm_is_deterministic_and_offline(tmp_path: Path, model_dir: Path) -> None:
    other = build_tiny_lm(tmp_path / "same")
    changed = build_tiny_lm(tmp_path / "changed", seed=1)
    a, b, c = (student(d).model.get_input_embeddings().weight for d in (model_dir, other, changed))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    s = student(model_dir)
    assert s.hidden_size == 32
    text = "héllo ☃ {}"
    assert s.tokenizer.decode(s.tokenizer(text)["input_ids"]) == text  # byte-level BPE: nothing is UNK


def test_score_act_records_match_manual_forward(model_dir: Path) -> None:
    s = student(model_dir)
    samples = s.act(OBSERVATIONS, [ENV] * 3, DecodingRegime(), torch.Generator().manual_seed(0))
    for obs, sample in zip(OBSERVATIONS, samples):
        assert sample.index is not None and sample.action == obs.candidates[sample.index]
        answer = s.tokenizer(candidate_response(sample.action), add_special_tokens=False)["input_ids"]
        assert list(sample.token_ids) == answer + [s.tokenizer.eos_token_id]
        manual = manual_token_logprobs(s, obs, list(sample.token_ids), with_candidates=True)
        assert sample.token_logprobs == pytest.approx(manual, abs=1e-4)
        assert sample.loss_mask == (1,) * len(sample.token_ids)
        # The candidate distribution is the softmax of the candidates' summed answer log-probs.
        sums = []
        for c in obs.candidates:
            ids = s.tokenizer(candidate_response(c), add_special_tokens=False)["input_ids"] + [s.eos_id]
            sums.append(sum(manual_token_logprobs(s, obs, ids, with_candidates=True)))
        expected = torch.log_softmax(torch.tensor(sums, dtype=torch.float64), 0)
        assert sample.logprob == pytest.approx(float(expected[sample.index]), abs=1e-4)
        assert len(sample.hidden) == s.hidden_size


def test_score_act_equals_evaluate_at_unit_temperature(model_dir: Path) -> None:
    s = student(model_dir, forward_batch_size=2)  # rows of one observation span several chunks
    samples = s.act(OBSERVATIONS, [ENV] * 3, DecodingRegime(), torch.Generator().manual_seed(1))
    ev = s.evaluate(OBSERVATIONS, [ENV] * 3, [x.action for x in samples])
    assert ev.logprobs.shape == ev.entropy.shape == ev.values.shape == (3,)
    assert ev.candidate_logits.shape == ev.candidate_mask.shape == (3, 4)
    assert ev.candidate_mask.sum(1).tolist() == [3, 2, 4]
    assert ev.logprobs.tolist() == pytest.approx([x.logprob for x in samples], abs=1e-5)
    assert ev.entropy.tolist() == pytest.approx([x.entropy for x in samples], abs=1e-5)
    assert ev.values.tolist() == pytest.approx([x.value for x in samples], abs=1e-6)
    for row, sample in enumerate(samples):
        n = len(sample.token_ids)
        assert ev.token_mask[row].sum() == n
        assert ev.token_logprobs[row, :n].tolist() == pytest.approx(sample.token_logprobs, abs=1e-5)


def test_score_act_uses_the_regime(model_dir: Path) -> None:
    s = student(model_dir, length_normalize=True)
    regime = DecodingRegime(temperature=2.0)
    samples = s.act(OBSERVATIONS, [ENV] * 3, regime, torch.Generator().manual_seed(2))
    ev = s.evaluate(OBSERVATIONS, [ENV] * 3, [x.action for x in samples])
    for row, sample in enumerate(samples):
        real = ev.candidate_logits[row][ev.candidate_mask[row]].detach()  # padding entries are 0, not -inf
        tempered = torch.log_softmax(real / 2.0, 0)
        assert sample.logprob == pytest.approx(float(tempered[sample.index]), abs=1e-5)
    again = s.act(OBSERVATIONS, [ENV] * 3, regime, torch.Generator().manual_seed(2))
    assert again == samples  # same generator seed, same draws
    # length_normalize divides each candidate's summed log-prob by its answer's token count
    plain = student(model_dir).evaluate(OBSERVATIONS, [ENV] * 3, [x.action for x in samples])
    for row, obs in enumerate(OBSERVATIONS):
        counts = [len(s.tokenizer(candidate_response(c))["input_ids"]) + 1 for c in obs.candidates]  # + EOS
        normalised = ev.candidate_logits[row, : len(counts)].detach()
        expected = plain.candidate_logits[row, : len(counts)].detach() / torch.tensor(counts)
        assert torch.allclose(normalised, expected, atol=1e-5)


def test_sampling_logprobs_by_hand() -> None:
    logits = torch.tensor([0.5, 0.3, 0.2]).log()
    assert sampling_logprobs(logits, 1.0, 1.0).exp().tolist() == pytest.approx([0.5, 0.3, 0.2])
    assert sampling_logprobs(logits, 1.0, 0.6).exp().tolist() == pytest.approx([0.625, 0.375, 0.0])
    assert sampling_logprobs(logits, 1.0, 0.45).exp().tolist() == pytest.approx([1.0, 0.0, 0.0])
    hot = torch.tensor([0.5**0.5, 0.3**0.5, 0.2**0.5])
    assert sampling_logprobs(logits, 2.0, 1.0).exp().tolist() == pytest.approx((hot / hot.sum()).tolist())


def test_generate_records_match_manual_forward(model_dir: Path) -> None:
    s = student(model_dir, mode="generate", max_new_tokens=12)
    obs = [Observation(text="1 failed"), Observation(text="2 failed, 3 passed")]
    regime = DecodingRegime(temperature=0.7, top_p=1.0)
    samples = s.act(obs, [ENV] * 2, regime, torch.Generator().manual_seed(0))
    for o, sample in zip(obs, samples):
        ids = list(sample.token_ids)
        assert 1 <= len(ids) <= 12 and sample.loss_mask == (1,) * len(ids)
        text_ids = ids[:-1] if ids[-1] in s.stop_ids else ids
        assert sample.action == s.tokenizer.decode(text_ids, skip_special_tokens=False)
        manual = manual_token_logprobs(s, o, ids, with_candidates=False, temperature=0.7)
        assert sample.token_logprobs == pytest.approx(manual, abs=1e-4)
        assert sample.logprob == pytest.approx(sum(manual), abs=1e-3)
    # evaluate scores the recorded tokens under the untempered model
    ev = s.evaluate(obs, [ENV] * 2, [x.action for x in samples], [x.token_ids for x in samples])
    assert ev.candidate_logits.shape == (2, 0) and ev.candidate_mask.shape == (2, 0)
    for row, (o, sample) in enumerate(zip(obs, samples)):
        manual = manual_token_logprobs(s, o, list(sample.token_ids), with_candidates=False)
        n = len(manual)
        assert ev.token_logprobs[row, :n].tolist() == pytest.approx(manual, abs=1e-4)
        assert ev.token_mask[row].tolist() == [True] * n + [False] * (ev.token_mask.shape[1] - n)
        assert float(ev.logprobs[row].detach()) == pytest.approx(sum(manual), abs=1e-3)


def test_generate_learns_a_json_answer_and_stops(model_dir: Path) -> None:
    s = student(model_dir, mode="generate", max_new_tokens=24)
    obs, target = [Observation(text="all tests pass")], '{"action": "stop"}'
    [before] = s.act(obs, [ENV], DecodingRegime(top_p=0.01))
    assert parse_action_json(before.action) is None
    assert s.last_act_metrics["policy/non_json_frac"] == 1.0
    assert "policy/invalid_action_frac" not in s.last_act_metrics  # the environment decides what is invalid
    optimizer = torch.optim.Adam(s.parameters(), lr=3e-2)
    for _ in range(15):  # supervised warm-up: maximise log p(target + EOS)
        loss = -s.evaluate(obs, [ENV], [target]).logprobs.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    [sample] = s.act(obs, [ENV], DecodingRegime(top_p=0.01))  # a nucleus this small is greedy decoding
    assert sample.action == target and sample.token_ids[-1] == s.eos_id
    assert sample.logprob == 0.0  # every greedy token has probability 1 under the sampling distribution
    assert parse_action_json(sample.action) == {"action": "stop"}
    assert s.last_act_metrics["policy/non_json_frac"] == 0.0
    # The greedy answer is the canonical tokenization: evaluating from the text alone gives the same tokens.
    from_text = s.evaluate(obs, [ENV], [sample.action])
    from_ids = s.evaluate(obs, [ENV], [sample.action], [sample.token_ids])
    assert torch.equal(from_text.token_logprobs, from_ids.token_logprobs)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"action": "stop"}', {"action": "stop"}),
        ('```json\n{"action": "run", "cmd": "pytest -q"}\n```', {"action": "run", "cmd": "pytest -q"}),
        ('Sure! {"action": "read", "path": "a.py"} then I patch it.', {"action": "read", "path": "a.py"}),
        ('{"thought": "hm"} {"action": "stop"}', {"action": "stop"}),
        ('{"action": "patch", "at": {"line": 3}} {"action": "stop"}', {"action": "patch", "at": {"line": 3}}),
        ('{"action": "run", "cmd": "ls"', None),
        ("{'action': 'stop'}", None),
        ('{"cmd": "ls"}', None),
        ("no json here", None),
        ("", None),
    ],
)
def test_parse_action_json(text: str, expected: dict | None) -> None:
    assert parse_action_json(text) == expected


def test_candidate_response() -> None:
    assert candidate_response("pytest -q") == '{"action": "pytest -q"}'
    assert candidate_response('say "hi"') == '{"action": "say \\"hi\\""}'
    assert candidate_response('{"action": "read", "path": "a.py"}') == '{"action": "read", "path": "a.py"}'
    assert candidate_response('{"path": "a.py"}') == '{"action": "{\\"path\\": \\"a.py\\"}"}'


def test_long_observation_keeps_its_end(model_dir: Path) -> None:
    s = student(model_dir)
    text = "START " + " ".join(f"line{i}" for i in range(400)) + " THE-END"
    ids, truncated = build_prompt_ids(s.tokenizer, ENV, text, ["stop"], max_tokens=160)
    decoded = s.tokenizer.decode(ids)
    assert truncated and len(ids) <= 160
    assert "THE-END" in decoded and "START" not in decoded and TRUNCATION_MARK in decoded
    short, cut = build_prompt_ids(s.tokenizer, ENV, "short", ["stop"], max_tokens=160)
    assert not cut and "short" in s.tokenizer.decode(short)
    with pytest.raises(PolicyError, match="max_prompt_tokens"):
        build_prompt_ids(s.tokenizer, ENV, text, ["stop"], max_tokens=20)


def test_truncation_fits_whenever_the_mark_alone_fits(model_dir: Path) -> None:
    # Left-truncating non-ASCII text cuts characters between byte tokens; each cut decodes to U+FFFD, which
    # re-encodes to more tokens than were kept, so the shrink loop overshoots past every non-empty suffix.
    # A budget the truncation mark alone fits into must still give a prompt, never "needs N but max is >= N".
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    floor = len(render_prompt(tokenizer, ENV, TRUNCATION_MARK, ["stop"]))
    for text in ("\N{GRINNING FACE}" * 50, "\u65e5\u672c\u8a9e" * 50, "word " * 100):
        for budget in range(floor, floor + 6):
            ids, truncated = build_prompt_ids(tokenizer, ENV, text, ["stop"], max_tokens=budget)
            assert truncated and len(ids) <= budget
            assert TRUNCATION_MARK.strip() in tokenizer.decode(ids)


def checkpoint_round_trip(model_dir: Path, **config: object) -> dict[str, torch.Tensor]:
    trained = student(model_dir, **config)
    optimizer = torch.optim.Adam(trained.parameters(), lr=1e-2)
    for _ in range(3):
        ev = trained.evaluate(OBSERVATIONS, [ENV] * 3, ["stop", "stop", "stop"])
        optimizer.zero_grad()
        (-ev.logprobs.sum() + ev.values.pow(2).sum()).backward()
        optimizer.step()
    fresh = student(model_dir, **{**config, "seed": 7})
    before = fresh.evaluate(OBSERVATIONS, [ENV] * 3, ["stop"] * 3)
    expected = trained.evaluate(OBSERVATIONS, [ENV] * 3, ["stop"] * 3)
    assert not torch.allclose(before.logprobs, expected.logprobs, atol=1e-4)  # training changed something
    fresh.load_state_dict({k: v.clone() for k, v in trained.state_dict().items()})
    after = fresh.evaluate(OBSERVATIONS, [ENV] * 3, ["stop"] * 3)
    assert torch.allclose(after.logprobs, expected.logprobs, atol=1e-6)
    assert torch.allclose(after.values, expected.values, atol=1e-6)
    assert torch.allclose(after.token_logprobs, expected.token_logprobs, atol=1e-6)
    return trained.state_dict()


def test_checkpoint_round_trip_full_and_lora(model_dir: Path) -> None:
    full = checkpoint_round_trip(model_dir)
    lora = checkpoint_round_trip(model_dir, lora=True, lora_r=2)
    assert all("lora_" in k or k.startswith("value_head.") for k in lora)
    n_full, n_lora = (sum(t.numel() for t in state.values()) for state in (full, lora))
    assert n_lora < 0.15 * n_full
    with pytest.raises(PolicyError, match="does not fit"):
        student(model_dir).load_state_dict(lora)


def test_a_checkpoint_is_refused_on_another_model_at_its_model_path(tmp_path: Path) -> None:
    """A checkpoint records a fingerprint of its base model's config and tokenizer files; rebuilt on whatever
    is at model_path now, another model there silently took the LoRA adapters (or failed on shapes)."""
    model = build_tiny_lm(tmp_path / "model")
    trained = student(model, lora=True, lora_r=2)
    spec, state = policy_spec(trained), trained.state_dict()
    assert {"config.json", "tokenizer.json"} <= spec["base"].keys()
    assert not any(name.endswith(".safetensors") for name in spec["base"])  # the weights are never read
    build_policy(spec, source="checkpoint run-a:ckpt-0002").load_state_dict(state)  # the same model: loads
    old = {key: value for key, value in spec.items() if key != "base"}  # stored before fingerprints
    build_policy(old).load_state_dict(state)

    shutil.rmtree(model)
    build_tiny_lm(model, hidden_size=64)  # another architecture, the same tokenizer
    with pytest.raises(PolicyError, match="checkpoint run-a:ckpt-0002 was trained on another model") as wider:
        build_policy(spec, source="checkpoint run-a:ckpt-0002")
    assert str(model) in str(wider.value) and "config.json differs" in str(wider.value)
    assert "tokenizer.json" not in str(wider.value) and "put that model back" in str(wider.value)

    build_tiny_lm(model)  # the original again, then only the tokenizer replaced
    build_policy(spec).load_state_dict(state)
    shutil.copy(build_tiny_lm(tmp_path / "other-vocab", vocab_size=400) / "tokenizer.json", model)
    with pytest.raises(PolicyError, match="tokenizer.json differs") as retokenized:
        build_policy(spec)
    assert "config.json" not in str(retokenized.value)


def test_missing_model_is_never_downloaded(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="never downloads"):
        CausalLMStudent(CausalLMStudentConfig(model_path=str(tmp_path / "absent")))
    started = time.monotonic()
    with pytest.raises(PolicyError, match="never downloads"):
        CausalLMStudent(CausalLMStudentConfig(model_path="aios-rl-test/not-a-cached-model"))
    assert time.monotonic() - started < 5.0  # a cache miss fails at once: no network retries
    with pytest.raises(PolicyError, match="model_path is empty"):
        CausalLMStudent(CausalLMStudentConfig())


def test_lora_gradients_reach_adapters_not_base(model_dir: Path) -> None:
    s = student(model_dir, lora=True)
    trainable = list(s.parameters())
    assert {p.data_ptr() for p in trainable} == {t.data_ptr() for t in s.state_dict().values()}
    ev = s.evaluate(OBSERVATIONS, [ENV] * 3, ["stop"] * 3)
    (-ev.logprobs.sum() + ev.values.sum()).backward()
    named = dict(s.model.named_parameters())
    lora_b = [p for n, p in named.items() if "lora_B" in n]
    base = [p for n, p in named.items() if "lora_" not in n]
    assert lora_b and base
    # lora_B starts at 0, which makes lora_A's first gradient 0: B is where a gradient must show.
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in lora_b)
    assert all(not p.requires_grad and p.grad is None for p in base)
    assert s.value_head.weight.grad is not None and s.value_head.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("lora", [False, True])
def test_building_the_student_leaves_the_global_rng_alone(model_dir: Path, lora: bool) -> None:
    torch.manual_seed(123)
    before = torch.get_rng_state()
    built = student(model_dir, lora=lora)
    assert torch.equal(torch.get_rng_state(), before)
    assert built.vocab_size == built.model.get_output_embeddings().weight.shape[0] > 1  # RAIL's log|V|


def test_lora_wrap_shows_no_library_deprecation(model_dir: Path) -> None:
    # peft reads transformers' deprecated `is_gradient_checkpointing`; the user cannot act on that warning.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        student(model_dir, lora=True)
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]


def test_optimizer_steps_raise_target_candidate(model_dir: Path) -> None:
    s = student(model_dir, lora=True, lora_r=8)
    obs = OBSERVATIONS[:1]
    start = s.evaluate(obs, [ENV], ["stop"])
    target = int(start.candidate_logits[0].argmin())  # the least likely candidate
    action = obs[0].candidates[target]
    optimizer = torch.optim.Adam(s.parameters(), lr=1e-2)
    p_before = float(s.evaluate(obs, [ENV], [action]).logprobs.detach().exp())
    for _ in range(10):
        loss = -s.evaluate(obs, [ENV], [action]).logprobs.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    p_after = float(s.evaluate(obs, [ENV], [action]).logprobs.detach().exp())
    # Summed answer log-probs make the random model's candidate distribution very peaked (p_before ~ 1e-10).
    assert p_after > max(1000 * p_before, 0.25), (p_before, p_after)


def test_misuse_raises_policy_error(model_dir: Path) -> None:
    s = student(model_dir)
    assert isinstance(s, Policy)
    with pytest.raises(PolicyError, match="needs candidates"):
        s.act([Observation(text="x")], [ENV], DecodingRegime())
    with pytest.raises(PolicyError, match="not among"):
        s.evaluate(OBSERVATIONS[:1], [ENV], ["rm -rf /"])
    with pytest.raises(PolicyError, match="one per observation"):
        s.act(OBSERVATIONS, [ENV], DecodingRegime())
    assert CausalLMStudentConfig.model_validate(s.config_dict()) == s.config
    assert math.isfinite(s.act(OBSERVATIONS[:1], [ENV], DecodingRegime())[0].logprob)


def test_duplicate_candidates_are_one_action(model_dir: Path) -> None:
    s = student(model_dir)
    obs = [Observation(text="1 failed", candidates=["stop", "run pytest -q", "stop"])]
    ev = s.evaluate(obs, [ENV], ["stop"])
    logp = torch.log_softmax(ev.candidate_logits[0].detach(), 0)
    assert float(logp[0]) == pytest.approx(float(logp[2]), abs=1e-6)
    assert float(ev.logprobs[0].detach()) == pytest.approx(math.log(2) + float(logp[0]), abs=1e-5)
    generator = torch.Generator().manual_seed(0)
    draws = [s.act(obs, [ENV], DecodingRegime(), generator)[0] for _ in range(6)]
    stops = [d for d in draws if d.action == "stop"]
    assert stops and all(d.logprob == pytest.approx(float(ev.logprobs[0].detach()), abs=1e-5) for d in stops)


def test_score_mode_draws_distinct_candidates_for_a_group(model_dir: Path) -> None:
    s = student(model_dir)
    obs = [OBSERVATIONS[2]] * 4  # four candidates
    for seed in range(3):
        samples = s.act(obs, [ENV] * 4, DecodingRegime(), torch.Generator().manual_seed(seed), distinct=["t"] * 4)
        assert sorted(x.index for x in samples) == [0, 1, 2, 3]
        ev = s.evaluate(obs, [ENV] * 4, [x.action for x in samples])
        assert ev.logprobs.tolist() == pytest.approx([x.logprob for x in samples], abs=1e-5)
    plain = s.act(OBSERVATIONS, [ENV] * 3, DecodingRegime(), torch.Generator().manual_seed(1))
    grouped = s.act(OBSERVATIONS, [ENV] * 3, DecodingRegime(), torch.Generator().manual_seed(1), distinct=[None] * 3)
    assert [x.action for x in plain] == [x.action for x in grouped]  # no group: the same draws
    drawn: dict = {}  # a group's draws remembered across calls, as the runner's distinct="states" keeps them
    generator = torch.Generator().manual_seed(2)
    picks = [s.act([OBSERVATIONS[2]], [ENV], DecodingRegime(), generator, distinct=["t"], drawn=drawn)[0]
             for _ in range(4)]
    picks = [x.index for x in picks]
    assert sorted(picks) == [0, 1, 2, 3]


@pytest.mark.parametrize("answer", [
    '{"action": "stop"}', '```json\n{"action": "stop"}\n```', '  {"action": "stop"}\n',
    '{"action": "stop"} and then I', 'Sure: {"action": "stop"}', '{"action": "stop"}{"action": "stop"}',
    '{"action": ', '["stop"]', '{"act": "stop"}',
    '```{"action": "stop"}```', '```\n{"action": "stop"}```',  # a fence on one line is not stripped there
])
def test_an_answer_counts_as_one_json_action_exactly_when_the_shell_env_reads_it_so(answer: str) -> None:
    # Every case names a known action, so the env's verdict turns on the format alone: the rule the policy
    # counts by (whether the action itself is allowed only the environment can say).
    from aios_rl.envs.shell.actions import Invalid, parse_action

    assert is_json_action(answer) == (not isinstance(parse_action(answer), Invalid))


def test_lora_target_modules_accepts_one_module_name_as_a_string(model_dir: Path) -> None:
    # The field's contract is "names, or 'all-linear'": one name written as a plain string (YAML
    # `lora_target_modules: q_proj`) must put adapters on those modules, as the one-name tuple does.
    as_string = student(model_dir, lora=True, lora_target_modules="q_proj").state_dict()
    as_tuple = student(model_dir, lora=True, lora_target_modules=("q_proj",)).state_dict()
    assert as_string.keys() == as_tuple.keys()
    assert any("q_proj.lora_A" in k for k in as_string)


GREEDY = DecodingRegime(name="greedy", temperature=1e-4)  # campaign.evaluate.GREEDY: what temperature 0 runs


def flat_student(model_dir: Path, **overrides: object) -> CausalLMStudent:
    """A student whose LM head is zero: every next-token logit is 0, so every token ties with every other."""
    s = student(model_dir, **overrides)
    with torch.no_grad():
        s.model.get_output_embeddings().weight.zero_()
    return s


def test_greedy_scoring_is_an_argmax_with_ties_to_the_first_candidate(model_dir: Path) -> None:
    # Greedy evaluation must be deterministic: at a tiny temperature, candidates whose scores differ by less
    # than about the temperature (here: exactly equal) used to be drawn at random.
    s = flat_student(model_dir)
    obs = Observation(text="1 failed", candidates=["read c.py", "read b.py", "read d.py"])
    scores = s.evaluate([obs], [ENV], ["read b.py"]).candidate_logits[0].detach()
    assert float(scores.max() - scores.min()) < 1e-4  # near-ties (equal token counts under a flat head)
    first = int(scores.argmax())
    for seed in range(8):
        (sample,) = s.act([obs], [ENV], GREEDY, torch.Generator().manual_seed(seed))
        assert (sample.index, sample.logprob) == (first, 0.0)
        (grouped,) = s.act([obs], [ENV], GREEDY, torch.Generator().manual_seed(seed), distinct=["t"])
        assert grouped.index == first  # a greedy regime takes the argmax whatever the group drew


def test_greedy_generation_is_an_argmax_with_ties_to_the_first_token(model_dir: Path) -> None:
    s = flat_student(model_dir, mode="generate", max_new_tokens=6)
    obs = [Observation(text="1 failed")]
    runs = [s.act(obs, [ENV], GREEDY, torch.Generator().manual_seed(seed))[0] for seed in range(4)]
    assert all(r.token_ids == runs[0].token_ids for r in runs)
    assert runs[0].token_ids[0] == 0  # every logit is 0: the first token id wins
    assert runs[0].logprob == 0.0 and set(runs[0].token_logprobs) == {0.0}


@pytest.fixture(scope="module")
def short_context_dir(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GPT-2 (learned positions: 200 of them) with the tiny tokenizer, without chat template or pad
    token: a base model whose context is shorter than ``max_prompt_tokens``' default."""
    from transformers import GPT2Config, GPT2LMHeadModel

    path = tmp_path_factory.mktemp("tiny-gpt2")
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    tokenizer.chat_template, tokenizer.pad_token = None, None
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=200, n_embd=16, n_layer=1, n_head=2,
                        eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id)
    GPT2LMHeadModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    (path / "chat_template.jinja").unlink(missing_ok=True)
    return path


def test_a_long_observation_fits_the_models_context(short_context_dir: Path) -> None:
    # max_prompt_tokens (1024 by default) above the model's context used to index past the position table.
    long = "x = 1 + 2\n" * 300
    scored = student(short_context_dir)
    assert not scored.tokenizer.chat_template and scored.tokenizer.pad_token_id is None
    patch = '{"action": "patch", "path": "a.py", "old": "1", "new": "2"}'
    obs = Observation(text=long, candidates=["stop", patch])
    (sample,) = scored.act([obs], [ENV], DecodingRegime(), torch.Generator().manual_seed(0))
    ev = scored.evaluate([obs], [ENV], [sample.action])
    assert math.isclose(float(ev.logprobs[0].detach()), sample.logprob, abs_tol=1e-5)  # one prompt in both
    assert scored.last_act_metrics["policy/prompt_truncated_frac"] == 1.0

    writer = student(short_context_dir, mode="generate", max_new_tokens=8)
    generator = torch.Generator().manual_seed(0)
    (answer,) = writer.act([Observation(text=long)], [ENV], DecodingRegime(), generator)
    assert writer.last_act_metrics["policy/prompt_truncated_frac"] == 1.0
    again = writer.evaluate([Observation(text=long)], [ENV], [answer.action], token_ids=[answer.token_ids])
    assert math.isclose(float(again.logprobs[0].detach()), answer.logprob, abs_tol=1e-4)
    # a distillation target longer than max_new_tokens still fits beside its prompt
    target = '{"action": "patch", "path": "stats.py", "old": "range(n - 1)", "new": "range(n)"}' * 2
    assert writer.evaluate([Observation(text=long)], [ENV], [target]).token_mask.sum() > 8


def test_half_precision_trains_lora_adapters_only(model_dir: Path) -> None:
    # Adam's eps (1e-8) is 0 in float16, so a full float16 model's first step divided 0 by 0 wherever a
    # gradient was 0 (every unused embedding row): the weights turned NaN, and the next act() failed.
    # Refused for training only: a float16 full model stored earlier still loads to be evaluated.
    with pytest.raises(ConfigError, match="float16"):
        check_trainable(CausalLMStudentConfig(model_path=str(model_dir), dtype="float16"))
    with pytest.raises(ConfigError, match="float16"):
        Trainer(student(model_dir, dtype="float16"))
    for config in ({"dtype": "float16", "lora": True}, {"dtype": "bfloat16"}):
        s = student(model_dir, **config)
        optimizer = torch.optim.Adam(s.parameters(), lr=1e-2)  # as the Trainer steps
        ev = s.evaluate(OBSERVATIONS, [ENV] * 3, ["stop"] * 3)
        (-ev.logprobs.sum() + ev.values.pow(2).sum()).backward()
        optimizer.step()
        assert all(bool(p.isfinite().all()) for p in s.parameters())
        s.act(OBSERVATIONS, [ENV] * 3, DecodingRegime(), torch.Generator().manual_seed(0))
