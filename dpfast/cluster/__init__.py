"""Clustering under differential privacy (scikit-learn's ``sklearn.cluster`` names).

:class:`KMeans` -- DP-Lloyd (Blum, Dwork, McSherry & Nissim 2005; Su, Cao, Li, Bertino, Lin & Wang
2016) with a data-independent initialisation inside public bounds.
"""
from dpfast.cluster._kmeans import KMeans

__all__ = ["KMeans"]
