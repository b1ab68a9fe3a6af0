"""What a measurement is and what a result holds: the metric catalogue and the saved results."""
