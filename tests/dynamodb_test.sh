#!/usr/bin/env bash
# dynamodb_test: Lapse's DynamoDB-compatible API (lapse-dynamodb,
# docs/dynamodb-api.md) driven by the real clients, on a cluster that
# deploy/local-cluster.sh (make cluster) starts on free loopback ports, with
# its gateway on LAPSE_PORT+40 as `up` prints it.
#
#   tests/dynamodb_test.sh cli    LOCAL_CLUSTER_SCRIPT BIN_DIR
#   tests/dynamodb_test.sh pytest LOCAL_CLUSTER_SCRIPT BIN_DIR PYTEST_FILE...
#
# cli: the aws CLI (dummy credentials, no config file of the user's read or
#   written) does create-table, describe-table, list-tables, put-item,
#   get-item, query (key condition, filter, projection, names), update-item,
#   delete-item, update-time-to-live, describe-time-to-live, delete-table,
#   tag-resource, untag-resource, list-tags-of-resource, a GSI with an
#   INCLUDE projection (describe-table, scan --index-name),
#   each output checked; get-item on a missing table exits non-zero naming
#   ResourceNotFoundException, a query with an unescaped reserved word a
#   ValidationException naming it, a false condition
#   ConditionalCheckFailedException. The table has a stream: aws
#   dynamodbstreams list-streams, describe-stream, get-shard-iterator and
#   get-records read its put as an INSERT with the new image.
# pytest: runs the PYTEST_FILEs (boto3 and raw HTTP) against the gateway.
# Both: the gateway is still the same running process at the end, `down`
#   stops it, and its log holds no sanitizer report.
set -euo pipefail

mode=$1 script=$2 bin=$3
pyfiles=("${@:4}")
me=dynamodb_test
tmp_root=${LAPSE_TEST_TMP:-/tmp}
mkdir -p "$tmp_root"
tmp=$(mktemp -d "$tmp_root/dynamodb_test.XXXXXX")
export LAPSE_HOME=$tmp/home

