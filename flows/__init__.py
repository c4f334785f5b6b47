"""Prefect flows: they only sequence and fan out tasks."""
