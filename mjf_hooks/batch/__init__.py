"""One module per batch system: its environment and tools -> job facts."""
