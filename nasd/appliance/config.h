#pragma once
/* Daemon configuration: etc/nasd.conf ("key = value" lines, # comments), then
 * command-line flags override. */
#include <stddef.h>

struct nasd_config {
    char listen[128];        /* REST/UI address "host:port" */
    char db_path[1024];
    char state_dir[1024];    /* pools, datasets, service state */
    char web_dir[1024];      /* static UI files */
    char iscsi_portal[128];  /* "" disables the iSCSI service */
    char nfs_bind[64];       /* "" disables the NFS service */
    char api_hosts[512];     /* Host names the REST server answers to besides addresses (auth off, not loopback) */
    int nfs_port, mount_port, portmap_port; /* portmap_port -1: no built-in portmapper */
    int demo;                /* create a demo pool on an empty DB */
    int auth;                /* require an API token on /api/v1 and /metrics */
    int log_level;
    size_t max_body;         /* REST request body limit, bytes */
    unsigned long long cache_bytes; /* RAM read cache per pool, 0 = engine default */
    unsigned long long dirty_bytes; /* write-back budget per pool, 0 = engine default (vpool_opts) */
};

void config_defaults(struct nasd_config *c);
/* Load a config file; -1 with a message on unknown keys or bad values. */
int config_load_file(struct nasd_config *c, const char *path, char *err, size_t errlen);
/* Set one key (shared by file and flags). */
int config_set(struct nasd_config *c, const char *key, const char *value, char *err, size_t errlen);
