"""Private matrix decompositions (scikit-learn's ``sklearn.decomposition`` names).

:class:`PCA` -- principal component analysis from a second-moment matrix released by the
Gaussian mechanism (Analyze Gauss, Dwork, Talwar, Thakurta & Zhang 2014) or, with ``delta=0``,
the Laplace mechanism (Dwork, McSherry, Nissim & Smith 2006; the SuLQ covariance perturbation of
Blum, Dwork, McSherry & Nissim 2005).
"""
from dpfast.decomposition._pca import PCA

__all__ = ["PCA"]
