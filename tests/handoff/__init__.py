"""Handoff graphs and their parts."""
