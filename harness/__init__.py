"""servegate's harness: build arms, fire load, sample memory, and gate head against base."""
