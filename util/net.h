#pragma once
/* Listen addresses given as "host:port", "[v6]:port" or ":port" (any address), and the
 * key per-client limits count under. */
#include <stdint.h>
#include <sys/socket.h>

/* Numeric host and port only. 0, or -1 when s is not such an address. */
int nasd_parse_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *len);

/* The 16-byte key of a client for per-address limits: IPv4 as v4-mapped IPv6 (both
 * spellings of one client share it), IPv6 by its /64: one host usually holds a whole /64
 * (privacy addresses), so a limit per full address would be no limit. All zeros for other
 * families. */
void nasd_peer_key(const struct sockaddr_storage *ss, uint8_t key[16]);
