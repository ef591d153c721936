"""The training precisions a run may choose, in a module without torch: the command line offers them
before it imports torch."""

PRECISIONS = ("fp32", "bf16")  # fp32, or bf16 autocast (``trainers.train.TrainConfig.precision``)
