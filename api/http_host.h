#pragma once
/* Which Host names the REST server answers to. A browser page on a name the attacker
 * controls can make that name resolve to the appliance (DNS rebinding) and then use the
 * API as its own origin: a server on loopback answers only to loopback names, and one
 * on another address without auth only to IP addresses and the names in api_hosts. */

/* host: the Host header (NULL: none, not a browser). api_hosts: comma-separated names. */
int http_host_allowed(const char *host, int loopback_listen, int auth, const char *api_hosts);
