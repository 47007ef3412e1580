"""Muninn's ingest side: read Matrix, refuse what must never be indexed, write and read the index.

`ingest` never imports `bot`.
"""
