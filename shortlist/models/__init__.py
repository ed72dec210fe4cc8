"""The trainee's model: where it comes from, checked before it loads (config.py), the offline tiny
model (tiny.py), the trainee's shape with random weights for benchmarks (shapes.py), and every private
internal of transformers the project leans on: generate()'s, a config's revision (hf_internals.py)."""
