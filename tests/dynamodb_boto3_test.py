"""dynamodb_boto3_test: boto3 and raw HTTP against lapse-dynamodb
(docs/dynamodb-api.md). Run by tests/dynamodb_test.sh pytest, which starts a
cluster with its gateway and sets DDB_ENDPOINT (http://127.0.0.1:PORT) and
DDB_GATEWAY_PID.

Proves: the table calls, expressions (conditions, updates, projections, key
conditions and filters, with nested paths, reserved words and missing or
unused names and values), conditional writes that lose no update under
concurrency, Query and Scan with pagination, segments and Select=COUNT on a
table, an LSI and a GSI, the batch calls and their limits, items round-trip in DynamoDB JSON, each error by
name (ResourceNotFoundException, ResourceInUseException, ValidationException,
SerializationException, UnknownOperationException), an item whose TTL passes
disappears from GetItem on time after UpdateTimeToLive, and bad input
(malformed JSON, wrong types, deep nesting, no target, a body over 16 MB)
gets DynamoDB's error shape while the gateway keeps serving.
"""
import http.client
import json
import threading
import os
import time
import urllib.parse
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError

from ddb_helpers import (ENDPOINT, TYPE_PREFIX, assert_error, client, error_code, gateway_alive,
                         new_table, raw)


@pytest.fixture(scope="module")
def ddb():
    return client("dynamodb")


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
        ddb.delete_item(TableName=name, Key=key, ReturnValues="ALL_NEW")
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
                 b'{"pk":{"S":"a"},"x":{"SS":["a","a"]}}', b'{"pk":{"S":"a"},"x":{"NS":[]}}',
                 b'{"pk":{"S":"a"},"x":"plain"}'):
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


# ---- expressions, conditional writes, Query, Scan, batches (issue 14's second slice) ----

def msg(excinfo):
    return excinfo.value.response["Error"]["Message"]


