"""Prefect tasks: each a thin, named, retried wrapper over one `ablations` call."""
