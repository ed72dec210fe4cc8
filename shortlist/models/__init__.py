"""The trainee's model: where it comes from, checked before it loads (config.py), the offline tiny
model (tiny.py), and the trainee's shape with random weights for benchmarks (shapes.py)."""
