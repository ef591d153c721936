"""Study reports: tidy frames from an Optuna storage and self-contained plotly HTML."""
