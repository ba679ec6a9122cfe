"""What clients and the docs are shown of the catalog: plain data, no HTTP."""

from __future__ import annotations

from providers.catalog import CATEGORIES, OAUTH_OPTIONAL, Provider, Shape, catalog
from providers.identifiers import OAUTH
from providers.verification import can_verify

CATEGORY_TITLES = {
    "ai": "AI model providers",
    "developer": "Developer platforms",
    "messaging": "Messaging and mail",
    "commerce": "Commerce and CRM",
    "identity": "OAuth identity",
    "productivity": "Productivity",
}


def describe(provider: Provider) -> dict:
    """One provider as `GET /api/v1/providers` shows it: what a connect form needs."""
    return {
        "id": provider.id,
        "name": provider.name,
        "category": provider.category,
        "shapes": [
            {
                "keyType": shape.key_type,
                "required": sorted(shape.required),
                "optional": sorted(shape.optional),
                "verifiable": can_verify(provider, shape),
            }
            for shape in provider.shapes
        ],
    }


def describe_all() -> list[dict]:
    return [describe(provider) for provider in sorted(catalog().values(), key=lambda p: p.id)]


def _shape_text(shape: Shape) -> str:
    text = f"{shape.key_type}: " + ", ".join(f"`{name}`" for name in sorted(shape.required))
    if shape.key_type == OAUTH and shape.optional == OAUTH_OPTIONAL - shape.required:
        return text + " (+ the optional OAuth fields)"
    if shape.optional:
        return text + " (+ optional " + ", ".join(f"`{n}`" for n in sorted(shape.optional)) + ")"
    return text


def shapes_text() -> str:
    """Every catalog provider's credential shapes, one Markdown line each, for the OpenAPI
    document: what a schema cannot say of a body whose shape depends on its `service`."""
    return "\n".join(
        f"- `{provider.id}`: " + " | ".join(_shape_text(shape) for shape in provider.shapes)
        for provider in sorted(catalog().values(), key=lambda p: p.id)
    )


def _check_cell(provider: Provider) -> str:
    checks = []
    for shape in provider.shapes:
        check = shape.check
        if check is None:
            continue
        if not provider.per_customer:
            where = provider.base_url
        elif provider.api_host is not None and provider.api_host.field in shape.known:
            where = f"{provider.base_url_example} (the set's {provider.api_host.field})"
        else:
            where = f"{provider.base_url_example} (server-side URL)"
        text = f"`{check.method} {where}{check.path}`"
        if text not in checks:
            checks.append(text)
    return "<br>".join(checks) or "none: stored unverified"


def _shapes_cell(provider: Provider) -> str:
    return "; ".join(
        f"{shape.key_type}: " + ", ".join(f"`{name}`" for name in sorted(shape.required))
        for shape in provider.shapes
    )


def render_table() -> str:
    """docs/providers.md's provider table, generated from the catalog (no server-side overrides)."""
    providers = sorted(catalog().values(), key=lambda p: p.id)
    fixed = sum(1 for p in providers if not p.per_customer and any(s.check for s in p.shapes))
    lines = [
        f"{len(providers)} providers; {fixed} are verified at a fixed host, and the "
        f"{sum(1 for p in providers if p.per_customer)} with a per-customer host are verified "
        "once the operator sets their URL in `CREDVAULT_PROVIDER_BASE_URLS`.",
        "",
    ]
    for category in CATEGORIES:
        members = [p for p in providers if p.category == category]
        lines += [
            f"#### {CATEGORY_TITLES[category]}",
            "",
            "| id | provider | credential shapes (required keyNames) | check |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| `{p.id}` | {p.name} | {_shapes_cell(p)} | {_check_cell(p)} |" for p in members
        ]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
