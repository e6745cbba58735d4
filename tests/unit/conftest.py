"""The fuzz tests' budget and mutations (tests/unit/test_fuzz_*.py, issue 12).

Each parser of input we do not control has a fuzz test: seeded mutations of a valid input (truncation,
type swaps, byte flips, nesting, huge values), and the rule that every case either succeeds or raises an
IchorError whose message is one short line without key material; any other exception fails the test
with the case's seed, number, input and traceback.

In CI each parser runs ``DEFAULT_COUNT`` cases or ``DEFAULT_SECONDS`` seconds, whichever ends first
(all of them together well under two minutes). A maintainer runs them longer:

    cd /work/main
    export ANSIBLE_COLLECTIONS_PATH=$(~/.cache/maesh-ichor/env-2.19/bin/python tests/collection_path.py)
    ~/.cache/maesh-ichor/env-2.19/bin/python -m pytest -q -p no:cacheprovider tests/unit/test_fuzz_*.py \\
        --fuzz-seconds 600 --fuzz-seed 7

``--fuzz-count N``: N cases per parser (no time limit unless --fuzz-seconds is given too).
``--fuzz-seconds S``: S seconds per parser (no case limit unless --fuzz-count is given too).
``--fuzz-seed S``: another sequence of cases (default 12: CI always runs the same cases).
``--fuzz-keep-going``: run every case and report each distinct failure at the end (else the first one fails).
The options are registered when pytest is pointed at tests/unit or a file in it.
"""

import copy
import random
import time
import traceback

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError

DEFAULT_COUNT = 1500
DEFAULT_SECONDS = 10.0
DEFAULT_SEED = 12
# A message is one line a person reads; a parser that quotes a huge input is wrong.
MESSAGE_LIMIT = 1000
# A window of key material this long in a message is a leak (24 base64 characters are 18 bytes of key).
LEAK_WINDOW = 24


def pytest_addoption(parser):
    group = parser.getgroup("fuzz", "fuzz tests of the parsers of untrusted input")
    group.addoption("--fuzz-count", type=int, default=None, help="cases per parser")
    group.addoption("--fuzz-seconds", type=float, default=None, help="seconds per parser")
    group.addoption("--fuzz-seed", type=int, default=None, help="seed of the cases (default %d)" % DEFAULT_SEED)
    group.addoption("--fuzz-keep-going", action="store_true", default=None,
                    help="run every case, then report each distinct failure")


def _option(config, name):
    try:
        return config.getoption(name)
    except ValueError:  # pytest was not pointed at tests/unit: the options are not registered
        return None


# ---------------------------------------------------------------------------------------------- values

SCALARS = (None, True, False, 0, -1, 1, 65536, 2 ** 64, 1.5, -0.0, float("inf"), float("nan"), "", "x", "0",
           "true", "null", "~", "- a", "{", "é", "\x00", "\x7f", "\u2028", "a: b", "--- |", "*a", "&a", "!!binary",
           "%", "@", "`", "9" * 5000)


def huge(rng):
    """A value too big for any field."""
    return rng.choice(["A" * rng.choice([10 ** 4, 10 ** 6]), ["x"] * 10 ** 4, dict(("k%d" % i, i) for i in range(10 ** 4)),
                       10 ** rng.choice([20, 400]), -(2 ** 100)])


def nested(value, depth, rng):
    for _round in range(depth):
        value = [value] if rng.random() < 0.5 else {"a": value}
    return value


def _paths(tree):
    """Every node's path, in document order (without recursion: earlier rounds may have nested it deep)."""
    todo = [((), tree)]
    while todo:
        prefix, node = todo.pop()
        yield prefix
        if isinstance(node, dict):
            todo.extend((prefix + (key,), node[key]) for key in reversed(list(node)))
        elif isinstance(node, list):
            todo.extend((prefix + (index,), node[index]) for index in reversed(range(len(node))))


def _get(tree, path):
    for part in path:
        tree = tree[part]
    return tree


def _set(tree, path, value):
    if not path:
        return value
    _get(tree, path[:-1])[path[-1]] = value
    return tree


