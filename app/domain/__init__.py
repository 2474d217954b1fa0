"""The pure domain: who holds which band of which weight, what it costs, and what moves.

Nothing here imports a web framework, a template engine or a schema library
(`tests/domain/test_purity.py` checks it), so the model can be read, tested and reused alone.
"""
