"""The soak: a compressed day of operation of the platform on its own local cluster.

``make soak`` (or ``python -m bench.soak``) runs it; docs/soak.md says what it does and
which invariants it checks.
"""
