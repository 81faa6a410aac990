/*
 * http.h: a minimal HTTP endpoint on NNG's HTTP server, for Prometheus
 * scraping of GET /metrics. rpc/ is the only module that includes NNG, so
 * the daemons reach NNG's HTTP server through this.
 *
 * Thread-safety: the callback runs on NNG's threads, possibly several at once.
 */
#ifndef LAPSE_HTTP_H
#define LAPSE_HTTP_H

#include <stddef.h>

#include "../common/buf.h"

typedef struct http_server http_server;

/* Fills body with the response to GET path. Returns 0 (200 OK) or an error
 * (500 with a short message). */
typedef int (*http_get_fn)(void *arg, buf *body);

/* Serves GET path (e.g. "/metrics") on host_port ("127.0.0.1:9401") with the
 * given content type. Returns 0, LAPSE_EINVAL (bad address) or
 * LAPSE_EUNAVAILABLE (address in use) with a reason in err. */
int http_server_open(http_server **out, const char *host_port, const char *path,
                     const char *content_type, http_get_fn fn, void *arg, char *err,
                     size_t errlen);
void http_server_close(http_server *s); /* accepts NULL */

#endif