cleanup() {
  local rc=$? pidf pid
  timeout -k 5 100 "$script" down >/dev/null 2>&1 || true
  for pidf in "$LAPSE_HOME"/*.pid; do
    [[ -f $pidf && -f ${pidf%.pid}.cmd ]] || continue
    pid=$(<"$pidf")
    if [[ -r /proc/$pid/cmdline && $(tr '\0' ' ' <"/proc/$pid/cmdline") == "$(<"${pidf%.pid}.cmd") " ]]; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  if ((rc != 0)); then
    for f in "$LAPSE_HOME"/dynamodb.log "$LAPSE_HOME"/coordinator.log "$LAPSE_HOME"/node1.log; do
      [[ -f $f ]] || continue
      echo "--- $f (last 30 lines)" >&2
      tail -n 30 "$f" >&2
    done
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT

fail() {
  echo "$me: FAIL: $*" >&2
  exit 1
}

command -v aws >/dev/null || fail "aws CLI missing (deploy/install-deps.sh installs awscli)"
# Debian's python3-boto3 and python3-pytest are the system Python's; a
# pyenv or venv python3 first on PATH does not see them.
py=/usr/bin/python3
[[ -x $py ]] || py=python3
[[ $mode != pytest ]] || "$py" -c 'import boto3, pytest' ||
  fail "boto3 or pytest missing (deploy/install-deps.sh installs python3-boto3 python3-pytest)"

listening() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A base b with b..b+n-1 free, below the ephemeral range (as local_cluster_test).
ephemeral_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
((ephemeral_low > 12000)) || ephemeral_low=32768
free_base() {
  local n=$1 b i tries
  for tries in $(seq 50); do
    b=$((10000 + RANDOM % (ephemeral_low - 10010)))
    for ((i = 0; i < n; i++)); do
      listening $((b + i)) && continue 2
    done
    echo "$b"
    return 0
  done
  fail "no free ports found"
}

for attempt in 1 2 3; do
  # The cluster on +0..+32, the nodes' metrics on +34..+36 (LAPSE_METRICS_PORT+i),
  # the gateway on +40: one block of 41 ports seen free, so no two picks
  # can overlap.
  export LAPSE_PORT=$(free_base 41)
  export LAPSE_METRICS_PORT=$((LAPSE_PORT + 33))
  # Every phase is bounded well inside ctest's TIMEOUT, so a stall ends in
  # this script's own failure, with the daemons' logs, not in a silent kill.
  phase_start=$SECONDS
  timeout -k 5 90 "$script" up "$bin" >"$tmp/up.out" 2>&1 && break
  grep -qis "address in use" "$LAPSE_HOME"/*.log || fail "up failed: $(cat "$tmp/up.out")"
  ((attempt < 3)) || fail "up lost its ports three times: $(cat "$tmp/up.out")"
  "$script" down >/dev/null 2>&1 || true
  rm -rf "$LAPSE_HOME"
done
echo "$me: cluster up in $((SECONDS - phase_start)) s" >&2
port=$((LAPSE_PORT + 40))
coord=tcp://127.0.0.1:$LAPSE_PORT # the first coordinator (as `up` prints them)
endpoint=http://127.0.0.1:$port
grep -q "DynamoDB API: $endpoint" "$tmp/up.out" || fail "up does not print the gateway's $endpoint"
gw_pid=$(<"$LAPSE_HOME/dynamodb.pid")
[[ -r /proc/$gw_pid/cmdline ]] || fail "the gateway (pid $gw_pid) is not running"

# Dummy credentials; the user's aws config is neither read nor written.
export AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x AWS_EC2_METADATA_DISABLED=true
export AWS_CONFIG_FILE=$tmp/aws-config AWS_SHARED_CREDENTIALS_FILE=$tmp/aws-credentials
export AWS_DEFAULT_REGION=us-east-1 AWS_PAGER="" AWS_MAX_ATTEMPTS=1
: >"$AWS_CONFIG_FILE"
: >"$AWS_SHARED_CREDENTIALS_FILE"

# Runs aws SERVICE ARGS (dynamodb or dynamodbstreams), stdout to $tmp/out,
# stderr to $tmp/err; returns its status.
aws_call() {
  local service=$1
  shift
  timeout 60 aws "$service" --endpoint-url "$endpoint" --region us-east-1 --output json \
    --cli-read-timeout 30 --cli-connect-timeout 5 "$@" >"$tmp/out" 2>"$tmp/err"
}
ddb() { aws_call dynamodb "$@"; }
ddbs() { aws_call dynamodbstreams "$@"; }
ok() {
  ddb "$@" || fail "aws dynamodb $1 failed: $(cat "$tmp/err")"
}
oks() {
  ddbs "$@" || fail "aws dynamodbstreams $1 failed: $(cat "$tmp/err")"
}
# Evaluates a Python expression over the last output (doc) and fails unless it holds.
check() {
  python3 - "$tmp/out" "$1" <<'EOF' || fail "after aws dynamodb: $1 does not hold on: $(cat "$tmp/out")"
import json, sys
raw = open(sys.argv[1]).read()
doc = json.loads(raw) if raw.strip() else {}
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}

# Prints Python's value of an expression over the last output (doc).
value() {
  python3 - "$tmp/out" "$1" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))
EOF
}

# Table $1's stream through aws dynamodbstreams: list-streams and
# describe-stream find it; get-shard-iterator and get-records read user1's
# session s1 as an INSERT with its new image from the shard the lapse CLI
# says holds it (64 shards are too many aws CLI starts to scan).
streams_cli() {
  local t=$1 arn shard sid it
  oks list-streams --table-name "$t"
  check "len(doc['Streams']) == 1 and doc['Streams'][0]['TableName'] == '$t'"
  arn=$(value "doc['Streams'][0]['StreamArn']")
  oks describe-stream --stream-arn "$arn"
  check "doc['StreamDescription']['StreamStatus'] == 'ENABLED' and len(doc['StreamDescription']['Shards']) == 64"
  cp "$tmp/out" "$tmp/stream.json"
  for _ in $(seq 20); do # records fill shortly after the write
    shard=$(timeout 30 "$bin/lapse" --coordinator "$coord" stream "$t" | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r["dynamodb"]["Keys"] == {"UserName": {"S": "user1"}, "SessionId": {"S": "s1"}}:
        print(r["shard"]); break') || fail "lapse stream $t failed"
    [[ -z $shard ]] || break
    sleep 0.5
  done
  [[ -n $shard ]] || fail "lapse stream $t has no record of user1/s1 after 10 s"
  cp "$tmp/stream.json" "$tmp/out"
  sid=$(value "doc['StreamDescription']['Shards'][$shard]['ShardId']")
  oks get-shard-iterator --stream-arn "$arn" --shard-id "$sid" --shard-iterator-type TRIM_HORIZON
  it=$(value "doc['ShardIterator']")
  oks get-records --shard-iterator "$it"
  check "[r['eventName'] for r in doc['Records'] if r['dynamodb']['Keys'] == {'UserName': {'S': 'user1'}, 'SessionId': {'S': 's1'}}] == ['INSERT']"
  check "any(r['dynamodb'].get('NewImage', {}).get('Tags') == {'L': [{'S': 'a'}, {'BOOL': True}]} for r in doc['Records'])"
  check "'NextShardIterator' in doc and all(len(r['dynamodb']['SequenceNumber']) >= 21 for r in doc['Records'])"
  if ddbs get-records --shard-iterator "not-an-iterator"; then fail "get-records took a bad iterator"; fi
  grep -q "ValidationException" "$tmp/err" || fail "bad iterator: $(cat "$tmp/err")"
}

# A GSI with an INCLUDE projection through the aws CLI: describe-table gives
# the projection as created and the index's ItemCount and IndexSizeBytes (0:
# nothing put yet; boto3's test_describe_table_index_sizes counts), scan
# --index-name returns only the item that has the index's key, with the keys
# and the included attribute.
index_cli() {
  local t=CliIndexed
  ok create-table --table-name $t --billing-mode PAY_PER_REQUEST \
    --attribute-definitions AttributeName=id,AttributeType=S AttributeName=grp,AttributeType=S \
    --key-schema AttributeName=id,KeyType=HASH \
    --global-secondary-indexes '[{"IndexName":"by_grp","KeySchema":[{"AttributeName":"grp","KeyType":"HASH"}],"Projection":{"ProjectionType":"INCLUDE","NonKeyAttributes":["color"]}}]'
  ok describe-table --table-name $t
  check "doc['Table']['GlobalSecondaryIndexes'][0]['Projection'] == {'ProjectionType': 'INCLUDE', 'NonKeyAttributes': ['color']}"
  check "(doc['Table']['GlobalSecondaryIndexes'][0]['ItemCount'], doc['Table']['GlobalSecondaryIndexes'][0]['IndexSizeBytes']) == (0, 0)"
  ok put-item --table-name $t --item '{"id":{"S":"a"},"grp":{"S":"g"},"color":{"S":"red"},"size":{"N":"3"}}'
  ok put-item --table-name $t --item '{"id":{"S":"b"},"color":{"S":"blue"}}'
  ok scan --table-name $t --index-name by_grp
  check "doc['Items'] == [{'id': {'S': 'a'}, 'grp': {'S': 'g'}, 'color': {'S': 'red'}}] and doc['ScannedCount'] == 1"
  ok delete-table --table-name $t
}

run_cli() {
  local t=SessionData key item now arn
  ok create-table --table-name $t \
    --attribute-definitions AttributeName=UserName,AttributeType=S AttributeName=SessionId,AttributeType=S \
    --key-schema AttributeName=UserName,KeyType=HASH AttributeName=SessionId,KeyType=RANGE \
    --billing-mode PAY_PER_REQUEST --stream-specification StreamEnabled=true,StreamViewType=NEW_AND_OLD_IMAGES
  check "doc['TableDescription']['TableName'] == '$t' and doc['TableDescription']['TableStatus'] == 'ACTIVE'"
  check "doc['TableDescription']['LatestStreamArn'].startswith('arn:aws:dynamodb:us-east-1:000000000000:table/$t/stream/')"
  ok describe-table --table-name $t
  check "doc['Table']['TableStatus'] == 'ACTIVE' and doc['Table']['TableArn'].endswith(':table/$t')"
  check "doc['Table']['KeySchema'] == [{'AttributeName':'UserName','KeyType':'HASH'},{'AttributeName':'SessionId','KeyType':'RANGE'}]"
  check "{'AttributeName':'SessionId','AttributeType':'S'} in doc['Table']['AttributeDefinitions']"
  ok list-tables
  check "'$t' in doc['TableNames']"
  arn=arn:aws:dynamodb:us-east-1:000000000000:table/$t
  ok tag-resource --resource-arn "$arn" --tags Key=team,Value=sessions Key=env,Value=test
  ok untag-resource --resource-arn "$arn" --tag-keys env
  ok list-tags-of-resource --resource-arn "$arn"
  check "doc['Tags'] == [{'Key': 'team', 'Value': 'sessions'}]"
  now=$(date +%s)
  key='{"UserName":{"S":"user1"},"SessionId":{"S":"s1"}}'
  item='{"UserName":{"S":"user1"},"SessionId":{"S":"s1"},"ExpirationTime":{"N":"'$((now + 86400))'"},"Tags":{"L":[{"S":"a"},{"BOOL":true}]}}'
  ok put-item --table-name $t --item "$item"
  ok get-item --table-name $t --key "$key"
  check "doc['Item'] == json.loads('''$item''')"
  ok put-item --table-name $t --item '{"UserName":{"S":"user1"},"SessionId":{"S":"s2"},"Hits":{"N":"2"}}'
  ok put-item --table-name $t --item '{"UserName":{"S":"user2"},"SessionId":{"S":"s1"}}'
  # Query: the key condition picks user1's two sessions, newest first; the
  # filter keeps one; a projection and a reserved word (Status) through #names.
  ok query --table-name $t --key-condition-expression 'UserName = :u AND begins_with(SessionId, :s)' \
    --expression-attribute-values '{":u":{"S":"user1"},":s":{"S":"s"}}' --no-scan-index-forward
  check "[i['SessionId']['S'] for i in doc['Items']] == ['s2', 's1'] and doc['Count'] == 2"
  ok query --table-name $t --key-condition-expression 'UserName = :u' --filter-expression 'Hits > :h' \
    --projection-expression 'SessionId, #st' --expression-attribute-names '{"#st":"Status"}' \
    --expression-attribute-values '{":u":{"S":"user1"},":h":{"N":"1"}}'
  check "doc['Items'] == [{'SessionId': {'S': 's2'}}] and doc['Count'] == 1 and doc['ScannedCount'] == 2"
  if ddb query --table-name $t --key-condition-expression 'Status = :u' \
    --expression-attribute-values '{":u":{"S":"user1"}}'; then
    fail "query with an unescaped reserved word succeeded"
  fi
  grep -q "ValidationException.*reserved keyword: Status" "$tmp/err" ||
    fail "reserved word in a query: $(cat "$tmp/err")"
  ok update-item --table-name $t --key '{"UserName":{"S":"user1"},"SessionId":{"S":"s2"}}' \
    --update-expression 'SET Hits = Hits + :one' --expression-attribute-values '{":one":{"N":"1"}}' \
    --return-values UPDATED_NEW
  check "doc['Attributes'] == {'Hits': {'N': '3'}}"
  ok update-time-to-live --table-name $t --time-to-live-specification Enabled=true,AttributeName=ExpirationTime
  check "doc['TimeToLiveSpecification'] == {'Enabled': True, 'AttributeName': 'ExpirationTime'}"
  ok describe-time-to-live --table-name $t
  check "doc['TimeToLiveDescription']['TimeToLiveStatus'] in ('ENABLING', 'ENABLED') and doc['TimeToLiveDescription']['AttributeName'] == 'ExpirationTime'"
  streams_cli $t
  index_cli
  ok delete-item --table-name $t --key "$key"
  ok get-item --table-name $t --key "$key"
  check "'Item' not in doc"
  # Error paths: the CLI exits non-zero and names DynamoDB's error.
  if ddb get-item --table-name NoSuchTable --key "$key"; then
    fail "get-item on a missing table succeeded: $(cat "$tmp/out")"
  fi
  grep -q "ResourceNotFoundException" "$tmp/err" || fail "missing table: $(cat "$tmp/err")"
  if ddb put-item --table-name $t --item '{"UserName":{"S":"user2"},"SessionId":{"S":"s1"}}' \
    --condition-expression 'attribute_not_exists(UserName)'; then
    fail "a conditional put over an existing item succeeded"
  fi
  grep -q "ConditionalCheckFailedException" "$tmp/err" || fail "conditional put: $(cat "$tmp/err")"
  ok delete-table --table-name $t
  check "doc['TableDescription']['TableName'] == '$t'"
  ok list-tables
  check "'$t' not in doc['TableNames']"
  if ddb describe-table --table-name $t; then fail "describe-table after delete-table succeeded"; fi
  grep -q "ResourceNotFoundException" "$tmp/err" || fail "deleted table: $(cat "$tmp/err")"
}

case $mode in
  cli) run_cli ;;
  pytest)
    # SIGINT first: pytest then reports the test it was in; the
    # faulthandler dumps every thread's stack of a test running past 45 s.
    phase_start=$SECONDS
    DDB_ENDPOINT=$endpoint DDB_GATEWAY_PID=$gw_pid DDB_BIN_DIR=$bin DDB_COORDINATOR=$coord timeout -s INT -k 10 $((200 + ${DDB_FUZZ_SECONDS:-0})) "$py" -m pytest -v \
      -p no:cacheprovider -o faulthandler_timeout=45 --durations=5 "${pyfiles[@]}" ||
      fail "pytest ${pyfiles[*]} failed after $((SECONDS - phase_start)) s"
    ;;
  *) fail "unknown mode $mode" ;;
esac

[[ $(<"$LAPSE_HOME/dynamodb.pid") == "$gw_pid" && -r /proc/$gw_pid/cmdline ]] ||
  fail "the gateway (pid $gw_pid) died during the test"
phase_start=$SECONDS
timeout -k 5 100 "$script" down >"$tmp/down.out" 2>&1 || fail "down failed: $(cat "$tmp/down.out")"
echo "$me: cluster down in $((SECONDS - phase_start)) s" >&2
grep -q "stopped dynamodb (pid $gw_pid)" "$tmp/down.out" || fail "down did not stop the gateway: $(cat "$tmp/down.out")"
! listening "$port" || fail "the gateway's port $port still answers after down"
if grep -Eq "AddressSanitizer|LeakSanitizer|runtime error:" "$LAPSE_HOME/dynamodb.log"; then
  fail "sanitizer report in the gateway's log: $(grep -E -A20 'Sanitizer|runtime error' "$LAPSE_HOME/dynamodb.log" | head -40)"
fi
echo "$me $mode: ok"
