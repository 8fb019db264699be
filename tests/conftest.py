"""Hypothesis profiles: ``quick`` (CI, default) and ``thorough``.

Select with the environment variable ``POLYVERIFY_PROFILE=thorough``.
"""
import os

from hypothesis import HealthCheck, settings

settings.register_profile("quick", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("POLYVERIFY_PROFILE", "quick"))
