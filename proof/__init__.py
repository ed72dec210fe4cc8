"""The proof: commit Shortlist's predictions, train each family with GRPO + LoRA, test them."""
