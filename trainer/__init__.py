"""Loupe's trainer: Django-free, reads a snapshot file (JSONL), writes an HF checkpoint dir.

Run it as ``python -m trainer {sft,dpo,rl,eval,serve,demos} ...`` (see cli.py and README.md).
Imports are kept out of this module so ``python -m trainer --help`` starts fast.
"""
