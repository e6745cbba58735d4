"""The glue between a module's action and its flow (ansible_module/runner.py): what reaches the task's result."""

from ansible_collections.maesh.ichor.plugins.module_utils.ansible_module import runner
from ansible_collections.maesh.ichor.plugins.module_utils.common.errors import IchorError
from ansible_collections.maesh.ichor.plugins.module_utils.common.redact import Secret

KEY = "-----BEGIN ED25519 PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIMARKERmarkerMARKERmarker0123456789abcdefXYZ\n-----END ED25519 PRIVATE KEY-----"


class FakeConn:
    closed = False

    def close(self):
        self.closed = True


def _run(call, diff=False):
    conn = FakeConn()
    result = runner.result_of(call, {}, diff, conn=conn)
    assert conn.closed, "the connections are closed however the flow ends"
    return result


def test_a_result_is_returned_with_diff_only_in_diff_mode_and_warnings_as_warnings():
    result = dict(changed=True, plan=["a"], diff={"before": "x", "after": "y"}, warnings=["careful"])
    quiet = _run(lambda conn: dict(result), diff=False)
    assert quiet == dict(changed=True, failed=False, plan=["a"], warnings=["careful"])
    loud = _run(lambda conn: dict(result), diff=True)
    assert loud["diff"] == {"before": "x", "after": "y"}


def test_an_expected_error_fails_with_its_one_line_and_its_result():
    def call(conn):
        raise IchorError("cp-1: refused\n  because   it is held", result=dict(plan=["cp-1: held"], diff={"a": 1}))
    failed = _run(call)
    assert failed == dict(failed=True, changed=False, msg="cp-1: refused because it is held", plan=["cp-1: held"])


def test_a_bug_keeps_its_traceback_redacted_and_says_it_is_one():
    secret = Secret("s3cr3t-token-value-0123456789")

    def call(conn):
        raise KeyError("boom %s %s" % (KEY, secret.reveal()))
    failed = _run(call)
    msg, trace = failed["msg"], failed["exception"]
    assert failed["failed"] is True
    assert msg.startswith("unexpected error (a bug; rerun with -vvv for the traceback): KeyError: ")
    assert "Traceback (most recent call last)" in trace and "in call" in trace and "\n" in trace
    for text in (msg, trace):
        assert "MARKERmarker" not in text and "s3cr3t-token-value" not in text
