"""dynamodb_legacy_test: DynamoDB's legacy (non-expression) parameters through
lapse-dynamodb with boto3's low-level client (docs/dynamodb-api.md, "Legacy
parameters"). Run by tests/dynamodb_test.sh pytest with the boto3 suite, on
the same cluster.

Proves: Expected in both forms (Exists/Value and ComparisonOperator) with
every ComparisonOperator true and false on a real item, ConditionalOperator
AND and OR, ConditionalCheckFailedException on a false Expected with the item
left unchanged; AttributeUpdates PUT (the default), ADD on numbers, lists and
sets, DELETE of an attribute or of set elements, CONTAINS on a set, on new and existing items, with ReturnValues;
AttributesToGet on GetItem, Query, Scan and BatchGetItem; KeyConditions on a
table with a sort key (EQ, LE, LT, GE, GT, BETWEEN, BEGINS_WITH) and beside a
FilterExpression; QueryFilter and ScanFilter with AND and OR; attribute names
that are reserved words; and each error by name (mixing a legacy parameter
with its expression, a bad operator, a wrong number or type of values,
Exists with and without Value, a key condition that is not indexable).
"""
import uuid

import pytest
from botocore.exceptions import ClientError

from ddb_helpers import client, error_code, new_table


@pytest.fixture(scope="module")
def ddb():
    return client("dynamodb")


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


def refused(e, code, text=None):
    """Asserts the ClientError e is code and its message holds text."""
    assert error_code(e) == code, e.value.response
    if text is not None:
        assert text in e.value.response["Error"]["Message"], e.value.response


@pytest.fixture(scope="module")
def item_table(ddb):
    """A table without sort key, deleted at the end."""
    name = new_table(ddb, sort_key=False)
    yield name
    ddb.delete_table(TableName=name)


ITEM = {"pk": S("i"), "n": N(5), "s": S("hello"), "l": {"L": [N(1), N(2)]},
        "status": S("active"), "b": {"B": b"\x01\x02\x03"}}


def check_expected(ddb, table, expected, holds, op="put"):
    """Writes ITEM back under expected; it must succeed exactly when holds
    (else ConditionalCheckFailedException) and leave ITEM as it was."""
    def write():
        if op == "put":
            ddb.put_item(TableName=table, Item=ITEM, Expected=expected)
        else:
            ddb.update_item(TableName=table, Key={"pk": ITEM["pk"]}, Expected=expected,
                            AttributeUpdates={"s": {"Value": ITEM["s"]}})

    if holds:
        write()
    else:
        with pytest.raises(ClientError) as e:
            write()
        refused(e, "ConditionalCheckFailedException", "The conditional request failed")
    got = ddb.get_item(TableName=table, Key={"pk": ITEM["pk"]}, ConsistentRead=True)["Item"]
    assert got == ITEM


def cmp(op, *values):
    return {"ComparisonOperator": op, "AttributeValueList": list(values)}


# (attribute, condition, holds on ITEM)
OPERATOR_CASES = [
    ("n", cmp("EQ", N(5)), True), ("n", cmp("EQ", N(6)), False),
    ("n", cmp("EQ", S("5")), False),  # another type is never equal
    ("s", cmp("EQ", S("hello")), True), ("l", cmp("EQ", {"L": [N(1), N(2)]}), True),
    ("n", cmp("NE", N(6)), True), ("n", cmp("NE", N(5)), False),
    ("missing", cmp("NE", N(5)), True),
    ("n", cmp("LE", N(5)), True), ("n", cmp("LE", N(4)), False),
    ("n", cmp("LT", N(6)), True), ("n", cmp("LT", N(5)), False),
    ("n", cmp("GE", N(5)), True), ("n", cmp("GE", N(6)), False),
    ("n", cmp("GT", N(4)), True), ("n", cmp("GT", N(5)), False),
    ("s", cmp("LT", S("z")), True), ("s", cmp("GT", S("z")), False),
    ("missing", cmp("LT", N(100)), False),
    ("n", cmp("NOT_NULL"), True), ("missing", cmp("NOT_NULL"), False),
    ("missing", cmp("NULL"), True), ("n", cmp("NULL"), False),
    ("s", cmp("CONTAINS", S("ell")), True), ("s", cmp("CONTAINS", S("xyz")), False),
    ("l", cmp("CONTAINS", N(2)), True), ("l", cmp("CONTAINS", N(3)), False),
    ("s", cmp("NOT_CONTAINS", S("xyz")), True), ("s", cmp("NOT_CONTAINS", S("ell")), False),
    ("missing", cmp("NOT_CONTAINS", S("x")), True),
    ("s", cmp("BEGINS_WITH", S("he")), True), ("s", cmp("BEGINS_WITH", S("lo")), False),
    ("b", cmp("BEGINS_WITH", {"B": b"\x01\x02"}), True),
    ("b", cmp("BEGINS_WITH", {"B": b"\x02"}), False),
    ("n", cmp("IN", N(1), N(5), N(9)), True), ("n", cmp("IN", N(1), N(2)), False),
    ("s", cmp("IN", S("hello")), True),
    ("n", cmp("BETWEEN", N(1), N(5)), True), ("n", cmp("BETWEEN", N(6), N(9)), False),
    ("s", cmp("BETWEEN", S("a"), S("m")), True), ("s", cmp("BETWEEN", S("i"), S("m")), False),
    ("status", cmp("EQ", S("active")), True),  # a reserved word is a plain name here
]


