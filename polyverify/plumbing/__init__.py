"""The bottom layer: command-line conventions, signals, the proof child, exact rational parsing.

Nothing here imports any other part of the project (``tests/polyverify/test_layers.py`` checks
it), so every package may import it.
"""
