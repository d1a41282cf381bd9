"""Renderers: Summary and bench rows to rich tables, Markdown, CSV and JSON. Nothing here reads files."""
