/* ddb_api_test: the gateway's protocol frame without a cluster
 * (ddb_api_call): every request that is refused before any liblapse call
 * gets DynamoDB's error shape with the right __type and status: no or a
 * foreign X-Amz-Target, an unknown operation, malformed or non-object JSON,
 * 100 000-deep nesting, members of the wrong JSON type, missing required
 * members, bad key schemas, stream views and TTL names, unsupported
 * expressions, the legacy parameters' mistakes (mixed with expressions,
 * Exists/Value, operators and their value counts and types, Actions,
 * KeyConditions, AttributesToGet) and DynamoDB Streams' bad ARNs, iterator types, sequence
 * numbers and iterators (malformed, too long, expired). The
 * client is NULL, so a path that reached liblapse would crash the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "ddb_api.h"
#include "ddb_req.h"

#define PREFIX "com.amazonaws.dynamodb.v20120810#"

/* Calls target with body and checks the status and the error's __type, and
 * that message names want_in_message (when not NULL). */
static void expect_error(const char *target, const char *body, int status, const char *type,
                         const char *want_in_message)
{
    ddb_api api = {.c = NULL, .region = "us-east-1"};
    int got = 0;
    char *out = NULL;
    ddb_api_call(&api, target, body, body ? strlen(body) : 0, &got, &out);
    assert_non_null(out);
    json_t *doc = json_loads(out, 0, NULL);
    if (doc == NULL || got != status) {
        fail_msg("%s %s: status %d, body %s", target ? target : "(none)", body, got, out);
    }
    const char *t = json_string_value(json_object_get(doc, "__type"));
    const char *m = json_string_value(json_object_get(doc, "message"));
    char want[128];
    snprintf(want, sizeof want, PREFIX "%s", type);
    if (t == NULL || strcmp(t, want) != 0 || m == NULL || m[0] == '\0' ||
        (want_in_message != NULL && strstr(m, want_in_message) == NULL)) {
        fail_msg("%s %s: want %s naming \"%s\", got %s", target ? target : "(none)", body, want,
                 want_in_message ? want_in_message : "", out);
    }
    json_decref(doc);
    free(out);
}

#define T(op) "DynamoDB_20120810." op
#define S(op) "DynamoDBStreams_20120810." op

static void frame_errors(void **state)
{
    (void)state;
    expect_error(NULL, "{}", 400, "UnknownOperationException", "X-Amz-Target");
    expect_error(T("ListStreams"), "{}", 400, "UnknownOperationException", "ListStreams");
    expect_error(S("PutItem"), "{}", 400, "UnknownOperationException", "PutItem");
    expect_error("DynamoDBStreams_20120811.ListStreams", "{}", 400, "UnknownOperationException",
                 "X-Amz-Target");
    expect_error(T("TransactWriteItems"), "{}", 400, "UnknownOperationException",
                 "TransactWriteItems");
    expect_error(T(""), "{}", 400, "UnknownOperationException", NULL);
    expect_error(T("ListTables"), "{not json", 400, "SerializationException", NULL);
    expect_error(T("ListTables"), "", 400, "SerializationException", NULL);
    expect_error(T("ListTables"), "[1]", 400, "SerializationException", NULL);
    expect_error(T("ListTables"), "\"s\"", 400, "SerializationException", NULL);
    expect_error(T("ListTables"), "{\"a\":1,\"a\":2}", 400, "SerializationException", NULL);

    size_t depth = 100000;
    char *deep = malloc(2 * depth + 1);
    assert_non_null(deep);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = '\0';
    expect_error(T("ListTables"), deep, 400, "SerializationException", NULL);
    free(deep);
}

static void member_errors(void **state)
{
    (void)state;
    expect_error(T("DescribeTable"), "{\"TableName\":5}", 400, "SerializationException",
                 "TableName");
    expect_error(T("DescribeTable"), "{}", 400, "ValidationException", "TableName");
    expect_error(T("DescribeTable"), "{\"TableName\":null}", 400, "ValidationException",
                 "TableName");
    expect_error(T("ListTables"), "{\"Limit\":\"5\"}", 400, "SerializationException", "Limit");
    expect_error(T("ListTables"), "{\"Limit\":0}", 400, "ValidationException", "Limit");
    expect_error(T("ListTables"), "{\"Limit\":101}", 400, "ValidationException", "Limit");
    expect_error(T("PutItem"), "{\"TableName\":\"t\",\"Item\":[]}", 400, "SerializationException",
                 "Item");
    expect_error(T("PutItem"), "{\"TableName\":\"t\"}", 400, "ValidationException", "Item");
    expect_error(T("PutItem"), "{\"TableName\":\"t\",\"Item\":{\"a\":{\"N\":\"x\"}}}", 400,
                 "ValidationException", NULL);
    expect_error(T("PutItem"), "{\"TableName\":\"t\",\"Item\":{\"a\":{\"SS\":[\"x\"]}}}", 400,
                 "ValidationException", NULL);
    expect_error(T("GetItem"), "{\"TableName\":\"t\",\"Key\":\"k\"}", 400, "SerializationException",
                 "Key");
    expect_error(T("GetItem"), "{\"TableName\":\"t\",\"Key\":{},\"ConsistentRead\":1}", 400,
                 "SerializationException", "ConsistentRead");
}

