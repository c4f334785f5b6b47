"""One run's training: the driver, stop rules, memory, the process's warm-up."""