@pytest.mark.parametrize("attr,cond,holds", OPERATOR_CASES,
                         ids=["%s-%s-%d" % (c[0], c[1]["ComparisonOperator"], i)
                              for i, c in enumerate(OPERATOR_CASES)])
def test_expected_comparison_operator(ddb, item_table, attr, cond, holds):
    ddb.put_item(TableName=item_table, Item=ITEM)
    check_expected(ddb, item_table, {attr: cond}, holds)


def test_expected_exists_forms(ddb, item_table):
    ddb.put_item(TableName=item_table, Item=ITEM)
    check_expected(ddb, item_table, {"n": {"Value": N(5)}}, True)
    check_expected(ddb, item_table, {"n": {"Value": N(4)}}, False)
    check_expected(ddb, item_table, {"n": {"Exists": True, "Value": N(5)}}, True)
    check_expected(ddb, item_table, {"s": {"Exists": True, "Value": S("bye")}}, False)
    check_expected(ddb, item_table, {"missing": {"Exists": False}}, True)
    check_expected(ddb, item_table, {"n": {"Exists": False}}, False)
    check_expected(ddb, item_table, {"status": {"Exists": False}}, False)
    # Expected's ComparisonOperator form also takes a lone Value.
    check_expected(ddb, item_table, {"n": {"ComparisonOperator": "GT", "Value": N(1)}}, True)
    # The same on UpdateItem.
    check_expected(ddb, item_table, {"n": {"Value": N(5)}}, True, op="update")
    check_expected(ddb, item_table, {"n": {"Exists": False}}, False, op="update")
    # PutItem only if absent (the classic idiom), then DeleteItem under Expected.
    key = {"pk": S("fresh-" + uuid.uuid4().hex[:6])}
    ddb.put_item(TableName=item_table, Item={**key, "v": N(1)},
                 Expected={"pk": {"Exists": False}})
    with pytest.raises(ClientError) as e:
        ddb.put_item(TableName=item_table, Item={**key, "v": N(2)},
                     Expected={"pk": {"Exists": False}})
    refused(e, "ConditionalCheckFailedException", "The conditional request failed")
    with pytest.raises(ClientError) as e:
        ddb.delete_item(TableName=item_table, Key=key, Expected={"v": {"Value": N(2)}})
    refused(e, "ConditionalCheckFailedException")
    assert ddb.get_item(TableName=item_table, Key=key, ConsistentRead=True)["Item"]["v"] == N(1)
    ddb.delete_item(TableName=item_table, Key=key, Expected={"v": {"Value": N(1)}})
    assert "Item" not in ddb.get_item(TableName=item_table, Key=key, ConsistentRead=True)


