#pragma once
/* REST helpers for pools on a Ceph cluster (api/pools_ceph.c). */
#include "api/api.h"

/* The "ceph" object of a pool request -> c; -1 with 400 in r. */
int api_ceph_conf_parse(json_t *o, struct ceph_conf *c, struct api_reply *r);
/* Stores the settings of pool pool_id (inside the caller's transaction); 0 or SQLite error. */
int api_ceph_conf_save(nasd_db *db, int64_t pool_id, const struct ceph_conf *c);
/* Adds "backend" and, for ceph pools, "ceph":{monitors,pool,user,keyring,conf,key_set} to row. */
void api_ceph_pool_json(nasd_db *db, int64_t pool_id, json_t *row);
