"""Where runs run: devices and slots, a worker process per slot, the local executor, hosts."""
