"""`ablate verify`: every artifact of an output folder reloaded and checked."""