def _swap(node, tree, rng):
    kind = rng.random()
    if kind < 0.45:
        return rng.choice(SCALARS)
    if kind < 0.6:
        return rng.choice([[], {}, [rng.choice(SCALARS)], {"k": rng.choice(SCALARS)}, {None: 1}, {1: "x"}])
    if kind < 0.8:  # another part of the document in this place
        other = _get(tree, rng.choice(list(_paths(tree))))
        try:
            return copy.deepcopy(other)
        except RecursionError:  # a part nested hundreds of levels by an earlier round
            return rng.choice(SCALARS)
    if isinstance(node, str):  # the same text, another type
        return rng.choice([[node], {node: node}, {"k": node}, len(node)])
    return str(node)


def _truncate(node, rng):
    if isinstance(node, (str, list)) and node:
        return node[:rng.randrange(len(node))]
    if isinstance(node, dict) and node:
        keys = list(node)
        for key in rng.sample(keys, rng.randint(1, len(keys))):
            del node[key]
        return node
    return None


def _rekey(node, rng):
    if isinstance(node, dict) and node:
        key = rng.choice(list(node))
        new = rng.choice([key + "x" if isinstance(key, str) else "x", "", 0, None, True, 1.5, key.upper() if isinstance(key, str) else 2])
        node[new] = node.pop(key)
        return node
    if isinstance(node, dict):
        node["unknown"] = rng.choice(SCALARS)
    return node


def mutate_tree(tree, rng, rounds=None):
    """A copy of a parsed document (dicts, lists, scalars) with 1-3 structural mutations."""
    tree = copy.deepcopy(tree)
    for _round in range(rounds or rng.randint(1, 3)):
        path = rng.choice(list(_paths(tree)))
        node = _get(tree, path)
        op = rng.random()
        if op < 0.35:
            value = _swap(node, tree, rng)
        elif op < 0.55:
            value = _truncate(node, rng)
        elif op < 0.7:
            value = _rekey(node, rng)
        elif op < 0.8:
            value = nested(node, rng.choice([1, 3, 40, 400]), rng)
        elif op < 0.9:
            value = huge(rng)
        elif isinstance(node, list) and node:  # repeat or reorder items
            value = node + node if rng.random() < 0.5 else list(reversed(node))
        else:
            value = rng.choice(SCALARS)
        tree = _set(tree, path, value)
    return tree


BYTES = (b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\t", b"\r", b"\n", b"\n- ", b": ", b"---\n", b"...\n",
         b"[", b"]", b"{", b"}", b"&a ", b"*a", b"!!int ", b"!!binary ", b"!!timestamp ", b"!!set ", b"? ", b"<<: ", b"'",
         b'"', b"\\", b"#", b"%YAML 1.1\n", b"|\n", b">-\n", b"0x", b"9" * 5000, b"=", b"\"\\xff\"", b"\"\\ud800\"")


def mutate_bytes(data, rng, rounds=None):
    """A copy of a serialized document with 1-4 byte-level mutations."""
    data = bytearray(data)
    for _round in range(rounds or rng.randint(1, 4)):
        op = rng.random()
        at = rng.randrange(len(data) + 1)
        if op < 0.2:  # truncation
            del data[at:]
        elif op < 0.45:  # byte flips
            for _round in range(rng.randint(1, 8)):
                if data:
                    data[rng.randrange(len(data))] = rng.randrange(256)
        elif op < 0.7:  # a token that means something to the format
            data[at:at] = rng.choice(BYTES)
        elif op < 0.8:  # a slice repeated or cut out
            end = min(len(data), at + rng.randint(1, 200))
            if rng.random() < 0.5:
                data[at:at] = data[at:end] * rng.choice([1, 2, 100])
            else:
                del data[at:end]
        elif op < 0.9:  # deep nesting
            depth = rng.choice([50, 900, 5000])
            opener, closer = rng.choice([(b"[", b"]"), (b"{a: ", b"}"), (b"- ", b"")])
            data[at:at] = opener * depth + b"x" + closer * depth
        else:  # huge
            data[at:at] = rng.choice([b"A" * 10 ** 6, b"- x\n" * 10 ** 5, b"&a [*a]"])
    return bytes(data)


# ---------------------------------------------------------------------------------------------- the rule

def leaks(message, secrets, window=LEAK_WINDOW):
    """The first window of a secret (str) that appears in the message, or None."""
    for secret in secrets:
        if len(secret) <= window:  # a token: all of it
            if secret in message:
                return secret
            continue
        for start in range(0, len(secret) - window + 1):
            piece = secret[start:start + window]
            if len(piece) == window and piece in message:
                return piece
    return None


class FuzzFailure(AssertionError):
    pass


