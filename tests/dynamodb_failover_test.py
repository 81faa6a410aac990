"""dynamodb_failover_test: PutItem and GetItem through the gateway while a
node is stopped (SIGSTOP: it keeps its connections, so calls to it time out
rather than being refused). The gateway sends these two operations with
liblapse's asynchronous calls, which make one attempt; a time-out or a
failover's refusal goes back to a worker, whose blocking call retries on the
promoted copy. So no call fails: each waits out the failover (the node's
2 s lease, then the promotion) and succeeds. Every acknowledged put reads
back after the node resumes, and the gateway stays up.

Run last in its pytest list: the stopped node is resumed at the end, but the
cluster's primaries have moved."""
import os
import signal
import time

import boto3
import botocore.config
import botocore.exceptions

from ddb_helpers import ENDPOINT, gateway_alive, new_table

KEYS = 48  # over every partition of the table, so some are on the stopped node


def no_retry_client():
    """A boto3 client that never retries (ddb_helpers' retries a 5xx once,
    which would hide a call the gateway failed)."""
    return boto3.client(
        "dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1",
        aws_access_key_id="x", aws_secret_access_key="x",
        config=botocore.config.Config(retries={"total_max_attempts": 1, "mode": "standard"},
                                      connect_timeout=5, read_timeout=30))


def node_pid(n):
    with open(os.path.join(os.environ["LAPSE_HOME"], "node%d.pid" % n)) as f:
        return int(f.read())


def put_and_read(ddb, table, i, acked):
    k = "k%d" % (i % KEYS)
    ddb.put_item(TableName=table, Item={"pk": {"S": k}, "v": {"N": str(i)}})
    acked[k] = i
    got = ddb.get_item(TableName=table, Key={"pk": {"S": k}}, ConsistentRead=True)
    assert got["Item"]["v"]["N"] == str(i), (k, got)


def test_puts_and_gets_go_on_while_a_node_is_stopped():
    ddb = no_retry_client()
    table = new_table(ddb, sort_key=False)
    acked = {}
    for i in range(KEYS):  # every key once, with every node up
        put_and_read(ddb, table, i, acked)
    pid = node_pid(1)
    os.kill(pid, signal.SIGSTOP)
    failures = []
    try:
        started = time.monotonic()
        i = KEYS
        # Two rounds over the keys: the first meets the stopped node's
        # partitions before their failover, the second after it.
        while i < 3 * KEYS and time.monotonic() - started < 120:
            try:
                put_and_read(ddb, table, i, acked)
            except botocore.exceptions.ClientError as e:
                failures.append((i, e.response["Error"]["Code"], e.response["Error"]["Message"]))
            i += 1
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert i == 3 * KEYS, "the loop ran out of time after %d calls" % i
    assert not failures, failures
    print("%d puts and reads while node 1 was stopped, %.1f s" % (2 * KEYS, took))
    for k, v in sorted(acked.items()):
        got = ddb.get_item(TableName=table, Key={"pk": {"S": k}}, ConsistentRead=True)
        assert got["Item"]["v"]["N"] == str(v), (k, v, got)
    assert gateway_alive()
