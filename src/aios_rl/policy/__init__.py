"""Policy implementations: the compact text student (CPU default) and the Hugging Face causal-LM student."""
