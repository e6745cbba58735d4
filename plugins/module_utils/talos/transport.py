# -*- coding: utf-8 -*-
# Copyright: maesh.ichor contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TLS for the Talos API on Python's ssl module.

Talos makes its API CA Ed25519 by default. grpcio's TLS (BoringSSL) offers no Ed25519
signature algorithm, so our gRPC transport (module_utils.talos.wire) speaks HTTP/2 over Python's
ssl (OpenSSL), which does. ALPN is ``h2`` on both sides (grpc-go refuses TLS without it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import ssl

from ansible_collections.maesh.ichor.plugins.module_utils.common.files import load_cert_chain
from ansible_collections.maesh.ichor.plugins.module_utils.talos.errors import TalosConfigError

_PRIVATE_KEY_PEM = re.compile(br"-----BEGIN (?:EC |RSA )?PRIVATE KEY-----\s+[A-Za-z0-9+/=\s]+-----END (?:EC |RSA )?PRIVATE KEY-----")


def normalise_key_pem(key_pem):
    """Return the client key as a PEM that OpenSSL loads (PKCS#8, or SEC1 for ECDSA), without parsing it here:
    OpenSSL reads it when the certificate chain is loaded, so no module pays for importing cryptography.

    Talos labels Ed25519 keys ``ED25519 PRIVATE KEY`` (PKCS#8 DER inside), a label OpenSSL does not know;
    ECDSA keys come as ``EC PRIVATE KEY``.
    """
    pem = key_pem.replace(b"ED25519 PRIVATE KEY", b"PRIVATE KEY")
    if not _PRIVATE_KEY_PEM.search(pem):
        raise TalosConfigError("the talosconfig context's client key cannot be loaded (not a PEM private key)")
    return pem


def _load_chain(ctx, crt_pem, key_pem):
    try:
        load_cert_chain(ctx, crt_pem, key_pem)
    except ssl.SSLError:
        raise TalosConfigError("the talosconfig context's client certificate and key do not match or cannot be loaded")


def client_context(credentials):
    """mTLS client context: verify the server against the context's CA, present the client cert."""
    if credentials.ca is None:
        raise TalosConfigError("the talosconfig context has no 'ca'; it cannot verify the machines")
    if not credentials.has_client_certificate:
        raise TalosConfigError("the talosconfig context has no client certificate ('crt' and 'key')")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    try:
        ctx.load_verify_locations(cadata=credentials.ca.reveal().decode("ascii", "replace"))
    except (ssl.SSLError, TypeError, ValueError):  # TypeError: not ASCII
        raise TalosConfigError("the talosconfig context's 'ca' is not a valid certificate")
    _load_chain(ctx, credentials.crt.reveal(), normalise_key_pem(credentials.key.reveal()))
    ctx.set_alpn_protocols(["h2"])
    return ctx


def maintenance_context():
    """Maintenance mode: the machine has a per-boot self-signed certificate and asks for none.

    Like ``talosctl --insecure``: no verification is possible before a machine has a config.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    return ctx
