"""Declarative search spaces over DAMCHA knobs (filled by the pipeline work).

Knob names are the fields of ``trainers.config.ModelConfig``: one flat name is the model
field, the Optuna parameter and the report column.
"""
