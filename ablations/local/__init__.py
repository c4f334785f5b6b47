"""This machine's executor: a worker process per slot for one campaign.

executor.py  `LocalSlots`: runs, preflight, probe and the results step on this machine's slots
"""
