#pragma once
/* Built-in iSCSI target service (RFC 7143, SBC-3). The daemon core configures it
 * only through these calls; storage is reached only through nasd_bdev. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "util/stats.h"
#include "storage/bdev.h"

#define ISCSI_MAX_LUNS 64
#define ISCSI_MAX_ACL 32

struct iscsi_lun_cfg {
    uint64_t lun;       /* LUN number as reported by REPORT LUNS */
    nasd_bdev *bdev;    /* the service takes its own reference */
};

struct iscsi_target_cfg {
    char iqn[224];
    char alias[64];
    unsigned nluns;
    struct iscsi_lun_cfg luns[ISCSI_MAX_LUNS];
    char chap_user[64], chap_secret[64];      /* empty user: no CHAP required */
    char mutual_user[64], mutual_secret[64];  /* empty user: one-way CHAP only */
    unsigned ninitiators;                     /* 0: any initiator may log in */
    char initiators[ISCSI_MAX_ACL][224];
    /* ImmediateData=Yes when the initiator offers it: a write of up to FirstBurstLength
     * comes with its command, one round trip less than R2T. Off by default: libiscsi's
     * iscsi-test-cu (iSCSIDataSnInvalid) needs R2T for every write, even after a relogin. */
    bool immediate_data;
    struct nasd_io_stats *stats;              /* may be NULL; service takes a ref */
};

struct iscsi_server;

/* portal: "host:port" ("0.0.0.0:3260", "127.0.0.1:13260", "[::1]:3260").
 * workers: backend I/O threads (0 = default). NULL on error with a message in err. */
struct iscsi_server *iscsi_server_start(const char *portal, int workers, char *err, size_t errlen);
/* The same, bound but refusing connections until iscsi_server_listen: the daemon adds its
 * targets first, so no initiator is ever told "target not found" during start-up. */
struct iscsi_server *iscsi_server_start_held(const char *portal, int workers, char *err, size_t errlen);
int iscsi_server_listen(struct iscsi_server *s, char *err, size_t errlen);
/* Add a target, or replace the one with the same IQN (live: new logins see the new
 * config; existing sessions to a replaced target are dropped). 0 or -errno. */
int iscsi_server_set_target(struct iscsi_server *s, const struct iscsi_target_cfg *cfg);
/* Remove a target and drop its sessions; returns -ENOENT if unknown. */
int iscsi_server_remove_target(struct iscsi_server *s, const char *iqn);
/* Stops listening, closes all sessions, waits for workers, frees everything. */
void iscsi_server_stop(struct iscsi_server *s);
/* CHAP credentials: empty user = none; empty muser = one-way only. */
struct iscsi_chap { char user[64], secret[64], muser[64], msecret[64]; };
/* Discovery (SendTargets) sessions. With a user set, CHAP with these credentials is
 * required. Either way a discovery session may authenticate with CHAP using the
 * credentials of a target; targets protected by CHAP are listed only to a discovery
 * session that authenticated with the discovery credentials or with theirs. */
void iscsi_server_set_discovery_auth(struct iscsi_server *s, const struct iscsi_chap *a);

/* Connection caps; a refused connection is closed at once with a (rate-limited) warning. */
struct iscsi_limits {
    unsigned max_conns;       /* all connections (default 1024) */
    unsigned max_per_addr;    /* from one initiator address (default 64) */
    unsigned max_prelogin;    /* not yet logged in, all addresses (default 128) */
    unsigned dout_timeout_s;  /* a command waiting this long for Data-Out that does not come drops its
                               * connection (default 30): its buffer counts against every client's */
};
void iscsi_server_set_limits(struct iscsi_server *s, const struct iscsi_limits *l);
/* Port actually bound (useful with port 0). */
int iscsi_server_port(struct iscsi_server *s);
