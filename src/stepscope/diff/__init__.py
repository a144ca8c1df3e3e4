"""Two runs -> deltas, a verdict and a CI gate (``compare.py``), from traces or ``analyze --json``
reports (``profile.py``, ``load.py``)."""
