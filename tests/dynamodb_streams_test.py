"""dynamodb_streams_test: DynamoDB Streams through lapse-dynamodb with boto3's
dynamodbstreams client (docs/dynamodb-api.md, "Streams"). Run by
tests/dynamodb_test.sh pytest with the boto3 suite, on the same cluster.

Proves: a table created with a StreamSpecification shows LatestStreamArn
and LatestStreamLabel; ListStreams (all, by table, paged) and DescribeStream
(shards paged, identifiers in the shapes the SDKs validate) find it; every
change is read once through GetShardIterator and GetRecords across all shards,
following NextShardIterator, in DynamoDB Streams' record shape; each of the
four StreamViewTypes shows exactly its images; LATEST, AT_SEQUENCE_NUMBER and
AFTER_SEQUENCE_NUMBER start where DynamoDB's do; a write that changes
nothing makes no record; a TTL delete is one REMOVE
marked as the service's; a re-created table's stream is another stream; a
stream turned on by UpdateTable holds only later writes, turned off is gone,
and turned on again is another stream without the first one's records; and
each bad request gets DynamoDB's error by name.
"""
import glob
import os
import time
import uuid

import pytest
from botocore.exceptions import ClientError

from ddb_helpers import assert_error, client, error_code, raw

KEYS = [{"AttributeName": "pk", "KeyType": "HASH"}]
DEFS = [{"AttributeName": "pk", "AttributeType": "S"}]


@pytest.fixture(scope="module")
def ddb():
    return client("dynamodb")


@pytest.fixture(scope="module")
def streams():
    return client("dynamodbstreams")


def stream_table(ddb, view="NEW_AND_OLD_IMAGES"):
    """A new table with a stream of view; returns (name, stream ARN)."""
    name = "s_" + uuid.uuid4().hex[:12]
    d = ddb.create_table(TableName=name, KeySchema=KEYS, AttributeDefinitions=DEFS,
                         BillingMode="PAY_PER_REQUEST",
                         StreamSpecification={"StreamEnabled": True, "StreamViewType": view})
    d = d["TableDescription"]
    assert d["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": view}
    return name, d["LatestStreamArn"]


def shard_ids(streams, arn):
    """Every ShardId of the stream, following LastEvaluatedShardId."""
    ids, start = [], None
    for _ in range(100):
        kw = {"StreamArn": arn, "Limit": 25}
        if start:
            kw["ExclusiveStartShardId"] = start
        d = streams.describe_stream(**kw)["StreamDescription"]
        ids += [s["ShardId"] for s in d["Shards"]]
        start = d.get("LastEvaluatedShardId")
        if not start:
            return ids
    raise AssertionError("DescribeStream pages never end")


