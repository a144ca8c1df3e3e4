"""Planner: search parallel and memory strategies, predict memory, step time and MFU."""
