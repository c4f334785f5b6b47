"""The slots a machine offers: its devices, a slot per device (or CPU share), who holds which.

devices.py  which devices exist, `SlotSpec`, slots per device, the thread-safe lease

The worker process each slot gets is in `ablations.workers`, this machine's executor in
`ablations.local`, a work pool's hosts in `ablations.pool`.
"""
