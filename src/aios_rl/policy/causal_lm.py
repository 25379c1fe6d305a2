"""The causal-LM student: any local Hugging Face ``AutoModelForCausalLM`` as a policy (ARCHITECTURE §7).

Two ways to act, chosen by ``CausalLMStudentConfig.mode``:

- ``"score"``: the observation's candidates are listed in the prompt and each candidate's answer text
  (:func:`~aios_rl.policy.lm_prompt.candidate_response`, followed by the EOS token) is scored by its
  summed token log-probability after the prompt. Those scores are the logits of a distribution over
  candidates, sampled with the regime's temperature and top-p. ``ActionSample.action`` is the candidate.
- ``"generate"``: the model writes its answer token by token (temperature/top-p) until EOS or
  ``max_new_tokens``. ``ActionSample.action`` is the raw generated text, whether or not it parses: the
  environment parses it and reports an invalid action (where ``reward.invalid_action_penalty`` applies)
  when it cannot; the shell environment wants one JSON object and nothing else (a code fence aside), as the
  system message asks, and the student counts answers by that rule
  (:func:`~aios_rl.policy.lm_prompt.is_json_action`). Keeping the raw text is what lets
  :meth:`CausalLMStudent.evaluate` re-score exactly what was sampled.

Below ``greedy_temperature`` (a greedy regime, such as evaluation's at temperature 0) both modes take the
argmax instead of sampling, the first of tied maxima (lowest candidate position or token id), with sampling
log-probability 0, as the compact student does; ``distinct`` groups change nothing then.

Token records (``token_ids`` / ``token_logprobs`` / ``loss_mask``) hold the answer tokens only, EOS
included; the prompt is rebuilt from the observation. ``loss_mask`` is therefore all ones here.

A value head (one ``Linear``) reads the last hidden state of the prompt's final token. With ``lora=True``
only the LoRA adapters (peft) and the value head train, and only they are in ``state_dict``; the base weights
come from ``model_path`` again on loading, so a checkpoint records the fingerprint of that model's config and
tokenizer files (:data:`BASE_FILES`) and is refused on another model there (:func:`check_base`).

The model stays in eval mode (dropout off) so ``act`` and ``evaluate`` compute the same function; PPO's
importance ratio would otherwise carry dropout noise.
"""

from __future__ import annotations

import hashlib
import logging
import warnings
from collections.abc import Hashable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from huggingface_hub import snapshot_download
from pydantic import Field
from torch import Tensor, nn
from transformers import AutoModelForCausalLM, AutoTokenizer

from aios_rl.contracts.config import ConfigModel
from aios_rl.contracts.episode import DecodingRegime, Observation
from aios_rl.contracts.errors import PolicyError
from aios_rl.policy.base import ActionSample, Evaluation, float16_untrainable
from aios_rl.policy.lm_prompt import build_prompt_ids, candidate_response, is_json_action
from aios_rl.policy.sampling import draw_indices

__all__ = [
    "BASE_FILES",
    "CausalLMStudentConfig",
    "CausalLMStudent",
    "base_fingerprint",
    "check_base",
    "greedy_logprobs",
    "sampling_logprobs",
]

logger = logging.getLogger(__name__)

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

# What a checkpoint records of the model it was trained on: the architecture (config.json) and the tokenizer
# with its chat template, in any of the layouts transformers saves. Never the weight files (gigabytes): a
# full-model checkpoint holds its own weights, and LoRA adapters fit only a base of the same architecture and
# tokenizer. Other weights with the same config and tokenizer (another fine-tune of one base) pass unnoticed.
BASE_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "tokenizer.model",
    "spiece.model",
    "chat_template.jinja",
    "chat_template.json",
)


class CausalLMStudentConfig(ConfigModel):
    """Settings of :class:`CausalLMStudent`."""

    model_path: str = Field(
        default="",
        description="Local model directory, or a model id already in the Hugging Face cache (no download).",
    )
    mode: Literal["score", "generate"] = Field(
        default="score", description="score: rank the observation's candidates; generate: write a JSON action"
    )
    max_new_tokens: int = Field(default=64, gt=0, description="generate mode: most answer tokens per action.")
    max_prompt_tokens: int = Field(
        default=1024,
        gt=0,
        description="Longest prompt; longer observations lose their beginning. Less where the model's "
        "context (max_position_embeddings) would not hold the prompt and its answer.",
    )
    length_normalize: bool = Field(
        default=False,
        description="score mode: divide each candidate's summed log-prob by its token count",
    )
    lora: bool = Field(default=False, description="Train LoRA adapters (peft) instead of the full model.")
    lora_r: int = Field(default=8, gt=0, description="LoRA rank.")
    lora_alpha: float = Field(default=16.0, gt=0.0, description="LoRA scaling numerator (scale = alpha / r).")
    lora_dropout: float = Field(
        default=0.0, ge=0.0, lt=1.0, description="LoRA dropout (inactive: the model stays in eval mode)."
    )
    lora_target_modules: str | tuple[str, ...] = Field(
        default="all-linear",
        description="Modules that get adapters: names (one name may be a plain string), or 'all-linear' "
        "(every Linear but the LM head).",
    )
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        default="float32",
        description="Weights dtype of the language model (the value head stays float32); float16 only with "
        "lora (the adapters train in float32).",
    )
    device: str = Field(
        default="cpu",
        pattern=r"^(cpu|auto|cuda(:\d+)?)$",
        description="cpu, cuda[:N], or auto (cuda when available).",
    )
    forward_batch_size: int = Field(
        default=16, gt=0, description="Prompt+answer sequences per forward pass; lower it to save memory."
    )
    greedy_temperature: float = Field(
        default=1e-3,
        gt=0.0,
        description="act() takes the argmax (first on ties; logprob 0) when the regime's temperature is "
        "below this.",
    )
    seed: int = Field(default=0, description="Seed of the LoRA adapter initialisation.")


