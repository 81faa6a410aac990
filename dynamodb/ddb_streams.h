/*
 * ddb_streams.h: DynamoDB Streams' operations in the gateway (ListStreams,
 * DescribeStream, GetShardIterator, GetRecords; X-Amz-Target
 * DynamoDBStreams_20120810.*) on liblapse's change stream
 * (docs/dynamodb-api.md, "Streams").
 *
 * Identifiers, in the shapes the SDKs validate:
 *   stream ARN   <table ARN>/stream/<label>, label the table's creation time
 *                (UTC, ms) so a re-created table's stream is another stream
 *                (ddb_req_stream_arn, which DescribeTable uses too);
 *   ShardId      shardId-<partition, 20 digits>-<table id, 8 hex digits>;
 *   sequence     the shard's record number, 21 digits;
 *   iterator     <stream ARN>|<table id>|<shard>|<after>|<issued ms>: the
 *                records after sequence number <after> (0: from the oldest
 *                kept), stateless, valid 15 minutes from <issued ms>.
 *
 * Thread-safety: as liblapse's client; each call on its own ddb_ctx.
 *
 * Invariants:
 *  1. Each returns as ddb_req.h's invariant 1 says; req is borrowed.
 *  2. GetRecords never skips a record silently: when records between the
 *     iterator's position and the shard's oldest kept one were trimmed, it
 *     answers TrimmedDataAccessException (a TRIM_HORIZON iterator that has
 *     read nothing yet starts at the oldest kept record and never does).
 *  3. NextShardIterator continues after the last record returned, so
 *     following it reads each record once, in sequence order.
 */
#ifndef LAPSE_DDB_STREAMS_H
#define LAPSE_DDB_STREAMS_H

#include "ddb_req.h"

int ddb_streams_list(ddb_ctx *x, json_t *req);
int ddb_streams_describe(ddb_ctx *x, json_t *req);
int ddb_streams_get_iterator(ddb_ctx *x, json_t *req);
int ddb_streams_get_records(ddb_ctx *x, json_t *req);

#endif
