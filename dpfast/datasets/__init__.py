"""Data sets shipped with dpfast (dpfast's design notes: only demos, tests and benchmarks import it)."""
from dpfast.datasets._adult import load_adult

__all__ = ["load_adult"]
