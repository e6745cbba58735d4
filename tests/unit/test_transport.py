"""The client key as the Talos connection hands it to OpenSSL (talos/transport.py): Talos's Ed25519 label made the one
OpenSSL knows, the PEM otherwise as it is (OpenSSL parses it: no module imports cryptography for it), and anything
that is no PEM private key refused in one line."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.talos import transport
from ansible_collections.maesh.ichor.plugins.module_utils.talos.errors import TalosConfigError

# the runtime dependencies' floors (h2, hpack, hyperframe, protobuf, kubernetes, PyYAML) run these too
pytestmark = pytest.mark.floor

BODY = b"MC4CAQAwBQYDK2VwBCIEIJ2cwQ6Y5d0m0F2x0b3n4c5d6e7f8g9h0i1j2k3l4m5n\n"


def test_talos_ed25519_label_becomes_pkcs8():
    pem = b"-----BEGIN ED25519 PRIVATE KEY-----\n" + BODY + b"-----END ED25519 PRIVATE KEY-----\n"
    assert transport.normalise_key_pem(pem) == b"-----BEGIN PRIVATE KEY-----\n" + BODY + b"-----END PRIVATE KEY-----\n"


@pytest.mark.parametrize("label", [b"EC PRIVATE KEY", b"PRIVATE KEY", b"RSA PRIVATE KEY"])
def test_other_pems_pass_as_they_are(label):
    pem = b"-----BEGIN " + label + b"-----\n" + BODY + b"-----END " + label + b"-----\n"
    assert transport.normalise_key_pem(pem) == pem


@pytest.mark.parametrize("pem", [
    b"", b"not a key", b"-----BEGIN CERTIFICATE-----\n" + BODY + b"-----END CERTIFICATE-----\n",
    b"-----BEGIN ENCRYPTED PRIVATE KEY-----\n" + BODY + b"-----END ENCRYPTED PRIVATE KEY-----\n",
    b"-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\n" + BODY + b"-----END EC PRIVATE KEY-----\n",
])
def test_what_is_no_pem_private_key_is_one_line(pem):
    with pytest.raises(TalosConfigError) as exc:
        transport.normalise_key_pem(pem)
    assert exc.value.message == "the talosconfig context's client key cannot be loaded (not a PEM private key)"


class _Secret:
    def __init__(self, value):
        self.value = value

    def reveal(self):
        return self.value


class _Credentials:
    has_client_certificate = True
    crt = key = _Secret(b"")

    def __init__(self, ca):
        self.ca = _Secret(ca)


NOT_A_CERTIFICATE = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize("ca", [b"\x00\xff" * 40, b"not a certificate", NOT_A_CERTIFICATE])
def test_a_ca_that_is_no_certificate_is_one_line(ca):
    # bytes that are not ASCII (found by a fuzz of the same ssl call) included
    with pytest.raises(TalosConfigError) as exc:
        transport.client_context(_Credentials(ca))
    assert exc.value.message == "the talosconfig context's 'ca' is not a valid certificate"
