"""selena: reproducible network experiments on Xen with time dilation."""

__version__ = "0.1.0"
