/* Host header checks against DNS rebinding (see http_host.h). */
#include "api/http_host.h"
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The name of a Host header without its port and IPv6 brackets; -1 if malformed. */
static int host_name(const char *host, char *name, size_t len)
{
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        if (!end || (end[1] && end[1] != ':')) return -1;
        snprintf(name, len, "%.*s", (int)(end - host - 1), host + 1);
        return 0;
    }
    snprintf(name, len, "%s", host);
    char *colon = strchr(name, ':');
    if (colon) *colon = 0;
    return 0;
}

static int listed(const char *name, const char *list)
{
    size_t nl = strlen(name);
    for (const char *p = list; p && *p;) {
        p += strspn(p, " ,");
        size_t l = strcspn(p, " ,");
        if (l && l == nl && !strncasecmp(p, name, l)) return 1;
        p += l;
    }
    return 0;
}

int http_host_allowed(const char *host, int loopback_listen, int auth, const char *api_hosts)
{
    char name[256];
    if (!host) return 1;                 /* HTTP/1.0 without Host: not a browser */
    if (host_name(host, name, sizeof name)) return 0;
    struct in_addr a4;
    struct in6_addr a6;
    int v4 = inet_pton(AF_INET, name, &a4) == 1, v6 = inet_pton(AF_INET6, name, &a6) == 1;
    if (loopback_listen)
        return !strcasecmp(name, "localhost") || (v4 && (ntohl(a4.s_addr) >> 24) == 127) ||
               (v6 && IN6_IS_ADDR_LOOPBACK(&a6));
    if (auth) return 1;                  /* a rebound page has no token */
    return v4 || v6 || !strcasecmp(name, "localhost") || listed(name, api_hosts);
}
