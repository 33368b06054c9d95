"""dpfast: fast, correct differential privacy."""
from dpfast import random  # noqa: F401

__version__ = "0.1.0"
