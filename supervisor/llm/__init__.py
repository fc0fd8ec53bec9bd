"""Model providers behind one protocol (see base.py)."""
