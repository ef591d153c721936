"""Named studies: a registry of frozen study definitions run by ``python -m studies.run``."""
