#pragma once
/* Listen addresses given as "host:port", "[v6]:port" or ":port" (any address). */
#include <sys/socket.h>

/* Numeric host and port only. 0, or -1 when s is not such an address. */
int nasd_parse_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *len);