def check_trainable(config: CausalLMStudentConfig) -> None:
    """Refuse settings a fresh student could not train with, before anything is built. A stored student
    with them still loads (``shell eval`` of an old checkpoint); :class:`~aios_rl.algos.trainer.Trainer`
    refuses to train it.

    Raises:
        ConfigError: dtype float16 without LoRA.
    """
    if config.dtype == "float16" and not config.lora:
        raise float16_untrainable(stored=False)


@dataclass(frozen=True)
class _RowScores:
    """Per-token scores of N (prompt, answer) rows, answers left-aligned and padded to R tokens."""

    token_logprobs: Tensor  # (N, R) log p(answer token | prefix), 0 where masked
    token_mask: Tensor  # (N, R) bool, True on answer tokens
    token_entropy: Tensor  # (N, R) entropy of the next-token distribution, 0 where masked
    prompt_hidden: Tensor  # (N, H) float32, last layer at the prompt's final token


@dataclass(frozen=True)
class _CandidateTable:
    """Score mode: every candidate answer of B observations, one row each, and the (B, C) view of them."""

    scores: _RowScores  # N rows = all candidates of all observations, in order
    answers: list[list[int]]  # N answer token ids (text + EOS)
    logits: Tensor  # (B, C) candidate scores, 0 at padding
    mask: Tensor  # (B, C) bool, True on real candidates
    first_row: Tensor  # (B,) long, row of each observation's first candidate
    truncated: list[bool]  # B, the prompt lost the start of its observation text


def sampling_logprobs(logits: Tensor, temperature: float, top_p: float) -> Tensor:
    """Log-probabilities of the temperature-scaled, nucleus-filtered distribution over the last dim.

    Entries outside the nucleus are ``-inf``; the rest are renormalised. The most likely entry is always
    kept, so the result is a proper distribution for any ``top_p > 0``.

    Args:
        logits: unnormalised scores, shape ``(..., V)``.
        temperature: softmax temperature, > 0.
        top_p: nucleus mass in (0, 1]; 1 keeps everything.

    Returns:
        Float32 log-probabilities, shape ``(..., V)``.
    """
    # Holtzman et al. 2019, nucleus sampling, https://arxiv.org/abs/1904.09751
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    if top_p >= 1.0:
        return logp
    sorted_logp, order = logp.sort(dim=-1, descending=True)
    sorted_p = sorted_logp.exp()
    outside = sorted_p.cumsum(-1) - sorted_p >= top_p  # the mass before this entry already reached top_p
    drop = torch.zeros_like(outside).scatter(-1, order, outside)
    kept = logp.masked_fill(drop, float("-inf"))
    return kept - torch.logsumexp(kept, dim=-1, keepdim=True)


def greedy_logprobs(logits: Tensor) -> Tensor:
    """Log-probabilities of the greedy choice over the last dim: 0 at the argmax (the first of tied maxima),
    ``-inf`` elsewhere. Float32, same shape as ``logits``."""
    out = torch.full(logits.shape, float("-inf"), dtype=torch.float32, device=logits.device)
    return out.scatter_(-1, logits.float().argmax(-1, keepdim=True), 0.0)


def resolve_model_dir(model_path: str) -> Path:
    """The local directory holding ``model_path``: the path itself, or its Hugging Face cache snapshot."""
    never = "aios-rl never downloads models: copy one there, or build a tiny one with aios_rl.policy.tiny_lm"
    if not model_path:
        raise PolicyError(f"CausalLMStudentConfig.model_path is empty; {never}")
    local = Path(model_path).expanduser()
    if local.is_dir():
        return local
    try:
        # local_files_only: a cache miss raises instead of reaching the network.
        return Path(snapshot_download(model_path, local_files_only=True))
    except (OSError, ValueError) as exc:  # LocalEntryNotFoundError is an OSError, a bad repo id a ValueError
        raise PolicyError(
            f"model {model_path!r} is neither a local directory nor in the Hugging Face cache ({exc}); "
            f"{never}"
        ) from exc


