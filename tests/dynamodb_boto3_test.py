"""dynamodb_boto3_test: boto3 and raw HTTP against lapse-dynamodb
(docs/dynamodb-api.md). Run by tests/dynamodb_test.sh pytest, which starts a
cluster with its gateway and sets DDB_ENDPOINT (http://127.0.0.1:PORT) and
DDB_GATEWAY_PID.

Proves: the table calls, items round-trip in DynamoDB JSON, each error by
name (ResourceNotFoundException, ResourceInUseException, ValidationException,
SerializationException, UnknownOperationException), an item whose TTL passes
disappears from GetItem on time after UpdateTimeToLive, and bad input
(malformed JSON, wrong types, deep nesting, no target, a body over 16 MB)
gets DynamoDB's error shape while the gateway keeps serving.
"""
import http.client
import json
import os
import time
import urllib.parse
import uuid

import boto3
import botocore.config
import pytest
from botocore.exceptions import ClientError

ENDPOINT = os.environ["DDB_ENDPOINT"]
GATEWAY_PID = int(os.environ["DDB_GATEWAY_PID"])
TYPE_PREFIX = "com.amazonaws.dynamodb.v20120810#"


@pytest.fixture(scope="module")
def ddb():
    return boto3.client(
        "dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1",
        aws_access_key_id="x", aws_secret_access_key="x",
        config=botocore.config.Config(retries={"max_attempts": 1}, connect_timeout=5,
                                      read_timeout=30))


def new_table(ddb, sort_key=True):
    name = "t_" + uuid.uuid4().hex[:12]
    defs = [{"AttributeName": "pk", "AttributeType": "S"}]
    keys = [{"AttributeName": "pk", "KeyType": "HASH"}]
    if sort_key:
        defs.append({"AttributeName": "sk", "AttributeType": "N"})
        keys.append({"AttributeName": "sk", "KeyType": "RANGE"})
    ddb.create_table(TableName=name, AttributeDefinitions=defs, KeySchema=keys,
                     BillingMode="PAY_PER_REQUEST")
    return name


def error_code(excinfo):
    return excinfo.value.response["Error"]["Code"]


def raw(method, body=b"", target="DynamoDB_20120810.ListTables", headers=None):
    """(status, parsed JSON or text) of one raw HTTP request to the gateway."""
    u = urllib.parse.urlparse(ENDPOINT)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    h = {"Content-Type": "application/x-amz-json-1.0"}
    if target is not None:
        h["X-Amz-Target"] = target
    h.update(headers or {})
    try:
        conn.request(method, "/", body=body, headers=h)
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(data)
    except ValueError:
        return resp.status, data.decode(errors="replace")


def assert_error(status, doc, name, http_status=400):
    assert status == http_status, (status, doc)
    assert isinstance(doc, dict) and doc.get("__type") == TYPE_PREFIX + name, doc
    assert isinstance(doc.get("message"), str) and doc["message"], doc


def gateway_alive():
    with open("/proc/%d/stat" % GATEWAY_PID) as f:
        return f.read().split(") ")[1][0] != "Z"


def test_table_lifecycle(ddb):
    name = new_table(ddb)
    t = ddb.describe_table(TableName=name)["Table"]
    assert t["TableName"] == name
    assert t["TableStatus"] == "ACTIVE"
    assert t["TableArn"] == "arn:aws:dynamodb:us-east-1:000000000000:table/" + name
    assert t["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"},
                              {"AttributeName": "sk", "KeyType": "RANGE"}]
    assert {"AttributeName": "sk", "AttributeType": "N"} in t["AttributeDefinitions"]
    assert name in ddb.list_tables()["TableNames"]
    with pytest.raises(ClientError) as e:
        new_table_named = dict(TableName=name,
                               AttributeDefinitions=[{"AttributeName": "pk",
                                                      "AttributeType": "S"}],
                               KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        ddb.create_table(**new_table_named)
    assert error_code(e) == "ResourceInUseException"
    # ListTables pages in name order.
    other = new_table(ddb, sort_key=False)
    names = sorted([name, other])
    page = ddb.list_tables(ExclusiveStartTableName=names[0], Limit=1)
    assert page["TableNames"][0] > names[0]
    assert ddb.delete_table(TableName=name)["TableDescription"]["TableName"] == name
    ddb.delete_table(TableName=other)
    with pytest.raises(ClientError) as e:
        ddb.describe_table(TableName=name)
    assert error_code(e) == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        ddb.create_table(TableName="bad", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": "other",
                                                "AttributeType": "S"}])
    assert error_code(e) == "ValidationException"


