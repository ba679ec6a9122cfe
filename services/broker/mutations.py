"""A brokered call to a provider's GraphQL endpoint, judged by the operations it may execute:
a mutation that the catalog lists as creating, revealing or widening a credential is refused
unless the grant names it in `graphql`; every other operation passes under the grant's path.
What the request selects is read by providers/graphql_operations.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from providers.catalog import Provider
from providers.graphql_operations import InvalidGraphQLRequest, selected_mutations
from services.broker.paths import ProxyPath
from services.exceptions import InvalidGraphQL, SensitiveEndpointRefused
from services.storage.queries import GrantedSet


class Request(Protocol):
    """What of the agent's request is read: its headers (lower-case names), query string and
    body (`call.ProxyRequest`)."""

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def query(self) -> str: ...

    @property
    def body(self) -> bytes: ...


def refuse_sensitive_mutations(
    *, provider: Provider, found: GrantedSet, path: ProxyPath, request: Request
) -> None:
    """InvalidGraphQL for a request on the provider's GraphQL endpoint that is not a GraphQL
    request credvault can read; SensitiveEndpointRefused, naming the mutation, for one that
    selects a listed mutation the grant does not name. Nothing for any other request."""
    endpoint = provider.graphql
    if endpoint is None or not endpoint.serves(path.text):
        return
    try:
        selected = selected_mutations(
            body=request.body,
            content_type=request.headers.get("content-type", ""),
            query=request.query,
        )
    except InvalidGraphQLRequest as exc:
        raise InvalidGraphQL(f"Not a GraphQL request credvault can read: {exc}") from None
    refused = endpoint.refused(selected, named=found.graphql)
    if refused is not None:
        raise SensitiveEndpointRefused(
            f"The GraphQL mutation {refused.mutation} creates, reveals or widens a credential "
            f'({refused.why}): the grant must name it ("graphql": ["{refused.mutation}"]).'
        )