def base_fingerprint(model_dir: Path) -> dict[str, str]:
    """Hex sha256 of the bytes of each of :data:`BASE_FILES` that ``model_dir`` holds, by file name.

    Raises:
        PolicyError: one of them cannot be read.
    """
    fingerprint = {}
    for name in BASE_FILES:
        path = model_dir / name
        if path.is_file():
            try:
                fingerprint[name] = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError as exc:
                raise PolicyError(f"cannot read {path} to fingerprint the model: {exc}") from exc
    return fingerprint


def check_base(config: CausalLMStudentConfig, stored: Mapping[str, str], source: str) -> None:
    """Refuse to rebuild a stored student on another model than the one it was trained on.

    Args:
        config: the stored student's config; its ``model_path`` is where the model is looked for now.
        stored: the :func:`base_fingerprint` recorded when the student was built.
        source: what stored it, as the message names it (``"checkpoint RUN:ID"``).

    Raises:
        PolicyError: a file of :data:`BASE_FILES` differs, is gone or is new, naming each one.
    """
    model_dir = resolve_model_dir(config.model_path)
    now = base_fingerprint(model_dir)
    changed = [name for name in sorted(stored.keys() | now.keys()) if stored.get(name) != now.get(name)]
    if not changed:
        return
    what = ", ".join(
        f"{name} {'is new' if name not in stored else 'is gone' if name not in now else 'differs'}"
        for name in changed
    )
    raise PolicyError(
        f"{source} was trained on another model than the one now at {model_dir}: the files of its "
        f"architecture or tokenizer changed ({what}), and its weights fit only the model they were trained "
        f"on; put that model back at {config.model_path}, or train a new run on this one"
    )


def _pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise PolicyError(f"device {name!r} requested but CUDA is not available; use device='cpu' or 'auto'")
    return torch.device(name)


