"""The slots a machine offers: its devices, a slot per device (or CPU share), who holds which.

devices.py  which devices exist, `SlotSpec`, slots per device, the thread-safe lease
locks.py    a slot's lock file, held across processes (two campaigns, a pool host) per run

The worker process each slot gets is in `ablations.workers`, this machine's executor in
`ablations.local`, a work pool's hosts in `ablations.pool`.
"""