def test_items(ddb):
    name = new_table(ddb)
    item = {"pk": {"S": "user1"}, "sk": {"N": "7"}, "m": {"M": {"a": {"L": [{"N": "1.5"}]}}},
            "b": {"B": b"\x00\x01"}, "flag": {"BOOL": False}, "nothing": {"NULL": True}}
    key = {"pk": {"S": "user1"}, "sk": {"N": "7"}}
    ddb.put_item(TableName=name, Item=item)
    assert ddb.get_item(TableName=name, Key=key, ConsistentRead=True)["Item"] == item
    assert "Item" not in ddb.get_item(TableName=name, Key={"pk": {"S": "user1"},
                                                            "sk": {"N": "8"}})
    ddb.delete_item(TableName=name, Key=key)
    assert "Item" not in ddb.get_item(TableName=name, Key=key)
    # Errors by name.
    with pytest.raises(ClientError) as e:
        ddb.get_item(TableName="no_such_table_" + uuid.uuid4().hex[:6], Key=key)
    assert error_code(e) == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        ddb.get_item(TableName=name, Key={"pk": {"S": "user1"}})
    assert error_code(e) == "ValidationException"
    with pytest.raises(ClientError) as e:
        ddb.put_item(TableName=name, Item={"pk": {"N": "1"}, "sk": {"N": "1"}})
    assert error_code(e) == "ValidationException"
    with pytest.raises(ClientError) as e:
        ddb.put_item(TableName=name, Item=item, ConditionExpression="attribute_not_exists(pk)")
    assert error_code(e) == "ValidationException"
    assert "ConditionExpression" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        ddb.delete_item(TableName=name, Key=key, ReturnValues="ALL_OLD")
    assert error_code(e) == "ValidationException"
    ddb.delete_table(TableName=name)


def test_ttl_expiry_seen_through_getitem(ddb):
    name = new_table(ddb, sort_key=False)
    assert ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"][
        "TimeToLiveStatus"] == "DISABLED"
    spec = {"Enabled": True, "AttributeName": "ExpirationTime"}
    assert ddb.update_time_to_live(TableName=name, TimeToLiveSpecification=spec)[
        "TimeToLiveSpecification"] == spec
    deadline = time.time() + 20
    while True:
        d = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        assert d["AttributeName"] == "ExpirationTime"
        if d["TimeToLiveStatus"] == "ENABLED":
            break
        assert d["TimeToLiveStatus"] == "ENABLING", d
        assert time.time() < deadline, "TTL not ENABLED within 20 s"
        time.sleep(0.2)
    with pytest.raises(ClientError) as e:
        ddb.update_time_to_live(TableName=name, TimeToLiveSpecification=spec)
    assert error_code(e) == "ValidationException"
    with pytest.raises(ClientError) as e:
        ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={
            "Enabled": False, "AttributeName": "Other"})
    assert error_code(e) == "ValidationException"

    due = int(time.time()) + 3
    short = {"pk": {"S": "short"}}
    long_ = {"pk": {"S": "long"}}
    ddb.put_item(TableName=name, Item=dict(short, ExpirationTime={"N": str(due)}))
    ddb.put_item(TableName=name, Item=dict(long_, ExpirationTime={"N": str(due + 3600)}))
    assert "Item" in ddb.get_item(TableName=name, Key=short)
    # Lapse deletes on time (within about a second); allow 10 s past due.
    while "Item" in ddb.get_item(TableName=name, Key=short):
        assert time.time() < due + 10, "the expired item is still there 10 s after its TTL"
        time.sleep(0.1)
    gone_at = time.time()
    assert gone_at >= due - 1, "deleted %.1f s before its TTL" % (due - gone_at)
    assert "Item" in ddb.get_item(TableName=name, Key=long_)
    ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={
        "Enabled": False, "AttributeName": "ExpirationTime"})
    ddb.delete_table(TableName=name)


