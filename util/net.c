/* host:port parsing shared by the REST listener and the iSCSI portal; the per-client
 * limit key of the iSCSI and NFS services. */
#include "util/net.h"
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>

void nasd_peer_key(const struct sockaddr_storage *ss, uint8_t key[16])
{
    memset(key, 0, 16);
    if (ss->ss_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        memcpy(key, a, IN6_IS_ADDR_V4MAPPED(a) ? 16 : 8);
    }
}

int nasd_parse_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[256];
    const char *port;
    if (s[0] == '[') {
        const char *e = strchr(s, ']');
        if (!e || e[1] != ':' || (size_t)(e - s - 1) >= sizeof host) return -1;
        memcpy(host, s + 1, e - s - 1);
        host[e - s - 1] = '\0';
        port = e + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon || (size_t)(colon - s) >= sizeof host) return -1;
        memcpy(host, s, colon - s);
        host[colon - s] = '\0';
        port = colon + 1;
    }
    struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE, .ai_socktype = SOCK_STREAM };
    struct addrinfo *ai;
    if (!*port || getaddrinfo(host[0] ? host : NULL, port, &hints, &ai)) return -1;
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}
