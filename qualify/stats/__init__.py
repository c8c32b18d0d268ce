"""Statistics that more than one stage judges with."""