def test_condition_expressions(ddb):
    name = new_table(ddb)
    key = {"pk": {"S": "c"}, "sk": {"N": "1"}}
    item = dict(key, n={"N": "5"}, m={"M": {"l": {"L": [{"S": "x"}, {"M": {"c": {"N": "3"}}}]}}})
    ddb.put_item(TableName=name, Item=item, ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(ClientError) as e:
        ddb.put_item(TableName=name, Item=key, ConditionExpression="attribute_not_exists(pk)")
    assert error_code(e) == "ConditionalCheckFailedException"
    assert ddb.get_item(TableName=name, Key=key)["Item"] == item  # not replaced
    # A false condition on a nested path refuses the delete; a true one deletes.
    with pytest.raises(ClientError) as e:
        ddb.delete_item(TableName=name, Key=key, ConditionExpression="#m.l[1].c > :v",
                        ExpressionAttributeNames={"#m": "m"},
                        ExpressionAttributeValues={":v": {"N": "3"}})
    assert error_code(e) == "ConditionalCheckFailedException"
    assert "Item" in ddb.get_item(TableName=name, Key=key)
    # A condition reading two attributes of an existing item is guarded by
    # the whole item as read: false, nothing deleted.
    with pytest.raises(ClientError) as e:
        ddb.delete_item(TableName=name, Key=key, ConditionExpression="m.l[1].c = :v AND n = :n",
                        ExpressionAttributeValues={":v": {"N": "3"}, ":n": {"N": "6"}})
    assert error_code(e) == "ConditionalCheckFailedException"
    assert "Item" in ddb.get_item(TableName=name, Key=key)
    ddb.delete_item(TableName=name, Key=key,
                    ConditionExpression="m.l[1].c = :v AND (size(m.l) BETWEEN :lo AND :hi "
                                        "OR m.l[0] IN (:v))",
                    ExpressionAttributeValues={":v": {"N": "3"}, ":lo": {"N": "1"},
                                               ":hi": {"N": "9"}})
    assert "Item" not in ddb.get_item(TableName=name, Key=key)
    # Functions on an absent item: the put is guarded by its absence.
    ddb.put_item(TableName=name, Item=item,
                 ConditionExpression="attribute_not_exists(n) AND NOT begins_with(pk, :c)",
                 ExpressionAttributeValues={":c": {"S": "zz"}})
    with pytest.raises(ClientError) as e:
        ddb.put_item(TableName=name, Item=item, ConditionExpression="size(m.l) > :two",
                     ExpressionAttributeValues={":two": {"N": "2"}})
    assert error_code(e) == "ConditionalCheckFailedException"
    ddb.put_item(TableName=name, Item=item,
                 ConditionExpression="contains(m.l, :x) AND attribute_type(m.l, :t)",
                 ExpressionAttributeValues={":x": {"S": "x"}, ":t": {"S": "L"}})
    # Mistakes, each a ValidationException naming the culprit.
    cases = [
        (dict(ConditionExpression="status = :v", ExpressionAttributeValues={":v": {"S": "a"}}),
         "reserved keyword: status"),
        (dict(ConditionExpression="n = :missing"), "attribute value: :missing"),
        (dict(ConditionExpression="#missing = :v", ExpressionAttributeValues={":v": {"N": "1"}}),
         "attribute name: #missing"),
        (dict(ConditionExpression="n = :v", ExpressionAttributeValues={":v": {"N": "1"},
                                                                        ":u": {"N": "2"}}),
         "unused in expressions: keys: {:u}"),
        (dict(ConditionExpression="n = = :v", ExpressionAttributeValues={":v": {"N": "1"}}),
         "Syntax error"),
        (dict(ConditionExpression="nofunc(n)"), "Invalid function name; function: nofunc"),
        (dict(ConditionExpression="(" * 40 + "attribute_exists(n)" + ")" * 40),
         "nested too deeply"),
    ]
    for kw, want in cases:
        with pytest.raises(ClientError) as e:
            ddb.put_item(TableName=name, Item=item, **kw)
        assert error_code(e) == "ValidationException", kw
        assert want in msg(e), (kw, msg(e))
    ddb.delete_table(TableName=name)


def test_update_item(ddb):
    name = new_table(ddb)
    key = {"pk": {"S": "u"}, "sk": {"N": "1"}}
    # On an absent item UpdateItem creates it.
    r = ddb.update_item(TableName=name, Key=key,
                        UpdateExpression="SET n = if_not_exists(n, :zero) + :one, l = :l, "
                                         "m = :m",
                        ExpressionAttributeValues={":zero": {"N": "0"}, ":one": {"N": "1"},
                                                   ":l": {"L": [{"N": "1"}]},
                                                   ":m": {"M": {"a": {"M": {}}}}},
                        ReturnValues="ALL_NEW")
    assert r["Attributes"] == dict(key, n={"N": "1"}, l={"L": [{"N": "1"}]},
                                   m={"M": {"a": {"M": {}}}})
    r = ddb.update_item(TableName=name, Key=key, UpdateExpression="SET l = list_append(l, :l)",
                        ExpressionAttributeValues={":l": {"L": [{"S": "two"}]}},
                        ReturnValues="UPDATED_NEW")
    assert r["Attributes"] == {"l": {"L": [{"N": "1"}, {"S": "two"}]}}
    r = ddb.update_item(TableName=name, Key=key, UpdateExpression="SET m.a.#b = :v",
                        ExpressionAttributeNames={"#b": "b"},
                        ExpressionAttributeValues={":v": {"S": "deep"}}, ReturnValues="ALL_NEW")
    assert r["Attributes"]["m"] == {"M": {"a": {"M": {"b": {"S": "deep"}}}}}
    ddb.update_item(TableName=name, Key=key, UpdateExpression="SET n = n - :d",
                    ExpressionAttributeValues={":d": {"N": "2.5"}})
    r = ddb.update_item(TableName=name, Key=key, UpdateExpression="ADD c :d",
                        ExpressionAttributeValues={":d": {"N": "2.5"}}, ReturnValues="ALL_NEW")
    assert r["Attributes"]["n"] == {"N": "-1.5"} and r["Attributes"]["c"] == {"N": "2.5"}
    ddb.update_item(TableName=name, Key=key, UpdateExpression="REMOVE l[0], c")
    got = ddb.get_item(TableName=name, Key=key)["Item"]
    assert got["l"] == {"L": [{"S": "two"}]} and "c" not in got
    # A condition of the node's own shape, true then false.
    ddb.update_item(TableName=name, Key=key, UpdateExpression="SET s = :s",
                    ConditionExpression="attribute_exists(n)",
                    ExpressionAttributeValues={":s": {"S": "on"}})
    with pytest.raises(ClientError) as e:
        ddb.update_item(TableName=name, Key=key, UpdateExpression="SET s = :s",
                        ConditionExpression="s = :other",
                        ExpressionAttributeValues={":s": {"S": "x"}, ":other": {"S": "off"}})
    assert error_code(e) == "ConditionalCheckFailedException"
    assert ddb.get_item(TableName=name, Key=key)["Item"]["s"] == {"S": "on"}
    # Refusals by name.
    cases = [
        (dict(UpdateExpression="SET sk = :v", ExpressionAttributeValues={":v": {"N": "2"}}),
         "Cannot update attribute sk"),
        (dict(UpdateExpression="SET n = :v REMOVE n", ExpressionAttributeValues={":v": {"N": "2"}}),
         "Two document paths overlap"),
        (dict(UpdateExpression="SET s = s + :v", ExpressionAttributeValues={":v": {"N": "2"}}),
         "operand type: S"),
        (dict(UpdateExpression="SET nothing.a = :v", ExpressionAttributeValues={":v": {"N": "2"}}),
         "invalid for update"),
        (dict(UpdateExpression="SET n = :v", ExpressionAttributeValues={":v": {"N": "2"}},
              ReturnValues="OLD_AND_NEW"), "returnValues"),
        (dict(UpdateExpression="SET #size = :v", ExpressionAttributeValues={":v": {"N": "2"}}),
         "attribute name: #size"),
        # ADD of a set to a number: the operand types differ.
        (dict(UpdateExpression="ADD n :s", ExpressionAttributeValues={":s": {"SS": ["a"]}}),
         "operand"),
        (dict(UpdateExpression="SET size = :v", ExpressionAttributeValues={":v": {"N": "2"}}),
         "reserved keyword"),
    ]
    for kw, want in cases:
        with pytest.raises(ClientError) as e:
            ddb.update_item(TableName=name, Key=key, **kw)
        assert error_code(e) == "ValidationException", kw
        assert want in msg(e), (kw, msg(e))
    ddb.delete_table(TableName=name)


@pytest.mark.parametrize("update", ["SET n = n + :one", "SET n = n + :one, m = m + :one"])
def test_concurrent_increments_lose_nothing(ddb, update):
    """SET n = n + 1 is read, computed and written under a guard on n (with
    m too, under a guard on the whole item): four threads racing 20 times
    each end at exactly 80."""
    name = new_table(ddb)
    key = {"pk": {"S": "ctr"}, "sk": {"N": "0"}}
    ddb.put_item(TableName=name, Item=dict(key, n={"N": "0"}, m={"N": "0"}))
    errors = []

    def worker():
        for _ in range(20):
            for attempt in range(20):
                try:
                    ddb.update_item(TableName=name, Key=key, UpdateExpression=update,
                                    ExpressionAttributeValues={":one": {"N": "1"}})
                    break
                except ClientError as e:  # a 500 after guard retries wrote nothing: resend
                    if e.response["ResponseMetadata"]["HTTPStatusCode"] != 500:
                        errors.append(e)
                        return
            else:
                errors.append("gave up")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    got = ddb.get_item(TableName=name, Key=key, ConsistentRead=True)["Item"]
    assert got["n"] == {"N": "80"}
    assert got["m"] == {"N": "80" if "m =" in update else "0"}
    ddb.delete_table(TableName=name)


def test_return_values_old(ddb):
    """ReturnValues ALL_OLD (PutItem, DeleteItem, UpdateItem) and UPDATED_OLD
    return the item the write replaced exactly; ReturnValuesOnConditionCheckFailure
    ALL_OLD puts the item a false condition saw in the error."""
    name = new_table(ddb)
    key = {"pk": {"S": "rv"}, "sk": {"N": "1"}}
    v1 = dict(key, a={"N": "1"}, b={"S": "x"})
    assert "Attributes" not in ddb.put_item(TableName=name, Item=v1, ReturnValues="ALL_OLD")
    v2 = dict(key, a={"N": "2"})
    assert ddb.put_item(TableName=name, Item=v2, ReturnValues="ALL_OLD")["Attributes"] == v1
    r = ddb.update_item(TableName=name, Key=key, UpdateExpression="SET a = a + :one, c = :c",
                        ExpressionAttributeValues={":one": {"N": "1"}, ":c": {"S": "new"}},
                        ReturnValues="UPDATED_OLD")
    assert r["Attributes"] == {"a": {"N": "2"}}  # c had no old value
    r = ddb.update_item(TableName=name, Key=key, UpdateExpression="REMOVE c",
                        ReturnValues="ALL_OLD")
    assert r["Attributes"] == dict(key, a={"N": "3"}, c={"S": "new"})
    # (Raw: Debian's botocore predates ReturnValuesOnConditionCheckFailure.)
    body = json.dumps({"TableName": name, "Key": key, "ConditionExpression": "a = :nine",
                       "ExpressionAttributeValues": {":nine": {"N": "9"}},
                       "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}).encode()
    status, doc = raw("POST", body, target="DynamoDB_20120810.DeleteItem")
    assert_error(status, doc, "ConditionalCheckFailedException")
    assert doc["Item"] == dict(key, a={"N": "3"})
    with pytest.raises(ClientError) as e:  # NONE: no item in the error
        ddb.delete_item(TableName=name, Key=key, ConditionExpression="a = :nine",
                        ExpressionAttributeValues={":nine": {"N": "9"}})
    assert "Item" not in e.value.response
    r = ddb.delete_item(TableName=name, Key=key, ReturnValues="ALL_OLD")
    assert r["Attributes"] == dict(key, a={"N": "3"})
    assert "Attributes" not in ddb.delete_item(TableName=name, Key=key, ReturnValues="ALL_OLD")
    ddb.delete_table(TableName=name)


def test_return_values_old_of_the_deepest_item(ddb):
    """An item nested as deep as DynamoDB allows (32 levels) is replaced with
    ReturnValues ALL_OLD like any other. The gateway reads the old item and
    puts on the condition that the item is still exactly that; carried as a
    condition's M value, the item once counted a level too deep and the
    put failed with a 500 ("out of memory", dynamodb_fuzz_test seed
    1314278702)."""
    name = new_table(ddb)
    deep = {"S": "deep"}
    for _ in range(30):  # the list and 30 maps around the string: 32 levels
        deep = {"M": {"x": deep}}
    key = {"pk": {"S": "deep"}, "sk": {"N": "1"}}
    v1 = dict(key, l={"L": [deep]})
    ddb.put_item(TableName=name, Item=v1)
    assert ddb.put_item(TableName=name, Item=key, ReturnValues="ALL_OLD")["Attributes"] == v1
    ddb.put_item(TableName=name, Item=v1)
    r = ddb.delete_item(TableName=name, Key=key, ReturnValues="ALL_OLD")
    assert r["Attributes"] == v1
    with pytest.raises(ClientError) as e:  # one level more is refused, as DynamoDB does
        ddb.put_item(TableName=name, Item=dict(key, l={"L": [{"M": {"x": deep}}]}))
    assert error_code(e) == "ValidationException"
    ddb.delete_table(TableName=name)


def test_get_item_projection(ddb):
    name = new_table(ddb)
    key = {"pk": {"S": "p"}, "sk": {"N": "1"}}
    ddb.put_item(TableName=name, Item=dict(key, a={"N": "1"}, b={"S": "x"},
                                           m={"M": {"l": {"L": [{"N": "0"}, {"S": "y"}]},
                                                    "z": {"N": "9"}}}))
    got = ddb.get_item(TableName=name, Key=key, ProjectionExpression="a, m.l[1], #z",
                       ExpressionAttributeNames={"#z": "nothing"})["Item"]
    assert got == {"a": {"N": "1"}, "m": {"M": {"l": {"L": [{"S": "y"}]}}}}
    with pytest.raises(ClientError) as e:
        ddb.get_item(TableName=name, Key=key, ProjectionExpression="a, name")
    assert error_code(e) == "ValidationException" and "reserved keyword: name" in msg(e)
    ddb.delete_table(TableName=name)


def fill(ddb, name, pks, n):
    for pk in pks:
        for i in range(n):
            ddb.put_item(TableName=name, Item={"pk": {"S": pk}, "sk": {"N": str(i)},
                                               "odd": {"BOOL": i % 2 == 1},
                                               "g": {"S": "g" + str(i % 2)}})


def test_query(ddb):
    name = new_table(ddb)
    fill(ddb, name, ["a", "b"], 12)
    v = {":p": {"S": "a"}, ":lo": {"N": "3"}, ":hi": {"N": "8"}}
    r = ddb.query(TableName=name, KeyConditionExpression="pk = :p AND sk BETWEEN :lo AND :hi",
                  ExpressionAttributeValues=v)
    assert [i["sk"]["N"] for i in r["Items"]] == ["3", "4", "5", "6", "7", "8"]
    assert all(i["pk"] == {"S": "a"} for i in r["Items"])
    r = ddb.query(TableName=name, KeyConditionExpression=":p = pk AND :lo > sk",
                  ExpressionAttributeValues={":p": {"S": "a"}, ":lo": {"N": "3"}},
                  ScanIndexForward=False)
    assert [i["sk"]["N"] for i in r["Items"]] == ["2", "1", "0"]
    # Pages of 5 with a filter: Limit counts what was read; every item once.
    seen, start, pages = [], None, 0
    while True:
        kw = {"ExclusiveStartKey": start} if start else {}
        r = ddb.query(TableName=name, KeyConditionExpression="pk = :p",
                      FilterExpression="odd = :t", ProjectionExpression="sk",
                      ExpressionAttributeValues={":p": {"S": "a"}, ":t": {"BOOL": True}},
                      Limit=5, **kw)
        pages += 1
        assert r["ScannedCount"] <= 5 and r["Count"] == len(r["Items"])
        seen += [int(i["sk"]["N"]) for i in r["Items"]]
        assert all(set(i) == {"sk"} for i in r["Items"])
        start = r.get("LastEvaluatedKey")
        if not start:
            break
    assert seen == [1, 3, 5, 7, 9, 11] and pages >= 3
    r = ddb.query(TableName=name, KeyConditionExpression="pk = :p",
                  ExpressionAttributeValues={":p": {"S": "b"}}, Select="COUNT")
    assert r["Count"] == 12 and "Items" not in r
    for kw, want in [
        (dict(KeyConditionExpression="sk = :v", ExpressionAttributeValues={":v": {"N": "1"}}),
         "missed key schema element: pk"),
        (dict(KeyConditionExpression="pk = :p OR sk = :v",
              ExpressionAttributeValues={":p": {"S": "a"}, ":v": {"N": "1"}}),
         "Invalid operator"),
        (dict(KeyConditionExpression="pk = :p AND odd = :v",
              ExpressionAttributeValues={":p": {"S": "a"}, ":v": {"BOOL": True}}),
         "odd is not a key attribute"),
        (dict(KeyConditionExpression="pk < :p", ExpressionAttributeValues={":p": {"S": "a"}}),
         "Query key condition not supported"),
        (dict(KeyConditionExpression="pk = :p", IndexName="nope",
              ExpressionAttributeValues={":p": {"S": "a"}}),
         "does not have the specified index"),
        (dict(KeyConditionExpression="pk = :p", FilterExpression="sk > :v",
              ExpressionAttributeValues={":p": {"S": "a"}, ":v": {"N": "1"}}),
         "Primary key attribute: sk"),
    ]:
        with pytest.raises(ClientError) as e:
            ddb.query(TableName=name, **kw)
        assert error_code(e) == "ValidationException", kw
        assert want in msg(e), (kw, msg(e))
    ddb.delete_table(TableName=name)


def test_query_indexes(ddb):
    name = "t_" + uuid.uuid4().hex[:12]
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": t}
                              for a, t in [("pk", "S"), ("sk", "N"), ("g", "S"), ("r", "N")]],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}],
        LocalSecondaryIndexes=[{"IndexName": "by_r", "Projection": {"ProjectionType": "ALL"},
                                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                              {"AttributeName": "r", "KeyType": "RANGE"}]}],
        GlobalSecondaryIndexes=[{"IndexName": "by_g", "Projection": {"ProjectionType": "ALL"},
                                 "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"},
                                               {"AttributeName": "sk", "KeyType": "RANGE"}]}])
    for i in range(6):
        ddb.put_item(TableName=name, Item={"pk": {"S": "a"}, "sk": {"N": str(i)},
                                           "r": {"N": str(10 - i)}, "g": {"S": "g" + str(i % 2)}})
    r = ddb.query(TableName=name, IndexName="by_r", KeyConditionExpression="pk = :p AND r >= :r",
                  ExpressionAttributeValues={":p": {"S": "a"}, ":r": {"N": "8"}})
    assert [i["r"]["N"] for i in r["Items"]] == ["8", "9", "10"]
    deadline = time.time() + 10  # a GSI is eventually consistent
    while True:
        r = ddb.query(TableName=name, IndexName="by_g",
                      KeyConditionExpression="g = :g AND sk > :s",
                      ExpressionAttributeValues={":g": {"S": "g1"}, ":s": {"N": "1"}})
        if [i["sk"]["N"] for i in r["Items"]] == ["3", "5"] or time.time() > deadline:
            break
        time.sleep(0.2)
    assert [i["sk"]["N"] for i in r["Items"]] == ["3", "5"]
    with pytest.raises(ClientError) as e:  # a GSI cannot promise a consistent read
        ddb.query(TableName=name, IndexName="by_g", ConsistentRead=True,
                  KeyConditionExpression="g = :g", ExpressionAttributeValues={":g": {"S": "g1"}})
    assert error_code(e) == "ValidationException" and "global secondary indexes" in msg(e)
    r = ddb.query(TableName=name, IndexName="by_r", ConsistentRead=True,
                  KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "a"}})
    assert r["Count"] == 6
    ddb.delete_table(TableName=name)


