"""A tiny randomly initialised causal LM and its tokenizer, built locally (no download).

Tests, the demo and the benchmarks need a real Hugging Face model directory that loads through
``AutoModelForCausalLM`` / ``AutoTokenizer`` exactly like a downloaded one, without network access.
:func:`build_tiny_lm` trains a byte-level BPE tokenizer on a small built-in corpus (every byte stays
encodable, so no text is ever out of vocabulary), gives it a ChatML chat template, creates a 2-layer Qwen2
model with tiny dimensions, and saves both with ``save_pretrained``.

Note: ``AutoTokenizer`` loads the saved tokenizer as ``Qwen2Tokenizer`` (the config's model type), which
keeps the trained vocabulary and merges but pre-tokenizes the Qwen way (digits split one by one). That is
the tokenizer every caller sees, so it is the one that counts.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from aios_rl.policy.lm_prompt import system_message

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_lm"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

# ChatML, as Qwen2 instruct models use it; <|im_end|> closes the assistant's turn and is the EOS token.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_CORPUS = (
    system_message("shell", with_candidates=True),
    system_message("browser", with_candidates=False),
    '{"action": "run", "cmd": "pytest -q"}',
    '{"action": "read", "path": "src/module.py"}',
    '{"action": "patch", "path": "stats.py", "old": "range(n - 1)", "new": "range(n)"}',
    '{"action": "stop"}',
    "Candidate actions:\n1. run tests\n2. read the failing file\n3. stop",
    "FAILED tests/test_stats.py::test_mean - AssertionError: assert 2.5 == 3.0\n1 failed, 4 passed in 0.12s",
    "def mean(values):\n    return sum(values) / len(values)\n",
    "click button 'Submit'; fill textbox 'Email' with 'a@example.com'; next page",
)


def _train_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on the built-in corpus, wrapped for ``transformers``."""
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes: nothing is out of vocabulary
        show_progress=False,
    )
    raw.train_from_iterator(list(_CORPUS) * 4, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def build_tiny_lm(
    path: str | Path,
    *,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 4,
    vocab_size: int = 512,
    max_positions: int = 2048,
    init_std: float = 0.1,
    seed: int = 0,
) -> Path:
    """Build a tiny random Qwen2 causal LM plus tokenizer and save both to ``path``.

    The result loads with ``AutoModelForCausalLM.from_pretrained(path, local_files_only=True)`` and
    ``AutoTokenizer.from_pretrained(path, local_files_only=True)``. The same arguments give the same
    weights; the global torch RNG is left untouched.

    Args:
        path: directory to write (created if missing).
        hidden_size: model width; must be divisible by ``num_heads``.
        num_layers: transformer blocks.
        num_heads: attention heads (key/value heads are half as many, as in Qwen2's grouped attention).
        vocab_size: BPE vocabulary target, at least 259 (256 bytes + 3 special tokens).
        max_positions: longest sequence (prompt + answer) the model accepts.
        init_std: standard deviation of the initial weights. Larger than Hugging Face's 0.02 on purpose:
            with tied embeddings that small and a normalised final hidden state, logits span barely one
            nat, so LoRA adapters (which cannot touch the embeddings) could hardly change any probability.
        seed: seed of the weight initialisation.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Example:
        >>> model_dir = build_tiny_lm(tmp_path / "tiny-lm")  # doctest: +SKIP
        >>> CausalLMStudent(CausalLMStudentConfig(model_path=str(model_dir)))  # doctest: +SKIP
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = _train_tokenizer(vocab_size)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=max(1, num_heads // 2),
        max_position_embeddings=max_positions,
        initializer_range=init_std,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