static void unsupported_parameters_are_named(void **state)
{
    (void)state;
    expect_error(T("PutItem"), "{\"TableName\":\"t\",\"Item\":{},\"ReturnValues\":\"ALL_NEW\"}",
                 400, "ValidationException", "ReturnValues ALL_NEW is not valid for PutItem");
    expect_error(T("UpdateItem"),
                 "{\"TableName\":\"t\",\"Key\":{},\"UpdateExpression\":\"SET a = :v\","
                 "\"ExpressionAttributeValues\":{\":v\":{\"N\":\"1\"}},\"ReturnValues\":\"OLD\"}",
                 400, "ValidationException", "returnValues");
    expect_error(T("DeleteItem"),
                 "{\"TableName\":\"t\",\"Key\":{},\"ReturnValuesOnConditionCheckFailure\":"
                 "\"ALL_NEW\"}",
                 400, "ValidationException", "returnValuesOnConditionCheckFailure");
    expect_error(T("CreateTable"), "{\"TableName\":\"t\",\"SSESpecification\":{}}", 400,
                 "ValidationException", "SSESpecification");
    /* Tags and the tagging calls' mistakes, refused before any liblapse
     * call. */
    static const char *const create_keys =
        "{\"TableName\":\"t\",\"AttributeDefinitions\":[{\"AttributeName\":\"pk\","
        "\"AttributeType\":\"S\"}],\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":"
        "\"HASH\"}],";
    char body[512];
    snprintf(body, sizeof body, "%s\"Tags\":[{\"Key\":\"aws:x\",\"Value\":\"v\"}]}", create_keys);
    expect_error(T("CreateTable"), body, 400, "ValidationException", "reserved prefix aws:");
    snprintf(body, sizeof body, "%s\"Tags\":[{\"Key\":\"\",\"Value\":\"v\"}]}", create_keys);
    expect_error(T("CreateTable"), body, 400, "ValidationException", "1 to 128");
    snprintf(body, sizeof body, "%s\"Tags\":[{\"Key\":\"k\"}]}", create_keys);
    expect_error(T("CreateTable"), body, 400, "ValidationException", "Value");
    expect_error(T("TagResource"),
                 "{\"ResourceArn\":\"arn:aws:s3:::bucket\",\"Tags\":[{\"Key\":\"k\","
                 "\"Value\":\"v\"}]}",
                 400, "ValidationException", "Invalid TableArn");
    expect_error(T("TagResource"),
                 "{\"ResourceArn\":\"arn:aws:dynamodb:r:1:table/tt/index/i\",\"Tags\":[]}", 400,
                 "ValidationException", "Invalid TableArn");
    expect_error(T("UntagResource"), "{\"ResourceArn\":\"arn:aws:dynamodb:r:1:table/ttt\"}", 400,
                 "ValidationException", "TagKeys");
    expect_error(T("ListTagsOfResource"), "{}", 400, "ValidationException", "ResourceArn");
    expect_error(T("TagResource"),
                 "{\"ResourceArn\":\"arn:aws:dynamodb:r:1:table/lapse.dynamodb.meta\","
                 "\"Tags\":[]}",
                 400, "ResourceNotFoundException", "lapse.dynamodb.meta");
}

/* Expressions are parsed before any liblapse call: every mistake is a
 * ValidationException in DynamoDB's words, naming the culprit. */
static void expression_errors_are_named(void **state)
{
    (void)state;
    expect_error(T("PutItem"),
                 "{\"TableName\":\"t\",\"Item\":{},\"ConditionExpression\":\"status = :v\","
                 "\"ExpressionAttributeValues\":{\":v\":{\"S\":\"x\"}}}",
                 400, "ValidationException", "reserved keyword: status");
    expect_error(T("PutItem"),
                 "{\"TableName\":\"t\",\"Item\":{},\"ConditionExpression\":\"a = :nope\"}", 400,
                 "ValidationException", "attribute value: :nope");
    expect_error(T("DeleteItem"),
                 "{\"TableName\":\"t\",\"Key\":{},\"ConditionExpression\":\"#n = :v\","
                 "\"ExpressionAttributeValues\":{\":v\":{\"S\":\"x\"}}}",
                 400, "ValidationException", "attribute name: #n");
    expect_error(T("GetItem"), "{\"TableName\":\"t\",\"Key\":{},\"ProjectionExpression\":\"a,\"}",
                 400, "ValidationException", "Invalid ProjectionExpression: Syntax error");
    expect_error(T("GetItem"),
                 "{\"TableName\":\"t\",\"Key\":{},\"ProjectionExpression\":\"a\","
                 "\"ExpressionAttributeNames\":{\"#x\":\"x\"}}",
                 400, "ValidationException", "unused in expressions: keys: {#x}");
    expect_error(T("UpdateItem"),
                 "{\"TableName\":\"t\",\"Key\":{},\"UpdateExpression\":\"SET a = :v REMOVE a.b\","
                 "\"ExpressionAttributeValues\":{\":v\":{\"N\":\"1\"}}}",
                 400, "ValidationException", "Two document paths overlap");
    expect_error(T("UpdateItem"),
                 "{\"TableName\":\"t\",\"Key\":{},\"UpdateExpression\":\"SET a = :v\","
                 "\"ExpressionAttributeValues\":{\":v\":[]}}",
                 400, "ValidationException", ":v");
    expect_error(T("PutItem"),
                 "{\"TableName\":\"t\",\"Item\":{},\"ConditionExpression\":\"begins_with(a, :v)\","
                 "\"ExpressionAttributeValues\":{\":v\":{\"S\":5}}}",
                 400, "ValidationException", "invalid value");
    expect_error(T("PutItem"),
                 "{\"TableName\":\"t\",\"Item\":{},\"ConditionExpression\":\"a = :v\","
                 "\"ExpressionAttributeValues\":{\":v\":{\"N\":\"12abc\"}}}",
                 400, "ValidationException", "not a valid number");
    char body[4096];
    int n =
        snprintf(body, sizeof body, "{\"TableName\":\"t\",\"Key\":{},\"ConditionExpression\":\"");
    for (int i = 0; i < 100; i++) {
        body[n++] = '(';
    }
    n += snprintf(body + n, sizeof body - (size_t)n, "attribute_exists(a)");
    for (int i = 0; i < 100; i++) {
        body[n++] = ')';
    }
    snprintf(body + n, sizeof body - (size_t)n, "\"}");
    expect_error(T("DeleteItem"), body, 400, "ValidationException", "nested too deeply");
    expect_error(
        T("Query"),
        "{\"TableName\":\"t\",\"KeyConditionExpression\":\"pk = :p\",\"Select\":\"COUNT\","
        "\"ProjectionExpression\":\"a\",\"ExpressionAttributeValues\":{\":p\":{\"S\":\"x\"}}}",
        400, "ValidationException", "ProjectionExpression");
    expect_error(T("Scan"), "{\"TableName\":\"t\",\"Limit\":0}", 400, "ValidationException",
                 "Limit");
    expect_error(T("Scan"), "{\"TableName\":\"t\",\"Segment\":1}", 400, "ValidationException",
                 "TotalSegments");
    expect_error(T("BatchWriteItem"), "{\"RequestItems\":{}}", 400, "ValidationException",
                 "requestItems");
    expect_error(T("BatchGetItem"), "{\"RequestItems\":{\"t\":{\"Keys\":[]}}}", 400,
                 "ValidationException", "Keys");
}