def test_expected_conditional_operator(ddb, item_table):
    ddb.put_item(TableName=item_table, Item=ITEM)
    # The key and one attribute: one guard covers both (docs, "What is atomic").
    both = {"pk": cmp("NULL"), "n": cmp("EQ", N(5))}  # false, true
    check_expected(ddb, item_table, both, False)
    ddb.put_item(TableName=item_table, Item=ITEM, Expected=both, ConditionalOperator="OR")
    with pytest.raises(ClientError) as e:
        ddb.put_item(TableName=item_table, Item=ITEM, Expected=both, ConditionalOperator="AND")
    refused(e, "ConditionalCheckFailedException")
    with pytest.raises(ClientError) as e:
        ddb.put_item(TableName=item_table, Item=ITEM, ConditionalOperator="OR",
                     Expected={"pk": cmp("NULL"), "n": cmp("EQ", N(6))})
    refused(e, "ConditionalCheckFailedException")
    # Two attributes besides the key on an existing item: guarded by the
    # whole item as read, as the same ConditionExpression would be.
    ddb.put_item(TableName=item_table, Item=ITEM, ConditionalOperator="OR",
                 Expected={"n": cmp("EQ", N(5)), "s": cmp("EQ", S("x"))})
    with pytest.raises(ClientError) as e:
        ddb.put_item(TableName=item_table, Item=ITEM, ConditionalOperator="AND",
                     Expected={"n": cmp("EQ", N(5)), "s": cmp("EQ", S("x"))})
    refused(e, "ConditionalCheckFailedException")
    # On an absent item any Expected is served.
    key = {"pk": S("absent-" + uuid.uuid4().hex[:6])}
    ddb.put_item(TableName=item_table, Item={**key, "v": N(1)}, ConditionalOperator="AND",
                 Expected={"n": cmp("NULL"), "s": {"Exists": False}})
    assert ddb.get_item(TableName=item_table, Key=key, ConsistentRead=True)["Item"]["v"] == N(1)


def test_attribute_updates(ddb, item_table):
    key = {"pk": S("u-" + uuid.uuid4().hex[:6])}
    # An absent item is created; every action at once.
    r = ddb.update_item(TableName=item_table, Key=key, ReturnValues="ALL_NEW",
                        AttributeUpdates={
                            "status": {"Value": S("new")},  # PUT by default
                            "count": {"Action": "ADD", "Value": N(3)},
                            "log": {"Action": "ADD", "Value": {"L": [S("a")]}},
                            "gone": {"Action": "DELETE"}})
    assert r["Attributes"] == {**key, "status": S("new"), "count": N(3), "log": {"L": [S("a")]}}
    # PUT, DELETE and ADD of a number on an existing item.
    ddb.update_item(TableName=item_table, Key=key, AttributeUpdates={
        "status": {"Action": "DELETE"}, "name": {"Action": "PUT", "Value": S("x")},
        "count": {"Action": "ADD", "Value": N("-1.5")}})
    got = ddb.get_item(TableName=item_table, Key=key, ConsistentRead=True)["Item"]
    assert got == {**key, "name": S("x"), "count": N("1.5"), "log": {"L": [S("a")]}}
    # ADD of a list appends; UPDATED_NEW shows what was written.
    r = ddb.update_item(TableName=item_table, Key=key, ReturnValues="UPDATED_NEW",
                        AttributeUpdates={"log": {"Action": "ADD", "Value": {"L": [S("b")]}}})
    assert r["Attributes"] == {"log": {"L": [S("a"), S("b")]}}
    # A false Expected changes nothing.
    with pytest.raises(ClientError) as e:
        ddb.update_item(TableName=item_table, Key=key, Expected={"name": {"Value": S("y")}},
                        AttributeUpdates={"name": {"Value": S("z")}})
    refused(e, "ConditionalCheckFailedException")
    ddb.update_item(TableName=item_table, Key=key, Expected={"name": {"Value": S("x")}},
                    AttributeUpdates={"name": {"Value": S("z")}})
    got = ddb.get_item(TableName=item_table, Key=key, ConsistentRead=True)["Item"]
    assert got["name"] == S("z")
    with pytest.raises(ClientError) as e:
        ddb.update_item(TableName=item_table, Key=key,
                        AttributeUpdates={"pk": {"Value": S("other")}})
    refused(e, "ValidationException", "Cannot update attribute pk")


