"""ddb_helpers: what the pytest suites against lapse-dynamodb share
(tests/dynamodb_test.sh pytest runs them with DDB_ENDPOINT and
DDB_GATEWAY_PID set): the endpoint, boto3 clients, raw HTTP requests and
DynamoDB's error shape."""
import http.client
import json
import os
import urllib.parse
import uuid

import boto3
import botocore.config
import pytest

ENDPOINT = os.environ["DDB_ENDPOINT"]
GATEWAY_PID = int(os.environ["DDB_GATEWAY_PID"])
TYPE_PREFIX = "com.amazonaws.dynamodb.v20120810#"


def client(service):
    """A boto3 client of service ("dynamodb" or "dynamodbstreams") on the gateway."""
    return boto3.client(
        service, endpoint_url=ENDPOINT, region_name="us-east-1",
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
