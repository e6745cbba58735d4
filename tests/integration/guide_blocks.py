"""The guides' runnable blocks, and the output they quote: what tests/integration/test_guide_commands.py runs against
the lab and tests/unit/test_guides.py holds every guide to (no lab here: parsing and comparing only).

A guide marks a block the lab can run with an HTML comment on the line before its fence (invisible once rendered):

* ``<!-- lab -->`` (or ``<!-- lab: rc=2 -->`` for a command that must fail with that status) before a ```` ```sh ````
  block: the block is run as one bash script. Its output is quoted by the next fenced block whose fence follows a
  ``<!-- lab-output -->`` line, if that comes before any other runnable block; without one, only the status counts.
* the same comment before a ```` ```console ```` block: its ``$ `` lines (and their ``\\``-continued lines) are the
  script, the other lines the output it quotes.

The quoted output is compared line by line, in order, with what the script printed (standard output and error): each
quoted line must be one of the printed lines that follow the one the previous quoted line matched. A quoted line may
hold ``...`` for any text, and a line of ``...`` alone stands for lines left out. Lines are compared without their
leading ``- `` (the plan callback's) and their JSON quotes (Ansible's default output of a list), with each run of
spaces or tabs as one space, and with the values that change from run to run made alike on both sides (``VOLATILE``).
"""

import re

MARK = re.compile(r"^<!--\s*lab(?::\s*(?P<args>[^>]*?))?\s*-->\s*$")
OUTPUT_MARK = re.compile(r"^<!--\s*lab-output\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")

# values that differ from run to run, and what both sides become: the cluster lock's holder ids, times, digests,
# sizes, the Talos CA fingerprints and status tokens (16 hex digits), Helm's modification stamps; and a Kubernetes
# Node's name, which Talos gives a machine (talos-6a2-6c4 unless told otherwise) and no inventory decides
VOLATILE = [
    (re.compile(r"\bNode [a-z0-9][a-z0-9.-]*(?=[),:;]|$)"), "Node <node>"),
    (re.compile(r"maesh-ichor-\d{8}T\d{6}Z-[0-9a-f]{12}"), "maesh-ichor-<run>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z| \+0000 UTC)?"), "<time>"),
    (re.compile(r"\d{8}T\d{6}Z"), "<time>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<sha256>"),
    (re.compile(r"\b[0-9a-f]{16}\b"), "<hex>"),
    (re.compile(r"\b\d+ bytes\b"), "<n> bytes"),
]


class Block:
    """A runnable block of a guide: its script, the output it quotes (a list of lines, or None) and the status."""

    def __init__(self, guide, line, lang, script, expected, rc):
        self.guide, self.line, self.lang = guide, line, lang
        self.script, self.expected, self.rc = script, expected, rc

    def __repr__(self):
        return "%s:%d (%s)" % (self.guide, self.line, self.lang)


def _fenced(lines, start):
    """(lang, body lines, index after the closing fence) of the fence at ``start``."""
    lang = FENCE.match(lines[start]).group("lang")
    end = start + 1
    while end < len(lines) and not lines[end].startswith("```"):
        end += 1
    if end == len(lines):
        raise ValueError("line %d: a fence that is never closed" % (start + 1))
    return lang, lines[start + 1:end], end + 1


def _args(text):
    args = dict(part.split("=", 1) for part in (text or "").split() if "=" in part)
    unknown = sorted(set(args) - {"rc"})
    if unknown:
        raise ValueError("unknown lab marker arguments: %s" % ", ".join(unknown))
    return {"rc": int(args.get("rc", 0))}


def _console(body):
    """(script, quoted output) of a console block: the ``$ `` lines and their continuations, the rest."""
    script, output, going_on = [], [], False
    for line in body:
        if line.startswith("$ "):
            script.append(line[2:])
            going_on = line.rstrip().endswith("\\")
        elif going_on:
            script.append(line)
            going_on = line.rstrip().endswith("\\")
        else:
            output.append(line)
    return "\n".join(script) + "\n", output


def blocks(text, guide="guide"):
    """The runnable blocks of a guide's text, in order."""
    lines = text.splitlines()
    found = []
    index = 0
    pending = None  # an sh block waiting for the output it quotes
    while index < len(lines):
        line = lines[index]
        mark = MARK.match(line)
        if mark and index + 1 < len(lines) and FENCE.match(lines[index + 1]):
            args = _args(mark.group("args"))
            lang, body, after = _fenced(lines, index + 1)
            if lang == "sh":
                pending = Block(guide, index + 2, lang, "\n".join(body) + "\n", None, args["rc"])
                found.append(pending)
            elif lang == "console":
                script, output = _console(body)
                found.append(Block(guide, index + 2, lang, script, output, args["rc"]))
                pending = None
            else:
                raise ValueError("%s:%d: a lab block is ```sh or ```console, not ```%s" % (guide, index + 2, lang))
            index = after
            continue
        if mark:
            raise ValueError("%s:%d: a lab marker must be the line before a fence" % (guide, index + 1))
        if OUTPUT_MARK.match(line):
            if pending is None or pending.expected is not None:
                raise ValueError("%s:%d: quoted output without a runnable sh block before it" % (guide, index + 1))
            if index + 1 >= len(lines) or not FENCE.match(lines[index + 1]):
                raise ValueError("%s:%d: a lab-output marker must be the line before a fence" % (guide, index + 1))
            _lang, body, after = _fenced(lines, index + 1)
            pending.expected = body
            index = after
            continue
        index += 1
    return found


def normal(line):
    """A line as it is compared: without the plan callback's ``- ``, JSON quotes and a trailing comma, the volatile
    values made alike."""
    text = line.strip()
    if text.startswith("- "):
        text = text[2:]
    if len(text) > 1 and text.startswith('"') and text.rstrip(",").endswith('"'):
        text = text.rstrip(",")[1:-1].replace('\\"', '"')
    for pattern, placeholder in VOLATILE:
        text = pattern.sub(placeholder, text)
    return " ".join(text.split())  # a table's columns, aligned with spaces or tabs


def _pattern(line):
    return re.compile("^%s$" % ".*".join(re.escape(part) for part in normal(line).split("...")))


def unmatched(expected, output):
    """The first quoted line that the output does not print where the guide says it does (None when all are), with
    the output's lines after the last match, for the message."""
    printed = [normal(line) for line in output.splitlines()]
    at = 0
    for line in expected:
        if not line.strip() or line.strip() == "...":
            continue
        pattern = _pattern(line)
        for index in range(at, len(printed)):
            if pattern.match(printed[index]):
                at = index + 1
                break
        else:
            return line
    return None
