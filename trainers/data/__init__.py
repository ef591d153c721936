"""Tasks: Long Range Arena (generated ListOps, release files) and synthetic recall."""
