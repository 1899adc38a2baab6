"""gpuctl: the command-line client of the GPU Platform REST API (see docs/api.md)."""

__version__ = "0.1.0"
