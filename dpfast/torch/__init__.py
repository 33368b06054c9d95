"""DP-SGD for your own PyTorch model (issue 25; in progress).

Optional extra ``dpfast[torch]`` (torch >= 2.2).  Importing ``dpfast`` never imports torch.
"""
from dpfast.torch._fast_layers import FAST_LAYERS  # placeholder export until the engine lands

__all__ = ["FAST_LAYERS"]
