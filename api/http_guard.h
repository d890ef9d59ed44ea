#pragma once
/* REST connection deadlines (slowloris): a request's headers must arrive within
 * HTTP_HEADER_DEADLINE_S of the connection or of the previous request's end, and its
 * body within HTTP_BODY_DEADLINE_S of the headers; a watchdog thread shuts down
 * connections past their deadline (libmicrohttpd's own timeout restarts on every byte). */
#include <microhttpd.h>

#define HTTP_HEADER_DEADLINE_S 10
#define HTTP_BODY_DEADLINE_S 30

struct http_guard;
struct http_guard *http_guard_start(void);
void http_guard_stop(struct http_guard *g);
/* MHD_OPTION_NOTIFY_CONNECTION callback; cls is the guard. */
void http_guard_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);
/* Phase changes of the connection's current request (socket_context from MHD_CONNECTION_INFO_SOCKET_CONTEXT). */
void http_guard_headers_done(struct MHD_Connection *conn);
void http_guard_body_done(struct MHD_Connection *conn);
void http_guard_request_done(struct MHD_Connection *conn);
