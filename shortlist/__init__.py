"""Shortlist: which environments can GRPO actually improve my model on?"""
