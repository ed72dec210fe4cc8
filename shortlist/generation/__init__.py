"""Drawing completions as GRPO draws them: the Sampler (sampling.py), the fast decoder and its
self-check (engine.py), transformers' private internals it leans on (hf_internals.py), and
torch.compile's caches (compile_cache.py)."""
