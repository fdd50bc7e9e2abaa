"""Offloading wrapper layers and the machinery behind their backward."""

from kswap.layers.offload import Offload

__all__ = ["Offload"]
