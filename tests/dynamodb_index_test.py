"""dynamodb_index_test: reads from secondary indexes through lapse-dynamodb
with boto3 (docs/dynamodb-api.md, "Scan of an index"). Run by
tests/dynamodb_test.sh pytest with the boto3 suite, on the same cluster.

Proves: Scan with IndexName on an LSI and on a GSI returns exactly the items
the index holds (sparse: an item without the index's keys is not there),
pages with Limit and a LastEvaluatedKey of the table's and the index's keys
without losing or repeating an item, applies FilterExpression,
ProjectionExpression, Select COUNT and Segment / TotalSegments, and refuses
a consistent read of a GSI and an unknown index by name. Would catch: the
index scan returning the whole table, a LastEvaluatedKey without the index
keys, a page resuming at the wrong place.

Also ProjectionType INCLUDE (docs/dynamodb-api.md, "Index projections") and
table tags, both kept in the gateway's own document of the table ("What the
gateway keeps").
"""
import threading
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from ddb_helpers import client, error_code

N_ITEMS = 24


@pytest.fixture(scope="module")
def ddb():
    return client("dynamodb")


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


def key_schema(h, r=None):
    ks = [{"AttributeName": h, "KeyType": "HASH"}]
    if r:
        ks.append({"AttributeName": r, "KeyType": "RANGE"})
    return ks


def create_indexed(ddb, name, lsi_projection):
    """Creates table name, pk S / sk N, with LSI by_r on r (lsi_projection),
    GSI by_g on g / sk (ALL) and GSI keys_g on g (KEYS_ONLY); CreateTable's
    answer."""
    return ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": t}
                              for a, t in [("pk", "S"), ("sk", "N"), ("g", "S"), ("r", "N")]],
        KeySchema=key_schema("pk", "sk"),
        LocalSecondaryIndexes=[{"IndexName": "by_r", "KeySchema": key_schema("pk", "r"),
                                "Projection": {"ProjectionType": lsi_projection}}],
        GlobalSecondaryIndexes=[
            {"IndexName": "by_g", "KeySchema": key_schema("g", "sk"),
             "Projection": {"ProjectionType": "ALL"}},
            {"IndexName": "keys_g", "KeySchema": key_schema("g"),
             "Projection": {"ProjectionType": "KEYS_ONLY"}}])


@pytest.fixture(scope="module")
def table(ddb):
    """pk S / sk N; LSI by_r on r (even items only), GSI by_g on g (every third
    item), GSI keys_g on g KEYS_ONLY. Each item has x = i and a payload."""
    name = "ix_" + uuid.uuid4().hex[:12]
    create_indexed(ddb, name, "ALL")
    for i in range(N_ITEMS):
        item = {"pk": S("p%d" % (i % 5)), "sk": N(i), "x": N(i), "payload": S("v%d" % i)}
        if i % 2 == 0:
            item["r"] = N(100 - i)
        if i % 3 == 0:
            item["g"] = S("g%d" % (i % 2))
        ddb.put_item(TableName=name, Item=item)
    yield name
    ddb.delete_table(TableName=name)


def scan_all(ddb, **kw):
    """Every page of a Scan: (items, pages' LastEvaluatedKeys, ScannedCounts)."""
    items, keys, scanned, start = [], [], [], None
    for _ in range(200):
        if start:
            kw["ExclusiveStartKey"] = start
        r = ddb.scan(**kw)
        items += r.get("Items", [])
        scanned.append(r["ScannedCount"])
        start = r.get("LastEvaluatedKey")
        if not start:
            return items, keys, scanned
        keys.append(start)
    raise AssertionError("scan did not end")


def xs(items):
    return sorted(int(i["sk"]["N"]) for i in items)  # sk = x = the item's number


