"""Analysis of a campaign's run records: paired-seed effects and classification errors.

Import from the modules (`paired`, `flips`, `verdicts`, the looks' `sequential` and `looks`):
this package imports none of them, so the looks, which every `ablate` command and slot worker
uses, do not pull in pandas and scipy's statistics with the rest.
"""
