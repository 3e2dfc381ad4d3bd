"""Renderings of an Inspection: Rich terminal, JSON, Markdown."""
