"""A provider's GraphQL endpoint: the mutations on it that create, reveal or widen a credential,
and which of them a request selects, read with the reference parser (graphql-core), never with
patterns.

A request on the endpoint's paths is read as one GraphQL request or a batch (a JSON body, an
`application/graphql` body, a `query` parameter); what is refused as `InvalidGraphQLRequest`,
the limits (MAX_GRAPHQL_BATCH, MAX_GRAPHQL_TOKENS) and which operations and mutations count are
told in docs/providers.md#graphql-providers, their reasons in docs/decisions.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from graphql import GraphQLError
from graphql.language import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
)
from graphql.language.parser import Parser

from providers.sensitive import path_covers

GRAPHQL_KEYS = {"paths", "docs", "sensitive"}
MUTATION_KEYS = {"mutation", "why", "docs"}
REQUEST_MEMBERS = {"query", "operationName", "variables", "extensions"}
# A GraphQL name (the spec's Name token).
NAME_PATTERN = r"^[_A-Za-z][_0-9A-Za-z]*$"
MAX_NAME_CHARS = 128
_NAME = re.compile(NAME_PATTERN)
# Every document of one request together: at most this many tokens (the parser counts
# comments too). Far above what a client's largest generated query holds (a few thousand),
# and about a tenth of a second of parsing at worst, whatever the body's size.
MAX_GRAPHQL_TOKENS = 20_000
# Requests in one batch: ten times what batching clients send at most by default (Apollo's
# BatchHttpLink and gql: 10), so that a batch of tiny documents is not a thousand parses.
MAX_GRAPHQL_BATCH = 100
JSON_MEDIA_TYPE = "application/json"
GRAPHQL_MEDIA_TYPE = "application/graphql"


class GraphQLEntryError(ValueError):
    """An invalid `graphql` block of a catalog entry: the message names the field."""


class InvalidGraphQLRequest(ValueError):
    """A request on a GraphQL endpoint that cannot be read as GraphQL: the message says why,
    never quoting a value of the request."""


@dataclass(frozen=True, slots=True)
class SensitiveMutation:
    mutation: str
    why: str
    docs: str


@dataclass(frozen=True, slots=True)
class GraphQLEndpoint:
    """A provider's GraphQL endpoint and its sensitive mutations."""

    paths: tuple[str, ...]
    docs: str
    sensitive: tuple[SensitiveMutation, ...]

    def serves(self, path: str) -> bool:
        """Whether a request on the decoded `path` reaches the endpoint (or a path below it:
        a server mounted at a prefix answers there too)."""
        return any(path_covers(pattern, path) for pattern in self.paths)

    @property
    def mutations(self) -> frozenset[str]:
        return frozenset(entry.mutation for entry in self.sensitive)

    def refused(self, selected: Iterable[str], *, named: Sequence[str]) -> SensitiveMutation | None:
        """The first listed mutation that `selected` holds and `named` (a grant's) does not."""
        chosen = set(selected)
        for entry in self.sensitive:
            if entry.mutation in chosen and entry.mutation not in named:
                return entry
        return None


def is_name(value: object) -> bool:
    return isinstance(value, str) and len(value) <= MAX_NAME_CHARS and bool(_NAME.match(value))


def parse_graphql(raw: Mapping[str, Any]) -> GraphQLEndpoint | None:
    """A provider entry's `graphql` block, or None without one. Raises GraphQLEntryError
    naming the field."""
    if "graphql" not in raw:
        return None
    block = raw["graphql"]
    if not isinstance(block, dict):
        raise GraphQLEntryError("`graphql` must be a table")
    unknown = sorted(set(block) - GRAPHQL_KEYS)
    if unknown:
        raise GraphQLEntryError(f"graphql: unknown key `{unknown[0]}`")
    paths = block.get("paths")
    if (
        not isinstance(paths, list)
        or not paths
        or any(not isinstance(p, str) or not p.startswith("/") or not p.strip("/") for p in paths)
    ):
        raise GraphQLEntryError(
            "graphql: `paths` must list paths that start with '/' and name a segment"
        )
    docs = block.get("docs")
    if not isinstance(docs, str) or not docs.startswith("https://"):
        raise GraphQLEntryError("graphql: `docs` must be an https URL")
    entries = block.get("sensitive")
    if not isinstance(entries, list) or not entries:
        raise GraphQLEntryError(
            "graphql: `sensitive` must list the mutations that create, reveal or widen a credential"
        )
    parsed = tuple(
        _parse_mutation(entry, f"graphql.sensitive[{i}]") for i, entry in enumerate(entries)
    )
    seen: set[str] = set()
    for index, entry in enumerate(parsed):
        if entry.mutation in seen:
            raise GraphQLEntryError(f"graphql.sensitive[{index}]: `mutation` appears twice")
        seen.add(entry.mutation)
    return GraphQLEndpoint(tuple(paths), docs, parsed)


