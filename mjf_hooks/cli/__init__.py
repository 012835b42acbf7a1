"""Entry points. Hook entry points stay click-free (the start-up budget, README "The contract")."""
