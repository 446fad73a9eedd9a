"""Tuning a LoRA adapter on the user's own data: runs in their own process, the data, the estimate."""
