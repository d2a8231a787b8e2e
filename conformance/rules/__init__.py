"""The pure decisions made before and after a check: applicability, waivers, strict rules."""