class CausalLMStudent:
    """A Hugging Face causal LM as a :class:`~aios_rl.policy.base.Policy`.

    Attributes:
        config: the settings it was built with.
        model: the language model (a peft model when ``config.lora``).
        tokenizer: its tokenizer.
        value_head: ``Linear(hidden_size, 1)`` on the prompt's final hidden state, float32.
        hidden_size: width of the model's hidden state (length of ``ActionSample.hidden``).
        base_fingerprint: :func:`base_fingerprint` of the model directory it was built from; stored with its
            checkpoints (``policy.factory.policy_spec``), compared when one is rebuilt (:func:`check_base`).
        last_act_metrics: ``policy/*`` fractions from the latest ``act`` call (``non_json_frac``: answers
            that are not one JSON action, whether or not the environment takes them; which actions it
            refused is the rollout ledger's ``rollout/invalid_actions``; ``answer_truncated_frac``: answers
            cut at ``max_new_tokens``; ``prompt_truncated_frac``), also logged as a warning; the rollout
            runner averages them into each epoch's metrics line (``rollout.budget.ActMetrics``).

    Example:
        >>> student = CausalLMStudent(CausalLMStudentConfig(model_path="/models/tiny"))  # doctest: +SKIP
        >>> obs = Observation(text="1 failed", candidates=["run pytest -q", "stop"])
        >>> student.act([obs], ["shell"], DecodingRegime())  # doctest: +SKIP
    """

    def __init__(self, config: CausalLMStudentConfig) -> None:
        self.config = config
        self.device = _pick_device(config.device)
        model_dir = resolve_model_dir(config.model_path)
        self.base_fingerprint = base_fingerprint(model_dir)
        # Building the student leaves the global RNG as it was (as the compact student does): a trainer that
        # has just restored a checkpoint's RNG state keeps it when a reference copy is built after it.
        with torch.random.fork_rng(devices=[]):
            try:
                self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
                model = AutoModelForCausalLM.from_pretrained(
                    model_dir, local_files_only=True, dtype=_DTYPES[config.dtype]
                )
            except (OSError, ValueError) as exc:
                raise PolicyError(
                    f"could not load a causal LM and tokenizer from {model_dir}: {exc}"
                ) from exc
            text_config = model.config.get_text_config()
            self.hidden_size: int = text_config.hidden_size
            # the most positions a sequence may use (GPT-2's learned table has no more); None: no limit given
            self.context: int | None = getattr(text_config, "max_position_embeddings", None)
            # what token entropies span (RAIL's log|V|)
            self.vocab_size: int = int(model.get_output_embeddings().weight.shape[0])
            if config.lora:
                model = self._wrap_lora(model)
            self.model = model.to(self.device).eval()
            self.value_head = nn.Linear(self.hidden_size, 1).to(self.device)
        nn.init.zeros_(self.value_head.weight)  # values start at 0: no arbitrary initial bias in advantages
        nn.init.zeros_(self.value_head.bias)
        self.eos_id = self._eos_id()
        self.stop_ids = self._stop_ids()
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.eos_id
        self.last_act_metrics: dict[str, float] = {}

    # ------------------------------------------------------------------ Policy protocol

    def act(
        self,
        observations: Sequence[Observation],
        environments: Sequence[str],
        regime: DecodingRegime,
        generator: torch.Generator | None = None,
        distinct: Sequence[Hashable | None] | None = None,
        drawn: MutableMapping[Hashable, set[str]] | None = None,
    ) -> list[ActionSample]:
        """Choose one action per observation (see the module docstring for the two modes).

        Args:
            observations: what each environment shows; score mode needs candidates in every one.
            environments: environment id per observation (named in the system message).
            regime: temperature and top-p; below ``config.greedy_temperature`` the argmax is taken (first on
                ties) with logprob 0.
            generator: CPU generator for reproducible sampling; None uses torch's global RNG.
            distinct: score mode: a group id per observation; rows of one group draw distinct candidates
                while their distributions have mass left (``policy.sampling.draw_indices``). Generate mode
                writes free text, so its rows always draw independently.
            drawn: score mode: the actions each ``distinct`` group drew in earlier calls (excluded too;
                updated in place).

        Returns:
            One :class:`ActionSample` per observation; ``logprob`` and ``token_logprobs`` are under the
            sampling distribution, ``entropy`` under the untempered one.

        Raises:
            PolicyError: mismatched lengths, a score-mode observation without candidates, or a prompt
                that cannot fit ``max_prompt_tokens``.
        """
        _check_lengths(observations, environments=environments)
        if not observations:
            return []
        with torch.no_grad():
            if self.config.mode == "score":
                return self._act_score(observations, environments, regime, generator, distinct, drawn)
            return self._act_generate(observations, environments, regime, generator)

    def evaluate(
        self,
        observations: Sequence[Observation],
        environments: Sequence[str],
        actions: Sequence[str],
        token_ids: Sequence[Sequence[int] | None] | None = None,
        loss_mask: Sequence[Sequence[int] | None] | None = None,
    ) -> Evaluation:
        """Re-score recorded actions with gradients.

        In score mode ``logprobs`` is the log-probability of the action in the (untempered) candidate
        distribution — normalised against the other candidates, so it is not the sum of
        ``token_logprobs`` — and ``entropy`` is that distribution's entropy; ``extras["token_entropy"]``
        holds the mean token entropy of the chosen answer. In generate mode ``logprobs`` is the sum of
        ``token_logprobs``, ``entropy`` the mean token entropy, and the candidate tensors have C = 0.

        Args:
            observations: the recorded observations.
            environments: environment id per observation.
            actions: the recorded action texts (a candidate in score mode, the raw answer in generate mode).
            token_ids: generate mode: the recorded ``ActionSample.token_ids`` per row. Pass them: re-encoding
                the decoded text may give other tokens than were sampled (BPE has many tokenizations of a
                string) and an answer cut at ``max_new_tokens`` has no EOS. Rows given None are encoded
                from the action text plus EOS. Ignored in score mode, whose answers are canonical.
            loss_mask: generate mode: the recorded ``ActionSample.loss_mask`` per row (one entry per token of
                that row's ``token_ids``); tokens marked 0 add nothing to ``logprobs``, ``entropy`` or
                ``token_mask``. None (or a None row) trains every token. Ignored in score mode.

        Returns:
            An :class:`Evaluation`; ``token_logprobs``/``token_mask`` are ``(B, T)`` over answer tokens.

        Raises:
            PolicyError: mismatched lengths, or a score-mode action that is not one of its candidates.
        """
        _check_lengths(observations, environments=environments, actions=actions)
        if not observations:
            raise PolicyError("evaluate got an empty batch; pass at least one (observation, action) pair")
        if token_ids is not None:
            _check_lengths(observations, token_ids=token_ids)
        if loss_mask is not None:
            _check_lengths(observations, loss_mask=loss_mask)
        if self.config.mode == "score":
            return self._evaluate_score(observations, environments, actions)
        return self._evaluate_generate(observations, environments, actions, token_ids, loss_mask)

    def parameters(self) -> Iterator[nn.Parameter]:
        """The trainable parameters: LoRA adapters (the whole model without LoRA) and the value head."""
        yield from (p for p in self.model.parameters() if p.requires_grad)
        yield from self.value_head.parameters()

    def state_dict(self) -> dict[str, Tensor]:
        """The trainable parameters by name (detached references, like ``nn.Module.state_dict``).

        With LoRA this is the adapters and the value head only, so checkpoints stay small; the frozen base
        weights come from ``model_path`` again when loading.
        """
        return {name: p.detach() for name, p in self._trainable().items()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Copy a :meth:`state_dict` into this student's parameters, in place.

        Raises:
            PolicyError: missing or unexpected keys (e.g. a LoRA checkpoint into a full-model student) or
                a shape mismatch.
        """
        params = self._trainable()
        missing, unexpected = sorted(params.keys() - state.keys()), sorted(state.keys() - params.keys())
        if missing or unexpected:
            raise PolicyError(
                f"state dict does not fit this student (lora={self.config.lora}): "
                f"{len(missing)} missing keys {missing[:3]}, "
                f"{len(unexpected)} unexpected keys {unexpected[:3]}"
            )
        bad = [k for k, p in params.items() if tuple(state[k].shape) != tuple(p.shape)]
        if bad:
            raise PolicyError(
                f"state dict shapes differ from this model's at {bad[:3]}: "
                f"{[tuple(state[k].shape) for k in bad[:3]]} vs {[tuple(params[k].shape) for k in bad[:3]]}"
            )
        with torch.no_grad():
            for key, param in params.items():
                param.copy_(state[key])

    def config_dict(self) -> dict[str, Any]:
        """The config as JSON-ready values (rebuild with ``CausalLMStudentConfig.model_validate``)."""
        return self.config.model_dump(mode="json")

    def _trainable(self) -> dict[str, nn.Parameter]:
        params = {f"model.{name}": p for name, p in self.model.named_parameters() if p.requires_grad}
        params.update({f"value_head.{name}": p for name, p in self.value_head.named_parameters()})
        return params

    # ------------------------------------------------------------------ acting

    def _act_score(
        self,
        observations: Sequence[Observation],
        environments: Sequence[str],
        regime: DecodingRegime,
        generator: torch.Generator | None,
        distinct: Sequence[Hashable | None] | None,
        drawn: MutableMapping[Hashable, set[str]] | None = None,
    ) -> list[ActionSample]:
        table = self._candidate_table(observations, environments)
        logp = _masked_log_softmax(table.logits, table.mask)  # (B, C)
        entropy = -(logp.exp() * logp).masked_fill(~table.mask, 0.0).sum(-1)  # (B,)
        values = self.value_head(table.scores.prompt_hidden[table.first_row]).squeeze(-1)  # (B,)
        samplings = [  # (C_b,) per row
            self._sampling(table.logits[b, : len(obs.candidates)], regime)
            for b, obs in enumerate(observations)
        ]
        rows = [sampling.exp() for sampling in samplings]  # without groups: one draw per row, as _sample does
        indices = draw_indices(rows, [obs.candidates for obs in observations], distinct, generator, drawn)
        samples = []
        for b, (obs, sampling, index) in enumerate(zip(observations, samplings, indices)):
            # A candidate listed twice is one action: its probability is the sum over its positions.
            same = torch.tensor([c == obs.candidates[index] for c in obs.candidates], device=self.device)
            row = int(table.first_row[b]) + index
            answer = table.answers[row]
            hidden = table.scores.prompt_hidden[row]  # (H,)
            samples.append(ActionSample(
                action=obs.candidates[index],
                index=index,
                logprob=float(sampling.masked_fill(~same, float("-inf")).logsumexp(0)),
                entropy=float(entropy[b]),
                value=float(values[b]),
                hidden=tuple(hidden.tolist()),
                token_ids=tuple(answer),
                token_logprobs=tuple(table.scores.token_logprobs[row, : len(answer)].tolist()),
                loss_mask=(1,) * len(answer),
            ))
        self.last_act_metrics = {"policy/prompt_truncated_frac": sum(table.truncated) / len(observations)}
        return samples

    def _act_generate(
        self,
        observations: Sequence[Observation],
        environments: Sequence[str],
        regime: DecodingRegime,
        generator: torch.Generator | None,
    ) -> list[ActionSample]:
        room = [self.config.max_new_tokens] * len(observations)
        prompts, truncated = self._prompts(observations, environments, False, answer_room=room)
        # One observation at a time: no left padding, so every prompt is exactly what evaluate sees.
        samples = [self._generate_one(prompt, regime, generator) for prompt in prompts]
        non_json = sum(not is_json_action(s.action) for s in samples)
        cut = sum(s.token_ids is not None and s.token_ids[-1] not in self.stop_ids for s in samples)
        if non_json or cut:
            logger.warning(
                "causal LM student: %d of %d answers are not one JSON action, %d hit max_new_tokens=%d",
                non_json, len(samples), cut, self.config.max_new_tokens,
            )
        n = len(observations)
        self.last_act_metrics = {
            "policy/non_json_frac": non_json / n,
            "policy/answer_truncated_frac": cut / n,
            "policy/prompt_truncated_frac": sum(truncated) / n,
        }
        return samples

    def _generate_one(
        self, prompt: list[int], regime: DecodingRegime, generator: torch.Generator | None
    ) -> ActionSample:
        out = self.model(
            input_ids=torch.tensor([prompt], device=self.device), use_cache=True, output_hidden_states=True
        )
        hidden = out.hidden_states[-1][0, -1].float()  # (H,)
        tokens: list[int] = []
        token_logprobs: list[float] = []
        entropies: list[float] = []
        for _ in range(self.config.max_new_tokens):
            next_logits = out.logits[0, -1]  # (V,)
            logp = torch.log_softmax(next_logits.float(), dim=-1)
            entropies.append(float(-(logp.exp() * logp).sum()))
            sampling = self._sampling(next_logits, regime)  # (V,)
            token = _sample(sampling, generator)
            tokens.append(token)
            token_logprobs.append(float(sampling[token]))
            if token in self.stop_ids:
                break
            next_input = torch.tensor([[token]], device=self.device)  # (1, 1)
            out = self.model(input_ids=next_input, cache=out.cache, use_cache=True)
        text_tokens = tokens[:-1] if tokens[-1] in self.stop_ids else tokens
        # Special tokens stay in the text so that encoding it again gives them back.
        return ActionSample(
            action=self.tokenizer.decode(
                text_tokens, skip_special_tokens=False, clean_up_tokenization_spaces=False
            ),
            index=None,
            logprob=sum(token_logprobs),
            entropy=sum(entropies) / len(entropies),
            value=float(self.value_head(hidden)),
            hidden=tuple(hidden.tolist()),
            token_ids=tuple(tokens),
            token_logprobs=tuple(token_logprobs),
            loss_mask=(1,) * len(tokens),
        )

    def _sampling(self, logits: Tensor, regime: DecodingRegime) -> Tensor:
        """The regime's sampling log-probabilities over ``logits`` (1-D): an argmax below
        ``config.greedy_temperature`` (a tiny temperature would still draw among near-tied entries)."""
        if regime.temperature < self.config.greedy_temperature:
            return greedy_logprobs(logits)
        return sampling_logprobs(logits, regime.temperature, regime.top_p)

    # ------------------------------------------------------------------ evaluating

    def _evaluate_score(
        self, observations: Sequence[Observation], environments: Sequence[str], actions: Sequence[str]
    ) -> Evaluation:
        table = self._candidate_table(observations, environments)
        match = torch.zeros_like(table.mask)  # (B, C) positions holding the recorded action string
        for b, (obs, action) in enumerate(zip(observations, actions)):
            hits = [k for k, c in enumerate(obs.candidates) if c == action]
            if not hits:
                raise PolicyError(
                    f"score mode: action {action[:80]!r} of row {b} is not among its "
                    f"{len(obs.candidates)} candidates, so its candidate log-prob is undefined"
                )
            match[b, hits] = True
        logp = _masked_log_softmax(table.logits, table.mask)  # (B, C)
        chosen = table.first_row + match.int().argmax(-1)  # (B,) row of the first matching candidate
        token_mask = table.scores.token_mask[chosen]  # (B, R)
        return Evaluation(
            logprobs=logp.masked_fill(~match, float("-inf")).logsumexp(-1),
            entropy=-(logp.exp() * logp).masked_fill(~table.mask, 0.0).sum(-1),
            values=self.value_head(table.scores.prompt_hidden[table.first_row]).squeeze(-1),
            candidate_logits=table.logits,
            candidate_mask=table.mask,
            token_logprobs=table.scores.token_logprobs[chosen],
            token_mask=token_mask,
            extras={"token_entropy": _masked_mean(table.scores.token_entropy[chosen], token_mask)},
        )

    def _evaluate_generate(
        self,
        observations: Sequence[Observation],
        environments: Sequence[str],
        actions: Sequence[str],
        token_ids: Sequence[Sequence[int] | None] | None,
        loss_mask: Sequence[Sequence[int] | None] | None,
    ) -> Evaluation:
        recorded = token_ids if token_ids is not None else [None] * len(actions)
        answers = [list(ids) if ids is not None else self._answer_ids(a) for ids, a in zip(recorded, actions)]
        if any(not a for a in answers):
            raise PolicyError("evaluate: a recorded answer has no tokens; token_ids rows must be non-empty")
        # A sampled answer has at most max_new_tokens, so its prompt is the one act built; only a longer
        # (distillation) target takes more room from the prompt.
        room = [max(self.config.max_new_tokens, len(a)) for a in answers]
        prompts, _ = self._prompts(observations, environments, False, answer_room=room)
        scores = self._score_rows(list(zip(prompts, answers)))
        trained = self._trained_tokens(loss_mask, answers, scores.token_mask.shape[1])  # (B, R)
        mask = scores.token_mask & trained  # (B, R)
        batch = len(observations)
        return Evaluation(
            logprobs=scores.token_logprobs.masked_fill(~mask, 0.0).sum(-1),
            entropy=_masked_mean(scores.token_entropy, mask),
            values=self.value_head(scores.prompt_hidden).squeeze(-1),
            candidate_logits=torch.zeros((batch, 0), device=self.device),
            candidate_mask=torch.zeros((batch, 0), dtype=torch.bool, device=self.device),
            token_logprobs=scores.token_logprobs.masked_fill(~mask, 0.0),
            token_mask=mask,
        )

    def _trained_tokens(
        self, loss_mask: Sequence[Sequence[int] | None] | None, answers: Sequence[Sequence[int]], width: int
    ) -> Tensor:
        """(B, width) bool: the recorded loss mask of each answer, True everywhere for rows without one."""
        out = torch.ones((len(answers), width), dtype=torch.bool)  # (B, R)
        for b, (row, answer) in enumerate(zip(loss_mask or [None] * len(answers), answers)):
            if row is None:
                continue
            if len(row) != len(answer):
                raise PolicyError(
                    f"evaluate: row {b} has {len(answer)} answer tokens but a loss mask of {len(row)} "
                    "entries; pass the loss_mask recorded with those token_ids"
                )
            out[b, : len(row)] = torch.tensor([bool(m) for m in row], dtype=torch.bool)
        return out.to(self.device)

    # ------------------------------------------------------------------ shared pieces

    def _prompts(
        self,
        observations: Sequence[Observation],
        environments: Sequence[str],
        with_candidates: bool,
        answer_room: Sequence[int],
    ) -> tuple[list[list[int]], list[bool]]:
        """Prompt ids and whether each was truncated; score mode insists on candidates. Each prompt leaves
        ``answer_room`` of the model's context free for its answer tokens."""
        if with_candidates:
            empty = [i for i, obs in enumerate(observations) if not obs.candidates]
            if empty:
                raise PolicyError(
                    f"score mode needs candidates, but observations {empty[:5]} have none; "
                    "use mode='generate' for environments without candidate actions"
                )
        built = [
            self._prompt_ids(env, obs.text, obs.candidates if with_candidates else (), room)
            for obs, env, room in zip(observations, environments, answer_room, strict=True)
        ]
        return [ids for ids, _ in built], [cut for _, cut in built]

    def _prompt_ids(
        self, environment: str, text: str, candidates: Sequence[str], answer_tokens: int
    ) -> tuple[list[int], bool]:
        """One prompt, within ``max_prompt_tokens`` and within what the model's context leaves beside an
        answer of ``answer_tokens`` (a longer sequence would index past a learned position table)."""
        limit = self.config.max_prompt_tokens
        if self.context is None or self.context - answer_tokens >= limit:
            return build_prompt_ids(self.tokenizer, environment, text, candidates, limit)
        try:
            room_left = self.context - answer_tokens
            return build_prompt_ids(self.tokenizer, environment, text, candidates, room_left)
        except PolicyError as exc:
            raise PolicyError(
                f"{exc} (the limit here is the model's context of {self.context} positions, "
                f"max_position_embeddings, less {answer_tokens} answer tokens: lower max_new_tokens or "
                "env.max_candidates, or use a model with a longer context)"
            ) from exc

    def _answer_ids(self, text: str) -> list[int]:
        """Tokens of an answer as the model would end it: the text, then EOS."""
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"]) + [self.eos_id]

    def _candidate_table(
        self, observations: Sequence[Observation], environments: Sequence[str]
    ) -> _CandidateTable:
        """Score every candidate answer of every observation and gather them into (B, C) logits."""
        answers = [[self._answer_ids(candidate_response(c)) for c in obs.candidates] for obs in observations]
        room = [max((len(a) for a in row), default=0) for row in answers]
        prompts, truncated = self._prompts(observations, environments, True, answer_room=room)
        rows, first_row = [], []
        for prompt, row in zip(prompts, answers, strict=True):
            first_row.append(len(rows))
            rows.extend((prompt, answer) for answer in row)
        scores = self._score_rows(rows)
        totals = scores.token_logprobs.sum(-1)  # (N,) summed answer log-probs
        if self.config.length_normalize:
            totals = totals / scores.token_mask.sum(-1)
        counts = [len(obs.candidates) for obs in observations]
        logits = torch.zeros((len(observations), max(counts)), device=self.device)  # (B, C); padding stays 0
        mask = torch.zeros_like(logits, dtype=torch.bool)  # (B, C)
        for b, (start, count) in enumerate(zip(first_row, counts)):
            logits[b, :count] = totals[start : start + count]
            mask[b, :count] = True
        first = torch.tensor(first_row, device=self.device)  # (B,)
        return _CandidateTable(scores, [answer for _, answer in rows], logits, mask, first, truncated)

    def _score_rows(self, rows: Sequence[tuple[Sequence[int], Sequence[int]]]) -> _RowScores:
        """Token log-probs, entropies and prompt hidden states of (prompt, answer) rows, in chunks."""
        width = max(len(answer) for _, answer in rows)
        size = self.config.forward_batch_size
        parts = [self._score_chunk(rows[i : i + size], width) for i in range(0, len(rows), size)]
        if len(parts) == 1:
            return parts[0]
        return _RowScores(
            token_logprobs=torch.cat([p.token_logprobs for p in parts]),
            token_mask=torch.cat([p.token_mask for p in parts]),
            token_entropy=torch.cat([p.token_entropy for p in parts]),
            prompt_hidden=torch.cat([p.prompt_hidden for p in parts]),
        )

    def _score_chunk(self, rows: Sequence[tuple[Sequence[int], Sequence[int]]], width: int) -> _RowScores:
        n = len(rows)
        length = max(len(p) + len(a) for p, a in rows)
        ids = torch.full((n, length), self.pad_id, dtype=torch.long)  # (n, L), right-padded
        attention = torch.zeros((n, length), dtype=torch.long)  # (n, L)
        for i, (prompt, answer) in enumerate(rows):
            ids[i, : len(prompt) + len(answer)] = torch.tensor([*prompt, *answer])
            attention[i, : len(prompt) + len(answer)] = 1
        ids, attention = ids.to(self.device), attention.to(self.device)
        out = self.model(input_ids=ids, attention_mask=attention, output_hidden_states=True, use_cache=False)
        prompt_len = torch.tensor([len(p) for p, _ in rows], device=self.device)  # (n,)
        answer_len = torch.tensor([len(a) for _, a in rows], device=self.device)  # (n,)
        offsets = torch.arange(width, device=self.device)  # (R,)
        mask = offsets[None, :] < answer_len[:, None]  # (n, R)
        # The logits at position t predict token t + 1, so answer token k is scored at prompt_len - 1 + k;
        # padded slots point at the prompt's last position (any valid index works; they are masked).
        last_prompt = prompt_len[:, None] - 1  # (n, 1)
        positions = torch.where(mask, last_prompt + offsets[None, :], last_prompt)  # (n, R)
        row = torch.arange(n, device=self.device)[:, None]  # (n, 1)
        logp = torch.log_softmax(out.logits[row, positions].float(), dim=-1)  # (n, R, V)
        targets = ids[row, positions + 1]  # (n, R)
        token_logprobs = logp.gather(-1, targets[..., None]).squeeze(-1)  # (n, R)
        entropy = -(logp.exp() * logp).sum(-1)  # (n, R)
        return _RowScores(
            token_logprobs=token_logprobs.masked_fill(~mask, 0.0),
            token_mask=mask,
            token_entropy=entropy.masked_fill(~mask, 0.0),
            prompt_hidden=out.hidden_states[-1][row.squeeze(1), prompt_len - 1].float(),  # (n, H)
        )

    def _wrap_lora(self, model: nn.Module) -> nn.Module:
        from peft import LoraConfig, get_peft_model  # peft only when asked for: it is slow to import

        target = self.config.lora_target_modules
        # peft reads any string but "all-linear" as a regular expression that must match a WHOLE module path,
        # so one name given as a string ("q_proj") would match nothing: it goes in as a one-name list.
        modules = target if target == "all-linear" else [target] if isinstance(target, str) else list(target)
        lora = LoraConfig(
            r=self.config.lora_r,
            lora_alpha=self.config.lora_alpha,
            lora_dropout=self.config.lora_dropout,
            target_modules=modules,
            task_type="CAUSAL_LM",
        )
        # peft draws the A matrices from torch's global RNG: seed it locally for reproducible adapters.
        # peft itself reads transformers' deprecated `is_gradient_checkpointing` (a FutureWarning the user
        # can do nothing about); that one warning is silenced here, every other one still shows.
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            torch.manual_seed(self.config.seed)
            try:
                return get_peft_model(model, lora)
            except ValueError as exc:
                raise PolicyError(f"LoRA target modules {target!r} do not fit this model: {exc}") from exc

    def _eos_id(self) -> int:
        eos = self.tokenizer.eos_token_id
        if eos is None:
            raise PolicyError(
                f"the tokenizer at {self.config.model_path!r} has no EOS token, so answers cannot end; "
                "set eos_token in its tokenizer_config.json"
            )
        return int(eos)

    def _stop_ids(self) -> frozenset[int]:
        """EOS plus the generation config's end tokens (chat models often list end-of-turn there too)."""
        extra = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        extra_ids = [] if extra is None else [extra] if isinstance(extra, int) else list(extra)
        return frozenset([self.eos_id, *extra_ids])


def _sample(logprobs: Tensor, generator: torch.Generator | None) -> int:
    """Index drawn from ``exp(logprobs)`` (1-D), on the CPU so a CPU generator works with any device."""
    return int(torch.multinomial(logprobs.exp().cpu(), 1, generator=generator))


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Row means (B,) of ``values`` (B, T) over ``mask``; 0 for an empty row."""
    return (values * mask).sum(-1) / mask.sum(-1).clamp_min(1)


# algos.losses.masked_log_softmax, restated: policy/ sits left of algos/ in the import chain.
def _masked_log_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """Log-softmax over the valid entries of the last dim, 0 at invalid ones."""
    filled = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
    return torch.log_softmax(filled, dim=-1).masked_fill(~mask, 0.0)


def _check_lengths(observations: Sequence[Observation], **others: Sequence[Any]) -> None:
    bad = {name: len(seq) for name, seq in others.items() if len(seq) != len(observations)}
    if bad:
        raise PolicyError(f"got {len(observations)} observations but lengths {bad}; pass one per observation")