/* expect_error with the body written in single quotes (turned into double
 * quotes), so the legacy cases below stay readable. */
static void expect_q(const char *target, const char *body, const char *type,
                     const char *want_in_message)
{
    char *b = strdup(body);
    assert_non_null(b);
    for (char *p = b; *p; p++) {
        *p = *p == '\'' ? '"' : *p;
    }
    expect_error(target, b, 400, type, want_in_message);
    free(b);
}

/* A legacy parameter beside its expression counterpart is refused in
 * DynamoDB's words; legacy-only requests may not bring their own names or
 * values. */
static void legacy_mixing_is_refused(void **state)
{
    (void)state;
    expect_q(T("GetItem"),
             "{'TableName':'t','Key':{},'AttributesToGet':['a'],'ProjectionExpression':'a'}",
             "ValidationException",
             "Can not use both expression and non-expression parameters in the same request: "
             "Non-expression parameters: {AttributesToGet} Expression parameters: "
             "{ProjectionExpression}");
    expect_q(T("PutItem"),
             "{'TableName':'t','Item':{},'Expected':{'a':{'Exists':false}},"
             "'ConditionExpression':'attribute_exists(a)'}",
             "ValidationException",
             "Non-expression parameters: {Expected} Expression parameters: {ConditionExpression}");
    expect_q(T("DeleteItem"),
             "{'TableName':'t','Key':{},'ConditionalOperator':'OR',"
             "'ConditionExpression':'attribute_exists(a)'}",
             "ValidationException", "Non-expression parameters: {ConditionalOperator}");
    expect_q(T("UpdateItem"),
             "{'TableName':'t','Key':{},'AttributeUpdates':{'a':{'Action':'DELETE'}},"
             "'Expected':{'a':{'Exists':false}},'UpdateExpression':'REMOVE a'}",
             "ValidationException",
             "Non-expression parameters: {AttributeUpdates, Expected} Expression parameters: "
             "{UpdateExpression}");
    expect_q(T("Query"),
             "{'TableName':'t','KeyConditions':{'pk':{'ComparisonOperator':'EQ',"
             "'AttributeValueList':[{'S':'x'}]}},'KeyConditionExpression':'pk = :p',"
             "'ExpressionAttributeValues':{':p':{'S':'x'}}}",
             "ValidationException",
             "Non-expression parameters: {KeyConditions} Expression parameters: "
             "{KeyConditionExpression}");
    expect_q(T("Query"),
             "{'TableName':'t','KeyConditionExpression':'pk = :p','QueryFilter':{'a':{"
             "'ComparisonOperator':'NOT_NULL'}},'ExpressionAttributeValues':{':p':{'S':'x'}}}",
             "ValidationException",
             "Non-expression parameters: {QueryFilter} Expression parameters: "
             "{KeyConditionExpression}");
    expect_q(T("Scan"),
             "{'TableName':'t','ScanFilter':{'a':{'ComparisonOperator':'NULL'}},"
             "'ProjectionExpression':'a'}",
             "ValidationException",
             "Non-expression parameters: {ScanFilter} Expression parameters: "
             "{ProjectionExpression}");
    expect_q(T("BatchGetItem"),
             "{'RequestItems':{'t':{'Keys':[{}],'AttributesToGet':['a'],"
             "'ProjectionExpression':'a'}}}",
             "ValidationException", "Non-expression parameters: {AttributesToGet}");
    expect_q(T("GetItem"),
             "{'TableName':'t','Key':{},'AttributesToGet':['a'],"
             "'ExpressionAttributeNames':{'#a':'a'}}",
             "ValidationException",
             "ExpressionAttributeNames can only be specified when using expressions");
    expect_q(T("PutItem"),
             "{'TableName':'t','Item':{},'Expected':{'a':{'Exists':false}},"
             "'ExpressionAttributeValues':{':a':{'S':'x'}}}",
             "ValidationException", "ExpressionAttributeValues can only be specified");
}

