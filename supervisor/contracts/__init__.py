"""Outcome contracts: checks, runtime evaluation, drafting seams."""