def test_scan(ddb):
    name = new_table(ddb)
    fill(ddb, name, ["a", "b", "c"], 7)
    all_keys, start = [], None
    while True:
        kw = {"ExclusiveStartKey": start} if start else {}
        r = ddb.scan(TableName=name, Limit=4, **kw)
        assert r["ScannedCount"] <= 4
        all_keys += [(i["pk"]["S"], i["sk"]["N"]) for i in r["Items"]]
        start = r.get("LastEvaluatedKey")
        if not start:
            break
    assert len(all_keys) == 21 and len(set(all_keys)) == 21
    segs = [ddb.scan(TableName=name, Segment=s, TotalSegments=3)["Items"] for s in range(3)]
    seg_keys = [(i["pk"]["S"], i["sk"]["N"]) for seg in segs for i in seg]
    assert sorted(seg_keys) == sorted(all_keys)
    r = ddb.scan(TableName=name, FilterExpression="odd = :t AND begins_with(g, :g)",
                 ExpressionAttributeValues={":t": {"BOOL": True}, ":g": {"S": "g1"}},
                 Select="COUNT")
    assert r["Count"] == 9 and r["ScannedCount"] == 21 and "Items" not in r
    for kw, want in [(dict(Segment=1), "TotalSegments"),
                     (dict(Segment=3, TotalSegments=3), "must be less than"),
                     (dict(FilterExpression="data = :v",
                           ExpressionAttributeValues={":v": {"N": "1"}}),
                      "reserved keyword: data")]:
        with pytest.raises(ClientError) as e:
            ddb.scan(TableName=name, **kw)
        assert error_code(e) == "ValidationException", kw
        assert want in msg(e), (kw, msg(e))
    ddb.delete_table(TableName=name)


