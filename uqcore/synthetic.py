"""Synthetic datasets of the papers with their true predictive distributions."""
