"""pytest's side of the kit, and the only package that imports pytest. The entry point is conformance.plugin.hooks.hooks."""