def test_batches(ddb):
    name = new_table(ddb)
    puts = [{"PutRequest": {"Item": {"pk": {"S": "b"}, "sk": {"N": str(i)}, "v": {"N": str(i)}}}}
            for i in range(25)]
    assert ddb.batch_write_item(RequestItems={name: puts})["UnprocessedItems"] == {}
    keys = [{"pk": {"S": "b"}, "sk": {"N": str(i)}} for i in range(100)]
    r = ddb.batch_get_item(RequestItems={name: {"Keys": keys, "ProjectionExpression": "sk, v"}})
    assert r["UnprocessedKeys"] == {}
    assert sorted(int(i["v"]["N"]) for i in r["Responses"][name]) == list(range(25))
    assert all(set(i) == {"sk", "v"} for i in r["Responses"][name])
    dels = [{"DeleteRequest": {"Key": k}} for k in keys[:10]]
    ddb.batch_write_item(RequestItems={name: dels})
    r = ddb.batch_get_item(RequestItems={name: {"Keys": keys[:25]}})
    assert sorted(int(i["sk"]["N"]) for i in r["Responses"][name]) == list(range(10, 25))
    for call, want in [
        (lambda: ddb.batch_write_item(RequestItems={name: puts + puts[:1]}), "Too many items"),
        (lambda: ddb.batch_get_item(RequestItems={name: {"Keys": keys + keys[:1]}}),
         "Too many items"),
        (lambda: ddb.batch_write_item(RequestItems={name: puts[:2] + puts[:1]}), "duplicates"),
        (lambda: ddb.batch_get_item(RequestItems={name: {"Keys": keys[:2] + keys[:1]}}),
         "duplicates"),
        (lambda: ddb.batch_write_item(RequestItems={name: [{"PutRequest": {"Item": {
            "pk": {"S": "b"}}}}]}), "sk"),
    ]:
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e) == "ValidationException", want
        assert want in msg(e), (want, msg(e))
    with pytest.raises(ClientError) as e:
        ddb.batch_get_item(RequestItems={"no_such_" + uuid.uuid4().hex[:6]: {"Keys": keys[:1]}})
    assert error_code(e) == "ResourceNotFoundException"
    ddb.delete_table(TableName=name)


