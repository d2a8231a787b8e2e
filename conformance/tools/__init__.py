"""What `ort-conformance` reads back: bundles, diffs, found.md."""
