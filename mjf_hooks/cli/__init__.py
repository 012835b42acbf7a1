"""Entry points. Hook entry points stay click-free (start-up budget, DESIGN.md)."""
