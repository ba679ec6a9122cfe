"""credvault's URLs, with the benchmark's baseline tried first: `/bench/baseline`, the health
view behind the whole middleware stack and the URL resolver.

`/bench/naive/...` is the proxy benchmark's naive forwarder.

`/healthz` itself is answered before the host check and the rest of the stack, for probes
that send an IP as the Host. Measured against it, every endpoint's ratio would
fall without any endpoint getting slower; this view costs what `/healthz` cost when the
benchmark's targets were set (docs/performance.md).
"""

import os

import requests
from django.http import HttpResponse
from django.urls import path

from credvault.urls import handler400, handler403, handler404, handler500, urlpatterns
from services.api import health


def naive_forward(request, rest: str) -> HttpResponse:
    """The proxy benchmark's naive forwarder (scripts/bench_proxy.py): `requests.get` to the
    upstream, a new connection each call, nothing checked, nothing audited."""
    answer = requests.get(f"{os.environ['CREDVAULT_BENCH_UPSTREAM']}/{rest}", timeout=30)
    return HttpResponse(answer.content, status=answer.status_code)


urlpatterns = [
    path("bench/baseline", health.healthz),
    path("bench/naive/<path:rest>", naive_forward),
    *urlpatterns,
]

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]
