"""`ablate probe`: each variant's step time and memory at a few batch sizes."""
