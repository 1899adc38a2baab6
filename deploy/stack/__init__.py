"""The local stack (deploy/local-cluster, deploy/local-idp): what runs where, declared once.

Standard library only: bash scripts run it with the system python3, before any virtualenv.
"""
