"""The one door to Kubernetes: names, apply, prune, watch, error classes.

It knows Kubernetes and nothing of teams or jobs; the apps import it, never the other way.
"""