def test_scan_lsi_holds_only_items_with_its_key(ddb, table):
    items, _, scanned = scan_all(ddb, TableName=table, IndexName="by_r")
    assert xs(items) == [i for i in range(N_ITEMS) if i % 2 == 0]
    assert sum(scanned) == N_ITEMS // 2
    assert all(i["payload"]["S"] == "v" + i["x"]["N"] for i in items)  # projection ALL
    r = ddb.scan(TableName=table, IndexName="by_r", ConsistentRead=True)
    assert r["Count"] == N_ITEMS // 2


def test_scan_gsi_is_sparse(ddb, table):
    items, _, _ = scan_all(ddb, TableName=table, IndexName="by_g")
    assert xs(items) == [i for i in range(N_ITEMS) if i % 3 == 0]


@pytest.mark.parametrize("index,keys", [("by_r", {"pk", "sk", "r"}), ("by_g", {"pk", "sk", "g"}),
                                        ("keys_g", {"pk", "sk", "g"})])
def test_scan_index_pages(ddb, table, index, keys):
    want = xs(scan_all(ddb, TableName=table, IndexName=index)[0])
    assert want
    items, leks, scanned = scan_all(ddb, TableName=table, IndexName=index, Limit=2)
    assert xs(items) == want  # nothing lost, nothing twice
    assert all(s <= 2 for s in scanned)
    assert len(leks) >= len(want) // 2 - 1
    for k in leks:  # the table's keys and the index's, as DynamoDB's
        assert set(k) == keys, k


def test_scan_index_filter_projection_count(ddb, table):
    r = ddb.scan(TableName=table, IndexName="by_r", FilterExpression="x >= :lo",
                 ExpressionAttributeValues={":lo": N(12)})
    assert xs(r["Items"]) == [12, 14, 16, 18, 20, 22]
    assert r["ScannedCount"] == N_ITEMS // 2
    r = ddb.scan(TableName=table, IndexName="by_g", ProjectionExpression="sk, g")
    assert all(set(i) == {"sk", "g"} for i in r["Items"]) and r["Count"] == 8
    r = ddb.scan(TableName=table, IndexName="by_g", Select="COUNT")
    assert "Items" not in r and r["Count"] == 8
    total = []
    for seg in range(3):
        r = ddb.scan(TableName=table, IndexName="by_r", Segment=seg, TotalSegments=3)
        total += r["Items"]
    assert xs(total) == [i for i in range(N_ITEMS) if i % 2 == 0]


def test_scan_keys_only_index(ddb, table):
    items, _, _ = scan_all(ddb, TableName=table, IndexName="keys_g")
    assert len(items) == 8
    assert all(set(i) == {"pk", "sk", "g"} for i in items), items[0]


def test_scan_index_errors(ddb, table):
    with pytest.raises(ClientError) as e:
        ddb.scan(TableName=table, IndexName="nope")
    assert error_code(e) == "ValidationException"
    assert "does not have the specified index: nope" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        ddb.scan(TableName=table, IndexName="by_g", ConsistentRead=True)
    assert error_code(e) == "ValidationException"
    assert "global secondary indexes" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        ddb.scan(TableName=table, IndexName="by_g", ExclusiveStartKey={"g": S("g0")})
    assert error_code(e) == "ValidationException" and "starting key" in \
        e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        ddb.scan(TableName="no_such_" + uuid.uuid4().hex[:8], IndexName="by_g")
    assert error_code(e) == "ResourceNotFoundException"


def create_include_table(ddb, name):
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": t}
                              for a, t in [("pk", "S"), ("sk", "N"), ("g", "S"), ("r", "N")]],
        KeySchema=key_schema("pk", "sk"),
        LocalSecondaryIndexes=[{"IndexName": "lsi_inc", "KeySchema": key_schema("pk", "r"),
                                "Projection": {"ProjectionType": "INCLUDE",
                                               "NonKeyAttributes": ["a"]}}],
        GlobalSecondaryIndexes=[
            {"IndexName": "gsi_inc", "KeySchema": key_schema("g", "sk"),
             "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["a", "b"]}},
            {"IndexName": "gsi_keys", "KeySchema": key_schema("g"),
             "Projection": {"ProjectionType": "KEYS_ONLY"}},
            {"IndexName": "gsi_all", "KeySchema": key_schema("g"),
             "Projection": {"ProjectionType": "ALL"}}])


