"""retrieval/addresses.py: the one check of which hosts outgoing requests may call, shared by the
LLM judge's endpoint and outside engines, and the servers' loopback test."""

import ipaddress

import pytest

from retrieval.addresses import ip_address_of, is_link_local_or_metadata, is_loopback, is_metadata_host
from retrieval.sources.external.descriptor import host_problem


@pytest.mark.parametrize("host", ["169.254.169.254", "2852039166", "0xa9.0xfe.0xa9.0xfe", "[::ffff:169.254.169.254]",
                                  "fe80::1%eth0", "100.100.100.200", "fd00:ec2::254", "2002:a9fe:a9fe::1",
                                  "64:ff9b::a9fe:a9fe"])
def test_link_local_and_metadata_addresses_in_every_spelling(host):
    address = ip_address_of(host)
    assert address is not None and is_link_local_or_metadata(address)
    assert host_problem(host) is not None  # an outside engine refuses what the LLM judge refuses


@pytest.mark.parametrize("host", ["127.0.0.1", "10.0.0.5", "93.184.216.34", "::1"])
def test_ordinary_addresses_pass(host):
    assert not is_link_local_or_metadata(ip_address_of(host))


def test_names_and_loopback():
    assert ip_address_of("example.com") is None and ip_address_of("metadata.google.internal") is None
    assert is_metadata_host("Metadata.Google.Internal.") and not is_metadata_host("example.com")
    assert host_problem("metadata.google.internal") == "'metadata.google.internal' is a cloud metadata host: refused"
    assert [is_loopback(h) for h in ("localhost", "127.0.0.1", "127.8.0.1", "::1", "[::1]", "10.0.0.1", "example")] \
        == [True, True, True, True, True, False, False]
    assert ip_address_of("[::1]") == ipaddress.ip_address("::1")