class Fuzz:
    """The cases of one parser's fuzz test, and the rule each one must meet."""

    def __init__(self, name, seed, count, seconds, keep_going=False):
        self.name = name
        self.seed = seed
        self.count = count
        self.seconds = seconds
        self.keep_going = keep_going
        self.failures = {}  # signature -> the first failure with it
        self.ran = 0
        self.errors = 0
        self.slowest = (0.0, None)

    def cases(self):
        """(index, rng) for each case within the budget; rng is seeded from (seed, parser, index)."""
        start = time.monotonic()
        index = 0
        while (self.count is None or index < self.count) and (
                self.seconds is None or time.monotonic() - start < self.seconds):
            yield index, random.Random("%d:%s:%d" % (self.seed, self.name, index))
            index += 1
            self.ran = index
        if self.failures:
            raise FuzzFailure("%d distinct failures in %d cases:\n\n%s" % (
                len(self.failures), self.ran, "\n\n".join(str(f) for f in self.failures.values())))

    def check(self, call, index, given, secrets=()):
        """Run ``call()``: success, or an IchorError with one short line and no key material. Returns the
        result, or the error."""
        began = time.monotonic()
        try:
            result = call()
        except IchorError as exc:
            self.errors += 1
            message = exc.message
            problem = None
            if not message or "\n" in message:
                problem = "the message is not one line"
            elif len(message) > MESSAGE_LIMIT:
                problem = "the message has %d characters (at most %d)" % (len(message), MESSAGE_LIMIT)
            elif leaks(message, secrets):
                problem = "the message holds key material %r" % leaks(message, secrets)
            if problem:
                self._raise(self._failure(index, given, "%s: %s" % (problem, message[:2000])))
            return exc
        except Exception:  # pylint: disable=broad-except  # the rule under test: nothing else escapes
            self._raise(self._failure(index, given, traceback.format_exc()))
            return None
        finally:
            spent = time.monotonic() - began
            if spent > self.slowest[0]:
                self.slowest = (spent, index)
        return result

    @staticmethod
    def _raise(failure):
        if failure is not None:
            raise failure

    def _failure(self, index, given, what):
        text = repr(given)
        if len(text) > 3000:
            text = text[:3000] + "... (%d characters)" % len(text)
        failure = FuzzFailure("fuzz %s case %d (--fuzz-seed %d): %s\ninput: %s" % (self.name, index, self.seed, what, text))
        if not self.keep_going:
            return failure
        lines = [line.strip() for line in what.strip().splitlines()]
        frames = [line for line in lines if line.startswith("File ")]
        signature = (frames[-1] if frames else "", lines[-1][:80] if frames else lines[0][:60])
        self.failures.setdefault(signature, failure)
        return None

    def summary(self):
        return "fuzz %s: %d cases (%d clean errors), slowest %.2fs (case %s)" % (
            self.name, self.ran, self.errors, self.slowest[0], self.slowest[1])


@pytest.fixture
def fuzz(request):
    """``fuzz(name, count=DEFAULT_COUNT, seconds=DEFAULT_SECONDS)`` -> a Fuzz within the run's budget."""
    config = request.config
    count_option = _option(config, "fuzz_count")
    seconds_option = _option(config, "fuzz_seconds")
    seed = _option(config, "fuzz_seed")
    keep_going = bool(_option(config, "fuzz_keep_going"))
    made = []

    def make(name, count=DEFAULT_COUNT, seconds=DEFAULT_SECONDS):
        if count_option is not None or seconds_option is not None:
            count, seconds = count_option, seconds_option
        made.append(Fuzz(name, DEFAULT_SEED if seed is None else seed, count, seconds, keep_going))
        return made[-1]

    yield make
    for one in made:
        print(one.summary())


@pytest.fixture
def fresh_redaction():
    """``reset(forget=())``: each case starts with the secrets registered before the test (less the values in
    ``forget``): a case's marker, registered by a successful parse, must not hide the next case's leak."""
    from ansible_collections.maesh.ichor.plugins.module_utils.common import redact

    saved = copy.deepcopy(redact._registered)  # pylint: disable=protected-access

    def reset(forget=()):
        for value in forget:
            for piece in redact._pieces(value):  # pylint: disable=protected-access
                saved.get(len(piece), set()).discard(piece)
        redact._registered.clear()  # pylint: disable=protected-access
        redact._registered.update(copy.deepcopy(saved))  # pylint: disable=protected-access

    yield reset
    reset()
