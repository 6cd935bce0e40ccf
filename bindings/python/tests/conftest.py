import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from hypothesis import settings

settings.register_profile("ci", max_examples=200, deadline=None)
settings.register_profile("dev", max_examples=100, deadline=None)
# A long search before a release: HYPOTHESIS_PROFILE=long pytest
settings.register_profile("long", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
