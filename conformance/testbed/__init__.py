"""What the kit runs against: the EP, its models, its tensors, its memory, its interop."""
