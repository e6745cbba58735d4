"""A Helm release record's ``data.release`` made from a release: what helm writes, for tests that build records (the
collection only reads them: module_utils/cilium/record.py decodes)."""

import base64
import gzip
import io
import json


def encode(release):
    """``data.release`` for a release, as the API takes it (the inverse of ``decode``)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as handle:
        handle.write(json.dumps(release, sort_keys=True).encode("utf-8"))
    return base64.b64encode(base64.b64encode(buf.getvalue())).decode("ascii")
