"""Put protoc/grpclib output into a form ansible-test sanity and ansible-lint accept.

Used by scripts/gen-protos after it rewrites imports. The code stays what protoc wrote,
statement for statement (nothing is reshaped for start-up: the modules run in Ansible's own
process and import it once per run), in a different layout:
  * imports of protobuf / grpclib are guarded, so the module imports without them (the
    modules then report the missing library through missing_required_lib);
  * the serialized descriptor is split into short bytes literals (one value, same bytes);
  * 4-space indentation, spaces around '=', at most two blank lines, lines under 160.
"""

import ast
import re

CHUNK = 32  # bytes per literal piece: repr of 32 bytes stays well under the line limit
LIMIT = 150


def _split_bytes(prefix, literal, suffix, indent):
    data = ast.literal_eval(literal)
    pieces = [repr(data[i:i + CHUNK]) for i in range(0, len(data), CHUNK)] or ["b''"]
    inner = " " * (indent + 4)
    return "%s(\n%s\n%s)%s" % (prefix, "\n".join(inner + p for p in pieces), " " * indent, suffix)


_BYTES_CALL = re.compile(r"^(\s*)(.*?\()(b'.*')(\).*)$")
_BYTES_ASSIGN = re.compile(r"^(\s*)(.*? = )(b'.*')$")
_ASYNC_DEF = re.compile(r"^(\s*)async def (\w+)\(self, stream: (.*)\) -> None:$")
_CALL = re.compile(r"^(\s*)([\w.]+\()(.*)(\))$")


def _wrap_long(line):
    if len(line) <= LIMIT:
        return [line]
    m = _BYTES_CALL.match(line)
    if m:
        indent = len(m.group(1))
        return _split_bytes(m.group(1) + m.group(2)[:-1], m.group(3), m.group(4)[1:], indent).split("\n")
    m = _BYTES_ASSIGN.match(line)
    if m:
        indent = len(m.group(1))
        return _split_bytes(m.group(1) + m.group(2), m.group(3), "", indent).split("\n")
    m = _ASYNC_DEF.match(line)
    if m:
        ind = m.group(1)
        return ["%sasync def %s(" % (ind, m.group(2)), "%s    self," % ind,
                "%s    stream: %s," % (ind, m.group(3)), "%s) -> None:" % ind]
    m = _CALL.match(line)
    if m:
        ind = m.group(1)
        return ["%s%s" % (ind, m.group(2)), "%s    %s%s" % (ind, m.group(3), m.group(4))]
    raise SystemExit("proto_sanity_form: cannot shorten line: %s..." % line[:80])


def _spaces_around_assign(line):
    # protoc writes "_globals['_X']._serialized_start=86"
    return re.sub(r"^(\s*_globals\[[^\]]*\][\w.\[\]']*?)=(?!=)", r"\1 = ", line)


def _reindent(line):
    # protoc indents its one if-block by two spaces
    m = re.match(r"^( +)(\S.*)$", line)
    if m and len(m.group(1)) % 4 == 2:
        return "    " * ((len(m.group(1)) + 2) // 4) + m.group(2)
    return line


def _collapse_blank(lines):
    out = []
    for line in lines:
        if line.strip() == "" and len(out) >= 2 and out[-1].strip() == "" and out[-2].strip() == "":
            continue
        out.append(line.rstrip())
    while out and out[-1] == "":
        out.pop()
    return out


def _is_import(line):
    return line.startswith(("import ", "from ")) and not line.startswith("from __future__")


def form_pb2(text):
    lines = text.split("\n")
    head, body = [], []
    seen_doc = False
    for line in lines:
        if not seen_doc:
            head.append(line)
            if line.startswith('"""'):
                seen_doc = True
            continue
        body.append(line)
    imports = [b for b in body if _is_import(b)]
    rest = [b for b in body if not _is_import(b)]
    out = head + [
        "# pylint: disable=unused-import,protected-access",
        "# (protoc imports the files this one depends on so they register first)",
        "try:",
    ] + ["    " + i for i in imports] + [
        "    HAS_PROTOBUF = True",
        "except ImportError:  # reported by the modules through missing_required_lib",
        "    HAS_PROTOBUF = False",
        "",
        "if HAS_PROTOBUF:",
    ]
    for line in rest:
        if line.strip() == "":
            if out[-1] != "":  # one blank line at most inside the block
                out.append("")
            continue
        if line.startswith("#"):
            out.append("    " + line)
            continue
        line = "    " + _reindent(_spaces_around_assign(line))
        out.extend(_wrap_long(line))
    return "\n".join(_collapse_blank(out)) + "\n"


def form_grpc(text):
    out = []
    for line in text.split("\n"):
        if line.startswith("import abc"):
            out.append("# pylint: disable=unused-import")
            # annotations name grpclib types; keep them unevaluated so the import needs no grpclib
            out.append("from __future__ import annotations")
            out.append(line)
            continue
        if line in ("import grpclib.const", "import grpclib.client") or line.startswith("import google.protobuf."):
            out.append("try:")
            out.append("    " + line)
            out.append("except ImportError:  # reported by the modules through missing_required_lib")
            out.append("    pass")
            continue
        out.extend(_wrap_long(line))
    return "\n".join(_collapse_blank(out)) + "\n"