def _parse_mutation(entry: Any, where: str) -> SensitiveMutation:
    if not isinstance(entry, dict):
        raise GraphQLEntryError(f"{where} must be a table")
    unknown = sorted(set(entry) - MUTATION_KEYS)
    if unknown:
        raise GraphQLEntryError(f"{where}: unknown key `{unknown[0]}`")
    if not is_name(entry.get("mutation")):
        raise GraphQLEntryError(f"{where}: `mutation` must be a GraphQL name")
    for name in ("why", "docs"):
        if not isinstance(entry.get(name), str) or not entry[name].strip():
            raise GraphQLEntryError(f"{where}: `{name}` is required")
    if not entry["docs"].startswith("https://"):
        raise GraphQLEntryError(f"{where}: `docs` must be an https URL")
    return SensitiveMutation(entry["mutation"], entry["why"], entry["docs"])


# --- a request's documents ---------------------------------------------------------------------


def selected_mutations(*, body: bytes, content_type: str, query: str) -> frozenset[str]:
    """The top-level mutation fields that a request on a GraphQL endpoint may execute, over
    every document it carries (its body, its `query` parameter). Raises InvalidGraphQLRequest."""
    documents, url_names = _query_string_documents(query)
    if body:
        documents += _body_documents(body, content_type, url_names)
    budget = MAX_GRAPHQL_TOKENS
    selected: set[str] = set()
    for text, operation_name in documents:
        document, used = _parsed(text, budget)
        budget -= used
        selected |= _mutation_fields(document, operation_name)
    return frozenset(selected)


def _query_string_documents(query: str) -> tuple[list[tuple[str, str | None]], list[str]]:
    """The documents of the query string's `query` parameter, and its `operationName`s. Read
    split at `&` and, as Rack 2 splits it too, at `;`: each reading's value counts."""
    texts: set[str] = set()
    names: set[str] = set()
    for separated in {query, query.replace(";", "&")}:
        params = parse_qsl(separated, keep_blank_values=True)
        found = [value for name, value in params if name == "query"]
        named = [value for name, value in params if name == "operationName"]
        if len(found) > 1 or len(named) > 1:
            raise InvalidGraphQLRequest("The query string names `query` or `operationName` twice.")
        texts.update(found)
        names.update(named)
    # One operation name read one way: it chooses; else every operation counts.
    chosen = next(iter(names)) if len(names) == 1 else None
    return [(text, chosen) for text in sorted(texts)], sorted(names)


def _media_type(content_type: str) -> tuple[str, dict[str, str]]:
    media, *raw_params = content_type.split(";")
    params = {}
    for raw in raw_params:
        name, _, value = raw.partition("=")
        params[name.strip().lower()] = value.strip().strip('"').lower()
    return media.strip().lower(), params


