"""Evaluations of memory quality (LoCoMo retrieval recall)."""
