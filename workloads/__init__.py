"""Workloads: the programs that run under the profilers (``python -m profctl.workloads.attention``)."""
