"""The glue between a module and its backend (ansible_module/runner.py): what reaches the module's result."""

import pytest

from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import runner
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import Secret

KEY = "-----BEGIN ED25519 PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIMARKERmarkerMARKERmarker0123456789abcdefXYZ\n-----END ED25519 PRIVATE KEY-----"


class Exited(Exception):
    pass


class FakeModule:
    def __init__(self, diff=False):
        self._diff = diff
        self.params = {}
        self.warnings = []
        self.result = None
        self.failed = None

    def warn(self, text):
        self.warnings.append(text)

    def exit_json(self, **result):
        self.result = result
        raise Exited()

    def fail_json(self, **result):
        self.failed = result
        raise Exited()


class FakeConn:
    closed = False

    def close(self):
        self.closed = True


def _run(module, call):
    conn = FakeConn()
    with pytest.raises(Exited):
        runner.run(module, call, conn=conn)
    assert conn.closed, "the connections are closed however the backend ends"
    return module


def test_a_result_is_returned_with_diff_only_in_diff_mode_and_warnings_as_warnings():
    result = dict(changed=True, plan=["a"], diff={"before": "x", "after": "y"}, warnings=["careful"])
    quiet = _run(FakeModule(diff=False), lambda conn: dict(result))
    assert quiet.result == dict(changed=True, plan=["a"]) and quiet.warnings == ["careful"]
    loud = _run(FakeModule(diff=True), lambda conn: dict(result))
    assert loud.result["diff"] == {"before": "x", "after": "y"}


def test_an_expected_error_fails_with_its_one_line_and_its_result():
    def call(conn):
        raise IchorError("cp-1: refused\n  because   it is held", result=dict(plan=["cp-1: held"], diff={"a": 1}))
    module = _run(FakeModule(), call)
    assert module.failed == dict(msg="cp-1: refused because it is held", plan=["cp-1: held"])
    assert "exception" not in module.failed


def test_a_bug_keeps_its_traceback_redacted_and_says_it_is_one():
    secret = Secret("s3cr3t-token-value-0123456789")

    def call(conn):
        raise KeyError("boom %s %s" % (KEY, secret.reveal()))
    module = _run(FakeModule(), call)
    msg, trace = module.failed["msg"], module.failed["exception"]
    assert msg.startswith("unexpected error (a bug; rerun with -vvv for the traceback): KeyError: ")
    assert "Traceback (most recent call last)" in trace and "in call" in trace and "\n" in trace
    for text in (msg, trace):
        assert "MARKERmarker" not in text and "s3cr3t-token-value" not in text
