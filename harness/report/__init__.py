"""What a person reads: the A/B report, its tables and plots, the terminal, saved results."""
