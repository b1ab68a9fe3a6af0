"""Model descriptions, weight loading and tokenization: everything about a model but compute."""