def test_describe_table_index_sizes(ddb):
    """DescribeTable's ItemCount and IndexSizeBytes of each index
    (docs/dynamodb-api.md, "Table size"): 0 when nothing is put; after 40
    puts of about 200 bytes over partitions on three nodes, exact counts of
    what each sparse index holds (the LSI's primaries and one copy of each
    GSI partition count their entries) and sizes near the entries': an LSI
    entry and an ALL GSI entry hold the whole item, a KEYS_ONLY one the keys.
    Would catch: the figures absent, an index counted as the whole table, a
    GSI partition counted on each of its copies or not at all. The gateway
    caches the figures for 10 s, so CreateTable's answer shows the zeros and
    the table is described once, when the GSI entries have arrived (they
    travel asynchronously)."""
    name = "ixsz_" + uuid.uuid4().hex[:12]
    created = create_indexed(ddb, name, "KEYS_ONLY")
    t = created["TableDescription"]
    for ix in t["LocalSecondaryIndexes"] + t["GlobalSecondaryIndexes"]:
        assert (ix["ItemCount"], ix["IndexSizeBytes"]) == (0, 0), ix
    n, in_r, in_g = 40, 0, 0
    for i in range(n):
        item = {"pk": S("p%d" % (i % 7)), "sk": N(i), "blob": S("x" * 200)}
        if i % 2 == 0:
            item["r"] = N(i)
            in_r += 1
        if i % 3 == 0:
            item["g"] = S("g%d" % (i % 4))
            in_g += 1
        ddb.put_item(TableName=name, Item=item)
    deadline = time.time() + 10
    while True:
        got = {ix: sum(ddb.query(TableName=name, IndexName=ix, KeyConditionExpression="g = :g",
                                 ExpressionAttributeValues={":g": S("g%d" % v)})["Count"]
                       for v in range(4))
               for ix in ("by_g", "keys_g")}
        if got == {"by_g": in_g, "keys_g": in_g} or time.time() > deadline:
            break
        time.sleep(0.2)
    assert got == {"by_g": in_g, "keys_g": in_g}
    t = ddb.describe_table(TableName=name)["Table"]
    assert t["ItemCount"] == n, t["ItemCount"]
    ix = {i["IndexName"]: i for i in t["LocalSecondaryIndexes"] + t["GlobalSecondaryIndexes"]}
    counts = {k: v["ItemCount"] for k, v in ix.items()}
    assert counts == {"by_r": in_r, "by_g": in_g, "keys_g": in_g}, counts
    sizes = {k: v["IndexSizeBytes"] for k, v in ix.items()}
    assert in_r * 200 <= sizes["by_r"] <= in_r * 300, sizes
    assert in_g * 200 <= sizes["by_g"] <= in_g * 300, sizes
    assert 0 < sizes["keys_g"] <= in_g * 40, sizes
    assert sizes["by_r"] + sizes["by_g"] <= 2 * t["TableSizeBytes"], (sizes, t["TableSizeBytes"])
    ddb.delete_table(TableName=name)


def projections(ddb, name):
    t = ddb.describe_table(TableName=name)["Table"]
    return {i["IndexName"]: i["Projection"]
            for i in t.get("LocalSecondaryIndexes", []) + t.get("GlobalSecondaryIndexes", [])}


def wait_gsi(ddb, name, index, want):
    """A GSI query is eventually consistent: polls until it holds want items."""
    deadline = time.time() + 10
    while True:
        r = ddb.query(TableName=name, IndexName=index, KeyConditionExpression="g = :g",
                      ExpressionAttributeValues={":g": S("G")})
        if r["Count"] == want or time.time() > deadline:
            return r
        time.sleep(0.2)


