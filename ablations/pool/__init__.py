"""A Prefect work pool's hosts: their slots, fenced attempts, results through the store.

host.py      a pool host's slots, leased across its flow-run processes
attempts.py  a run on a pool host: fenced attempts, heartbeat, results in the store
trust.py     what the campaign accepts back from the shared store
"""
