/* What an operator must set before nasd faces a network (README "Before exposing nasd
 * on a network"), checked at start: open exports on non-loopback addresses, REST auth. */
#include "nasd/appliance/exposure.h"
#include "util/net.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* "" (service off) counts as loopback: nothing is exposed. */
static int loopback_addr(const char *addr, int with_port)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (!addr[0]) return 1;
    if (with_port) {
        if (nasd_parse_hostport(addr, &ss, &sl)) return 0;
    } else {
        memset(&ss, 0, sizeof ss);
        if (inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr) == 1) ss.ss_family = AF_INET;
        else if (inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) ss.ss_family = AF_INET6;
        else return 0;
    }
    if (ss.ss_family == AF_INET) return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    if (ss.ss_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
    return 0;
}

int nasd_exposure_check(const struct nasd_config *cfg, nasd_db *db, void (*emit)(void *arg, const char *msg),
                        void *arg)
{
    char msg[512];
    int n = 0;
    int rest_open = !loopback_addr(cfg->listen, 1);
    int iscsi_open = !loopback_addr(cfg->iscsi_portal, 1);
    int nfs_open = !loopback_addr(cfg->nfs_bind, 0);
    if (!cfg->auth && (rest_open || iscsi_open || nfs_open)) {
        snprintf(msg, sizeof msg, "REST auth is off while %s%s%s listen beyond loopback: anyone who reaches the "
                 "API controls the appliance (set auth = on and create a token)",
                 rest_open ? "the API " : "", iscsi_open ? "iSCSI " : "", nfs_open ? "NFS" : "");
        emit(arg, msg);
        n++;
    }
    if (iscsi_open) {
        json_t *rows = db_rows(db, "SELECT name FROM iscsi_exports WHERE enabled=1 AND chap_user='' "
                               "AND (initiators_json='[]' OR initiators_json='') ORDER BY id", "");
        size_t i;
        json_t *r;
        json_array_foreach(rows, i, r) {
            snprintf(msg, sizeof msg, "iSCSI export %s is open to any initiator on %s: set CHAP or an "
                     "initiator list", json_string_value(json_object_get(r, "name")), cfg->iscsi_portal);
            emit(arg, msg);
            n++;
        }
        json_decref(rows);
    }
    if (nfs_open) {
        json_t *rows = db_rows(db, "SELECT name FROM nfs_exports WHERE enabled=1 AND "
                               "(clients_json='[]' OR clients_json='') ORDER BY id", "");
        size_t i;
        json_t *r;
        json_array_foreach(rows, i, r) {
            snprintf(msg, sizeof msg, "NFS export %s is open to any client on %s: set a client list",
                     json_string_value(json_object_get(r, "name")), cfg->nfs_bind);
            emit(arg, msg);
            n++;
        }
        json_decref(rows);
    }
    return n;
}