def read_all(streams, arn, want, iterators=None, timeout=20):
    """Reads every shard from TRIM_HORIZON (or the given iterators by shard)
    until want records arrived (records fill shortly after each write), then
    once more to see nothing else comes. Returns the records, shard order
    then sequence order, and the final iterators."""
    its = iterators or {
        sid: streams.get_shard_iterator(StreamArn=arn, ShardId=sid,
                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        for sid in shard_ids(streams, arn)}
    got = {sid: [] for sid in its}
    deadline = time.time() + timeout
    while True:
        for sid in its:
            r = streams.get_records(ShardIterator=its[sid])
            got[sid] += r["Records"]
            its[sid] = r["NextShardIterator"]
        n = sum(len(v) for v in got.values())
        if n >= want:
            break
        assert time.time() < deadline, "%d of %d records after %d s" % (n, want, timeout)
        time.sleep(0.2)
    for sid in its:  # nothing more than wanted, and no record twice
        r = streams.get_records(ShardIterator=its[sid])
        assert r["Records"] == [], r["Records"]
        its[sid] = r["NextShardIterator"]
    return [rec for sid in sorted(got) for rec in got[sid]], its


def test_stream_is_described_listed_and_paged(ddb, streams):
    name, arn = stream_table(ddb)
    t = ddb.describe_table(TableName=name)["Table"]
    assert t["LatestStreamArn"] == arn
    label = t["LatestStreamLabel"]
    assert arn == "arn:aws:dynamodb:us-east-1:000000000000:table/%s/stream/%s" % (name, label)
    assert len(label) == 23 and label[10] == "T", label  # 2026-11-26T08:19:05.123
    assert abs(t["CreationDateTime"].timestamp() - time.time()) < 600

    assert streams.list_streams(TableName=name)["Streams"] == [
        {"StreamArn": arn, "TableName": name, "StreamLabel": label}]
    # All streams, one per page: pages follow LastEvaluatedStreamArn.
    seen, start = [], None
    for _ in range(1000):
        kw = {"Limit": 1}
        if start:
            kw["ExclusiveStartStreamArn"] = start
        page = streams.list_streams(**kw)
        assert len(page["Streams"]) <= 1
        seen += [s["StreamArn"] for s in page["Streams"]]
        start = page.get("LastEvaluatedStreamArn")
        if not start:
            break
    assert arn in seen and len(seen) == len(set(seen))

    d = streams.describe_stream(StreamArn=arn)["StreamDescription"]
    assert d["StreamArn"] == arn and d["StreamLabel"] == label and d["TableName"] == name
    assert d["StreamStatus"] == "ENABLED" and d["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert d["KeySchema"] == KEYS
    ids = shard_ids(streams, arn)
    assert len(ids) == 64 and len(set(ids)) == 64  # one shard per partition
    assert ids == [s["ShardId"] for s in d["Shards"]]
    for s in d["Shards"]:
        assert len(s["ShardId"]) >= 28
        assert len(s["SequenceNumberRange"]["StartingSequenceNumber"]) >= 21
    # UpdateTable enabling it again: DynamoDB's refusal.
    with pytest.raises(ClientError) as e:
        ddb.update_table(TableName=name, StreamSpecification={
            "StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    assert error_code(e) == "ValidationException"
    assert "already has an enabled stream" in e.value.response["Error"]["Message"]
    # A table without a stream has none.
    plain = "p_" + uuid.uuid4().hex[:12]
    ddb.create_table(TableName=plain, KeySchema=KEYS, AttributeDefinitions=DEFS)
    assert "LatestStreamArn" not in ddb.describe_table(TableName=plain)["Table"]
    assert streams.list_streams(TableName=plain)["Streams"] == []
    ddb.delete_table(TableName=plain)
    ddb.delete_table(TableName=name)


def keys_of(recs):
    return [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in recs]


def test_stream_turned_on_off_and_on_again(ddb, streams):
    """UpdateTable's StreamSpecification after CreateTable: turning the
    stream on makes a stream (LatestStreamArn, ListStreams, DescribeStream)
    holding only the writes made after it, in its view; turning it off makes
    the stream gone (Lapse: no 24 hours of reading); turning it on again
    makes a NEW stream (another label and ARN) whose readers never see the
    first one's records. Its outbox already carried (and trimmed) records
    when the stream was turned on again on other hosts: a new shard host
    must not take them for records it lost."""
    name = "u_" + uuid.uuid4().hex[:12]
    ddb.create_table(TableName=name, KeySchema=KEYS, AttributeDefinitions=DEFS,
                     BillingMode="PAY_PER_REQUEST")
    t = ddb.describe_table(TableName=name)["Table"]
    assert "LatestStreamArn" not in t and "StreamSpecification" not in t

    def put(k):
        ddb.put_item(TableName=name, Item={"pk": {"S": k}, "v": {"S": k}})

    for i in range(5):
        put("before%d" % i)  # no stream yet: never in one

    # On, NEW_IMAGE: the new stream is described and listed.
    d = ddb.update_table(TableName=name, StreamSpecification={
        "StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})["TableDescription"]
    assert d["TableStatus"] == "ACTIVE"
    assert d["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}
    arn1, label1 = d["LatestStreamArn"], d["LatestStreamLabel"]
    assert arn1.endswith("/stream/" + label1)
    t = ddb.describe_table(TableName=name)["Table"]
    assert (t["LatestStreamArn"], t["LatestStreamLabel"]) == (arn1, label1)
    assert streams.list_streams(TableName=name)["Streams"] == [
        {"StreamArn": arn1, "TableName": name, "StreamLabel": label1}]
    sd = streams.describe_stream(StreamArn=arn1)["StreamDescription"]
    assert sd["StreamLabel"] == label1 and sd["StreamViewType"] == "NEW_IMAGE"
    assert len(sd["Shards"]) == 64
    with pytest.raises(ClientError) as e:
        ddb.update_table(TableName=name, StreamSpecification={
            "StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})
    assert error_code(e) == "ValidationException"
    assert "already has an enabled stream" in e.value.response["Error"]["Message"]

    for i in range(3):
        put("on%d" % i)
    ddb.update_item(TableName=name, Key={"pk": {"S": "before1"}}, UpdateExpression="SET v = :v",
                    ExpressionAttributeValues={":v": {"S": "changed"}})
    recs, its1 = read_all(streams, arn1, 4)
    assert sorted(keys_of(recs)) == [("INSERT", "on0"), ("INSERT", "on1"), ("INSERT", "on2"),
                                     ("MODIFY", "before1")]
    for r in recs:
        assert r["dynamodb"]["StreamViewType"] == "NEW_IMAGE" and "NewImage" in r["dynamodb"]
        assert "OldImage" not in r["dynamodb"]

    # Off: the stream is gone (Lapse does not keep it readable for 24 hours);
    # the table still says it had one, as DynamoDB's does.
    d = ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": False})
    d = d["TableDescription"]
    assert "LatestStreamArn" not in d and d["StreamSpecification"] == {"StreamEnabled": False}
    t = ddb.describe_table(TableName=name)["Table"]
    assert "LatestStreamArn" not in t and t["StreamSpecification"] == {"StreamEnabled": False}
    assert streams.list_streams(TableName=name)["Streams"] == []
    with pytest.raises(ClientError) as e:
        streams.describe_stream(StreamArn=arn1)
    assert error_code(e) == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        streams.get_records(ShardIterator=next(iter(its1.values())))
    assert error_code(e) == "ResourceNotFoundException"
    with pytest.raises(ClientError) as e:
        ddb.update_table(TableName=name, StreamSpecification={"StreamEnabled": False})
    assert error_code(e) == "ValidationException"
    assert "does not have a stream to disable" in e.value.response["Error"]["Message"]
    put("off0")  # while off: in no stream
    # Each node dropped the stream's records when it applied the change.
    home = os.environ.get("LAPSE_HOME")
    if home:
        want = 'table "%s" (id ' % name
        deadline = time.time() + 20
        while True:
            logs = [open(p, errors="replace").read() for p in glob.glob(home + "/node*.log")]
            hits = [l for l in logs if want in l and "its stream was turned off" in l]
            if len(hits) == len(logs) > 0:
                break
            assert time.time() < deadline, "%d of %d nodes dropped the records" % (
                len(hits), len(logs))
            time.sleep(0.2)
    # Another table's shards meanwhile: the new stream's shards are placed
    # on other hosts than the first one's, which never got this table's
    # outbox records (trimmed since): they must not refuse reads for them.
    other, _ = stream_table(ddb)

    # On again, KEYS_ONLY: a new stream, with none of the first one's records.
    d = ddb.update_table(TableName=name, StreamSpecification={
        "StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})["TableDescription"]
    arn2, label2 = d["LatestStreamArn"], d["LatestStreamLabel"]
    assert label2 != label1 and arn2 != arn1 and label2 > label1
    assert d["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}
    assert streams.list_streams(TableName=name)["Streams"] == [
        {"StreamArn": arn2, "TableName": name, "StreamLabel": label2}]
    with pytest.raises(ClientError) as e:
        streams.describe_stream(StreamArn=arn1)
    assert error_code(e) == "ResourceNotFoundException"
    for s in streams.describe_stream(StreamArn=arn2)["StreamDescription"]["Shards"]:
        assert len(s["SequenceNumberRange"]["StartingSequenceNumber"]) >= 21
    put("again0")
    ddb.delete_item(TableName=name, Key={"pk": {"S": "on0"}})
    recs, _ = read_all(streams, arn2, 2)
    assert sorted(keys_of(recs)) == [("INSERT", "again0"), ("REMOVE", "on0")]
    for r in recs:
        assert r["dynamodb"]["StreamViewType"] == "KEYS_ONLY"
        assert "NewImage" not in r["dynamodb"] and "OldImage" not in r["dynamodb"]
    # LATEST on a shard of the new stream starts after its records.
    sid = next(s for s in shard_ids(streams, arn2)
               if any(r["dynamodb"]["Keys"]["pk"]["S"] == "again0"
                      for r in read_shard(streams, arn2, s)))
    it = streams.get_shard_iterator(StreamArn=arn2, ShardId=sid,
                                    ShardIteratorType="LATEST")["ShardIterator"]
    assert streams.get_records(ShardIterator=it)["Records"] == []
    ddb.delete_table(TableName=other)
    ddb.delete_table(TableName=name)


def test_create_table_stream_turned_off_is_described(ddb, streams):
    """A stream CreateTable made, turned off: DescribeTable keeps
    StreamSpecification {StreamEnabled: false}, as DynamoDB's does (that
    stream, generation 0, is told apart from none by its label's instant);
    the stream itself is gone. Would catch: the table described as one that
    never had a stream."""
    name, arn = stream_table(ddb)
    d = ddb.update_table(TableName=name,
                         StreamSpecification={"StreamEnabled": False})["TableDescription"]
    assert d["StreamSpecification"] == {"StreamEnabled": False} and "LatestStreamArn" not in d
    t = ddb.describe_table(TableName=name)["Table"]
    assert t["StreamSpecification"] == {"StreamEnabled": False} and "LatestStreamArn" not in t
    assert streams.list_streams(TableName=name)["Streams"] == []
    ddb.delete_table(TableName=name)


def test_every_change_read_once_across_shards(ddb, streams):
    name, arn = stream_table(ddb)
    n = 40
    for i in range(n):
        ddb.put_item(TableName=name, Item={"pk": {"S": "k%d" % i}, "v": {"N": str(i)}})
    ddb.update_item(TableName=name, Key={"pk": {"S": "k1"}}, UpdateExpression="SET v = :v",
                    ExpressionAttributeValues={":v": {"N": "100"}})
    ddb.delete_item(TableName=name, Key={"pk": {"S": "k2"}})
    # Writes that change nothing make no record (as DynamoDB's).
    ddb.put_item(TableName=name, Item={"v": {"N": "3"}, "pk": {"S": "k3"}})
    ddb.update_item(TableName=name, Key={"pk": {"S": "k4"}}, UpdateExpression="SET v = :v",
                    ExpressionAttributeValues={":v": {"N": "4"}})
    recs, _ = read_all(streams, arn, n + 2)
    assert len(recs) == n + 2
    by_key = {}
    for r in recs:
        assert r["eventSource"] == "aws:dynamodb" and r["awsRegion"] == "us-east-1"
        assert r["eventVersion"] == "1.1" and len(r["eventID"]) >= 16
        d = r["dynamodb"]
        assert d["StreamViewType"] == "NEW_AND_OLD_IMAGES"
        assert len(d["SequenceNumber"]) >= 21 and d["SizeBytes"] > 0
        assert abs(d["ApproximateCreationDateTime"].timestamp() - time.time()) < 600
        assert "userIdentity" not in r
        by_key.setdefault(d["Keys"]["pk"]["S"], []).append(r)
    assert len({r["eventID"] for r in recs}) == len(recs)
    assert sorted(by_key) == sorted("k%d" % i for i in range(n))
    assert [r["eventName"] for r in by_key["k1"]] == ["INSERT", "MODIFY"]
    ins, mod = by_key["k1"]
    assert ins["dynamodb"]["NewImage"] == {"pk": {"S": "k1"}, "v": {"N": "1"}}
    assert "OldImage" not in ins["dynamodb"]
    assert mod["dynamodb"]["OldImage"] == {"pk": {"S": "k1"}, "v": {"N": "1"}}
    assert mod["dynamodb"]["NewImage"] == {"pk": {"S": "k1"}, "v": {"N": "100"}}
    assert int(mod["dynamodb"]["SequenceNumber"]) > int(ins["dynamodb"]["SequenceNumber"])
    rem = by_key["k2"][1]
    assert rem["eventName"] == "REMOVE" and "NewImage" not in rem["dynamodb"]
    assert rem["dynamodb"]["OldImage"] == {"pk": {"S": "k2"}, "v": {"N": "2"}}
    # GetRecords' Limit: one record per call, then the next from the iterator.
    sid = next(s for s in shard_ids(streams, arn)
               if any(r["dynamodb"]["Keys"]["pk"]["S"] == "k1" for r in read_shard(streams, arn, s)))
    it = streams.get_shard_iterator(StreamArn=arn, ShardId=sid,
                                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    one = streams.get_records(ShardIterator=it, Limit=1)
    assert len(one["Records"]) == 1
    rest = streams.get_records(ShardIterator=one["NextShardIterator"])["Records"]
    assert [r["eventID"] for r in [one["Records"][0]] + rest] == \
        [r["eventID"] for r in read_shard(streams, arn, sid)]
    ddb.delete_table(TableName=name)


def read_shard(streams, arn, sid):
    it = streams.get_shard_iterator(StreamArn=arn, ShardId=sid,
                                    ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    return streams.get_records(ShardIterator=it)["Records"]


@pytest.mark.parametrize("view,old,new", [("KEYS_ONLY", False, False),
                                          ("NEW_IMAGE", False, True),
                                          ("OLD_IMAGE", True, False),
                                          ("NEW_AND_OLD_IMAGES", True, True)])
def test_view_types_show_their_images(ddb, streams, view, old, new):
    name, arn = stream_table(ddb, view)
    assert ddb.describe_table(TableName=name)["Table"]["StreamSpecification"][
        "StreamViewType"] == view
    assert streams.describe_stream(StreamArn=arn)["StreamDescription"]["StreamViewType"] == view
    key = {"pk": {"S": "only"}}
    ddb.put_item(TableName=name, Item=dict(key, v={"N": "1"}))
    ddb.put_item(TableName=name, Item=dict(key, v={"N": "2"}))
    ddb.delete_item(TableName=name, Key=key)
    recs, _ = read_all(streams, arn, 3)
    assert [r["eventName"] for r in recs] == ["INSERT", "MODIFY", "REMOVE"]
    for r in recs:
        d = r["dynamodb"]
        assert d["StreamViewType"] == view and d["Keys"] == key
    ins, mod, rem = (r["dynamodb"] for r in recs)
    assert ("NewImage" in ins) == new and "OldImage" not in ins
    assert ("NewImage" in mod) == new and ("OldImage" in mod) == old
    assert ("OldImage" in rem) == old and "NewImage" not in rem
    if new:
        assert mod["NewImage"] == dict(key, v={"N": "2"})
    if old:
        assert mod["OldImage"] == dict(key, v={"N": "1"})
    ddb.delete_table(TableName=name)


def test_iterator_types(ddb, streams):
    name, arn = stream_table(ddb)
    key = {"pk": {"S": "one"}}
    for v in range(3):
        ddb.put_item(TableName=name, Item=dict(key, v={"N": str(v)}))
    recs, its = read_all(streams, arn, 3)
    sid = next(s for s in shard_ids(streams, arn)
               if read_shard(streams, arn, s))
    seqs = [r["dynamodb"]["SequenceNumber"] for r in recs]

    def first(kind, seq=None):
        kw = {"StreamArn": arn, "ShardId": sid, "ShardIteratorType": kind}
        if seq:
            kw["SequenceNumber"] = seq
        it = streams.get_shard_iterator(**kw)["ShardIterator"]
        return [r["dynamodb"]["SequenceNumber"]
                for r in streams.get_records(ShardIterator=it)["Records"]]

    assert first("TRIM_HORIZON") == seqs
    assert first("AT_SEQUENCE_NUMBER", seqs[1]) == seqs[1:]
    assert first("AFTER_SEQUENCE_NUMBER", seqs[1]) == seqs[2:]
    assert first("AFTER_SEQUENCE_NUMBER", seqs[2]) == []
    latest = streams.get_shard_iterator(StreamArn=arn, ShardId=sid,
                                        ShardIteratorType="LATEST")["ShardIterator"]
    assert streams.get_records(ShardIterator=latest)["Records"] == []
    ddb.put_item(TableName=name, Item=dict(key, v={"N": "3"}))
    deadline = time.time() + 20
    while True:
        r = streams.get_records(ShardIterator=latest)
        if r["Records"]:
            break
        latest = r["NextShardIterator"]
        assert time.time() < deadline, "the write after LATEST never came"
        time.sleep(0.2)
    assert [x["dynamodb"]["NewImage"]["v"]["N"] for x in r["Records"]] == ["3"]
    # Errors, by name.
    bad = [
        ({"ShardIteratorType": "AT_SEQUENCE_NUMBER"}, "ValidationException"),  # no number
        ({"ShardIteratorType": "LATEST", "SequenceNumber": seqs[0]}, "ValidationException"),
        ({"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": "9" * 21},
         "ValidationException"),  # beyond the shard's end
        ({"ShardIteratorType": "AT_SEQUENCE_NUMBER", "SequenceNumber": "12x" + "0" * 18},
         "ValidationException"),
        ({"ShardIteratorType": "SOMEWHERE"}, "ValidationException"),
        ({"ShardIteratorType": "LATEST", "ShardId": "shardId-" + "9" * 20 + "-00000001"},
         "ResourceNotFoundException"),
        ({"ShardIteratorType": "LATEST", "StreamArn": arn.replace(name, name + "x")},
         "ResourceNotFoundException"),
        ({"ShardIteratorType": "LATEST",
          "StreamArn": arn.rsplit("/", 1)[0] + "/2000-01-01T00:00:00.000"},
         "ResourceNotFoundException"),  # another label: not this table's stream
        ({"ShardIteratorType": "LATEST",
          "StreamArn": "arn:aws:s3:::bucket/with/a/long/enough/name/stream/x"},
         "ValidationException"),
    ]
    for over, code in bad:
        kw = dict({"StreamArn": arn, "ShardId": sid}, **over)
        with pytest.raises(ClientError) as e:
            streams.get_shard_iterator(**kw)
        assert error_code(e) == code, (over, e.value.response)
    for it in ["x" * 10, its[sid].replace("|", "/"), its[sid] + "0" * 25]:
        with pytest.raises(ClientError) as e:
            streams.get_records(ShardIterator=it)
        assert error_code(e) == "ValidationException", (it, e.value.response)
    # An iterator is valid 15 minutes from when it was issued (its last field).
    parts = its[sid].split("|")
    parts[-1] = str(int(time.time() * 1000) - 16 * 60 * 1000)
    with pytest.raises(ClientError) as e:
        streams.get_records(ShardIterator="|".join(parts))
    assert error_code(e) == "ExpiredIteratorException"
    with pytest.raises(ClientError) as e:
        streams.get_records(ShardIterator=its[sid], Limit=1001)
    assert error_code(e) == "ValidationException"

    # A re-created table of the same name is another stream: the old ARN and
    # its iterators are not found, the new one starts empty.
    old_ids = shard_ids(streams, arn)
    ddb.delete_table(TableName=name)
    for call in (lambda: streams.describe_stream(StreamArn=arn),
                 lambda: streams.get_records(ShardIterator=its[sid])):
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e) == "ResourceNotFoundException"
    time.sleep(0.002)  # labels are ms
    d = ddb.create_table(TableName=name, KeySchema=KEYS, AttributeDefinitions=DEFS,
                         StreamSpecification={"StreamEnabled": True,
                                              "StreamViewType": "KEYS_ONLY"})
    new_arn = d["TableDescription"]["LatestStreamArn"]
    assert new_arn != arn
    for call in (lambda: streams.describe_stream(StreamArn=arn),
                 lambda: streams.get_records(ShardIterator=its[sid])):
        with pytest.raises(ClientError) as e:
            call()
        assert error_code(e) == "ResourceNotFoundException"
    new_ids = shard_ids(streams, new_arn)
    assert sid not in new_ids  # shard ids name their table too
    with pytest.raises(ClientError) as e:
        read_shard(streams, new_arn, sid)
    assert error_code(e) == "ResourceNotFoundException"
    assert read_shard(streams, new_arn, new_ids[old_ids.index(sid)]) == []
    ddb.delete_table(TableName=name)


def test_ttl_delete_is_one_service_remove(ddb, streams):
    """The brief's bar: sessions expire on time through GetItem, and each is
    one REMOVE through GetRecords, marked as DynamoDB marks its TTL deletes."""
    name = "SessionData_" + uuid.uuid4().hex[:8]
    d = ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "UserName", "KeyType": "HASH"},
                   {"AttributeName": "SessionId", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "UserName", "AttributeType": "S"},
                              {"AttributeName": "SessionId", "AttributeType": "S"}],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    arn = d["TableDescription"]["LatestStreamArn"]
    ddb.update_time_to_live(TableName=name, TimeToLiveSpecification={
        "Enabled": True, "AttributeName": "ExpirationTime"})
    deadline = time.time() + 20
    while ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"][
            "TimeToLiveStatus"] != "ENABLED":
        assert time.time() < deadline, "TTL not ENABLED within 20 s"
        time.sleep(0.2)
    due = int(time.time()) + 3
    sessions = [{"UserName": {"S": "user%d" % i}, "SessionId": {"S": "s%d" % i}}
                for i in range(5)]
    for s in sessions:
        ddb.put_item(TableName=name, Item=dict(s, ExpirationTime={"N": str(due)}))
    ddb.put_item(TableName=name, Item={"UserName": {"S": "keep"}, "SessionId": {"S": "k"},
                                       "ExpirationTime": {"N": str(due + 3600)}})
    for s in sessions:
        while "Item" in ddb.get_item(TableName=name, Key=s):
            assert time.time() < due + 10, "a session is still there 10 s after its TTL"
            time.sleep(0.1)
    assert time.time() >= due - 1
    recs, _ = read_all(streams, arn, 2 * len(sessions) + 1)
    removes = [r for r in recs if r["eventName"] == "REMOVE"]
    assert len(removes) == len(sessions)
    assert sorted(r["dynamodb"]["Keys"]["UserName"]["S"] for r in removes) == \
        ["user%d" % i for i in range(5)]
    for r in removes:
        assert r["userIdentity"] == {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
        assert r["dynamodb"]["OldImage"]["ExpirationTime"] == {"N": str(due)}
    assert all("userIdentity" not in r for r in recs if r["eventName"] == "INSERT")
    ddb.delete_table(TableName=name)


def test_streams_targets_and_bad_input(ddb):
    name, arn = stream_table(ddb)
    st, doc = raw("POST", b'{"StreamArn": "%s"}' % arn.encode(),
                  target="DynamoDBStreams_20120810.DescribeStream")
    assert st == 200 and doc["StreamDescription"]["StreamArn"] == arn
    # Each service's operations under its own prefix only.
    st, doc = raw("POST", b"{}", target="DynamoDB_20120810.GetRecords")
    assert_error(st, doc, "UnknownOperationException")
    st, doc = raw("POST", b"{}", target="DynamoDBStreams_20120810.PutItem")
    assert_error(st, doc, "UnknownOperationException")
    st, doc = raw("POST", b"{}", target="DynamoDBStreams_20120810.ListShards")
    assert_error(st, doc, "UnknownOperationException")
    for body, name_ in [(b"{", "SerializationException"),
                        (b'{"StreamArn": 5}', "SerializationException"),
                        (b"{}", "ValidationException"),
                        (b'{"StreamArn": "%s", "Limit": 0}' % arn.encode(),
                         "ValidationException")]:
        st, doc = raw("POST", body, target="DynamoDBStreams_20120810.DescribeStream")
        assert_error(st, doc, name_)
    st, doc = raw("POST", b'{"ShardIterator": ""}',
                  target="DynamoDBStreams_20120810.GetRecords")
    assert_error(st, doc, "ValidationException")
    ddb.delete_table(TableName=name)
