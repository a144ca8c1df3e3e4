"""The advisor: analysis results -> findings (bottleneck, evidence, cause, change, saving).

``engine.advise`` evaluates the rules of ``data/advisor_rules.yaml`` (and users' files) over the
signals of each rank (``signals.py``); ``finding.py`` holds the frozen records.
"""
