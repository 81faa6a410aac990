/*
 * http_test_util.h: what the rpc/ HTTP tests share (http_test,
 * http_service_test, http_client_test).
 */
#ifndef LAPSE_HTTP_TEST_UTIL_H
#define LAPSE_HTTP_TEST_UTIL_H

/* A loopback TCP port that was free a moment ago (bound to port 0 and
 * released); fails the test when no socket can be had. */
int http_test_free_port(void);

#endif
