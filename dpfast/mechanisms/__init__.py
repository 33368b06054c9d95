"""Differentially private mechanisms with vectorized NumPy inputs (spec ``mechanisms.md``).

One module per family; everything public is re-exported here and at ``dpfast``'s top level.
"""
