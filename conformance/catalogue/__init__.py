"""The catalogue as data: YAML with positions, its schemas, the contracts, their claims, the Markdown catalogue."""
