"""Renderers: each output format is one module with a ``RENDERER``, listed in ``registry.py``."""
