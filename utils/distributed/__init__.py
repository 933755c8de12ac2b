"""Distributed training: who this process is (DistContext). See context.py."""
from utils.distributed.context import DistContext

__all__ = ["DistContext"]
