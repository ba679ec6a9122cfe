"""The benchmark server's settings: credvault's own, with the URLconf of `scripts.bench_urls`,
which adds the baseline `/bench/baseline`. Only `make bench` serves them."""

from credvault.settings import *  # noqa: F403

ROOT_URLCONF = "scripts.bench_urls"