def test_sets_through_legacy_parameters(ddb, item_table):
    """AttributeUpdates ADD and DELETE on sets, and CONTAINS / NOT_CONTAINS
    on a set in Expected."""
    key = {"pk": S("set-" + uuid.uuid4().hex[:6])}
    ddb.update_item(TableName=item_table, Key=key,
                    AttributeUpdates={"tags": {"Action": "ADD", "Value": {"SS": ["a", "b"]}}})
    ddb.update_item(TableName=item_table, Key=key,
                    AttributeUpdates={"tags": {"Action": "ADD", "Value": {"SS": ["c", "a"]}}})
    ddb.update_item(TableName=item_table, Key=key,
                    AttributeUpdates={"tags": {"Action": "DELETE", "Value": {"SS": ["b"]}}})
    got = ddb.get_item(TableName=item_table, Key=key, ConsistentRead=True)["Item"]
    assert sorted(got["tags"]["SS"]) == ["a", "c"]
    ddb.put_item(TableName=item_table, Item=dict(key, tags={"SS": ["a", "c"]}),
                 Expected={"tags": cmp("CONTAINS", S("c"))})
    with pytest.raises(ClientError) as e:
        ddb.put_item(TableName=item_table, Item=key,
                     Expected={"tags": cmp("NOT_CONTAINS", S("c"))})
    refused(e, "ConditionalCheckFailedException")
    ddb.update_item(TableName=item_table, Key=key,
                    AttributeUpdates={"tags": {"Action": "DELETE", "Value": {"SS": ["a", "c"]}}})
    assert "tags" not in ddb.get_item(TableName=item_table, Key=key,
                                      ConsistentRead=True)["Item"]


def test_attributes_to_get(ddb, item_table):
    ddb.put_item(TableName=item_table, Item=ITEM)
    got = ddb.get_item(TableName=item_table, Key={"pk": ITEM["pk"]}, ConsistentRead=True,
                       AttributesToGet=["status", "n", "missing"])["Item"]
    assert got == {"status": S("active"), "n": N(5)}
    got = ddb.batch_get_item(RequestItems={item_table: {
        "Keys": [{"pk": ITEM["pk"]}], "AttributesToGet": ["s", "pk"]}})
    assert got["Responses"][item_table] == [{"pk": S("i"), "s": S("hello")}]
    scan = ddb.scan(TableName=item_table, AttributesToGet=["status"],
                    ScanFilter={"pk": cmp("EQ", S("i"))})
    assert scan["Items"] == [{"status": S("active")}]
    scan = ddb.scan(TableName=item_table, AttributesToGet=["n"], Select="SPECIFIC_ATTRIBUTES",
                    ScanFilter={"pk": cmp("EQ", S("i"))})
    assert scan["Items"] == [{"n": N(5)}]


@pytest.fixture(scope="module")
def sorted_table(ddb):
    """pk "p" with sk 1..10 (N), each with v = sk % 3 and tag "t<sk>"."""
    name = new_table(ddb)
    for sk in range(1, 11):
        ddb.put_item(TableName=name, Item={"pk": S("p"), "sk": N(sk), "v": N(sk % 3),
                                           "tag": S("t%d" % sk), "status": S("s%d" % (sk % 2))})
    ddb.put_item(TableName=name, Item={"pk": S("q"), "sk": N(1), "v": N(0)})
    yield name
    ddb.delete_table(TableName=name)


def sks(r):
    return [int(i["sk"]["N"]) for i in r["Items"]]


def test_key_conditions(ddb, sorted_table):
    def q(sk_cond=None, **kw):
        kc = {"pk": cmp("EQ", S("p"))}
        if sk_cond is not None:
            kc["sk"] = sk_cond
        return sks(ddb.query(TableName=sorted_table, KeyConditions=kc, **kw))

    assert q() == list(range(1, 11))
    assert q(cmp("EQ", N(3))) == [3]
    assert q(cmp("LE", N(3))) == [1, 2, 3]
    assert q(cmp("LT", N(3))) == [1, 2]
    assert q(cmp("GE", N(8))) == [8, 9, 10]
    assert q(cmp("GT", N(8))) == [9, 10]
    assert q(cmp("BETWEEN", N(3), N(5))) == [3, 4, 5]
    assert q(cmp("GT", N(8)), ScanIndexForward=False) == [10, 9]
    assert q(cmp("LE", N(3)), AttributesToGet=["sk", "status"]) == [1, 2, 3]
    r = ddb.query(TableName=sorted_table, KeyConditions={"pk": cmp("EQ", S("p")), "sk":
                  cmp("EQ", N(2))}, AttributesToGet=["status", "tag"])
    assert r["Items"] == [{"status": S("s0"), "tag": S("t2")}]
    # KeyConditions beside a FilterExpression (DynamoDB allows it) whose own
    # #legacy0 and :legacy0 must not be confused with the generated ones.
    assert q(FilterExpression="#legacy0 = :legacy0",
             ExpressionAttributeNames={"#legacy0": "v"},
             ExpressionAttributeValues={":legacy0": N(1)}) == [1, 4, 7, 10]