def test_hostile_expressions_keep_the_gateway_serving():
    for expr in ["(" * 100000, "a." * 3000 + "b", "NOT " * 1000 + "a = :v",
                 "\u00e9 = :v", "a = :v " + "OR a = :v " * 400, "x" * 5000]:
        body = json.dumps({"TableName": "t", "Key": {"pk": {"S": "a"}},
                           "ConditionExpression": expr,
                           "ExpressionAttributeValues": {":v": {"N": "1"}}}).encode()
        status, doc = raw("POST", body, target="DynamoDB_20120810.DeleteItem")
        assert_error(status, doc, "ValidationException")
    assert gateway_alive()
    status, doc = raw("POST", b"{}")
    assert status == 200 and "TableNames" in doc


def test_sets(ddb):
    """SS, NS and BS: stored and returned as sets (in any order), ADD and
    DELETE on them, conditions on them, DynamoDB's refusals, and boto3's
    resource API mapping Python sets to them."""
    name = new_table(ddb, sort_key=False)
    key = {"pk": {"S": "s1"}}
    item = dict(key, ss={"SS": ["b", "a"]}, ns={"NS": ["1.50", "-2", "10"]},
                bs={"BS": [b"\x00\x01", b"\x02"]}, inlist={"L": [{"SS": ["x"]}]})
    ddb.put_item(TableName=name, Item=item)
    got = ddb.get_item(TableName=name, Key=key, ConsistentRead=True)["Item"]
    assert sorted(got["ss"]["SS"]) == ["a", "b"]
    assert sorted(got["ns"]["NS"], key=float) == ["-2", "1.50", "10"]
    assert sorted(got["bs"]["BS"]) == [b"\x00\x01", b"\x02"]
    assert got["inlist"] == {"L": [{"SS": ["x"]}]}
    # ADD unions, DELETE removes elements; a set emptied goes away.
    # (One set per call: on an existing item Lapse applies atomically what
    # reads one attribute, docs/dynamodb-api.md "What is atomic".)
    for expr, v in (("ADD ss :v", {"SS": ["c", "a"]}), ("ADD ns :v", {"NS": ["10.0", "7"]}),
                    ("DELETE ss :v", {"SS": ["b", "zz"]}),
                    ("DELETE bs :v", {"BS": [b"\x00\x01", b"\x02"]})):
        ddb.update_item(TableName=name, Key=key, UpdateExpression=expr,
                        ExpressionAttributeValues={":v": v})
    got = ddb.get_item(TableName=name, Key=key, ConsistentRead=True)["Item"]
    assert sorted(got["ss"]["SS"]) == ["a", "c"]
    assert sorted(got["ns"]["NS"], key=float) == ["-2", "1.50", "7", "10"]
    assert "bs" not in got
    # Conditions read sets: contains, size.
    ddb.put_item(TableName=name, Item=dict(key, ss={"SS": ["a", "c"]}),
                 ConditionExpression="size(ns) = :four",
                 ExpressionAttributeValues={":four": {"N": "4"}})
    ddb.put_item(TableName=name, Item=dict(key, ss={"SS": ["a"]}),
                 ConditionExpression="contains(ss, :c)", ExpressionAttributeValues={":c": {"S": "c"}})
    with pytest.raises(ClientError) as e:
        ddb.put_item(TableName=name, Item=key, ConditionExpression="contains(ss, :c)",
                     ExpressionAttributeValues={":c": {"S": "c"}})
    assert error_code(e) == "ConditionalCheckFailedException"
    # DynamoDB's refusals: empty sets, duplicates (NS by value), a set key.
    for bad in ({"SS": []}, {"SS": ["a", "a"]}, {"NS": ["1", "1.0"]}, {"NS": ["x"]}):
        with pytest.raises(ClientError) as e:
            ddb.put_item(TableName=name, Item=dict(key, v=bad))
        assert error_code(e) == "ValidationException", bad
    with pytest.raises(ClientError) as e:
        ddb.put_item(TableName=name, Item={"pk": {"SS": ["a"]}})
    assert error_code(e) == "ValidationException"
    assert ddb.get_item(TableName=name, Key=key, ConsistentRead=True)["Item"] == dict(
        key, ss={"SS": ["a"]})
    # boto3's resource API: Python sets are SS / NS.
    table = boto3.resource("dynamodb", endpoint_url=ENDPOINT, region_name="us-east-1",
                           aws_access_key_id="x", aws_secret_access_key="x").Table(name)
    table.put_item(Item={"pk": "r", "tags": {"red", "blue"}, "nums": {1, 2, 3}})
    r = table.get_item(Key={"pk": "r"}, ConsistentRead=True)["Item"]
    assert r["tags"] == {"red", "blue"} and r["nums"] == {1, 2, 3}
    ddb.delete_table(TableName=name)