def test_raw_protocol_errors():
    status, doc = raw("GET", target=None)
    assert status == 200 and "healthy" in doc
    status, doc = raw("POST", b"{}")
    assert status == 200 and isinstance(doc["TableNames"], list)
    assert_error(*raw("POST", b"{not json"), "SerializationException")
    assert_error(*raw("POST", b"[1,2]"), "SerializationException")
    assert_error(*raw("POST", b""), "SerializationException")
    assert_error(*raw("POST", b"[" * 100000 + b"]" * 100000), "SerializationException")
    assert_error(*raw("POST", b"{}", target="DynamoDB_20120810.NoSuchOperation"),
                 "UnknownOperationException")
    assert_error(*raw("POST", b"{}", target="Something.Else"), "UnknownOperationException")
    assert_error(*raw("POST", b"{}", target=None), "UnknownOperationException")
    assert_error(*raw("POST", b'{"TableName":5}', target="DynamoDB_20120810.DescribeTable"),
                 "SerializationException")
    assert_error(*raw("POST", b'{"TableName":"t","Item":[]}', target="DynamoDB_20120810.PutItem"),
                 "SerializationException")
    assert_error(*raw("POST", b'{}', target="DynamoDB_20120810.GetItem"), "ValidationException")
    assert_error(*raw("POST", b'{"TableName":"t","TimeToLiveSpecification":{"Enabled":"yes",'
                              b'"AttributeName":"x"}}',
                      target="DynamoDB_20120810.UpdateTimeToLive"), "SerializationException")
    assert_error(*raw("POST", b'{"TableName":"t","Limit":"x"}'), "SerializationException")
    assert_error(*raw("POST", b'{"Limit":0}'), "ValidationException")
    assert_error(*raw("POST", b'{"TableName":"x","Limit":1}' + b"\x00\xff"),
                 "SerializationException")
    # Signed requests are accepted without verification in this slice.
    status, doc = raw("POST", b"{}", headers={
        "Authorization": "AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/dynamodb/aws4_request,"
                         " SignedHeaders=host, Signature=00"})
    assert status == 200
    assert gateway_alive()


def test_bad_items_are_validation_errors(ddb):
    name = new_table(ddb, sort_key=False)
    for item in (b'{"pk":{"S":"a"},"n":{"N":"abc"}}', b'{"pk":{"S":"a"},"x":{"Q":"1"}}',
                 b'{"pk":{"S":"a"},"x":{"SS":["a"]}}', b'{"pk":{"S":"a"},"x":"plain"}'):
        body = b'{"TableName":"%s","Item":%s}' % (name.encode(), item)
        assert_error(*raw("POST", body, target="DynamoDB_20120810.PutItem"),
                     "ValidationException")
    ddb.delete_table(TableName=name)
    assert gateway_alive()


def test_oversized_body_is_refused_and_the_gateway_keeps_serving():
    # A Content-Length over 16 MB is refused from the headers alone, in
    # DynamoDB's shape, before any of the body is read.
    u = urllib.parse.urlparse(ENDPOINT)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.putrequest("POST", "/")
        conn.putheader("X-Amz-Target", "DynamoDB_20120810.DescribeTable")
        conn.putheader("Content-Type", "application/x-amz-json-1.0")
        conn.putheader("Content-Length", str(16 * 1024 * 1024 + 1))
        conn.endheaders()
        resp = conn.getresponse()
        assert_error(resp.status, json.loads(resp.read()), "SerializationException")
    finally:
        conn.close()
    # Just under the limit is read and answered by the gateway itself.
    near = b'{"TableName":"' + b"a" * (16 * 1024 * 1024 - 64) + b'"}'
    status, doc = raw("POST", near, target="DynamoDB_20120810.DescribeTable")
    assert status == 400 and doc["__type"] in (TYPE_PREFIX + "ValidationException",
                                                TYPE_PREFIX + "ResourceNotFoundException"), doc
    assert gateway_alive()
    status, doc = raw("POST", b"{}")
    assert status == 200
