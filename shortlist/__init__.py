"""Shortlist: which environments can GRPO improve a model on? (see README.md)"""