def test_describe_table_sizes(ddb):
    """DescribeTable's ItemCount and TableSizeBytes: 0 for a new table; after
    40 puts of about 300 bytes, over partitions on three nodes, the count is
    exact (each partition is counted while it holds under 10,000 items) and
    the size is the items' encoded bytes, near what was put. The gateway
    caches the figures for 10 s (DynamoDB: about 6 hours), so a table is
    described once before and once after its puts, each a first look."""
    empty = new_table(ddb, sort_key=False)
    t = ddb.describe_table(TableName=empty)["Table"]
    assert (t["ItemCount"], t["TableSizeBytes"]) == (0, 0)
    name = new_table(ddb)
    for i in range(40):
        ddb.put_item(TableName=name, Item={"pk": {"S": "p%d" % (i % 7)}, "sk": {"N": str(i)},
                                           "blob": {"S": "x" * 300}})
    t = ddb.describe_table(TableName=name)["Table"]
    assert t["ItemCount"] == 40, t["ItemCount"]
    assert 40 * 300 <= t["TableSizeBytes"] <= 40 * 600, t["TableSizeBytes"]
    ddb.delete_table(TableName=empty)
    ddb.delete_table(TableName=name)


def test_update_table(ddb):
    """UpdateTable: capacity settings are accepted and change nothing (Lapse
    tables are on-demand); a stream change that would change nothing is
    refused in DynamoDB's words (turning streams on and off:
    dynamodb_streams_test)."""
    name = new_table(ddb)
    d = ddb.update_table(TableName=name, BillingMode="PAY_PER_REQUEST")["TableDescription"]
    assert d["TableName"] == name and d["TableStatus"] == "ACTIVE"
    ddb.update_table(TableName=name, BillingMode="PROVISIONED",
                     ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5})
    assert ddb.describe_table(TableName=name)["Table"]["BillingModeSummary"] == {
        "BillingMode": "PAY_PER_REQUEST"}
    cases = [({"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "KEYS"}},
              "streamSpecification.streamViewType"),
             ({"StreamSpecification": {"StreamEnabled": False}},
              "does not have a stream to disable"),
             ({}, "At least one of")]
    for kw, text in cases:
        with pytest.raises(ClientError) as e:
            ddb.update_table(TableName=name, **kw)
        assert error_code(e) == "ValidationException" and text in msg(e), (kw, msg(e))
    with pytest.raises(ClientError) as e:
        ddb.update_table(TableName=name + "x", BillingMode="PAY_PER_REQUEST")
    assert error_code(e) == "ResourceNotFoundException"
    ddb.delete_table(TableName=name)

