"""Drawing completions as GRPO draws them: the Sampler (sampling.py), the fast decoder and its
self-check (engine.py; its decode step's attention: decode_attention.py), and torch.compile's caches
(compile_cache.py). The private internals of transformers it leans on are models/hf_internals.py's,
where a model's revision is read too."""
