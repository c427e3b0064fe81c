"""Record (or predict) what the backend had to do for regions of a PyTorch program."""

from .region import Region, explain, explain_steady, save

__all__ = ["Region", "explain", "explain_steady", "save"]
