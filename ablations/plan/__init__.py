"""The plan: its documented sections, the model, reading it, variants and run ids."""
