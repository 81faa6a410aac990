"""dynamodb_sigv4_test: SigV4 verification end to end (docs/dynamodb-api.md,
"Authentication"). Run by tests/dynamodb_test.sh pytest with the other
suites; starts a second lapse-dynamodb on the same cluster with
--dynamodb-credentials (DDB_BIN_DIR, DDB_COORDINATOR say where).

Proves: boto3 signing with a listed key (DynamoDB and DynamoDB Streams
clients) is served; a wrong secret is InvalidSignatureException, an unknown
key UnrecognizedClientException, no Authorization
MissingAuthenticationTokenException, a body changed after signing
InvalidSignatureException, a signature of another region refused; GET /
stays open; the gateway that verifies nothing (the suite's main one) takes
any signature; and a bad credentials file stops the gateway at start.
"""
import http.client
import json
import os
import socket
import subprocess
import time
import uuid

import boto3
import botocore.auth
import botocore.awsrequest
import botocore.config
import botocore.credentials
import pytest
from botocore.exceptions import ClientError

from ddb_helpers import TYPE_PREFIX, client, error_code

BIN = os.path.join(os.environ["DDB_BIN_DIR"], "lapse-dynamodb")
COORDINATOR = os.environ["DDB_COORDINATOR"]
KEY_ID, SECRET = "AKIDLAPSETEST", "lapse/secret+key"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def verifying(tmp_path_factory):
    """(endpoint, log path) of a gateway that verifies signatures."""
    d = tmp_path_factory.mktemp("sigv4")
    creds = d / "credentials"
    creds.write_text("# lapse-dynamodb --dynamodb-credentials\n%s %s\nOTHER other\n"
                     % (KEY_ID, SECRET))
    port = free_port()
    log = d / "gateway.log"
    with open(log, "w") as out:
        p = subprocess.Popen([BIN, "--listen", "127.0.0.1:%d" % port, "--coordinator",
                              COORDINATOR, "--dynamodb-credentials", str(creds)],
                             stdout=out, stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while True:
        assert p.poll() is None, "the gateway exited: " + log.read_text()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/")
            if c.getresponse().status == 200:
                break
        except OSError:
            pass
        assert time.time() < deadline, "the gateway does not answer: " + log.read_text()
        time.sleep(0.1)
    yield "http://127.0.0.1:%d" % port, log
    p.terminate()
    assert p.wait(timeout=30) == 0
    text = log.read_text()
    assert "verifying SigV4 signatures (2 access keys" in text, text
    for bad in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
        assert bad not in text, text


def signed_client(endpoint, service="dynamodb", key_id=KEY_ID, secret=SECRET,
                  region="us-east-1"):
    return boto3.client(
        service, endpoint_url=endpoint, region_name=region, aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        config=botocore.config.Config(retries={"max_attempts": 1}, connect_timeout=5,
                                      read_timeout=30))


def raw_signed(endpoint, body, tamper=None, sign=True):
    """(status, JSON) of a DescribeTable POST signed by botocore, its body
    replaced by tamper after signing when given."""
    req = botocore.awsrequest.AWSRequest(
        method="POST", url=endpoint + "/", data=body,
        headers={"Content-Type": "application/x-amz-json-1.0",
                 "X-Amz-Target": "DynamoDB_20120810.ListTables"})
    if sign:
        botocore.auth.SigV4Auth(botocore.credentials.Credentials(KEY_ID, SECRET), "dynamodb",
                                "us-east-1").add_auth(req)
    host = endpoint.split("//")[1]
    c = http.client.HTTPConnection(*host.split(":"), timeout=30)
    c.request("POST", "/", body=tamper if tamper is not None else body,
              headers=dict(req.headers.items()))
    r = c.getresponse()
    return r.status, json.loads(r.read())


def test_signed_requests_are_served(verifying):
    endpoint, _ = verifying
    ddb = signed_client(endpoint)
    name = "sig_" + uuid.uuid4().hex[:10]
    ddb.create_table(TableName=name, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     StreamSpecification={"StreamEnabled": True,
                                          "StreamViewType": "KEYS_ONLY"})
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "v": {"S": "x" * 5000}})
    assert ddb.get_item(TableName=name, Key={"pk": {"S": "a"}},
                        ConsistentRead=True)["Item"]["v"]["S"] == "x" * 5000
    streams = signed_client(endpoint, "dynamodbstreams")
    assert streams.list_streams(TableName=name)["Streams"][0]["TableName"] == name
    st, doc = raw_signed(endpoint, b"{}")
    assert st == 200 and name in doc["TableNames"], doc
    ddb.delete_table(TableName=name)


def test_bad_signatures_are_refused(verifying):
    endpoint, _ = verifying
    cases = [
        (signed_client(endpoint, secret=SECRET + "x"), "InvalidSignatureException"),
        (signed_client(endpoint, key_id="NOSUCHKEY"), "UnrecognizedClientException"),
        (signed_client(endpoint, region="eu-west-1"), "InvalidSignatureException"),
    ]
    for ddb, code in cases:
        with pytest.raises(ClientError) as e:
            ddb.list_tables()
        assert error_code(e) == code
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError) as e:
        signed_client(endpoint, "dynamodbstreams", secret="wrong").list_streams()
    assert error_code(e) == "InvalidSignatureException"
    # A body changed after signing; no Authorization at all.
    st, doc = raw_signed(endpoint, b"{}", tamper=b'{"Limit":1}')
    assert st == 400 and doc["__type"] == TYPE_PREFIX + "InvalidSignatureException", doc
    st, doc = raw_signed(endpoint, b"{}", sign=False)
    assert st == 400 and doc["__type"] == TYPE_PREFIX + "MissingAuthenticationTokenException"
    # Health checks need no signature.
    host = endpoint.split("//")[1]
    c = http.client.HTTPConnection(*host.split(":"), timeout=30)
    c.request("GET", "/")
    assert c.getresponse().status == 200


def test_unverifying_gateway_takes_any_signature():
    # The suite's main gateway runs without --dynamodb-credentials.
    assert "TableNames" in client("dynamodb").list_tables()
    assert "TableNames" in signed_client(os.environ["DDB_ENDPOINT"], secret="anything",
                                         key_id="ANYONE").list_tables()


def test_bad_credentials_file_stops_the_gateway(tmp_path):
    for text in ["", "AKID\n", "AKID secret extra\n"]:
        f = tmp_path / "credentials"
        f.write_text(text)
        p = subprocess.run([BIN, "--listen", "127.0.0.1:%d" % free_port(), "--coordinator",
                            COORDINATOR, "--dynamodb-credentials", str(f)],
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and "--dynamodb-credentials" in p.stderr, (text, p.stderr)
    p = subprocess.run([BIN, "--dynamodb-credentials", str(tmp_path / "missing")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "missing" in p.stderr