def test_include_projection(ddb):
    name = "inc_" + uuid.uuid4().hex[:12]
    create_include_table(ddb, name)
    want = {"lsi_inc": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["a"]},
            "gsi_inc": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["a", "b"]},
            "gsi_keys": {"ProjectionType": "KEYS_ONLY"},
            "gsi_all": {"ProjectionType": "ALL"}}
    assert projections(ddb, name) == want  # as given, from any call
    for i in range(4):
        ddb.put_item(TableName=name, Item={"pk": S("p"), "sk": N(i), "r": N(i), "g": S("G"),
                                           "a": S("a%d" % i), "b": N(i), "c": S("not projected")})
    keys = {"pk", "sk", "g"}
    r = wait_gsi(ddb, name, "gsi_inc", 4)
    assert [set(i) for i in r["Items"]] == [keys | {"a", "b"}] * 4, r["Items"]
    r = wait_gsi(ddb, name, "gsi_keys", 4)
    assert [set(i) for i in r["Items"]] == [keys] * 4, r["Items"]
    r = wait_gsi(ddb, name, "gsi_all", 4)
    assert all("c" in i for i in r["Items"])
    r = ddb.query(TableName=name, IndexName="lsi_inc", KeyConditionExpression="pk = :p",
                  ExpressionAttributeValues={":p": S("p")})
    assert [set(i) for i in r["Items"]] == [{"pk", "sk", "r", "a"}] * 4, r["Items"]
    # An LSI fetches the rest from the table when asked, as DynamoDB's.
    r = ddb.query(TableName=name, IndexName="lsi_inc", KeyConditionExpression="pk = :p",
                  ExpressionAttributeValues={":p": S("p")}, Select="ALL_ATTRIBUTES")
    assert all("c" in i for i in r["Items"]) and r["Count"] == 4
    r = ddb.scan(TableName=name, IndexName="lsi_inc")
    assert [set(i) for i in r["Items"]] == [{"pk", "sk", "r", "a"}] * 4
    r = ddb.scan(TableName=name, IndexName="gsi_inc")
    assert [set(i) for i in r["Items"]] == [keys | {"a", "b"}] * 4
    # A filter on a GSI sees only what it projects.
    r = ddb.scan(TableName=name, IndexName="gsi_inc", FilterExpression="attribute_exists(c)")
    assert r["Count"] == 0 and r["ScannedCount"] == 4
    with pytest.raises(ClientError) as e:
        ddb.query(TableName=name, IndexName="gsi_inc", KeyConditionExpression="g = :g",
                  ExpressionAttributeValues={":g": S("G")}, Select="ALL_ATTRIBUTES")
    assert error_code(e) == "ValidationException"
    assert "projection type is not ALL" in e.value.response["Error"]["Message"]
    # A table created again under the name does not inherit the projections.
    ddb.delete_table(TableName=name)
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "g", "AttributeType": "S"}],
        KeySchema=key_schema("pk"),
        GlobalSecondaryIndexes=[{"IndexName": "gsi_inc", "KeySchema": key_schema("g"),
                                 "Projection": {"ProjectionType": "ALL"}}])
    assert projections(ddb, name) == {"gsi_inc": {"ProjectionType": "ALL"}}
    ddb.delete_table(TableName=name)


@pytest.mark.parametrize("proj,text", [
    ({"ProjectionType": "INCLUDE"}, "NonKeyAttributes is not specified"),
    ({"ProjectionType": "KEYS_ONLY", "NonKeyAttributes": ["a"]}, "but NonKeyAttributes"),
    ({"ProjectionType": "INCLUDE", "NonKeyAttributes": ["a", "a"]}, "Duplicate"),
    ({"ProjectionType": "INCLUDE", "NonKeyAttributes": ["a%d" % i for i in range(101)]},
     "exceeds limit of 100"),
])
def test_include_refused(ddb, proj, text):
    name = "inc_" + uuid.uuid4().hex[:12]
    with pytest.raises(ClientError) as e:
        ddb.create_table(
            TableName=name,
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                  {"AttributeName": "g", "AttributeType": "S"}],
            KeySchema=key_schema("pk"),
            GlobalSecondaryIndexes=[{"IndexName": "gix", "KeySchema": key_schema("g"),
                                     "Projection": proj}])
    assert error_code(e) == "ValidationException" and text in e.value.response["Error"]["Message"]
    assert name not in ddb.list_tables()["TableNames"]


