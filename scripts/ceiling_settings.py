"""credvault's settings, with the URLconf of the benchmark's hand-built ceiling
(scripts/ceiling.py). Only `python -m scripts.bench --ceiling` starts a server with them."""

from credvault.settings import *  # noqa: F403

ROOT_URLCONF = "scripts.ceiling"
