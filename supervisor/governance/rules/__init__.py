"""The built-in shell rule families, one module each. A family reads one
simple command (its program, its arguments, and where its words point) and
returns the sentence that explains a denial to the model, or None."""