def test_key_conditions_begins_with(ddb):
    name = "t_" + uuid.uuid4().hex[:12]
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                           {"AttributeName": "sk", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                {"AttributeName": "sk", "KeyType": "RANGE"}])
    try:
        for sk in ("a#1", "a#2", "b#1", "ab"):
            ddb.put_item(TableName=name, Item={"pk": S("p"), "sk": S(sk)})
        r = ddb.query(TableName=name, KeyConditions={"pk": cmp("EQ", S("p")),
                                                     "sk": cmp("BEGINS_WITH", S("a#"))})
        assert [i["sk"]["S"] for i in r["Items"]] == ["a#1", "a#2"]
        with pytest.raises(ClientError) as e:
            ddb.query(TableName=name, KeyConditions={"pk": cmp("EQ", S("p")),
                                                     "sk": cmp("BEGINS_WITH", N(1))})
        refused(e, "ValidationException", "BEGINS_WITH is not valid for N")
    finally:
        ddb.delete_table(TableName=name)


def test_key_condition_errors(ddb, sorted_table):
    def bad(kc, text, **kw):
        with pytest.raises(ClientError) as e:
            ddb.query(TableName=sorted_table, KeyConditions=kc, **kw)
        refused(e, "ValidationException", text)

    bad({"pk": cmp("EQ", S("p")), "sk": cmp("NE", N(1))},
        "Attempted conditional constraint is not an indexable operation")
    bad({"pk": cmp("LE", S("p"))}, "partition key pk")
    bad({"sk": cmp("EQ", N(1))}, "missed key schema element")
    bad({"pk": cmp("EQ", S("p")), "v": cmp("EQ", N(1))}, "v is not a key attribute")
    bad({"pk": cmp("EQ", S("p")), "sk": cmp("EQ", N(1)), "v": cmp("EQ", N(1))},
        "Conditions can be of length 1 or 2 only")
    bad({"pk": cmp("EQ", S("p"), S("q"))}, "Invalid number of argument(s) for the EQ")
    bad({"pk": cmp("EQ", S("p"))}, "Primary key attribute: sk",
        QueryFilter={"sk": cmp("GT", N(1))})


def test_query_filter_and_or(ddb, sorted_table):
    kc = {"pk": cmp("EQ", S("p"))}
    f = {"v": cmp("EQ", N(0)), "status": cmp("EQ", S("s1"))}
    r = ddb.query(TableName=sorted_table, KeyConditions=kc, QueryFilter=f)
    assert sks(r) == [3, 9] and r["ScannedCount"] == 10
    r = ddb.query(TableName=sorted_table, KeyConditions=kc, QueryFilter=f,
                  ConditionalOperator="AND")
    assert sks(r) == [3, 9]
    r = ddb.query(TableName=sorted_table, KeyConditions=kc, QueryFilter=f,
                  ConditionalOperator="OR")
    assert sks(r) == [1, 3, 5, 6, 7, 9]
    r = ddb.query(TableName=sorted_table, KeyConditions=kc, Select="COUNT",
                  QueryFilter={"tag": cmp("IN", S("t2"), S("t4"), S("nope"))})
    assert r["Count"] == 2 and "Items" not in r
    r = ddb.query(TableName=sorted_table, KeyConditions=kc, Limit=4,
                  QueryFilter={"v": cmp("NE", N(0))})
    assert sks(r) == [1, 2, 4] and r["LastEvaluatedKey"] == {"pk": S("p"), "sk": N(4)}


