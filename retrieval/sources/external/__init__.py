"""Outside engines as sources: an HTTP JSON search API or an MCP server's search tool, declared by
a small JSON descriptor, registered by name in the store and then usable wherever a source name
is (weights, fusion, evaluation, the explanation), its hits joined to the collection's by id.

    descriptor.py  the descriptor's fields, validation and safety (http(s) only, no link-local or
                   metadata address, size and time bounds, credentials only as ${ENV} names)
    templates.py   a request filled for one query: {query}, {depth}, {filters}, {query_vector}, ${ENV}
    mapping.py     the engine's JSON answer to ranked hits by JMESPath paths; refusals named
    http_kind.py   the `http` kind's client (httpx2): bounded, capped, no redirects, no retries
    mcp_kind.py    the `mcp` kind's client (the MCP SDK): a server over stdio or streamable HTTP
    source.py      the `SourceSpec` of a descriptor: load, build, search through the response cache
    registry.py    registered descriptors (a keyed side table) and a source name's spec (`SourceSpecs`)
"""

from __future__ import annotations

from retrieval.sources.external.descriptor import Descriptor, parse_descriptor, read_descriptor
from retrieval.sources.external.registry import ExternalSources, SourceSpecs
from retrieval.sources.external.source import close_engines, external_spec, outside_rows

__all__ = ["Descriptor", "ExternalSources", "SourceSpecs", "close_engines", "external_spec", "outside_rows",
           "parse_descriptor", "read_descriptor"]
