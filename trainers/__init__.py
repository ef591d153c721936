"""Attention families, models, data, the training loop and its costs."""

# First, before anything imports torch: it reads the user's compile cache, which importing torch._dynamo overwrites.
import common.outputs  # noqa: F401