/* Expected's two forms: every mistake DynamoDB refuses, naming the
 * attribute. */
static void legacy_expected_errors(void **state)
{
    (void)state;
    static const struct {
        const char *expected; /* the Expected map */
        const char *type, *named;
    } bad[] = {
        {"{'a':{'Exists':false,'Value':{'S':'x'}}}", "ValidationException",
         "Value cannot be used when Exists is false for Attribute: a"},
        {"{'a':{'Exists':true}}", "ValidationException",
         "Value must be provided when Exists is true for Attribute: a"},
        {"{'a':{}}", "ValidationException",
         "Value must be provided when Exists is null for Attribute: a"},
        {"{'a':{'Exists':'yes','Value':{'S':'x'}}}", "SerializationException", "Exists"},
        {"{'a':{'Exists':true,'Value':{'S':'x'},'ComparisonOperator':'EQ'}}", "ValidationException",
         "Exists and ComparisonOperator cannot be used together for Attribute: a"},
        {"{'a':{'Value':{'S':'x'},'AttributeValueList':[{'S':'x'}],'ComparisonOperator':'EQ'}}",
         "ValidationException",
         "Value and AttributeValueList cannot be used together for Attribute: a"},
        {"{'a':{'AttributeValueList':[{'S':'x'}]}}", "ValidationException",
         "AttributeValueList can only be used with a ComparisonOperator for Attribute: a"},
        {"{'a':{'ComparisonOperator':'EQ'}}", "ValidationException",
         "Value or AttributeValueList must be used with ComparisonOperator: EQ for Attribute: a"},
        {"{'a':{'ComparisonOperator':'EQUALS','AttributeValueList':[{'S':'x'}]}}",
         "ValidationException", "'expected.a.member.comparisonOperator'"},
        {"{'a':{'ComparisonOperator':7}}", "SerializationException", "ComparisonOperator"},
        {"{'a':{'ComparisonOperator':'EQ','AttributeValueList':[{'S':'x'},{'S':'y'}]}}",
         "ValidationException",
         "Invalid number of argument(s) for the EQ ComparisonOperator for Attribute: a"},
        {"{'a':{'ComparisonOperator':'NULL','AttributeValueList':[{'S':'x'}]}}",
         "ValidationException", "Invalid number of argument(s) for the NULL ComparisonOperator"},
        {"{'a':{'ComparisonOperator':'NOT_NULL','Value':{'S':'x'}}}", "ValidationException",
         "Invalid number of argument(s) for the NOT_NULL ComparisonOperator"},
        {"{'a':{'ComparisonOperator':'BETWEEN','AttributeValueList':[{'N':'1'}]}}",
         "ValidationException", "Invalid number of argument(s) for the BETWEEN ComparisonOperator"},
        {"{'a':{'ComparisonOperator':'IN','AttributeValueList':[]}}", "ValidationException",
         "Invalid number of argument(s) for the IN ComparisonOperator"},
        {"{'a':{'ComparisonOperator':'GT','AttributeValueList':[{'SS':['x']}]}}",
         "ValidationException", "ComparisonOperator GT is not valid for SS AttributeValue type"},
        {"{'a':{'ComparisonOperator':'BEGINS_WITH','AttributeValueList':[{'N':'1'}]}}",
         "ValidationException",
         "ComparisonOperator BEGINS_WITH is not valid for N AttributeValue type for Attribute: a"},
        {"{'a':{'ComparisonOperator':'IN','AttributeValueList':[{'L':[]}]}}", "ValidationException",
         "ComparisonOperator IN is not valid for L AttributeValue type"},
        {"{'a':{'ComparisonOperator':'BETWEEN','AttributeValueList':[{'S':'a'},{'N':'1'}]}}",
         "ValidationException",
         "AttributeValues inside AttributeValueList must be of same type for Attribute: a"},
        {"{'a':{'ComparisonOperator':'EQ','AttributeValueList':[{'N':'12abc'}]}}",
         "ValidationException", "for Attribute: a"},
        {"{'a':{'Value':{'S':'x','N':'1'}}}", "ValidationException",
         "exactly one data type for Attribute: a"},
        {"{'a':{'ComparisonOperator':'EQ','AttributeValueList':{'S':'x'}}}",
         "SerializationException", "AttributeValueList"},
        {"{'a':5}", "SerializationException", "Expected"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{'TableName':'t','Key':{},'Expected':%s}", bad[i].expected);
        expect_q(T("DeleteItem"), body, bad[i].type, bad[i].named);
    }
    expect_q(T("PutItem"),
             "{'TableName':'t','Item':{},'ConditionalOperator':'XOR','Expected':{'a':{"
             "'Exists':false}}}",
             "ValidationException", "'conditionalOperator'");
    expect_q(T("PutItem"), "{'TableName':'t','Item':{},'Expected':[]}", "SerializationException",
             "Expected");
}

/* AttributeUpdates, KeyConditions, the filters and AttributesToGet: each
 * mistake by name. */
static void legacy_parameter_errors(void **state)
{
    (void)state;
    expect_q(T("UpdateItem"),
             "{'TableName':'t','Key':{},'AttributeUpdates':{'a':{'Action':'REPLACE',"
             "'Value':{'S':'x'}}}}",
             "ValidationException", "'attributeUpdates.a.member.action'");
    expect_q(T("UpdateItem"), "{'TableName':'t','Key':{},'AttributeUpdates':{'a':{}}}",
             "ValidationException",
             "Only DELETE action is allowed when no attribute value is specified (PUT of "
             "Attribute: a)");
    expect_q(T("UpdateItem"),
             "{'TableName':'t','Key':{},'AttributeUpdates':{'a':{'Action':'ADD'}}}",
             "ValidationException", "Only DELETE action is allowed");
    expect_q(T("UpdateItem"),
             "{'TableName':'t','Key':{},'AttributeUpdates':{'a':{'Action':'DELETE',"
             "'Value':{'N':'1'}}}}",
             "ValidationException",
             "DELETE action with value is not supported for the type N for Attribute: a");
    expect_q(T("UpdateItem"),
             "{'TableName':'t','Key':{},'AttributeUpdates':{'a':{'Action':'ADD',"
             "'Value':{'S':'x'}}}}",
             "ValidationException", "ADD action is not supported for the type S for Attribute: a");
    expect_q(T("UpdateItem"),
             "{'TableName':'t','Key':{},'AttributeUpdates':{'a':{'Value':{'N':'1e999'}}}}",
             "ValidationException", "for Attribute: a");
    expect_q(T("UpdateItem"), "{'TableName':'t','Key':{},'AttributeUpdates':{'a':{'Action':1}}}",
             "SerializationException", "Action");

    expect_q(T("Query"),
             "{'TableName':'t','KeyConditions':{'pk':{'ComparisonOperator':'NE',"
             "'AttributeValueList':[{'S':'x'}]}}}",
             "ValidationException",
             "Attempted conditional constraint is not an indexable operation");
    expect_q(T("Query"),
             "{'TableName':'t','KeyConditions':{'pk':{'ComparisonOperator':'IN',"
             "'AttributeValueList':[{'S':'x'}]}}}",
             "ValidationException", "not IN for Attribute: pk");
    expect_q(T("Query"), "{'TableName':'t','KeyConditions':{}}", "ValidationException",
             "Conditions can be of length 1 or 2 only");
    expect_q(T("Query"),
             "{'TableName':'t','KeyConditions':{'a':{'ComparisonOperator':'NULL'},'b':{"
             "'ComparisonOperator':'NULL'},'c':{'ComparisonOperator':'NULL'}}}",
             "ValidationException", "Conditions can be of length 1 or 2 only");
    expect_q(T("Query"), "{'TableName':'t','KeyConditions':{'pk':{'AttributeValueList':[]}}}",
             "ValidationException", "'keyConditions.pk.member.comparisonOperator'");
    expect_q(T("Query"),
             "{'TableName':'t','KeyConditions':{'sk':{'ComparisonOperator':'BETWEEN',"
             "'AttributeValueList':[{'N':'1'}]}}}",
             "ValidationException", "Invalid number of argument(s) for the BETWEEN");
    expect_q(T("Query"),
             "{'TableName':'t','KeyConditions':{'pk':{'ComparisonOperator':'EQ',"
             "'AttributeValueList':[{'S':'x'}]}},'QueryFilter':{'a':{'ComparisonOperator':"
             "'CONTAINS','AttributeValueList':[{'S':'x'},{'S':'y'}]}}}",
             "ValidationException", "Invalid number of argument(s) for the CONTAINS");
    expect_q(T("Scan"), "{'TableName':'t','ScanFilter':{'a':{}}}", "ValidationException",
             "'scanFilter.a.member.comparisonOperator' failed to satisfy constraint: Member must "
             "not be null");
    expect_q(T("Scan"),
             "{'TableName':'t','ScanFilter':{'a':{'ComparisonOperator':'LIKE',"
             "'AttributeValueList':[{'S':'x'}]}}}",
             "ValidationException", "'scanFilter.a.member.comparisonOperator'");
    expect_q(T("Scan"), "{'TableName':'t','AttributesToGet':[]}", "ValidationException",
             "attributesToGet");
    expect_q(T("Scan"), "{'TableName':'t','AttributesToGet':['a','b','a']}", "ValidationException",
             "Duplicate value in attribute name: a");
    expect_q(T("Scan"), "{'TableName':'t','AttributesToGet':['a'],'Select':'ALL_ATTRIBUTES'}",
             "ValidationException",
             "Cannot specify the AttributesToGet when choosing to get ALL_ATTRIBUTES");
    expect_q(T("GetItem"), "{'TableName':'t','Key':{},'AttributesToGet':[1]}",
             "SerializationException", "AttributesToGet");
    expect_q(T("GetItem"), "{'TableName':'t','Key':{},'AttributesToGet':'a'}",
             "SerializationException", "AttributesToGet");
}

/* Well-formed legacy requests get past the translation and the expression
 * checks (reserved words as names, the generated placeholders neither
 * undefined nor unused) and fail only at the missing TableName, the next
 * check before liblapse. A placeholder left unused or a name put in the
 * expression text would fail earlier, with another message. */
static void legacy_translation_reaches_the_operation(void **state)
{
    (void)state;
    const char *missing = "Value null at 'TableName'";
    expect_q(T("PutItem"),
             "{'Item':{},'ConditionalOperator':'OR','Expected':{'status':{'Exists':false},"
             "'size':{'Value':{'N':'1'}},'data':{'Exists':true,'Value':{'S':'x'}},"
             "'name':{'ComparisonOperator':'IN','AttributeValueList':[{'S':'a'},{'S':'b'},"
             "{'S':'c'}]}}}",
             "ValidationException", missing);
    expect_q(T("UpdateItem"),
             "{'Key':{},'AttributeUpdates':{'status':{'Value':{'S':'x'}},'size':{'Action':'ADD',"
             "'Value':{'N':'1'}},'data':{'Action':'DELETE'},'list':{'Action':'ADD','Value':{'L':"
             "[{'N':'1'}]}},'set':{'Action':'DELETE','Value':{'SS':['a']}},'comment':{'Action':"
             "'ADD','Value':{'NS':['1']}}},'Expected':{'status':{'ComparisonOperator':'NE',"
             "'AttributeValueList':[{'S':'y'}]}},'ReturnValues':'ALL_NEW'}",
             "ValidationException", missing);
    expect_q(T("GetItem"), "{'Key':{},'AttributesToGet':['status','size','a']}",
             "ValidationException", missing);
    expect_q(T("Scan"),
             "{'ConditionalOperator':'OR','AttributesToGet':['name'],'Select':"
             "'SPECIFIC_ATTRIBUTES','ScanFilter':{"
             "'a':{'ComparisonOperator':'EQ','AttributeValueList':[{'M':{}}]},"
             "'b':{'ComparisonOperator':'NE','AttributeValueList':[{'S':'x'}]},"
             "'c':{'ComparisonOperator':'LE','AttributeValueList':[{'N':'1'}]},"
             "'d':{'ComparisonOperator':'LT','AttributeValueList':[{'N':'1'}]},"
             "'e':{'ComparisonOperator':'GE','AttributeValueList':[{'N':'1'}]},"
             "'f':{'ComparisonOperator':'GT','AttributeValueList':[{'N':'1'}]},"
             "'g':{'ComparisonOperator':'NOT_NULL'},'h':{'ComparisonOperator':'NULL'},"
             "'i':{'ComparisonOperator':'CONTAINS','AttributeValueList':[{'S':'x'}]},"
             "'j':{'ComparisonOperator':'NOT_CONTAINS','AttributeValueList':[{'N':'1'}]},"
             "'k':{'ComparisonOperator':'BEGINS_WITH','AttributeValueList':[{'B':'AA=='}]},"
             "'l':{'ComparisonOperator':'IN','AttributeValueList':[{'N':'1'}]},"
             "'m':{'ComparisonOperator':'BETWEEN','AttributeValueList':[{'S':'a'},{'S':'b'}]}}}",
             "ValidationException", missing);
    expect_q(T("Query"),
             "{'KeyConditions':{'pk':{'ComparisonOperator':'EQ','AttributeValueList':[{'S':'x'}]},"
             "'sk':{'ComparisonOperator':'BETWEEN','AttributeValueList':[{'N':'1'},{'N':'2'}]}},"
             "'QueryFilter':{'status':{'ComparisonOperator':'NOT_NULL'}},"
             "'AttributesToGet':['pk','status']}",
             "ValidationException", missing);
    /* KeyConditions with a FilterExpression (DynamoDB allows it): the
     * request's #legacy0 and :legacy0 are kept, ours go around them. */
    expect_q(T("Query"),
             "{'KeyConditions':{'pk':{'ComparisonOperator':'EQ','AttributeValueList':[{'S':'x'}]}},"
             "'FilterExpression':'#legacy0 = :legacy0','ExpressionAttributeNames':{'#legacy0':"
             "'a'},'ExpressionAttributeValues':{':legacy0':{'S':'y'}}}",
             "ValidationException", missing);
    /* ... and their own unused names are still refused. */
    expect_q(T("Query"),
             "{'TableName':'t','KeyConditions':{'pk':{'ComparisonOperator':'EQ',"
             "'AttributeValueList':[{'S':'x'}]}},'FilterExpression':'a = :v',"
             "'ExpressionAttributeValues':{':v':{'S':'y'},':w':{'S':'z'}}}",
             "ValidationException", ":w");
    expect_q(T("BatchGetItem"), "{'RequestItems':{'t':{'Keys':[5],'AttributesToGet':['status']}}}",
             "SerializationException", "Keys");
}

static void create_table_and_ttl_validation(void **state)
{
    (void)state;
    const char *defs = "\"AttributeDefinitions\":[{\"AttributeName\":\"pk\",\"AttributeType\":"
                       "\"S\"}]";
    char body[1024];
    /* No HASH key first. */
    snprintf(body, sizeof body,
             "{\"TableName\":\"t\",%s,\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":"
             "\"RANGE\"}]}",
             defs);
    expect_error(T("CreateTable"), body, 400, "ValidationException", "KeySchema");
    /* A key not in AttributeDefinitions. */
    snprintf(body, sizeof body,
             "{\"TableName\":\"t\",%s,\"KeySchema\":[{\"AttributeName\":\"other\",\"KeyType\":"
             "\"HASH\"}]}",
             defs);
    expect_error(T("CreateTable"), body, 400, "ValidationException", "other");
    /* A bad attribute type. */
    expect_error(T("CreateTable"),
                 "{\"TableName\":\"t\",\"AttributeDefinitions\":[{\"AttributeName\":\"pk\","
                 "\"AttributeType\":\"BOOL\"}],\"KeySchema\":[{\"AttributeName\":\"pk\","
                 "\"KeyType\":\"HASH\"}]}",
                 400, "ValidationException", "AttributeType");
    /* Projections DynamoDB refuses (INCLUDE without NonKeyAttributes,
     * NonKeyAttributes without INCLUDE, a duplicate, an unknown type), views
     * DynamoDB does not have. */
    static const char *const bad_proj[][2] = {
        {"{\"ProjectionType\":\"INCLUDE\"}", "NonKeyAttributes is not specified"},
        {"{\"ProjectionType\":\"INCLUDE\",\"NonKeyAttributes\":[]}", "not specified or empty"},
        {"{\"ProjectionType\":\"ALL\",\"NonKeyAttributes\":[\"a\"]}",
         "ProjectionType is ALL, but NonKeyAttributes"},
        {"{\"ProjectionType\":\"INCLUDE\",\"NonKeyAttributes\":[\"a\",\"a\"]}",
         "Duplicate NonKeyAttribute a"},
        {"{\"ProjectionType\":\"SOME\"}", "[ALL, KEYS_ONLY, INCLUDE]"},
    };
    for (size_t i = 0; i < sizeof bad_proj / sizeof bad_proj[0]; i++) {
        snprintf(body, sizeof body,
                 "{\"TableName\":\"t\",%s,\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":"
                 "\"HASH\"}],\"GlobalSecondaryIndexes\":[{\"IndexName\":\"g\",\"KeySchema\":[{"
                 "\"AttributeName\":\"pk\",\"KeyType\":\"HASH\"}],\"Projection\":%s}]}",
                 defs, bad_proj[i][0]);
        expect_error(T("CreateTable"), body, 400, "ValidationException", bad_proj[i][1]);
    }
    snprintf(body, sizeof body,
             "{\"TableName\":\"t\",%s,\"KeySchema\":[{\"AttributeName\":\"pk\",\"KeyType\":"
             "\"HASH\"}],\"StreamSpecification\":{\"StreamEnabled\":true,\"StreamViewType\":"
             "\"NEW_IMAGES\"}}",
             defs);
    expect_error(T("CreateTable"), body, 400, "ValidationException", "NEW_IMAGES");
    expect_error(T("UpdateTimeToLive"), "{\"TableName\":\"t\"}", 400, "ValidationException",
                 "TimeToLiveSpecification");
    expect_error(T("UpdateTimeToLive"),
                 "{\"TableName\":\"t\",\"TimeToLiveSpecification\":{\"Enabled\":true,"
                 "\"AttributeName\":\"\"}}",
                 400, "ValidationException", "AttributeName");
    expect_error(T("UpdateTimeToLive"),
                 "{\"TableName\":\"t\",\"TimeToLiveSpecification\":{\"Enabled\":\"true\","
                 "\"AttributeName\":\"x\"}}",
                 400, "SerializationException", "Enabled");
}

/* UpdateTable's requests refused before the table is looked up. */
static void update_table_validation(void **state)
{
    (void)state;
    expect_error(T("UpdateTable"), "{\"TableName\":\"t\"}", 400, "ValidationException",
                 "At least one of");
    expect_error(T("UpdateTable"), "{\"TableName\":\"t\",\"BillingMode\":\"FREE\"}", 400,
                 "ValidationException", "billingMode");
    expect_error(T("UpdateTable"),
                 "{\"TableName\":\"t\",\"ProvisionedThroughput\":{\"ReadCapacityUnits\":0,"
                 "\"WriteCapacityUnits\":1}}",
                 400, "ValidationException", "ReadCapacityUnits");
    expect_error(T("UpdateTable"), "{\"TableName\":\"t\",\"GlobalSecondaryIndexUpdates\":[]}", 400,
                 "ValidationException", "GlobalSecondaryIndexUpdates");
    expect_error(T("UpdateTable"), "{\"TableName\":\"t\",\"StreamSpecification\":{}}", 400,
                 "ValidationException", "StreamEnabled");
    expect_error(T("UpdateTable"),
                 "{\"TableName\":\"t\",\"StreamSpecification\":{\"StreamEnabled\":true,"
                 "\"StreamViewType\":\"ALL\"}}",
                 400, "ValidationException", "streamSpecification.streamViewType");
    expect_error(T("UpdateTable"), "{\"TableName\":5,\"BillingMode\":\"PROVISIONED\"}", 400,
                 "SerializationException", "TableName");
}

/* DynamoDB Streams' requests refused before the stream is looked up. */
static void streams_validation(void **state)
{
    (void)state;
    expect_error(S("ListStreams"), "{\"Limit\":0}", 400, "ValidationException", "Limit");
    expect_error(S("ListStreams"), "{\"TableName\":7}", 400, "SerializationException", "TableName");
    expect_error(S("DescribeStream"), "{}", 400, "ValidationException", "StreamArn");
    expect_error(S("DescribeStream"), "{\"StreamArn\":\"arn:aws:s3:::b/stream/x\"}", 400,
                 "ValidationException", "StreamArn");
    expect_error(S("DescribeStream"), "{\"StreamArn\":\"arn:aws:dynamodb:us-east-1:1:table\"}", 400,
                 "ValidationException", "StreamArn");
    /* Another region's stream is not here. */
    expect_error(S("DescribeStream"),
                 "{\"StreamArn\":\"arn:aws:dynamodb:eu-west-1:000000000000:table/t/stream/"
                 "2026-01-01T00:00:00.000\"}",
                 400, "ResourceNotFoundException", "eu-west-1");
    const char *arn = "\"StreamArn\":\"arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/"
                      "2026-01-01T00:00:00.000\",\"ShardId\":\"shardId-"
                      "00000000000000000001-00000001\"";
    static const struct {
        const char *more; /* members after the ARN and shard */
        const char *named;
    } bad[] = {
        {"", "ShardIteratorType"},
        {",\"ShardIteratorType\":\"OLDEST\"", "OLDEST"},
        {",\"ShardIteratorType\":\"AT_SEQUENCE_NUMBER\"", "SequenceNumber"},
        {",\"ShardIteratorType\":\"TRIM_HORIZON\",\"SequenceNumber\":\"000000000000000000001\"",
         "SequenceNumber"},
        {",\"ShardIteratorType\":\"AT_SEQUENCE_NUMBER\",\"SequenceNumber\":\"1\"",
         "SequenceNumber"},
        {",\"ShardIteratorType\":\"AT_SEQUENCE_NUMBER\",\"SequenceNumber\":\""
         "99999999999999999999999\"",
         "SequenceNumber"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{%s%s}", arn, bad[i].more);
        expect_error(S("GetShardIterator"), body, 400, "ValidationException", bad[i].named);
    }

    expect_error(S("GetRecords"), "{}", 400, "ValidationException", "ShardIterator");
    expect_error(S("GetRecords"), "{\"ShardIterator\":\"abc\"}", 400, "ValidationException",
                 "ShardIterator");
    expect_error(S("GetRecords"), "{\"ShardIterator\":\"a|1|2|3|x\"}", 400, "ValidationException",
                 "ShardIterator");
    expect_error(S("GetRecords"), "{\"ShardIterator\":\"a|0|2|3|4\"}", 400, "ValidationException",
                 "ShardIterator"); /* table id 0 */
    expect_error(S("GetRecords"), "{\"ShardIterator\":\"a|1|2|3|4\",\"Limit\":1001}", 400,
                 "ValidationException", "Limit");
    /* Issued at 4 ms past 1970: long expired. */
    expect_error(S("GetRecords"), "{\"ShardIterator\":\"a|1|2|3|4\"}", 400,
                 "ExpiredIteratorException", "15 minutes");
    char *big = malloc(2200);
    assert_non_null(big);
    memset(big, 'a', 2100);
    snprintf(big + 2100, 100, "|1|2|3|4\"}");
    memcpy(big, "{\"ShardIterator\":\"", 18);
    expect_error(S("GetRecords"), big, 400, "ValidationException", "2048");
    free(big);
}

/* ddb_req_item reads an item as liblapse's DynamoDB JSON parser does, for
 * the items it sets straight from the request (plain S and N values) and
 * for those it hands to the parser: the same item, or the same refusal. */
static void item_read_as_the_parser_reads_it(const char *json)
{
    json_t *obj = json_loads(json, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
    assert_non_null(obj);
    ddb_ctx x = {0};
    lapse_item *got = NULL, *want = NULL;
    lapse_error err;
    int rv = ddb_req_item(&x, obj, "Key", &got);
    char *text = json_dumps(obj, JSON_COMPACT);
    assert_non_null(text);
    int want_rv = lapse_item_from_json(&want, text, &err);
    if ((rv == 0) != (want_rv == 0)) {
        fail_msg("%s: ddb_req_item %d (%s), the parser %d (%s)", json, rv, x.message, want_rv,
                 err.message);
    }
    if (rv == 0) {
        assert_true(lapse_item_equal(got, want));
        assert_int_equal(lapse_item_count(got), lapse_item_count(want));
    } else {
        char msg[640];
        snprintf(msg, sizeof msg, "Key: %s", err.message);
        assert_string_equal(x.message, msg);
        assert_string_equal(x.type, "ValidationException");
    }
    lapse_item_free(got);
    lapse_item_free(want);
    free(text);
    json_decref(obj);
}

static void items_read_as_the_parser_reads_them(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "{\"Id\":{\"S\":\"user1\"}}",
        "{\"Id\":{\"S\":\"\"},\"Seq\":{\"N\":\"7\"}}",
        "{\"Id\":{\"S\":\"caf\\u00e9\"},\"Seq\":{\"N\":\"-1.50E+3\"}}",
        "{\"Seq\":{\"N\":\"abc\"}}",
        "{\"Seq\":{\"N\":\"\"}}",
        "{\"Seq\":{\"N\":\"1e200\"}}",
        "{\"Seq\":{\"N\":\"123456789012345678901234567890123456789\"}}",
        "{\"Seq\":{\"N\":7}}",
        "{\"Id\":{\"S\":1}}",
        "{\"\":{\"S\":\"x\"}}",
        "{\"Id\":{\"S\":\"a\\u0000b\"}}",
        "{\"Id\":{\"S\":\"x\",\"N\":\"1\"}}",
        "{\"Id\":{}}",
        "{\"Id\":\"x\"}",
        "{\"Id\":{\"X\":\"x\"}}",
        "{\"Id\":{\"S\":\"x\"},\"Ok\":{\"BOOL\":true},\"M\":{\"M\":{\"a\":{\"N\":\"1\"}}}}",
        "{\"Id\":{\"B\":\"AAE=\"}}",
        "{}",
        "[]",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        item_read_as_the_parser_reads_it(cases[i]);
    }
    /* A name of the longest length allowed, and one byte longer. */
    for (size_t len = 65535; len <= 65536; len++) {
        char *big = malloc(len + 32);
        assert_non_null(big);
        big[0] = '{';
        big[1] = '"';
        memset(big + 2, 'n', len);
        snprintf(big + 2 + len, 30, "\":{\"S\":\"x\"}}");
        item_read_as_the_parser_reads_it(big);
        free(big);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(frame_errors),
        cmocka_unit_test(member_errors),
        cmocka_unit_test(unsupported_parameters_are_named),
        cmocka_unit_test(expression_errors_are_named),
        cmocka_unit_test(legacy_mixing_is_refused),
        cmocka_unit_test(legacy_expected_errors),
        cmocka_unit_test(legacy_parameter_errors),
        cmocka_unit_test(legacy_translation_reaches_the_operation),
        cmocka_unit_test(create_table_and_ttl_validation),
        cmocka_unit_test(streams_validation),
        cmocka_unit_test(update_table_validation),
        cmocka_unit_test(items_read_as_the_parser_reads_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
