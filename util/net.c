/* host:port parsing shared by the REST listener and the iSCSI portal. */
#include "util/net.h"
#include <netdb.h>
#include <string.h>

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
