"""Preflight: the data check and the restart check, across two processes."""
