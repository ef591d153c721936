"""The truth of a study's space: every configuration trained on several seeds (``table``, built by
``build``), what it says (``python -m benchmarks.truth``), and search strategies replayed on it."""
