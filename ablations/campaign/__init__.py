"""The campaign's machinery: its output folder, registration, steps, executor protocol, gate."""