def _body_documents(
    body: bytes, content_type: str, url_names: list[str]
) -> list[tuple[str, str | None]]:
    """The body's documents, each with the operation name that chooses its operation: none
    (every operation counts) when the query string names one too, since some servers let the
    URL's `operationName` win over the body's."""
    media, params = _media_type(content_type)
    if params.get("charset", "utf-8") not in ("utf-8", "utf8") or media not in (
        JSON_MEDIA_TYPE,
        GRAPHQL_MEDIA_TYPE,
    ):
        raise InvalidGraphQLRequest(
            "A GraphQL request's body is sent as application/json (or application/graphql), "
            "in UTF-8."
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidGraphQLRequest("The body is not UTF-8.") from None
    if media == GRAPHQL_MEDIA_TYPE:
        return [(text, None)]
    try:
        data = json.loads(text, object_pairs_hook=_one_each)
    except (ValueError, RecursionError):
        raise InvalidGraphQLRequest(
            "The body is not JSON, or an object in it names a member twice."
        ) from None
    requests = data if isinstance(data, list) else [data]
    if not 1 <= len(requests) <= MAX_GRAPHQL_BATCH:
        raise InvalidGraphQLRequest(f"A batch holds from 1 to {MAX_GRAPHQL_BATCH} requests.")
    documents = [_request_document(request, index) for index, request in enumerate(requests)]
    return [(text, None if url_names else name) for text, name in documents]


def _one_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("a member named twice")
    return result


def _request_document(request: Any, index: int) -> tuple[str, str | None]:
    where = f"Request {index}" if index else "The request"
    if not isinstance(request, dict):
        raise InvalidGraphQLRequest(f"{where} is not a JSON object.")
    unknown = sorted(set(request) - REQUEST_MEMBERS)
    if unknown:
        raise InvalidGraphQLRequest(
            f"{where} has a member other than query, operationName, variables and extensions."
        )
    text = request.get("query")
    if not isinstance(text, str) or not text.strip():
        raise InvalidGraphQLRequest(
            f"{where} has no `query` document (a persisted query cannot be read)."
        )
    operation_name = request.get("operationName")
    if operation_name is not None and not isinstance(operation_name, str):
        raise InvalidGraphQLRequest(f"{where}'s `operationName` is not a string.")
    for member in ("variables", "extensions"):
        if request.get(member) is not None and not isinstance(request[member], dict):
            raise InvalidGraphQLRequest(f"{where}'s `{member}` is not an object.")
    if "persistedQuery" in (request.get("extensions") or {}):
        raise InvalidGraphQLRequest(f"{where} names a persisted query, which cannot be read.")
    return text, operation_name


def _parsed(text: str, budget: int) -> tuple[DocumentNode, int]:
    """The document and the tokens it took; InvalidGraphQLRequest when it does not parse or
    goes past the tokens left."""
    if budget <= 0:
        raise _too_many_tokens()
    parser = Parser(text, no_location=True, max_tokens=budget)
    try:
        document = parser.parse_document()
    except GraphQLError as exc:
        if "tokens" in exc.message and "Parsing aborted" in exc.message:
            raise _too_many_tokens() from None
        position = f" at {exc.locations[0].line}:{exc.locations[0].column}" if exc.locations else ""
        raise InvalidGraphQLRequest(f"The document does not parse{position}.") from None
    except RecursionError:
        raise InvalidGraphQLRequest("The document is nested too deeply.") from None
    return document, parser.token_count


def _too_many_tokens() -> InvalidGraphQLRequest:
    return InvalidGraphQLRequest(
        f"The request's documents hold more than {MAX_GRAPHQL_TOKENS} tokens together."
    )


def _mutation_fields(document: DocumentNode, operation_name: str | None) -> set[str]:
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if not operations:
        raise InvalidGraphQLRequest("The document holds no operation.")
    if operation_name:
        operations = [op for op in operations if op.name and op.name.value == operation_name]
        if not operations:
            raise InvalidGraphQLRequest("`operationName` names no operation of the document.")
    fragments: dict[str, list[FragmentDefinitionNode]] = {}
    for definition in document.definitions:
        if isinstance(definition, FragmentDefinitionNode):
            fragments.setdefault(definition.name.value, []).append(definition)
    fields: set[str] = set()
    for operation in operations:
        if operation.operation != OperationType.MUTATION:
            continue
        pending: list[SelectionSetNode] = [operation.selection_set]
        followed: set[str] = set()
        while pending:
            for selection in pending.pop().selections:
                if isinstance(selection, FieldNode):
                    fields.add(selection.name.value)
                elif isinstance(selection, InlineFragmentNode):
                    pending.append(selection.selection_set)
                elif isinstance(selection, FragmentSpreadNode):
                    name = selection.name.value
                    if name not in followed:
                        followed.add(name)
                        pending += [fragment.selection_set for fragment in fragments.get(name, [])]
    return fields