def test_scan_filter_and_or(ddb, sorted_table):
    def scan(**kw):
        items, start = [], None
        while True:
            if start:
                kw["ExclusiveStartKey"] = start
            r = ddb.scan(TableName=sorted_table, Limit=3, **kw)
            items += r["Items"]
            start = r.get("LastEvaluatedKey")
            if not start:
                return sorted((i["pk"]["S"], int(i["sk"]["N"])) for i in items)

    f = {"v": cmp("EQ", N(0)), "tag": cmp("BEGINS_WITH", S("t"))}
    assert scan(ScanFilter=f) == [("p", 3), ("p", 6), ("p", 9)]
    got = scan(ScanFilter=f, ConditionalOperator="OR")
    assert got == sorted([("p", i) for i in range(1, 11)] + [("q", 1)])
    assert scan(ScanFilter={"tag": cmp("NULL")}) == [("q", 1)]
    assert scan(ScanFilter={"sk": cmp("BETWEEN", N(2), N(3)),
                            "tag": cmp("NOT_CONTAINS", S("2"))}) == [("p", 3)]
    r = ddb.scan(TableName=sorted_table, ScanFilter={"pk": cmp("EQ", S("q"))},
                 AttributesToGet=["v"])
    assert r["Items"] == [{"v": N(0)}]


@pytest.mark.parametrize("call,kw,text", [
    ("get_item", dict(Key={"pk": S("i")}, AttributesToGet=["n"], ProjectionExpression="n"),
     "Can not use both expression and non-expression parameters in the same request: "
     "Non-expression parameters: {AttributesToGet} Expression parameters: "
     "{ProjectionExpression}"),
    ("put_item", dict(Item={"pk": S("i")}, Expected={"n": {"Exists": False}},
                      ConditionExpression="attribute_exists(n)"),
     "Non-expression parameters: {Expected} Expression parameters: {ConditionExpression}"),
    ("update_item", dict(Key={"pk": S("i")}, AttributeUpdates={"n": {"Value": N(1)}},
                         UpdateExpression="SET n = :v",
                         ExpressionAttributeValues={":v": N(1)}),
     "Non-expression parameters: {AttributeUpdates} Expression parameters: {UpdateExpression}"),
    ("scan", dict(ScanFilter={"n": cmp("NULL")}, FilterExpression="attribute_exists(n)"),
     "Non-expression parameters: {ScanFilter} Expression parameters: {FilterExpression}"),
    ("put_item", dict(Item={"pk": S("i")}, Expected={"n": cmp("EQUALS", N(1))}),
     "'expected.n.member.comparisonOperator' failed to satisfy constraint"),
    ("put_item", dict(Item={"pk": S("i")}, Expected={"n": cmp("BETWEEN", N(1))}),
     "Invalid number of argument(s) for the BETWEEN ComparisonOperator for Attribute: n"),
    ("put_item", dict(Item={"pk": S("i")}, Expected={"n": cmp("NULL", N(1))}),
     "Invalid number of argument(s) for the NULL ComparisonOperator for Attribute: n"),
    ("put_item", dict(Item={"pk": S("i")}, Expected={"n": cmp("LT", {"BOOL": True})}),
     "ComparisonOperator LT is not valid for BOOL AttributeValue type for Attribute: n"),
    ("put_item", dict(Item={"pk": S("i")}, Expected={"n": {"Exists": False, "Value": N(1)}}),
     "Value cannot be used when Exists is false for Attribute: n"),
    ("put_item", dict(Item={"pk": S("i")}, Expected={"n": {"Exists": True}}),
     "Value must be provided when Exists is true for Attribute: n"),
    ("delete_item", dict(Key={"pk": S("i")}, Expected={"n": {"Exists": True}},
                         ConditionalOperator="NOR"),
     "'conditionalOperator' failed to satisfy constraint"),
    ("update_item", dict(Key={"pk": S("i")}, AttributeUpdates={"n": {"Action": "ADD"}}),
     "Only DELETE action is allowed when no attribute value is specified"),
    ("update_item", dict(Key={"pk": S("i")},
                         AttributeUpdates={"n": {"Action": "DELETE", "Value": N(1)}}),
     "DELETE action with value is not supported for the type N for Attribute: n"),
    ("update_item", dict(Key={"pk": S("i")},
                         AttributeUpdates={"n": {"Action": "ADD", "Value": S("x")}}),
     "ADD action is not supported for the type S for Attribute: n"),
    ("scan", dict(AttributesToGet=["n", "n"]), "Duplicate value in attribute name: n"),
])
def test_legacy_errors_by_name(ddb, item_table, call, kw, text):
    with pytest.raises(ClientError) as e:
        getattr(ddb, call)(TableName=item_table, **kw)
    refused(e, "ValidationException", text)
