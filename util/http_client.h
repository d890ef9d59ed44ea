#pragma once
/* A minimal HTTP/1.1 client for appliance-to-appliance calls (replication): plain
 * http://host:port only, one request per connection, body from a file. The caller waits;
 * deadlines and a cancel flag bound the wait. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* method, url ("http://host:port/path?query"), optional bearer token, content type and
 * a body of body_len bytes read from body_fd (-1: none). Returns the HTTP status (>0)
 * or -errno; the response body (NUL-terminated, at most resp_max-1 bytes) goes to resp.
 * timeout_s bounds connecting and sending without progress, and the whole response
 * (-ETIMEDOUT); a nonzero *cancel (may be NULL) ends the request (-ECANCELED). A host
 * name that does not resolve gives NASD_HTTP_ERESOLVE. */
#define NASD_HTTP_ERESOLVE (-100000)   /* the host name did not resolve */

int nasd_http_request(const char *method, const char *url, const char *token, const char *ctype, int body_fd,
                      uint64_t body_len, char *resp, size_t resp_max, int timeout_s, const atomic_int *cancel);

/* Text for a negative result of nasd_http_request. */
const char *nasd_http_strerror(int rc);