def test_gateway_table_is_hidden(ddb):
    meta = "lapse.dynamodb.meta"  # made by the INCLUDE tables above
    assert meta not in ddb.list_tables()["TableNames"]
    with pytest.raises(ClientError) as e:
        ddb.get_item(TableName=meta, Key={"k": S("x")})
    assert error_code(e) == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        ddb.batch_get_item(RequestItems={meta: {"Keys": [{"k": S("x")}]}})
    assert error_code(e) == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        ddb.create_table(TableName=meta, KeySchema=key_schema("k"),
                         AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}])
    assert error_code(e) == "ValidationException" and "reserved" in \
        e.value.response["Error"]["Message"]


def test_tags(ddb):
    name = "tag_" + uuid.uuid4().hex[:12]
    ddb.create_table(TableName=name, KeySchema=key_schema("pk"),
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     Tags=[{"Key": "team", "Value": "a"}, {"Key": "env", "Value": ""}])
    arn = ddb.describe_table(TableName=name)["Table"]["TableArn"]
    assert ddb.list_tags_of_resource(ResourceArn=arn)["Tags"] == [
        {"Key": "env", "Value": ""}, {"Key": "team", "Value": "a"}]
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "team", "Value": "b"},
                                            {"Key": "cost", "Value": "42"}])
    assert ddb.list_tags_of_resource(ResourceArn=arn)["Tags"] == [
        {"Key": "cost", "Value": "42"}, {"Key": "env", "Value": ""}, {"Key": "team", "Value": "b"}]
    ddb.untag_resource(ResourceArn=arn, TagKeys=["env", "nope"])
    assert [t["Key"] for t in ddb.list_tags_of_resource(ResourceArn=arn)["Tags"]] == \
        ["cost", "team"]
    # Up to 50 tags; one more is refused and changes nothing.
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "k%02d" % i, "Value": "v"} for i in range(48)])
    with pytest.raises(ClientError) as e:
        ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "one_more", "Value": "v"}])
    assert error_code(e) == "LimitExceededException"
    assert len(ddb.list_tags_of_resource(ResourceArn=arn)["Tags"]) == 50
    with pytest.raises(ClientError) as e:
        ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "aws:x", "Value": "v"}])
    assert error_code(e) == "ValidationException" and "aws:" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        ddb.list_tags_of_resource(ResourceArn="arn:aws:dynamodb:us-east-1:000000000000:nope")
    assert error_code(e) == "ValidationException"
    with pytest.raises(ClientError) as e:
        ddb.list_tags_of_resource(ResourceArn=arn + "_gone")
    assert error_code(e) == "ResourceNotFoundException"
    # Concurrent taggers both take effect (each write is over what it read).
    ddb.untag_resource(ResourceArn=arn, TagKeys=["k%02d" % i for i in range(48)])
    errors = []

    def tagger(w):
        c = client("dynamodb")
        try:
            for i in range(6):
                c.tag_resource(ResourceArn=arn, Tags=[{"Key": "w%d_%d" % (w, i), "Value": "v"}])
        except Exception as ex:  # reported below
            errors.append(ex)
    threads = [threading.Thread(target=tagger, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    keys = {t["Key"] for t in ddb.list_tags_of_resource(ResourceArn=arn)["Tags"]}
    assert keys == {"cost", "team"} | {"w%d_%d" % (w, i) for w in range(3) for i in range(6)}
    # A table created again under the name starts without tags.
    ddb.delete_table(TableName=name)
    ddb.create_table(TableName=name, KeySchema=key_schema("pk"),
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
    assert ddb.list_tags_of_resource(ResourceArn=arn)["Tags"] == []
    ddb.delete_table(TableName=name)
