"""Notebook 08, diagnose your own cluster.
"""
