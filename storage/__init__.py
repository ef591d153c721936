"""Optuna storage factory: one URL (SQLite by default, PostgreSQL on a cluster) to a storage."""
