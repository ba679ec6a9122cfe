"""credvault's URLs, with the benchmark's baseline tried first: `/bench/baseline`, the health
view behind the whole middleware stack and the URL resolver.

`/healthz` itself is answered before the host check and the rest of the stack, for probes
that send an IP as the Host (CONTRACT 14). Measured against it, every endpoint's ratio would
fall without any endpoint getting slower; this view costs what `/healthz` cost when the
benchmark's targets were set (docs/performance.md).
"""

from django.urls import path

from credvault.urls import handler400, handler403, handler404, handler500, urlpatterns
from services.api import health

urlpatterns = [path("bench/baseline", health.healthz), *urlpatterns]

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]
